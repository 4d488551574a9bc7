"""One provenance helper (r2s2r_envs.provenance) and one JSON form for writers (safe_json.plain_json)."""

from __future__ import annotations

import json
import math
import platform

import mujoco
import numpy as np
import pytest

from r2s2r_envs._version import __version__
from r2s2r_envs.provenance import VERSION_NAMES, versions
from r2s2r_envs.safe_json import plain_json


def test_versions_in_one_order_whatever_is_asked():
    assert list(versions()) == list(VERSION_NAMES)
    assert versions("python", "numpy", "r2s2r_envs") == {
        "r2s2r_envs": __version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    assert list(versions("python", "mujoco")) == ["mujoco", "python"]
    assert versions("mujoco")["mujoco"] == mujoco.__version__


def test_versions_names_the_valid_choices():
    with pytest.raises(ValueError, match="valid: \\['r2s2r_envs', 'mujoco'"):
        versions("torch")


def test_plain_json_is_strict_json():
    data = {1: (np.float32(0.5), np.int64(3)), "a": np.arange(2), "nan": math.nan, "f": np.float64(np.inf), "s": "x"}
    plain = plain_json(data)
    assert plain == {"1": [0.5, 3], "a": [0, 1], "nan": None, "f": None, "s": "x"}
    json.dumps(plain, allow_nan=False)


def test_plain_json_with_where_checks_what_a_result_records(tmp_path):
    class Params:
        def to_dict(self):
            return {"speed": (0.1, np.float32(0.25))}

    data = {"world": Params(), "path": tmp_path, "ok": [True, None, 2]}
    assert plain_json(data, "env_kwargs") == {
        "world": {"speed": [0.1, 0.25]},
        "path": str(tmp_path),
        "ok": [True, None, 2],
    }
    with pytest.raises(TypeError, match=r"env_kwargs\['a'\]\[1\] is nan; strict JSON holds finite numbers only"):
        plain_json({"a": [0.0, math.nan]}, "env_kwargs")
    with pytest.raises(TypeError, match=r"^policy.settings\['f'\]: a object cannot be written as JSON"):
        plain_json({"f": object()}, "policy.settings")
    assert plain_json({"f": len})["f"] is len  # without where: anything else as it is
