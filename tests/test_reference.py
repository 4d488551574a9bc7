"""baselines/reference.py: its rows, its refusal of bad input before any work, and its summary's contrasts."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from r2s2r_envs.evaluation import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))
import reference  # noqa: E402

FAST = {"num_objects": 1, "episode_steps": 30}


class ZeroPolicy:
    name = "zero"

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict) -> np.ndarray:
        return np.zeros(22, np.float32)


def test_rows_name_their_data_and_where_they_are_evaluated() -> None:
    rows = reference.all_rows()
    assert rows["sim-only/flow"].env_id == "PickSort-Ungrounded-v0" and rows["sim-only/flow"].real == ()
    assert rows["real-only/bc"].real_fraction == 1.0 and rows["real-only/bc"].sim == ()
    assert {r.method for r in rows.values() if r.name.startswith("co-trained/")} == {
        "flow",
        "flow-cfg",
        "flow-cfg-adda",
    }
    co = rows["co-trained/flow-cfg-adda/FullyGrounded"]
    assert co.sim == ("fullygrounded-1000",) and co.env_id == "PickSort-Real-v0"
    assert co.real_fraction == pytest.approx(0.224)
    config = co.config(seed=2, out=Path("x"), recipe="gpu", overrides={"steps": 5})
    assert (config.seed, config.recipe, config.steps, config.hidden_dim) == (2, "gpu", 5, 512)


def test_bad_rows_and_seeds_are_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        reference.main(["--out", str(tmp_path / "o"), "--rows", "sim-only/nope"])
    assert "unknown row(s) ['sim-only/nope']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reference.main(["--out", str(tmp_path / "o"), "--seeds", "a,b"])
    assert "--seeds must be comma-separated integers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reference.main(["--out", str(tmp_path / "o"), "--rows", "sim-only/flow", "--steps", "0"])
    assert "row sim-only/flow: steps must be an integer >= 1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_summary_contrasts_are_paired_over_the_episodes(tmp_path: Path) -> None:
    rows = reference.all_rows()
    names = [
        "real-only/flow",
        "co-trained/flow/Ungrounded",
        "co-trained/flow/WorldGrounded",
        "co-trained/flow-cfg/Ungrounded",
    ]
    result = evaluate("PickSort-Ungrounded-v0", ZeroPolicy(), episodes=3, env_kwargs=FAST, progress=False)
    paths = {}
    for k, name in enumerate(names):
        path = tmp_path / f"{k}.json"
        path.write_text(result.to_json())
        paths[name] = [path]
    summary = reference.summarize([rows[n] for n in names], paths, replicates=200)
    assert set(summary["rows"]) == set(names)
    for name in names[1:]:
        contrast = summary["versus_real_only"][name]["success"]
        assert contrast["estimate"] == 0.0 and contrast["ci95"] == [0.0, 0.0]  # the same episodes: no difference
    assert list(summary["versus_ungrounded"]) == ["co-trained/flow/WorldGrounded"]
    # Another method is compared with flow on the same sim data, not on another variant's.
    assert list(summary["versus_flow"]) == ["co-trained/flow-cfg/Ungrounded"]
    text = reference.to_markdown(summary, "cpu", 3)
    assert "| co-trained/flow/WorldGrounded | +0.0 [+0.0, +0.0] |" in text
    assert "| method minus `flow`, same data (lab) |" in text
