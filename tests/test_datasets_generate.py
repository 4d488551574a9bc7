"""Generation (determinism, parallel workers, successes-only, interruption and resume, locking, time limit, lab
datasets), replay, the data-never-code rules, CLI and the canonical datasets spec, on the physics-free toy env
(r2s2r_envs.datasets.toy)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import pytest
from conftest import downgrade_to_v1, downgrade_to_v2

from r2s2r_envs._version import __version__
from r2s2r_envs.datasets import CoTrainingMixture, DatasetError, TrajectoryDataset, open_dataset
from r2s2r_envs.datasets.canonical import default_spec_path, load_spec, make_datasets
from r2s2r_envs.datasets.cli import add_subcommands
from r2s2r_envs.datasets.generate import GenerationError, episode_seeds, generate, lab_record, writer_lock
from r2s2r_envs.datasets.replay import replay_demo
from r2s2r_envs.datasets.toy import (
    TOY_DEMONSTRATOR,
    TOY_EPISODE_STEPS,
    TOY_SPEC,
    make_toy_demonstrator,
    register_toy_env,
)
from r2s2r_envs.datasets.writer import _store_content_hash
from r2s2r_envs.envs.seeding import SEEDING_CONVENTION

REPO = Path(__file__).resolve().parents[1]
TOY = register_toy_env()  # envs are made from registered ids only
ALLOW_TOY = (TOY,)  # replay rebuilds only PickSort-* ids unless told otherwise


def _gen(out: Path, episodes: int, **kwargs) -> object:
    # A factory typed here, in Python: the file records its name and never imports it.
    kwargs.setdefault("demonstrator", make_toy_demonstrator)
    kwargs.setdefault("progress", False)
    return generate(TOY, episodes, out, **kwargs)


def test_generated_file_records_provenance_and_seeds(tmp_path: Path) -> None:
    out = tmp_path / "toy.hdf5"
    result = _gen(out, 5, seed=7)
    assert result.num_demos == 5 and result.complete and not result.resumed
    with open_dataset(out) as f:
        prov = f.provenance
        assert prov["env_id"] == "ToyPickSort-v0"
        assert prov["env_spec"]["entry_point"] == TOY_SPEC.entry_point
        assert prov["domain"] == "sim"
        assert prov["world"]["world"] == "toy"
        settings = {"gain_range": [0.05, 1.0], "action_noise": 0.05, "lead_s": 0.4}
        assert prov["demonstrator"] == {"name": "toy-reacher", "settings": settings}
        assert set(prov["versions"]) >= {"r2s2r_envs", "mujoco", "gymnasium", "numpy", "h5py", "python"}
        assert prov["versions"]["r2s2r_envs"] == __version__ != "unknown"
        assert prov["seed"] == 7 and prov["schema_version"] == 3
        assert prov["seeding"] == f.generation["seeding"] == SEEDING_CONVENTION
        assert f.generation["demonstrator"] == {"callable": "r2s2r_envs.datasets.toy.make_toy_demonstrator"}
        assert f.env_args["env_name"] == "ToyPickSort-v0" and f.env_args["type"] == 2
        assert "object_category" in f.obs_keys and "scene_image" not in f.obs_keys
        for k in f.demo_ids:
            attrs = f.demo_attrs(k)
            assert (attrs["seed"], attrs["demonstrator_seed"]) == episode_seeds(7, k)
            assert attrs["attempt"] == k
        assert f.attempts == 5
        assert f.content_hash == result.content_hash


def test_same_seed_same_content_other_seed_other_content(tmp_path: Path) -> None:
    a = _gen(tmp_path / "a.hdf5", 4, seed=1).content_hash
    b = _gen(tmp_path / "b.hdf5", 4, seed=1).content_hash
    c = _gen(tmp_path / "c.hdf5", 4, seed=2).content_hash
    assert a == b != c


def test_successes_only_records_attempts(tmp_path: Path) -> None:
    out = tmp_path / "succ.hdf5"
    result = _gen(out, 6, seed=3, successes_only=True)
    with open_dataset(out) as f:
        attempts = [f.demo_attrs(k)["attempt"] for k in f.demo_ids]
        assert all(f.demo_attrs(k)["success"] for k in f.demo_ids)
        assert attempts == sorted(attempts) and len(set(attempts)) == 6
        assert f.attempts == attempts[-1] + 1 == result.attempts
        assert f.attempts > 6  # the toy demonstrator fails about half the time
        n_attempts = f.attempts
    with open_dataset(_gen(tmp_path / "all.hdf5", n_attempts, seed=3).path) as everything:
        # The kept demos are exactly the successful attempts of an unfiltered run.
        kept = [k for k in everything.demo_ids if everything.demo_attrs(k)["success"]]
        assert kept == attempts


def test_rgb_mode_stores_only_images(tmp_path: Path) -> None:
    out = tmp_path / "rgb.hdf5"
    _gen(out, 2, obs_mode="rgb", env_kwargs={"image_size": 8})
    with open_dataset(out) as f:
        assert f.obs_keys == ["scene_image", "wrist_image"]
        # What robomimic passes to gym.make: the env arguments, including the time limit the demos ran under.
        assert f.env_args["env_kwargs"] == {
            "image_size": 8,
            "obs_mode": "state+rgb",
            "episode_steps": TOY_EPISODE_STEPS,
        }
    subset = tmp_path / "subset.hdf5"
    _gen(subset, 2, obs_mode="state", obs_keys=["eef_pos", "arm_qpos"])
    with open_dataset(subset) as f:
        assert f.obs_keys == ["arm_qpos", "eef_pos"]
    refusal = r"\(obs_mode 'state'\): unknown observation key\(s\) \['joint_angles'\]; valid: \[.*'eef_pos'"
    with pytest.raises(ValueError, match=refusal):
        _gen(tmp_path / "bad.hdf5", 1, obs_keys=["joint_angles"])


def _interrupted_file_is_shown_partial(path: Path, cache: Path, monkeypatch, capsys) -> None:
    """``datasets list`` and ``datasets verify NAME`` say that an interrupted file (here: as lab-50's) is partial."""
    import shutil

    cache.mkdir()
    shutil.copy(path, cache / "lab-50.hdf5")
    monkeypatch.setenv("R2S2R_DATA_DIR", str(cache))
    capsys.readouterr()
    assert _cli(["datasets", "list"]) == 0
    rows = {line.split()[0]: line.split()[3] for line in capsys.readouterr().out.splitlines()}
    assert rows["lab-50"] == "partial" and rows["ungrounded-1000"] == "missing"
    assert _cli(["datasets", "verify", "lab-50"]) == 0
    assert "(incomplete: its generation was interrupted" in capsys.readouterr().out
    assert _cli(["datasets", "verify", "lab-5O"]) == 1
    assert "nor the name of a canonical dataset (lab-50, " in capsys.readouterr().err


def test_interrupt_then_resume_equals_uninterrupted_run(tmp_path: Path, monkeypatch, capsys) -> None:
    # Same settings as the interrupted run: the content hash covers the generation settings (step_delay included).
    ref = _gen(tmp_path / "ref.hdf5", 12, seed=4, env_kwargs={"step_delay": 0.002})
    out = tmp_path / "int.hdf5"
    # SIGINT arrives while episodes run (each toy step sleeps 2 ms, an episode takes ~0.1 s).
    timer = threading.Timer(0.4, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    first = _gen(out, 12, seed=4, env_kwargs={"step_delay": 0.002})
    timer.join()
    assert first.interrupted and not first.complete
    assert 0 < first.num_demos < 12
    with open_dataset(out) as f:
        assert not f.complete and f.num_demos == first.num_demos
    _interrupted_file_is_shown_partial(out, tmp_path / "cache", monkeypatch, capsys)
    second = _gen(out, 12, seed=4, env_kwargs={"step_delay": 0.002})
    assert second.resumed and second.complete and second.new_demos == 12 - first.num_demos
    assert second.content_hash == ref.content_hash


def test_resume_refuses_different_settings(tmp_path: Path) -> None:
    out = tmp_path / "x.hdf5"
    _gen(out, 2, seed=1)
    with pytest.raises(GenerationError, match="seed: file has 1, now 2"):
        _gen(out, 3, seed=2)
    assert _gen(out, 3, seed=2, overwrite=True).num_demos == 3


def test_resume_of_complete_file_does_nothing_and_extending_appends(tmp_path: Path) -> None:
    out = tmp_path / "x.hdf5"
    _gen(out, 3, seed=5)
    again = _gen(out, 3, seed=5)
    assert again.new_demos == 0 and again.complete
    more = _gen(out, 5, seed=5)
    assert more.new_demos == 2
    assert more.content_hash == _gen(tmp_path / "ref.hdf5", 5, seed=5).content_hash


def test_resume_into_damaged_file_says_how_to_recover(tmp_path: Path) -> None:
    out = tmp_path / "x.hdf5"
    out.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(Exception, match="overwrite"):
        _gen(out, 2)


def test_file_held_by_another_writer_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "busy.hdf5"
    _gen(out, 2, seed=1)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, h5py, time; f = h5py.File(sys.argv[1], 'r+'); print('open', flush=True); time.sleep(60)",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        before = out.read_bytes()
        for overwrite in (False, True):
            with pytest.raises(GenerationError, match="being written by another process"):
                _gen(out, 3, seed=1, overwrite=overwrite)
        assert out.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()


def test_unknown_demonstrator_and_env(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown demonstrator 'no_such'; registered names: \[.*'toy-reacher'"):
        _gen(tmp_path / "x.hdf5", 1, demonstrator="no_such")
    with pytest.raises(ValueError, match="'module:function' is not accepted"):
        _gen(tmp_path / "x.hdf5", 1, demonstrator="r2s2r_envs.datasets.toy:make_toy_demonstrator")
    with pytest.raises(GenerationError, match="cannot make env 'NoSuchEnv-v0': not a registered id"):
        generate("NoSuchEnv-v0", 1, tmp_path / "y.hdf5", progress=False)
    with pytest.raises(GenerationError, match="registered env ids only"):
        generate(TOY_SPEC, 1, tmp_path / "y.hdf5", progress=False)  # an EnvSpec is never made
    assert not list(tmp_path.iterdir())  # nothing was created


def test_registered_demonstrator_name_and_env_default(tmp_path: Path) -> None:
    by_default = _gen(tmp_path / "a.hdf5", 3, seed=1, demonstrator=None)  # the env's own: toy-reacher
    by_name = _gen(tmp_path / "b.hdf5", 3, seed=1, demonstrator=TOY_DEMONSTRATOR)
    by_factory = _gen(tmp_path / "c.hdf5", 3, seed=1)
    with open_dataset(by_default.path) as a, open_dataset(by_name.path) as b, open_dataset(by_factory.path) as c:
        assert a.generation["demonstrator"] is None and b.generation["demonstrator"] == TOY_DEMONSTRATOR
        assert a.provenance["demonstrator"]["name"] == b.provenance["demonstrator"]["name"] == "toy-reacher"
        for k in a.demo_ids:  # the same demonstrator, so the same arrays
            np.testing.assert_array_equal(a.read(k, "actions"), c.read(k, "actions"))
    # The recorded choice is part of the settings: resuming with another one is refused.
    with pytest.raises(GenerationError, match="demonstrator"):
        _gen(tmp_path / "a.hdf5", 4, seed=1, demonstrator=TOY_DEMONSTRATOR)


def test_env_owns_the_time_limit(tmp_path: Path) -> None:
    assert gym.spec(TOY).max_episode_steps is None  # no Gymnasium TimeLimit: the env truncates itself
    a = _gen(tmp_path / "a.hdf5", 6, seed=2, max_episode_steps=4)
    b = _gen(tmp_path / "b.hdf5", 6, seed=2, episode_steps=4)
    c = _gen(tmp_path / "c.hdf5", 6, seed=2, env_kwargs={"episode_steps": 4})
    assert a.content_hash == b.content_hash == c.content_hash
    with open_dataset(a.path) as f:
        assert f.env_args["env_kwargs"] == {"episode_steps": 4, "obs_mode": "state"}  # what robomimic passes
        assert f.generation["env_kwargs"] == {"episode_steps": 4}
        lengths = [f.demo_length(k) for k in f.demo_ids]
        assert max(lengths) == 4
        timed_out = [f.demo_attrs(k) for k in f.demo_ids if f.demo_attrs(k)["truncated"]]
        assert timed_out and all(
            a["failure_cause"] == "timeout" and set(a["object_outcomes"]) == {"timeout"} for a in timed_out
        )
    with open_dataset(_gen(tmp_path / "d.hdf5", 2, seed=2).path) as f:
        assert max(f.demo_length(k) for k in f.demo_ids) <= TOY_EPISODE_STEPS
    with pytest.raises(ValueError, match="same setting"):
        _gen(tmp_path / "e.hdf5", 1, episode_steps=4, max_episode_steps=5)
    with pytest.raises(ValueError, match="contradicts"):
        _gen(tmp_path / "e.hdf5", 1, episode_steps=4, env_kwargs={"episode_steps": 5})
    with pytest.raises(ValueError, match="gymnasium.make arguments"):
        _gen(tmp_path / "e.hdf5", 1, env_kwargs={"max_episode_steps": 5})
    with pytest.raises(ValueError, match="positive integer"):
        _gen(tmp_path / "e.hdf5", 1, episode_steps=0)


# -- lab datasets ------------------------------------------------------------------------------------


def test_lab_dataset_is_a_black_box(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The toy env with domain="real" acts as the lab: get_state() raises, so rollout must never call it.
    out = tmp_path / "lab.hdf5"
    _gen(out, 4, seed=3, env_kwargs={"domain": "real"})
    with open_dataset(out) as f:
        assert f.domain == "real" and not f.has_states
        assert f.provenance["world"] == {
            "domain": "real",
            "lab": {"name": "toy-lab", "config_sha256": lab_config_hash()},
        }
        assert f.provenance["demonstrator"]["settings"] is None
        assert f.demo(0).states is None
    with h5py.File(out, "r") as h:
        names: list[str] = []
        h.visit(names.append)
        assert not [n for n in names if "states" in n]
    with pytest.raises(DatasetError, match="lab datasets carry no simulator state and cannot be replayed"):
        replay_demo(out, 0, check=True, allow_env_ids=ALLOW_TOY)
    assert f.env_args["env_kwargs"] == {"domain": "real", "obs_mode": "state", "episode_steps": TOY_EPISODE_STEPS}
    assert _cli(["replay", str(out), "--demo", "0", "--check"]) == 1
    assert "cannot be replayed" in capsys.readouterr().err
    # The loaders need no states: a lab file mixes with a sim file.
    sim = tmp_path / "sim.hdf5"
    _gen(sim, 4, seed=3)
    mix = CoTrainingMixture(
        [TrajectoryDataset(out, frame_stack=2), TrajectoryDataset(sim, frame_stack=2)], 0.5, normalize="minmax", seed=0
    )
    batch = mix.sample(32)
    assert batch["actions"].shape == (32, 1, 22) and 0 < batch["domain"].sum() < 32


def lab_config_hash() -> str:
    import hashlib

    return hashlib.sha256(json.dumps({"belt_speed": 0.5}, sort_keys=True).encode()).hexdigest()


def test_lab_record_names_the_lab_only() -> None:
    full = {
        "domain": "real",
        "lab": {"name": "default", "config_sha256": "ab" * 32},
        "world_params": {"x": 1},
        "control": {"gain": 2},
        "num_objects": 3,
    }
    assert lab_record(full, "PickSort-Real-v0") == {"domain": "real", "lab": full["lab"]}
    # Until the lab env reports a config hash, a bare name is accepted.
    assert lab_record({"lab": "default", "control": {}}, "X") == {
        "domain": "real",
        "lab": {"name": "default", "config_sha256": None},
    }
    with pytest.raises(GenerationError, match="names no lab"):
        lab_record({"domain": "real", "world_params": {}}, "X")


# -- a dataset is data, never code ------------------------------------------------------------------------


_MARKER_MODULE = """
from pathlib import Path
Path({marker!r}).write_text("imported")

def make(env):
    raise AssertionError("called")

class Env:
    pass
"""


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable module that writes a marker file when imported: nothing read from a file may import it."""
    path = tmp_path / "imported.marker"
    (tmp_path / "evil_marker_mod.py").write_text(_MARKER_MODULE.format(marker=str(path)))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield path
    assert "evil_marker_mod" not in sys.modules
    assert not path.exists(), "a module named by a dataset file was imported"


def _craft(path: Path, edit) -> None:
    """Edits a file and re-stamps its hashes, as someone crafting a file would."""
    with h5py.File(path, "r+") as f:
        edit(f)
        hashes = {int(g.attrs["demo_id"]): str(g.attrs["sha256"]) for g in f["data"].values()}
        _store_content_hash(f, hashes)


def test_replay_never_builds_an_env_from_a_file(
    tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.hdf5"
    _gen(out, 1, seed=2)
    evil_spec = json.loads(TOY_SPEC.to_json())
    evil_spec.update(id="Evil-v0", entry_point="evil_marker_mod:Env")

    def as_spec(f: h5py.File) -> None:
        for attrs, key, field in ((f.attrs, "generation", "env_id"), (f.attrs, "provenance", "env_spec")):
            record = json.loads(attrs[key])
            record[field] = evil_spec
            attrs[key] = json.dumps(record)
        env_args = json.loads(f["data"].attrs["env_args"])
        env_args["env_name"] = "Evil-v0"
        f["data"].attrs["env_args"] = json.dumps(env_args)

    _craft(out, as_spec)
    with open_dataset(out) as f:  # a valid file: it is refused for what it says, not for a broken hash
        assert f.generation["env_id"]["entry_point"] == "evil_marker_mod:Env"
    for allow in ((), ("Evil-v0",)):
        with pytest.raises(DatasetError, match="never from a spec or entry point read from a file"):
            replay_demo(out, 0, check=True, allow_env_ids=allow)
    assert _cli(["replay", str(out), "--demo", "0", "--check"]) == 1
    assert "registered id" in capsys.readouterr().err

    # An id that is not registered, or not a PickSort id, is refused too (also when its name looks harmless).
    for env_id, allow, message in (
        ("PickSort-Evil-v0", (), "not registered"),
        ("Evil-v0", (), "PickSort-"),
        (TOY, (), "PickSort-"),
        ("Evil-v0", ("Evil-v0",), "not registered"),
    ):

        def set_env_id(f: h5py.File, env_id: str = env_id) -> None:
            f.attrs["generation"] = json.dumps({**json.loads(f.attrs["generation"]), "env_id": env_id})

        _craft(out, set_env_id)
        with pytest.raises(DatasetError, match=message):
            replay_demo(out, 0, check=True, allow_env_ids=allow)


def test_stored_demonstrator_and_spec_demonstrator_are_never_imported(tmp_path: Path, marker: Path) -> None:
    out = tmp_path / "g.hdf5"
    _gen(out, 1, seed=2, demonstrator=None)
    _craft(
        out,
        lambda f: f.attrs.__setitem__(
            "generation", json.dumps({**json.loads(f.attrs["generation"]), "demonstrator": "evil_marker_mod:make"})
        ),
    )
    with pytest.raises(GenerationError, match="different settings.*demonstrator"):  # compared as data
        _gen(out, 2, seed=2, demonstrator=None)
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "spec_version": 1,
                "datasets": [
                    {"name": "toy", "env_id": TOY, "episodes": 1, "seed": 0, "demonstrator": "evil_marker_mod:make"}
                ],
            }
        )
    )
    with pytest.raises(ValueError, match="not a demonstrator name"):
        make_datasets(spec, cache_dir=tmp_path / "cache", progress=False)
    with pytest.raises(ValueError, match="not accepted"):
        _gen(tmp_path / "h.hdf5", 1, demonstrator="evil_marker_mod:make")


# -- concurrent writers ------------------------------------------------------------------------------------


_RACER = """
import json, sys, time
from pathlib import Path
from r2s2r_envs.datasets.generate import GenerationError, generate
from r2s2r_envs.datasets.toy import make_toy_demonstrator, register_toy_env

if __name__ == "__main__":
    root, name, reps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    env_id = register_toy_env()
    for rep in range(reps):
        (root / f"ready-{rep}-{name}").touch()
        while not (root / f"go-{rep}").exists():
            time.sleep(0.001)
        try:
            r = generate(env_id, 8, root / f"out-{rep}.hdf5", seed=rep, demonstrator=make_toy_demonstrator,
                         env_kwargs={"step_delay": 0.002}, progress=False)
            result = {"ok": r.content_hash}
        except GenerationError as exc:
            result = {"error": str(exc)}
        # Written whole, then renamed: the test polls for the file and must never read it half-written.
        tmp = root / f"result-{rep}-{name}.json.tmp"
        tmp.write_text(json.dumps(result))
        tmp.replace(root / f"result-{rep}-{name}.json")
"""


@pytest.mark.slow
def test_two_runs_started_together_one_proceeds_one_fails_cleanly(tmp_path: Path) -> None:
    reps = 5
    script = tmp_path / "racer.py"
    script.write_text(_RACER)
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(script), str(tmp_path), name, str(reps)], stderr=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    }
    try:
        for rep in range(reps):
            deadline = time.monotonic() + 120
            while not all((tmp_path / f"ready-{rep}-{n}").exists() for n in procs):
                assert time.monotonic() < deadline, "racers did not start"
                assert all(p.poll() is None for p in procs.values()), [p.stderr.read() for p in procs.values()]
                time.sleep(0.01)
            (tmp_path / f"go-{rep}").touch()  # both start at the same moment
            while not all((tmp_path / f"result-{rep}-{n}.json").exists() for n in procs):
                assert time.monotonic() < deadline, "racers did not finish"
                time.sleep(0.01)
            results = [json.loads((tmp_path / f"result-{rep}-{n}.json").read_text()) for n in procs]
            ok = [r["ok"] for r in results if "ok" in r]
            errors = [r["error"] for r in results if "error" in r]
            assert len(ok) == 1 and len(errors) == 1, results
            assert "another process is writing" in errors[0]
            with open_dataset(tmp_path / f"out-{rep}.hdf5") as f:
                assert f.complete and f.num_demos == 8 and f.content_hash == ok[0]
            assert not (tmp_path / f"out-{rep}.hdf5.lock").exists()
        for p in procs.values():
            assert p.wait(timeout=60) == 0, p.stderr.read()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()  # else a failure here leaves the pipes to a later test's warning checks


def test_held_lock_fails_at_once_and_creates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "locked.hdf5"
    with writer_lock(out) as lock:
        assert lock.exists()
        start = time.perf_counter()
        for overwrite in (False, True):
            with pytest.raises(GenerationError, match="another process is writing .*locked.hdf5"):
                _gen(out, 2, overwrite=overwrite)
        assert time.perf_counter() - start < 5.0
        assert sorted(p.name for p in out.parent.iterdir()) == ["locked.hdf5.lock"]
    assert not lock.exists()
    assert _gen(out, 2).complete
    assert sorted(p.name for p in out.parent.iterdir()) == ["locked.hdf5"]


@pytest.mark.slow
def test_two_workers_write_the_same_file_as_one(tmp_path: Path) -> None:
    one = _gen(tmp_path / "w1.hdf5", 16, seed=9, successes_only=True, workers=1)
    two = _gen(tmp_path / "w2.hdf5", 16, seed=9, successes_only=True, workers=2)
    assert one.content_hash == two.content_hash
    assert one.attempts == two.attempts
    assert (tmp_path / "w1.hdf5").read_bytes() == (tmp_path / "w2.hdf5").read_bytes()


_KILL_CHILD = """
import sys
from r2s2r_envs.datasets.generate import generate
from r2s2r_envs.datasets.toy import make_toy_demonstrator, register_toy_env
if __name__ == "__main__":
    generate(register_toy_env(), 30, sys.argv[1], seed=11, demonstrator=make_toy_demonstrator,
             progress=False, env_kwargs={"step_delay": 0.003}, workers=int(sys.argv[2]))
"""


def _children(pid: int) -> list[int]:
    """Child process ids of ``pid`` that are worker processes (from /proc; Linux)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and b"spawn_main" in cmdline:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_leaves_valid_file_and_rerun_resumes(tmp_path: Path, workers: int) -> None:
    script = tmp_path / "child.py"
    script.write_text(_KILL_CHILD)
    out = tmp_path / "killed.hdf5"
    ref = _gen(tmp_path / "ref.hdf5", 30, seed=11, env_kwargs={"step_delay": 0.003})
    proc = subprocess.Popen([sys.executable, str(script), str(out), str(workers)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until a few demos are on disk, then kill without warning
        time.sleep(0.2)
        try:  # the writer holds the HDF5 lock; peek without it (a torn read just means "not yet")
            with h5py.File(out, "r", locking=False) as f:
                if int(f.attrs["num_demos"]) >= 3:
                    break
        except (OSError, KeyError):
            continue
    workers_pids = _children(proc.pid)
    assert len(workers_pids) >= (workers if workers > 1 else 0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # Orphaned workers notice their parent is gone and exit instead of lingering.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers_pids):
        time.sleep(0.1)
    assert not [pid for pid in workers_pids if Path(f"/proc/{pid}").exists()]
    with open_dataset(out) as f:
        assert 3 <= f.num_demos < 30
        assert not f.complete
    resumed = _gen(out, 30, seed=11, env_kwargs={"step_delay": 0.003}, workers=workers)
    assert resumed.resumed and resumed.complete
    assert resumed.content_hash == ref.content_hash


# -- replay ------------------------------------------------------------------------------------------


def test_replay_recreates_states_and_renders_video(tmp_path: Path) -> None:
    import imageio.v2 as imageio

    out = tmp_path / "r.hdf5"
    _gen(out, 2, seed=2, env_kwargs={"image_size": 16})
    result = replay_demo(out, 1, video=tmp_path / "demo.mp4", check=True, allow_env_ids=ALLOW_TOY)
    assert result.first_divergent_step is None and result.max_state_error == 0.0
    with open_dataset(out) as f:
        assert result.num_steps == f.demo_length(1)
    with imageio.get_reader(tmp_path / "demo.mp4") as reader:
        assert reader.count_frames() == result.num_steps
    replay_demo(out, 0, video=tmp_path / "demo.gif", allow_env_ids=ALLOW_TOY)
    assert len(imageio.mimread(tmp_path / "demo.gif")) > 1


def test_replay_check_detects_tampered_actions(tmp_path: Path) -> None:
    out = tmp_path / "r.hdf5"
    _gen(out, 1, seed=2)
    # A damaged byte in the stored actions fails its checksum: replay never runs altered actions.
    damaged = tmp_path / "damaged.hdf5"
    damaged.write_bytes(out.read_bytes())
    with h5py.File(damaged, "r") as f:
        offset = f["data/demo_0/actions"].id.get_chunk_info(0).byte_offset + 9
    data = bytearray(damaged.read_bytes())
    data[offset] ^= 0x04
    damaged.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="'actions' of demo 0.*checksum"):
        replay_demo(damaged, 0, check=True, allow_env_ids=ALLOW_TOY)
    # Changed actions with re-stamped hashes (a file that verifies): only re-simulation can tell.
    _craft(out, lambda f: f["data/demo_0/actions"].__setitem__(slice(2, None), 0.0))
    result = replay_demo(out, 0, check=True, allow_env_ids=ALLOW_TOY)
    assert result.first_divergent_step == 3


def test_replay_of_a_version_1_file_maps_its_time_limit(tmp_path: Path) -> None:
    out = tmp_path / "v1.hdf5"
    _gen(out, 2, seed=2, episode_steps=5)
    with h5py.File(out, "r+") as f:  # as version 1 recorded it: Gymnasium's max_episode_steps
        generation = json.loads(f.attrs["generation"])
        generation["max_episode_steps"] = generation["env_kwargs"].pop("episode_steps")
        f.attrs["generation"] = json.dumps(generation)
    downgrade_to_v1(out)
    result = replay_demo(out, 1, check=True, allow_env_ids=ALLOW_TOY)
    assert result.first_divergent_step is None and result.num_steps <= 5


# -- CLI ---------------------------------------------------------------------------------------------


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="r2s2r")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_generate_info_verify_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.hdf5"
    # No --demonstrator: the env's own (a registered name); --max-episode-steps is the older name of --episode-steps.
    code = _cli(
        [
            "generate",
            TOY,
            "--episodes",
            "3",
            "--out",
            str(out),
            "--seed",
            "1",
            "--env-kwargs",
            '{"num_objects": 2}',
            "--max-episode-steps",
            "30",
            "--no-progress",
        ]
    )
    assert code == 0
    assert "3 demos" in capsys.readouterr().out
    same = tmp_path / "same.hdf5"
    assert (
        _cli(
            [
                "generate",
                TOY,
                "--episodes",
                "3",
                "--out",
                str(same),
                "--seed",
                "1",
                "--demonstrator",
                TOY_DEMONSTRATOR,
                "--env-kwargs",
                '{"num_objects": 2}',
                "--episode-steps",
                "30",
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert _cli(["datasets", "info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["demos"] == 3 and info["provenance"]["world"]["num_objects"] == 2
    assert info["schema_version"] == 3
    with open_dataset(out) as a, open_dataset(same) as b:
        assert a.env_args["env_kwargs"]["episode_steps"] == 30
        for k in a.demo_ids:
            np.testing.assert_array_equal(a.read(k, "actions"), b.read(k, "actions"))
    assert _cli(["datasets", "verify", str(out)]) == 0
    # The command line replays PickSort ids only; Python may allow the toy id explicitly.
    assert _cli(["replay", str(out), "--demo", "2", "--check"]) == 1
    assert "replay rebuilds only registered PickSort-* ids" in capsys.readouterr().err
    assert replay_demo(out, 2, check=True, allow_env_ids=ALLOW_TOY).first_divergent_step is None
    broken = tmp_path / "broken.hdf5"
    broken.write_bytes(out.read_bytes()[:3000])
    assert _cli(["datasets", "verify", str(broken)]) == 1
    assert "truncated or damaged" in capsys.readouterr().err


def test_cli_reports_errors_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _cli(["generate", "NoSuchEnv-v0", "--episodes", "1", "--out", str(tmp_path / "x.hdf5"), "--no-progress"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("r2s2r generate: error: cannot make env 'NoSuchEnv-v0'")  # as every command says it
    code = _cli(
        [
            "generate",
            TOY,
            "--episodes",
            "1",
            "--out",
            str(tmp_path / "x.hdf5"),
            "--no-progress",
            "--demonstrator",
            "r2s2r_envs.datasets.toy:make_toy_demonstrator",
        ]
    )
    assert code == 1
    assert "'module:function' is not accepted" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _cli(["generate", "X-v0", "--episodes", "1", "--out", "x.hdf5", "--env-kwargs", "[1]"])


def test_datasets_commands_report_as_every_command_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``r2s2r datasets SUB: error: ...``, and exit 2 for bad input found before any work, as ``evaluate`` does."""
    assert _cli(["datasets", "make", "--cache-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("r2s2r datasets make: error: name datasets to make or pass --all")
    assert _cli(["datasets", "make", "no-such-set", "--cache-dir", str(tmp_path), "--no-progress"]) == 2
    assert capsys.readouterr().err.startswith("r2s2r datasets make: error: ")
    args = ["datasets", "export", str(tmp_path / "x.hdf5"), "--format", "minari", "--out", str(tmp_path / "o")]
    assert _cli([*args, "--fps", "10"]) == 2
    assert capsys.readouterr().err.startswith("r2s2r datasets export: error: --fps applies to --format lerobot")
    assert _cli(["datasets", "info", str(tmp_path / "missing.hdf5")]) == 1
    assert capsys.readouterr().err.startswith("r2s2r datasets info: error: ")


# -- canonical datasets ------------------------------------------------------------------------------


def test_packaged_spec_lists_the_benchmark_datasets(capsys: pytest.CaptureFixture[str]) -> None:
    path = default_spec_path()
    assert path == REPO / "r2s2r_envs" / "datasets" / "canonical.json"
    assert not (REPO / "benchmarks" / "datasets.json").exists()  # one spec, shipped in the wheel
    entries = {e.name: e for e in load_spec()}  # read through importlib.resources
    assert entries == {e.name: e for e in load_spec(path)}
    # The lab's demos: lab-50 (PickSort-Real-v0) and lab v3's, lab-v3-50 and with images lab-v3-50-rgb64
    # (PickSort-Real-v1).
    lab = [e for e in entries.values() if e.env_id.startswith("PickSort-Real-")]
    assert [e.env_id for e in lab] == ["PickSort-Real-v0", "PickSort-Real-v1", "PickSort-Real-v1"]
    assert all(e.episodes == 50 for e in lab)
    sim = [e for e in entries.values() if e not in lab]
    assert {e.env_id for e in sim} >= {"PickSort-Ungrounded-v0"}
    assert all(e.episodes == 1000 for e in sim)
    # Sim demos with noise injection (what lets a learned policy recover, docs/datasets.md#noise-injection); the
    # real demos as the operator made them.
    assert all(e.action_noise == 0.1 and "--action-noise 0.1 " in e.command for e in sim)
    assert all(e.action_noise == 0.0 and "--action-noise" not in e.command for e in lab)
    assert all(e.command.startswith(f"r2s2r generate {e.env_id} ") for e in entries.values())
    # A hash is pinned on the reference machine (`r2s2r datasets make --all --update-spec`) or listed as a known
    # build of another machine once measured; the bump to schema version 3 made every earlier one stale, and an
    # unpinned entry is checked against its recipe instead (test_datasets_make_builds_verifies_and_skips).
    for e in entries.values():
        known = [h for h in (e.sha256, *e.other_builds) if h is not None]
        assert all(len(h) == 64 and int(h, 16) >= 0 for h in known), e.name
    assert all(e.demonstrator is None for e in entries.values())
    assert _cli(["datasets", "list"]) == 0
    assert "lab-50" in capsys.readouterr().out


def test_spec_command_must_match_fields(tmp_path: Path) -> None:
    spec = {
        "spec_version": 1,
        "datasets": [
            {"name": "a", "env_id": "X-v0", "episodes": 5, "seed": 0, "command": "r2s2r generate X-v0 --episodes 6"}
        ],
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="does not match its fields"):
        load_spec(path)


def test_datasets_make_builds_verifies_and_skips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {
        "spec_version": 1,
        "datasets": [
            {"name": "toy", "env_id": TOY, "episodes": 3, "seed": 0, "demonstrator": TOY_DEMONSTRATOR},
            {"name": "future", "env_id": "PickSort-NotBuiltYet-v0", "episodes": 3, "seed": 0},
        ],
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    cache = tmp_path / "cache"
    first = {r.name: r for r in make_datasets(path, cache_dir=cache, update_spec=True, progress=False)}
    assert first["toy"].status == "built" and first["future"].status == "skipped"
    pinned = json.loads(path.read_text())["datasets"][0]["sha256"]
    assert pinned == first["toy"].sha256
    second = {r.name: r for r in make_datasets(path, cache_dir=cache, progress=False)}
    assert second["toy"].status == "present" and second["toy"].message == "hash verified"
    raw = json.loads(path.read_text())
    raw["datasets"][0]["sha256"] = "0" * 64
    path.write_text(json.dumps(raw))
    # A build the spec knows from another kind of machine is verified like the pinned one.
    raw["datasets"][0]["other_builds"] = {first["toy"].sha256: "the test machine"}
    path.write_text(json.dumps(raw))
    known = make_datasets(path, names=["toy"], cache_dir=cache, progress=False)
    assert known[0].ok and known[0].message == "hash verified (a known build: the test machine)"
    del raw["datasets"][0]["other_builds"]
    path.write_text(json.dumps(raw))
    third = make_datasets(path, names=["toy"], cache_dir=cache, progress=False)
    # The file follows the recipe (made by this version with the spec's settings): what a build on another kind of
    # machine gives. Training uses it with a warning and records its own hash; so `datasets make` reports it and
    # exits 0, not 1, which would stop a `set -e` script over a usable file (issue 50).
    assert third[0].status == "unknown-build" and third[0].ok
    assert "follows the recipe" in third[0].message
    from r2s2r_envs.cli import main

    argv = ["--spec", str(path), "--cache-dir", str(cache)]
    assert main(["datasets", "make", "toy", *argv, "--no-progress"]) == 0
    assert main(["datasets", "list", *argv]) == 0
    listing = capsys.readouterr().out
    assert "toy" in listing and "pinned 000000000000" in listing and "cached file: an unknown build" in listing
    import r2s2r_envs.policies.data as selection

    monkeypatch.setattr(selection, "load_spec", lambda: load_spec(path))
    monkeypatch.setenv("R2S2R_DATA_DIR", str(cache))
    with pytest.warns(selection.UnpinnedDatasetWarning, match="follows the canonical recipe"):
        (ref,) = selection.resolve_datasets([], ["toy"])
    assert ref.content_hash == first["toy"].sha256
    # A recipe the file does not follow (another seed): stale, refused by make's report and by training.
    raw["datasets"][0]["seed"] = 5
    path.write_text(json.dumps(raw))
    fourth = make_datasets(path, names=["toy"], cache_dir=cache, progress=False)
    assert fourth[0].status == "hash-mismatch" and "stale or foreign (seed 0 (the recipe: 5))" in fourth[0].message
    with pytest.raises(selection.DataSelectionError, match=r"stale or foreign \(seed 0.*r2s2r datasets make toy"):
        selection.resolve_datasets([], ["toy"])
    # With no hash pinned at all the recipe is the only check, in make and in training alike.
    raw["datasets"][0]["sha256"] = None
    path.write_text(json.dumps(raw))
    fifth = make_datasets(path, names=["toy"], cache_dir=cache, progress=False)
    assert fifth[0].status == "hash-mismatch" and "no hash pinned, and the file is stale" in fifth[0].message
    with pytest.raises(selection.DataSelectionError, match=r"stale or foreign \(seed 0"):
        selection.resolve_datasets([], ["toy"])
    raw["datasets"][0]["seed"] = 0
    path.write_text(json.dumps(raw))
    sixth = make_datasets(path, names=["toy"], cache_dir=cache, progress=False)
    assert sixth[0].ok and "no expected hash" in sixth[0].message
    with pytest.warns(selection.UnpinnedDatasetWarning, match="none pinned yet"):
        selection.resolve_datasets([], ["toy"])
    with pytest.raises(KeyError, match=r"spec.json: unknown dataset\(s\) \[.nope.\]; valid: \[.*.toy.\]"):
        make_datasets(path, names=["nope"], cache_dir=cache, progress=False)
    raw["datasets"][0]["other_builds"] = {"abc": "a machine"}
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="other_builds must map 64-hex-digit content hashes"):
        load_spec(path)


def test_a_version_2_build_of_a_canonical_recipe_needs_a_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of schema version 2 (no clean action labels) never passes for a current build of its recipe, pinned or
    not: make reports it and training refuses it."""
    from r2s2r_envs.datasets.canonical import recipe_differences

    entry = {"name": "toy", "env_id": TOY, "episodes": 3, "seed": 0, "demonstrator": TOY_DEMONSTRATOR}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"spec_version": 1, "datasets": [entry]}))
    cache = tmp_path / "cache"
    (built,) = make_datasets(path, cache_dir=cache, progress=False)
    assert built.status == "built" and recipe_differences(load_spec(path)[0], cache / "toy.hdf5") == []
    old_hash = downgrade_to_v2(cache / "toy.hdf5")
    with open_dataset(cache / "toy.hdf5") as f:
        assert f.schema_version == 2 and f.content_hash == old_hash
    # Everything else follows the recipe: the schema version alone marks it stale.
    assert recipe_differences(load_spec(path)[0], cache / "toy.hdf5") == [
        "dataset schema version 2 (this package writes 3)"
    ]
    # Even with its very hash pinned, make does not take it: its hash follows the older rules.
    for pinned in (None, old_hash):
        path.write_text(json.dumps({"spec_version": 1, "datasets": [{**entry, "sha256": pinned}]}))
        (report,) = make_datasets(path, cache_dir=cache, progress=False)
        assert report.status == "failed" and not report.ok
        assert report.message == "built with schema version 2; delete it, or make it with --rebuild-stale"
    import r2s2r_envs.policies.data as selection

    path.write_text(json.dumps({"spec_version": 1, "datasets": [entry]}))  # nothing pinned, as shipped now
    monkeypatch.setattr(selection, "load_spec", lambda: load_spec(path))
    monkeypatch.setenv("R2S2R_DATA_DIR", str(cache))
    with pytest.raises(selection.DataSelectionError, match=r"stale or foreign \(dataset schema version 2"):
        selection.resolve_datasets([], ["toy"])


def test_rebuild_stale_moves_an_older_schema_aside_and_builds_again(tmp_path: Path) -> None:
    entry = {"name": "toy", "env_id": TOY, "episodes": 3, "seed": 0, "demonstrator": TOY_DEMONSTRATOR}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"spec_version": 1, "datasets": [entry]}))
    cache = tmp_path / "cache"
    (built,) = make_datasets(path, cache_dir=cache, progress=False)
    current = built.sha256
    old_hash = downgrade_to_v2(cache / "toy.hdf5")
    (rebuilt,) = make_datasets(path, cache_dir=cache, progress=False, rebuild_stale=True)
    assert rebuilt.ok and rebuilt.status == "built" and rebuilt.sha256 == current
    assert rebuilt.message.endswith("(the schema-2 file was moved to toy.schema-v2.hdf5)")
    with open_dataset(cache / "toy.schema-v2.hdf5") as f:  # nothing already written is lost
        assert f.schema_version == 2 and f.content_hash == old_hash
    (again,) = make_datasets(path, cache_dir=cache, progress=False, rebuild_stale=True)
    assert again.status == "present" and "moved" not in again.message  # a current file stays where it is
    from r2s2r_envs.cli import main

    downgrade_to_v2(cache / "toy.hdf5")
    code = main(
        ["datasets", "make", "toy", "--spec", str(path), "--cache-dir", str(cache), "--rebuild-stale", "--no-progress"]
    )
    assert code == 0 and (cache / "toy.schema-v2.1.hdf5").is_file()


def test_a_file_from_an_older_grounding_or_planner_does_not_follow_the_recipe(tmp_path: Path) -> None:
    """The recipe includes what the env records now: a grounding file retuned (or refitted) after the dataset was
    made leaves the file stale, though env id, arguments and seeds are the same.  The dataset recorded the grounding
    by value (docs/datasets.md#env-arguments), so the changed content shows as changed env arguments, named by the
    file's hashes."""
    import dataclasses

    from test_grounding_result import write_example

    from r2s2r_envs.datasets.canonical import CanonicalDataset, recipe_differences
    from r2s2r_envs.grounding.result import load_grounding, write_grounding

    grounding = write_example(tmp_path)
    kwargs = {"grounding": str(grounding), "num_objects": 1, "episode_steps": 40}
    out = tmp_path / "w.hdf5"
    generate("PickSort-WorldGrounded-v0", 1, out, seed=3, env_kwargs=kwargs, progress=False)
    entry = CanonicalDataset(
        name="w", env_id="PickSort-WorldGrounded-v0", episodes=1, seed=3, successes_only=False, env_kwargs=kwargs
    )
    assert recipe_differences(entry, out) == []
    section = {"name": "scripted", "settings": {"position_gain": 0.3}, "tuning": None}
    write_grounding(dataclasses.replace(load_grounding(grounding), demonstrator=section), grounding)
    differences = recipe_differences(entry, out)
    assert len(differences) == 1, differences
    with open_dataset(out) as f:
        recorded = f.generation["env_kwarg_files"]["grounding"]["sha256"]
    now = hashlib.sha256(grounding.read_bytes()).hexdigest()
    assert differences[0] == (
        f"env_kwargs differ: grounding: recorded from a file with sha256 {recorded[:16]}..., the recipe's file now "
        f"has {now[:16]}..."
    )


def test_action_noise_perturbs_arm_actions_reproducibly_and_is_recorded(tmp_path: Path) -> None:
    # One PickSort demo with one object, without and with noise injection (docs/datasets.md#noise-injection).
    kw = dict(progress=False, env_kwargs={"num_objects": 1})
    plain = generate("PickSort-Ungrounded-v0", 1, tmp_path / "plain.hdf5", **kw)
    noisy = generate("PickSort-Ungrounded-v0", 1, tmp_path / "noisy.hdf5", action_noise=0.1, **kw)
    again = generate("PickSort-Ungrounded-v0", 1, tmp_path / "again.hdf5", action_noise=0.1, **kw)
    assert noisy.content_hash == again.content_hash != plain.content_hash
    with open_dataset(plain.path) as p, open_dataset(noisy.path) as n:
        assert "action_noise" not in p.generation  # files made without noise keep their content and hash
        assert n.generation["action_noise"] == 0.1
        a, b = p.read(p.demo_ids[0], "actions"), n.read(n.demo_ids[0], "actions")
        # The first action sees the same observation: only the noise differs, on the 6 arm dims, not the fingers.
        assert np.array_equal(a[0, 6:], b[0, 6:])
        assert 0.02 < np.abs(a[0, :6] - b[0, :6]).mean() < 0.3
        assert np.all(np.abs(b) <= 1.0)
    # The executed actions are recorded: the demo re-simulates from them.
    assert replay_demo(noisy.path, 0, check=True).max_state_error == 0.0
    with pytest.raises(GenerationError, match="action_noise: file has 0.1, now 0.2"):
        generate("PickSort-Ungrounded-v0", 2, tmp_path / "noisy.hdf5", action_noise=0.2, **kw)
    for bad in (-0.1, 1.5, float("nan"), "0.1"):
        with pytest.raises(ValueError, match="action_noise must be a number in \\[0, 1\\]"):
            generate("PickSort-Ungrounded-v0", 1, tmp_path / "bad.hdf5", action_noise=bad, **kw)
    assert not (tmp_path / "bad.hdf5").exists()


def test_noise_injection_tells_the_demonstrator_what_was_executed() -> None:
    # A demonstrator with an ``executed`` hook (the humanlike generator) hears the executed action after every act
    # under noise injection; without noise the hook is not called (the executed action is its own).
    from r2s2r_envs.behavior import make_demonstrator
    from r2s2r_envs.datasets.generate import rollout

    class Listening:
        def __init__(self, inner):
            self.inner, self.heard, self.sent = inner, [], []

        def reset(self, seed=None):
            self.inner.reset(seed)

        def act(self, obs):
            self.sent.append(np.array(self.inner.act(obs), copy=True))
            return self.sent[-1]

        def executed(self, action):
            self.heard.append(np.array(action, copy=True))

    env = gym.make("PickSort-Ungrounded-v0", num_objects=1, episode_steps=40)
    keys = ["eef_pos"]
    for noise in (0.1, 0.0):
        demo = Listening(make_demonstrator(env))
        episode = rollout(env, demo, env_seed=0, demonstrator_seed=0, obs_keys=keys, action_noise=noise)
        if noise:
            assert len(demo.heard) == len(episode.actions) == 40
            assert np.array_equal(np.stack(demo.heard), episode.actions)
            assert not np.array_equal(np.stack(demo.sent), episode.actions)
        else:
            assert demo.heard == []
