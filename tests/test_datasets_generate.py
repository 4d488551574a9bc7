"""Generation (determinism, parallel workers, successes-only, interruption and resume), replay, CLI and the
canonical datasets spec, on the physics-free toy env (r2s2r_envs.datasets.toy)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import gymnasium as gym
import h5py
import pytest

from r2s2r_envs.datasets import open_dataset
from r2s2r_envs.datasets.canonical import load_spec, make_datasets
from r2s2r_envs.datasets.cli import add_subcommands
from r2s2r_envs.datasets.generate import GenerationError, episode_seeds, generate
from r2s2r_envs.datasets.replay import replay_demo
from r2s2r_envs.datasets.toy import TOY_SPEC

TOY_DEMO = "r2s2r_envs.datasets.toy:make_toy_demonstrator"
REPO = Path(__file__).resolve().parents[1]


def _gen(out: Path, episodes: int, **kwargs) -> "object":
    kwargs.setdefault("demonstrator", TOY_DEMO)
    kwargs.setdefault("progress", False)
    return generate(TOY_SPEC, episodes, out, **kwargs)


@pytest.fixture
def registered_toy() -> Iterator[str]:
    """Registers the toy env under its id for tests that go through env ids (CLI, canonical spec)."""
    gym.register(id=TOY_SPEC.id, entry_point=TOY_SPEC.entry_point, max_episode_steps=TOY_SPEC.max_episode_steps)
    yield TOY_SPEC.id
    del gym.registry[TOY_SPEC.id]


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
        assert prov["seed"] == 7 and prov["schema_version"] == 1
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
        assert f.env_args["env_kwargs"] == {"image_size": 8, "obs_mode": "state+rgb"}
    subset = tmp_path / "subset.hdf5"
    _gen(subset, 2, obs_mode="state", obs_keys=["eef_pos", "arm_qpos"])
    with open_dataset(subset) as f:
        assert f.obs_keys == ["arm_qpos", "eef_pos"]
    with pytest.raises(ValueError, match="not observations"):
        _gen(tmp_path / "bad.hdf5", 1, obs_keys=["joint_angles"])


def test_interrupt_then_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    ref = _gen(tmp_path / "ref.hdf5", 12, seed=4)
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
    second = _gen(out, 12, seed=4, env_kwargs={"step_delay": 0.002})
    assert second.resumed and second.complete and second.new_demos == 12 - first.num_demos
    # env_kwargs differ from the reference run (step_delay), which does not change the arrays.
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
        [sys.executable, "-c", "import sys, h5py, time; f = h5py.File(sys.argv[1], 'r+'); print('open', flush=True); "
         "time.sleep(60)", str(out)], stdout=subprocess.PIPE, text=True)
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
    with pytest.raises(ValueError, match="module:function"):
        _gen(tmp_path / "x.hdf5", 1, demonstrator="no_colon")
    with pytest.raises(GenerationError, match="cannot make env"):
        generate("NoSuchEnv-v0", 1, tmp_path / "y.hdf5", demonstrator=TOY_DEMO, progress=False)


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
from r2s2r_envs.datasets.toy import TOY_SPEC
if __name__ == "__main__":
    generate(TOY_SPEC, 30, sys.argv[1], seed=11, demonstrator="r2s2r_envs.datasets.toy:make_toy_demonstrator",
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
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find worker processes")
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
    result = replay_demo(out, 1, video=tmp_path / "demo.mp4", check=True)
    assert result.first_divergent_step is None and result.max_state_error == 0.0
    with open_dataset(out) as f:
        assert result.num_steps == f.demo_length(1)
    with imageio.get_reader(tmp_path / "demo.mp4") as reader:
        assert reader.count_frames() == result.num_steps
    replay_demo(out, 0, video=tmp_path / "demo.gif")
    assert len(imageio.mimread(tmp_path / "demo.gif")) > 1


def test_replay_check_detects_tampered_actions(tmp_path: Path) -> None:
    out = tmp_path / "r.hdf5"
    _gen(out, 1, seed=2)
    with h5py.File(out, "r+") as f:
        f["data/demo_0/actions"][2:] = 0.0
    result = replay_demo(out, 0, check=True)
    assert result.first_divergent_step == 3


# -- CLI ---------------------------------------------------------------------------------------------


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="r2s2r")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_generate_info_verify_replay(
    tmp_path: Path, registered_toy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.hdf5"
    code = _cli(["generate", registered_toy, "--episodes", "3", "--out", str(out), "--seed", "1",
                 "--demonstrator", TOY_DEMO, "--env-kwargs", '{"num_objects": 2}', "--no-progress"])
    assert code == 0
    assert "3 demos" in capsys.readouterr().out
    assert _cli(["datasets", "info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["demos"] == 3 and info["provenance"]["world"]["num_objects"] == 2
    assert _cli(["datasets", "verify", str(out)]) == 0
    assert _cli(["replay", str(out), "--demo", "2", "--check"]) == 0
    assert "re-simulates exactly" in capsys.readouterr().out
    broken = tmp_path / "broken.hdf5"
    broken.write_bytes(out.read_bytes()[:3000])
    assert _cli(["datasets", "verify", str(broken)]) == 1
    assert "truncated or damaged" in capsys.readouterr().err


def test_cli_reports_errors_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _cli(["generate", "NoSuchEnv-v0", "--episodes", "1", "--out", str(tmp_path / "x.hdf5"), "--no-progress"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot make env 'NoSuchEnv-v0'")
    with pytest.raises(SystemExit):
        _cli(["generate", "X-v0", "--episodes", "1", "--out", "x.hdf5", "--env-kwargs", "[1]"])


# -- canonical datasets ------------------------------------------------------------------------------


def test_repository_spec_lists_the_benchmark_datasets() -> None:
    entries = {e.name: e for e in load_spec(REPO / "benchmarks" / "datasets.json")}
    lab = [e for e in entries.values() if e.env_id == "PickSort-Real-v0"]
    assert len(lab) == 1 and lab[0].episodes == 50
    sim = [e for e in entries.values() if e.env_id != "PickSort-Real-v0"]
    assert {e.env_id for e in sim} >= {"PickSort-Ungrounded-v0"}
    assert all(e.episodes == 1000 for e in sim)
    assert all(e.command.startswith(f"r2s2r generate {e.env_id} ") for e in entries.values())


def test_spec_command_must_match_fields(tmp_path: Path) -> None:
    spec = {"spec_version": 1, "datasets": [{"name": "a", "env_id": "X-v0", "episodes": 5, "seed": 0,
                                              "command": "r2s2r generate X-v0 --episodes 6"}]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="does not match its fields"):
        load_spec(path)


def test_datasets_make_builds_verifies_and_skips(tmp_path: Path, registered_toy: str) -> None:
    spec = {"spec_version": 1, "datasets": [
        {"name": "toy", "env_id": registered_toy, "episodes": 3, "seed": 0, "demonstrator": TOY_DEMO},
        {"name": "future", "env_id": "PickSort-NotBuiltYet-v0", "episodes": 3, "seed": 0},
    ]}
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
    third = make_datasets(path, names=["toy"], cache_dir=cache, progress=False)
    assert third[0].status == "hash-mismatch" and not third[0].ok
    with pytest.raises(KeyError, match="it lists"):
        make_datasets(path, names=["nope"], cache_dir=cache, progress=False)
