"""The wheel ships everything an installed env needs (the MJCF in ``assets/``, the lab configs, the shipped grounding
and behavior model, ``py.typed``) and stays small: the model zoo's checkpoints are a data package of their own
(``zoo/``), built here too, whose files have the hashes the core's zoo index pins.  The Python versions the
package claims are the ones CI tests, and the records under ``experiments/`` keep their training logs thinned.

The test builds a wheel from a copy of the source tree, installs it into a fresh temporary venv and makes an
env there, from a working directory outside the checkout.  It stays hermetic (no network): the venv gets the
third-party dependencies (mujoco, gymnasium, ...) through a ``.pth`` line naming the current interpreter's
site-packages; ``.pth`` files inside that directory are not processed, so the checkout's editable install is
not visible and ``r2s2r_envs`` can only come from the wheel.  The test asserts that it did.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import REPO_ROOT

pytestmark = pytest.mark.slow

#: Issue 49's goal for the core wheel, the zoo's data package aside.
CORE_WHEEL_LIMIT_BYTES = 2_000_000
#: The zoo's data package: its checkpoints are packed as int8 (5.84 MB for three entries when set), so that a shallow
#: clone stays within issue 49's 12 MB (benchmarks/results/house/README.md#the-goals-met).
ZOO_WHEEL_LIMIT_BYTES = 7_000_000

IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "runs", ".cache", "*.mp4", "*.hdf5"
)

SMOKE = """
import os, sys
import gymnasium as gym
import numpy as np
import r2s2r_envs
from r2s2r_envs.world.builder import asset_path
from r2s2r_envs.lab import load_lab

prefix = os.path.realpath(sys.prefix)
where = os.path.realpath(r2s2r_envs.__file__)
assert where.startswith(prefix), f"r2s2r_envs imported from {where}, not from the venv {prefix}"
scene = os.path.realpath(asset_path("pick_sort_scene.xml"))
assert scene.startswith(prefix), f"MJCF read from {scene}, not from the installed wheel"
assert load_lab().name == "default"
from r2s2r_envs.lab import available_labs
assert "course-latency" in available_labs() and load_lab("course-latency").name == "course-latency"  # sealed, shipped
from r2s2r_envs.course import check_answer, exercises
assert len(exercises()) == 9
from r2s2r_envs.world import load_world
assert load_world("nominal").belt_speed > 0  # world presets ship as package data
for env_id in r2s2r_envs.ENV_IDS:
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, dtype=np.float32))
    assert np.isfinite(reward)
    env.close()
import importlib.util
from r2s2r_envs.policies import zoo
assert os.path.realpath(zoo.zoo_index_path()).startswith(prefix)  # the zoo's index ships in the core wheel
if importlib.util.find_spec(zoo.ZOO_PACKAGE) is None:  # the data package is apart: a clear error without it
    try:
        zoo.resolve_checkpoint("zoo:flow-real-only")
    except zoo.ZooError as e:
        assert "r2s2r_envs_zoo, which is not installed: pip install ./zoo" in str(e), e
    else:
        raise AssertionError("zoo:NAME resolved without the data package")
print("OK", where)
"""


def _site_packages() -> list[str]:
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    return sorted(p for p in paths if os.path.isdir(p))


def _build_wheel(project: Path, out: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "--wheel-dir",
            str(out),
            str(project),
        ],
        check=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("pkg") / "src"
    shutil.copytree(REPO_ROOT, src, ignore=IGNORED)
    return src


@pytest.fixture(scope="module")
def wheel(source: Path) -> Path:
    out = source.parent / "wheels"
    _build_wheel(source, out)
    (built,) = out.glob("r2s2r_envs-*.whl")
    return built


@pytest.fixture(scope="module")
def zoo_wheel(source: Path) -> Path:
    out = source.parent / "zoo-wheels"
    _build_wheel(source / "zoo", out)
    (built,) = out.glob("r2s2r_envs_zoo-*.whl")
    return built


def test_wheel_contains_assets_and_lab_configs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in sorted((REPO_ROOT / "r2s2r_envs").rglob("*.py")):
        rel = module.relative_to(REPO_ROOT).as_posix()
        assert rel in names, f"{rel} is not in the wheel (is its package listed in pyproject.toml?)"
    for xml in sorted((REPO_ROOT / "assets").glob("*.xml")):
        assert f"r2s2r_envs/assets/{xml.name}" in names, f"{xml.name} is not in the wheel"
    for cfg in sorted((REPO_ROOT / "r2s2r_envs" / "lab" / "configs").glob("*.json")):
        assert f"r2s2r_envs/lab/configs/{cfg.name}" in names, f"lab config {cfg.name} is not in the wheel"
    package_data = [
        *(REPO_ROOT / "r2s2r_envs" / "world" / "presets").glob("*.json"),
        *(REPO_ROOT / "r2s2r_envs" / "datasets").glob("*.json"),
        *(REPO_ROOT / "r2s2r_envs" / "evaluation").glob("*.json"),
        *(REPO_ROOT / "r2s2r_envs" / "grounding").glob("*.json"),
        *(REPO_ROOT / "r2s2r_envs" / "grounding" / "groundings").glob("*.json"),
        *(REPO_ROOT / "r2s2r_envs" / "behavior" / "models").glob("*.json.gz"),
        *(REPO_ROOT / "r2s2r_envs" / "policies" / "zoo").rglob("*.json"),
        *(REPO_ROOT / "r2s2r_envs" / "policies" / "encoders").glob("*.pt"),  # the frozen camera encoders
        REPO_ROOT / "r2s2r_envs" / "py.typed",
    ]
    shipped = {p.relative_to(REPO_ROOT).as_posix() for p in package_data}
    assert {"r2s2r_envs/grounding/groundings/default.json", "r2s2r_envs/behavior/models/default.json.gz"} <= shipped
    assert "r2s2r_envs/policies/zoo/index.json" in shipped  # the model zoo
    assert any(p.name == "canonical.json" for p in package_data) and any(p.name == "nominal.json" for p in package_data)
    for path in package_data:
        rel = path.relative_to(REPO_ROOT).as_posix()
        assert rel in names, f"{rel} is not in the wheel (package-data in pyproject.toml)"
    stray = ("tests/", "benchmarks/", "experiments/", "assets/", "zoo/", "r2s2r_envs_zoo/")
    assert not any(n.startswith(stray) for n in names), "stray top-level files"
    assert "r2s2r_envs/policies/encoders/sim-pose.pt" in shipped  # the cpu-image-cached recipe's frozen encoder
    checkpoints = [n for n in names if n.endswith(".pt") and not n.startswith("r2s2r_envs/policies/encoders/")]
    assert not checkpoints, "checkpoints belong to the zoo's data package (zoo/)"
    assert wheel.stat().st_size <= CORE_WHEEL_LIMIT_BYTES, f"the core wheel is {wheel.stat().st_size:,} bytes"


def test_zoo_data_package_holds_the_pinned_checkpoints(zoo_wheel):
    """Every entry of the core's zoo index is in the data package's wheel, each file with the pinned SHA-256."""
    index = json.loads((REPO_ROOT / "r2s2r_envs" / "policies" / "zoo" / "index.json").read_text())
    package = index["package"]
    assert zoo_wheel.name.startswith(f"{package}-")
    with zipfile.ZipFile(zoo_wheel) as archive:
        names = set(archive.namelist())
        expected = {f"{package}/__init__.py"}
        for entry in index["checkpoints"]:
            for file, pinned in entry["files_sha256"].items():
                member = f"{package}/{entry['name']}/{file}"
                expected.add(member)
                assert member in names, f"{member} is not in the zoo's wheel (zoo/pyproject.toml's package-data)"
                assert hashlib.sha256(archive.read(member)).hexdigest() == pinned, f"{member} is not the pinned file"
    assert {n for n in names if not n.startswith(f"{package}-")} == expected, "stray files in the zoo's wheel"
    assert zoo_wheel.stat().st_size <= ZOO_WHEEL_LIMIT_BYTES, f"the zoo's wheel is {zoo_wheel.stat().st_size:,} bytes"


def test_python_versions_claimed_are_the_tested_ones():
    """requires-python, the classifiers, the Makefile's check and the linters' targets name one lowest version, the
    one CI runs (the project's machines have Python 3.11 only)."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    lowest = re.fullmatch(r">=(3)\.(\d+)", pyproject["project"]["requires-python"])
    assert lowest, pyproject["project"]["requires-python"]
    major, minor = int(lowest[1]), int(lowest[2])
    assert sys.version_info[:2] >= (major, minor)
    versions = {c.rsplit(" :: ", 1)[1] for c in pyproject["project"]["classifiers"] if re.search(r":: 3\.\d+$", c)}
    assert versions == {f"{major}.{minor}"}, "classify exactly the versions CI tests"
    assert "Typing :: Typed" in pyproject["project"]["classifiers"]
    assert pyproject["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert pyproject["tool"]["mypy"]["python_version"] == f"{major}.{minor}"
    assert f"sys.version_info >= ({major}, {minor})" in (REPO_ROOT / "Makefile").read_text()
    zoo = tomllib.loads((REPO_ROOT / "zoo" / "pyproject.toml").read_text())
    assert zoo["project"]["requires-python"] == pyproject["project"]["requires-python"]


def test_records_keep_training_logs_thinned():
    """A record's train_log.json holds block means, not every step (benchmarks/thin_train_logs.py)."""
    logs = sorted((REPO_ROOT / "experiments").rglob("train_log.json"))
    assert logs
    fat = [
        str(p.relative_to(REPO_ROOT))
        for p in logs
        if isinstance((log := json.loads(p.read_text())).get("history"), dict) and "history_thinned" not in log
    ]
    assert not fat, f"thin them: python benchmarks/thin_train_logs.py {' '.join(fat)}"


def test_wheel_installs_and_runs_in_fresh_venv(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Third-party dependencies from the current interpreter (no network); r2s2r_envs itself only from the wheel.
    Path(purelib, "_deps_from_test_runner.pth").write_text("\n".join(_site_packages()) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        timeout=600,
    )

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.setdefault("MUJOCO_GL", "egl")
    result = subprocess.run([python, "-c", SMOKE], cwd=outside, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout

    # The console script is installed and works.
    script = subprocess.run(
        [env_dir / "bin" / "r2s2r", "envs"], cwd=outside, env=env, capture_output=True, text=True, timeout=300
    )
    assert script.returncode == 0, script.stderr
    assert "PickSort-Ungrounded-v0" in script.stdout
    # The canonical datasets spec ships in the wheel: `r2s2r datasets list` works outside a checkout.
    listing = subprocess.run(
        [env_dir / "bin" / "r2s2r", "datasets", "list"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listing.returncode == 0, listing.stderr
    assert "lab-50" in listing.stdout and "ungrounded-1000" in listing.stdout
    version = subprocess.run(
        [env_dir / "bin" / "r2s2r", "--version"], cwd=outside, env=env, capture_output=True, text=True, timeout=300
    )
    from r2s2r_envs import __version__

    assert version.stdout.strip() == f"r2s2r_envs {__version__}"
