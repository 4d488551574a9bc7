"""Generation with the real PickSort envs and their demonstrators (short episodes, one object)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import STATE_KEYS

import r2s2r_envs  # noqa: F401 - registers the envs
from r2s2r_envs.datasets import DatasetError, TrajectoryDataset, open_dataset
from r2s2r_envs.datasets.generate import generate
from r2s2r_envs.datasets.replay import replay_demo

SHORT = {"env_kwargs": {"num_objects": 1}, "episode_steps": 25, "progress": False}


@pytest.mark.parametrize("env_id,domain", [("PickSort-Ungrounded-v0", "sim"), ("PickSort-Real-v0", "real")])
def test_generate_records_env_and_replays_exactly(tmp_path: Path, env_id: str, domain: str) -> None:
    out = tmp_path / "demos.hdf5"
    result = generate(env_id, 2, out, seed=3, **SHORT)
    assert result.num_demos == 2
    with open_dataset(out) as f:
        assert f.domain == domain
        assert f.env_id == env_id
        assert set(f.obs_keys) == STATE_KEYS
        assert f.action_dim == 22
        assert f.obs_spec()["object_pos"][0] == (3,)
        assert f.env_args["env_kwargs"]["episode_steps"] == 25  # the env's own time limit, for robomimic too
        demo = f.demo(0)
        assert demo.num_samples == 25
        # No noise injected (the lab's operator, or a sim demonstrator without --action-noise): the clean labels
        # are the executed actions.
        np.testing.assert_array_equal(demo.action_labels, demo.actions)
        if domain == "real":
            # A lab dataset names its lab (name and config hash) and nothing else; it stores no simulator state,
            # and the lab's operator stays a black box to code reading its datasets.
            assert set(f.provenance["world"]) == {"domain", "lab"}
            assert f.provenance["world"]["lab"]["name"] == "default"
            assert demo.states is None and not f.has_states
            assert f.provenance["demonstrator"]["settings"] is None
        else:
            assert f.provenance["world"]  # the env's own provenance() record
            assert demo.states.dtype == np.float64 and demo.states.shape[0] == demo.num_samples
            assert isinstance(f.provenance["demonstrator"]["settings"], dict)
    if domain == "sim":
        # The stored seed and actions re-simulate the stored MuJoCo states exactly.
        check = replay_demo(out, 1, check=True)
        assert check.first_divergent_step is None and check.max_state_error == 0.0
    else:
        with pytest.raises(DatasetError, match="lab datasets carry no simulator state and cannot be replayed"):
            replay_demo(out, 1, check=True)
    ds = TrajectoryDataset(out, frame_stack=2, action_chunk=4, normalize="minmax")
    assert ds.get_batch(np.arange(4))["actions"].shape == (4, 4, 22)


def test_noise_injected_demos_replay_their_actions_and_label_the_planners_clean_actions(tmp_path: Path) -> None:
    """DART: ``actions`` are the executed (perturbed) commands, consistent with the states; ``action_labels`` are what
    the demonstrator itself chose in each visited state, reproducible by a fresh planner fed the recorded
    observations (it is a deterministic function of its observation history); the two differ by the injected noise,
    on the 6 arm entries only."""
    from r2s2r_envs.behavior.scripted import ScriptedPlanner

    sigma, steps = 0.1, 80
    out = tmp_path / "noisy.hdf5"
    kw = {"env_kwargs": {"num_objects": 1}, "episode_steps": steps, "progress": False}
    generate("PickSort-Ungrounded-v0", 2, out, seed=5, action_noise=sigma, **kw)
    # Replay runs the executed actions and reproduces every recorded state.
    for k in (0, 1):
        check = replay_demo(out, k, check=True)
        assert check.first_divergent_step is None and check.max_state_error == 0.0
    env = gym.make("PickSort-Ungrounded-v0", num_objects=1, episode_steps=steps)
    with open_dataset(out) as f:
        assert f.action_noise == sigma and f.label_array() == "action_labels"
        assert f.provenance["demonstrator"]["name"] == "scripted"
        settings = f.provenance["demonstrator"]["settings"]
        low, high = env.action_space.low, env.action_space.high
        for k in f.demo_ids:
            demo = f.demo(k)
            planner = ScriptedPlanner(env, **settings)
            planner.reset(seed=int(demo.attrs["demonstrator_seed"]))
            replanned = np.stack(
                [planner.act({key: v[t] for key, v in demo.obs.items()}) for t in range(demo.num_samples)]
            ).astype(np.float32)
            np.testing.assert_array_equal(demo.action_labels, replanned)
            # The noise stream of the attempt (seeded from its demonstrator seed), added to the arm part and clipped.
            rng = np.random.default_rng([int(demo.attrs["demonstrator_seed"]), 0xDA27])
            noise = np.stack([rng.normal(0.0, sigma, 6).astype(np.float32) for _ in range(demo.num_samples)])
            arm = np.clip(demo.action_labels[:, :6] + noise, low[:6], high[:6])
            np.testing.assert_array_equal(demo.actions[:, :6], arm)
            np.testing.assert_array_equal(demo.actions[:, 6:], demo.action_labels[:, 6:])  # the 16 finger targets
            difference = demo.actions[:, :6] - demo.action_labels[:, :6]
            assert np.all(np.abs(difference).max(axis=0) > 0) and 0.5 * sigma < difference.std() < 1.5 * sigma
    env.close()
    # Training on clean labels: the samples' actions and their statistics are the labels'.
    clean = TrajectoryDataset(out, labels="clean")
    executed = TrajectoryDataset(out)
    with open_dataset(out) as f:
        labels = np.concatenate([f.read(k, "action_labels") for k in f.demo_ids])
    np.testing.assert_array_equal(clean.get_batch(np.arange(len(clean)))["actions"][:, 0], labels)
    assert not np.array_equal(executed.get_batch(np.arange(len(executed)))["actions"][:, 0], labels)
    np.testing.assert_allclose(clean.stats["actions"].mean, labels.astype(np.float64).mean(axis=0), rtol=1e-9)


def test_inline_lab_parameters_never_reach_the_dataset(tmp_path: Path) -> None:
    """A lab given inline (``lab={...}``) carries its physics in its kwargs: none of it may be written."""
    import h5py

    secret_latency = 0.0437  # a value that appears nowhere else
    kwargs = {"num_objects": 1, "lab": {"world": {"control_latency": secret_latency}}}
    out = tmp_path / "lab.hdf5"
    generate("PickSort-Real-v0", 1, out, seed=0, env_kwargs=kwargs, episode_steps=5, progress=False)
    texts: list[str] = []
    with h5py.File(out, "r") as f:
        f.visititems(lambda name, obj: texts.extend(str(v) for v in obj.attrs.values()))
        texts.extend(str(v) for v in f.attrs.values())
        names: list[str] = []
        f.visit(names.append)
    blob = "\n".join(texts)
    assert "control_latency" not in blob and str(secret_latency) not in blob
    assert "world_params" not in blob
    assert "withheld" in blob  # the kwarg is marked as withheld, not silently dropped
    assert not [n for n in names if "states" in n]  # nothing derived from the hidden world
    with open_dataset(out) as f:
        assert f.domain == "real" and f.num_demos == 1


@pytest.mark.slow
def test_picksort_two_workers_match_one(tmp_path: Path) -> None:
    one = generate("PickSort-Ungrounded-v0", 4, tmp_path / "w1.hdf5", seed=5, workers=1, **SHORT)
    two = generate("PickSort-Ungrounded-v0", 4, tmp_path / "w2.hdf5", seed=5, workers=2, **SHORT)
    assert one.content_hash == two.content_hash
    assert (tmp_path / "w1.hdf5").read_bytes() == (tmp_path / "w2.hdf5").read_bytes()


_RGB_SCRIPT = """
import sys
import r2s2r_envs
from r2s2r_envs.datasets import open_dataset
from r2s2r_envs.datasets.generate import generate
from r2s2r_envs.datasets.replay import replay_demo
out, video = sys.argv[1], sys.argv[2]
generate("PickSort-Ungrounded-v0", 1, out, obs_mode="rgb", env_kwargs={"num_objects": 1, "image_size": 32},
         episode_steps=5, progress=False)
with open_dataset(out) as f:
    print("KEYS", ",".join(f.obs_keys))
    print("SHAPE", f.obs_spec()["scene_image"][0])
print("FRAMES", replay_demo(out, 0, video=video).num_steps)
"""


@pytest.mark.slow
def test_picksort_rgb_dataset_and_video(tmp_path: Path) -> None:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    out = subprocess.run(
        [sys.executable, "-c", _RGB_SCRIPT, str(tmp_path / "rgb.hdf5"), str(tmp_path / "v.mp4")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    # Rendering is part of the suite (MUJOCO_GL=egl, installed by `make`): a missing OpenGL fails, never skips.
    assert out.returncode == 0, out.stderr
    keys = next(line for line in out.stdout.splitlines() if line.startswith("KEYS")).split()[1].split(",")
    # The file stores exactly the keys of the env's "rgb" mode (images, and whatever proprioception it adds),
    # although the env ran in "state+rgb" for the demonstrator: no privileged object state.
    assert {"scene_image", "wrist_image"} <= set(keys) and "object_pos" not in keys
    assert "SHAPE (32, 32, 3)" in out.stdout
    assert "FRAMES 5" in out.stdout
    assert (tmp_path / "v.mp4").stat().st_size > 0
