"""Lab logs and what logging needs from the env: the log format's round trip and its errors, the operator set-up
reset option, and the opt-in sensors (docs/lab_logs.md)."""

from __future__ import annotations

import json

import gymnasium as gym
import h5py
import numpy as np
import pytest

from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.grounding import excitation
from r2s2r_envs.grounding.logs import LOG_SCHEMA_VERSION, LogError, LogRun, read_logs, write_logs
from r2s2r_envs.world.builder import scene_layout
from r2s2r_envs.world.params import WorldParams


def _run(name: str = "r0", split: str = "fit", steps: int = 4) -> LogRun:
    rng = np.random.default_rng(0)
    return LogRun(
        name=name,
        protocol="latency",
        settings={"hold_s": 0.4},
        split=split,
        seed=7,
        control_mode="joint",
        setup={"belt": False, "objects": []},
        env_kwargs={"control_mode": "joint", "num_objects": 3},
        actions=rng.uniform(-1, 1, (steps, 23)).astype(np.float32),
        timestamps=np.arange(steps + 1) * 0.05,
        obs={"arm_qpos": rng.normal(size=(steps + 1, 7)).astype(np.float32)},
    )


@pytest.fixture()
def logdir(tmp_path):
    write_logs(tmp_path, [_run("a"), _run("b", "heldout")], lab_name="unit", lab_config_sha256="ab" * 32, seed=3)
    return tmp_path


# ------------------------------------------------------------------------------------------ log format
def test_round_trip(logdir):
    logs = read_logs(logdir)
    original = _run("a")
    run = logs.runs[0]
    assert [r.name for r in logs.fit] == ["a"] and [r.name for r in logs.heldout] == ["b"]
    assert logs.lab_name == "unit" and logs.lab_config_sha256 == "ab" * 32 and logs.seed == 3
    assert run.protocol == "latency" and run.settings == {"hold_s": 0.4} and run.seed == 7
    assert run.setup == original.setup and run.env_kwargs == original.env_kwargs
    np.testing.assert_array_equal(run.actions, original.actions)
    np.testing.assert_array_equal(run.timestamps, original.timestamps)
    np.testing.assert_array_equal(run.obs["arm_qpos"], original.obs["arm_qpos"])
    assert run.control_dt == pytest.approx(0.05)
    manifest = json.loads((logdir / "manifest.json").read_text())
    assert manifest["schema_version"] == LOG_SCHEMA_VERSION
    assert {"r2s2r_envs", "mujoco"} <= set(manifest["versions"])
    with h5py.File(logdir / "a.hdf5") as f:
        assert f.attrs["schema_version"] == LOG_SCHEMA_VERSION and f.attrs["split"] == "fit"
        assert f["obs/arm_qpos"].shape == (5, 7)


def test_other_schema_version_is_refused(logdir):
    path = logdir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["schema_version"] = 99
    path.write_text(json.dumps(manifest))
    with pytest.raises(LogError, match="schema version 99.*reads version 1"):
        read_logs(logdir)


def test_truncated_file_is_refused(logdir):
    path = logdir / "a.hdf5"
    path.write_bytes(path.read_bytes()[:400])
    with pytest.raises(LogError, match="truncated or changed"):
        read_logs(logdir)


def test_missing_manifest_and_directory(tmp_path):
    with pytest.raises(LogError, match="no manifest.json"):
        read_logs(tmp_path)
    with pytest.raises(LogError, match="does not exist"):
        read_logs(tmp_path / "nowhere")


def test_missing_signal_names_run_and_keys(logdir):
    run = read_logs(logdir).runs[0]
    with pytest.raises(LogError, match=r"run 'a'.*\['finger_current'\].*the finger fit"):
        run.require(["arm_qpos", "finger_current"], "the finger fit")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"split": "train"}, "split must be one of"),
        ({"control_mode": "torque"}, "control_mode must be one of"),
        ({"timestamps": np.zeros(3)}, r"timestamps must be \(T\+1,\)"),
        ({"obs": {"arm_qpos": np.zeros((2, 7))}}, "must have T\\+1 = 5 rows"),
        ({"name": "../x"}, "plain file stem"),
    ],
)
def test_malformed_runs_are_refused(tmp_path, change, message):
    import dataclasses

    with pytest.raises(LogError, match=message):
        write_logs(tmp_path, [dataclasses.replace(_run(), **change)], lab_name="x", lab_config_sha256="", seed=0)


def test_duplicate_run_names_are_refused(tmp_path):
    with pytest.raises(LogError, match="unique"):
        write_logs(tmp_path, [_run("a"), _run("a")], lab_name="x", lab_config_sha256="", seed=0)


def test_fixed_split():
    assert [excitation.split_of(i, 1) for i in range(1)] == ["fit"]
    assert [excitation.split_of(i, 2) for i in range(2)] == ["fit", "heldout"]
    assert [excitation.split_of(i, 6) for i in range(6)] == ["fit", "fit", "heldout"] * 2
    plans = excitation.plan_runs(quick=True)
    splits = excitation._splits(plans)
    for protocol in ("sensing_rest", "belt_ride", "finger_steps", "latency", "lift", "push"):
        mine = {splits[p.name] for p in plans if p.protocol == protocol}
        assert mine == {"fit", "heldout"}, protocol
    # Every arm joint keeps a fitting run; a reference run shares the split of the run it replays.
    for joint in range(1, 8):
        assert any(splits[p.name] == "fit" for p in plans if p.settings.get("joint") == joint)
    for p in plans:
        if p.replay_of:
            assert splits[p.name] == splits[p.replay_of]


# ----------------------------------------------------------------------------------------- set-up option
def _env(**kwargs) -> PickSortEnv:
    return PickSortEnv(num_objects=3, **kwargs)


def test_setup_places_objects_stops_belt_and_parks_the_rest():
    env = _env(control_mode="joint")
    q = (0.1, -0.3, 0.0, -2.2, 0.0, 1.9, 0.7)
    setup = {"belt": False, "arm_qpos": q, "objects": [{"category": "bar", "position": [0.55, 0.1]}]}
    obs, _ = env.reset(seed=0, options={"setup": setup})
    layout = scene_layout()
    bar = obs["object_pos"][:3]
    np.testing.assert_allclose(bar[:2], [0.55, 0.1], atol=1e-6)
    assert bar[2] == pytest.approx(layout.belt_top + layout.object_half_sizes["bar"][2], abs=2e-3)
    np.testing.assert_allclose(obs["arm_qpos"], q, atol=1e-6)
    assert env.object_categories[0] == "bar"
    parked = obs["object_pos"][3:].reshape(2, 3)
    assert np.all(parked[:, 0] < -1.0)  # out of the robot's reach, on the floor
    hold = np.concatenate(
        [2 * (np.asarray(q) - env.scene.arm_range[:, 0]) / np.ptp(env.scene.arm_range, 1) - 1, -np.ones(16)]
    )
    for _ in range(40):
        obs, _, terminated, _, info = env.step(hold.astype(np.float32))
    np.testing.assert_allclose(obs["object_pos"][:2], [0.55, 0.1], atol=1e-3)  # the stopped belt holds it
    assert info["object_outcomes"][1:] == ["pending", "pending"] and not terminated


def test_setup_running_belt_and_height():
    env = _env()
    setup = {
        "objects": [{"category": "cube", "position": [0.55, 1.5]}, {"category": "ball", "position": [0.55, 1.0, 0.3]}]
    }
    obs, _ = env.reset(seed=0, options={"setup": setup})
    assert obs["object_pos"][5] == pytest.approx(0.3)
    for _ in range(20):
        obs, *_ = env.step(np.zeros(22, np.float32))
    assert obs["object_pos"][1] == pytest.approx(1.5 - 20 * 0.05 * env.world_params.belt_speed, abs=5e-3)


@pytest.mark.parametrize(
    ("setup", "error", "message"),
    [
        ({"lights": True}, ValueError, r"unknown setup key\(s\) \['lights'\]"),
        ({"belt": "off"}, TypeError, "true \\(running\\) or false"),
        ({"arm_qpos": [0.0] * 6}, ValueError, "7 numbers"),
        ({"arm_qpos": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]}, ValueError, r"joint\(s\) \[3\] outside the joint limits"),
        ({"objects": [{"category": "cone", "position": [0.5, 0.0]}]}, ValueError, "unknown category 'cone'"),
        ({"objects": [{"category": "cube"}]}, ValueError, r"missing key\(s\) \['position'\]"),
        ({"objects": [{"category": "cube", "position": [0.5]}]}, ValueError, r"\[x, y\] or \[x, y, z\]"),
        ({"objects": [{"category": "cube", "position": [0.5, 0.0]}] * 4}, ValueError, "num_objects=3"),
        ("belt", TypeError, "must be a mapping"),
    ],
)
def test_bad_setup_is_refused(setup, error, message):
    with pytest.raises(error, match=message):
        _env().reset(seed=0, options={"setup": setup})


def test_unknown_reset_option_lists_setup():
    with pytest.raises(ValueError, match="valid: \\['world', 'setup'\\]"):
        _env().reset(seed=0, options={"stup": {}})


# ------------------------------------------------------------------------------------------- sensors
NOISY = {"joint_pos_noise": 0.01, "object_pos_noise": 0.005, "arm_torque_noise": 0.3, "finger_current_noise": 0.02}


def _rollout(env: gym.Env, steps: int = 10) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    out = [env.reset(seed=11)[0]]
    for _ in range(steps):
        out.append(env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))[0])
    return out


def test_sensors_add_keys_and_leave_every_other_observation_bit_identical():
    plain = _rollout(_env(world=NOISY))
    sensed = _rollout(_env(world=NOISY, sensors=("arm_torque", "finger_current")))
    for a, b in zip(plain, sensed):
        assert set(b) - set(a) == {"arm_torque", "finger_current"}
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
        assert b["arm_torque"].shape == (7,) and b["finger_current"].shape == (16,)
        assert b["arm_torque"].dtype == np.float32


def test_sensor_noise_level():
    quiet = _rollout(_env(sensors=("arm_torque",)), 30)
    noisy = _rollout(_env(world={"arm_torque_noise": 0.3}, sensors=("arm_torque",)), 30)
    diff = np.array([n["arm_torque"] - q["arm_torque"] for n, q in zip(noisy, quiet)])
    assert np.std(diff) == pytest.approx(0.3, rel=0.2)
    assert WorldParams().arm_torque_noise == 0.0 and WorldParams().finger_current_noise == 0.0


def test_bad_sensors_are_refused():
    with pytest.raises(ValueError, match="sensor names from \\['arm_torque', 'finger_current', 'object_visible'\\]"):
        _env(sensors=("gyro",))
    with pytest.raises(ValueError, match="sensor names"):
        _env(sensors="arm_torque")


def test_lab_takes_sensors_and_setup():
    env = gym.make("PickSort-Real-v0", sensors=["arm_torque"], control_mode="joint")
    obs, _ = env.reset(
        seed=0, options={"setup": {"belt": False, "objects": [{"category": "ball", "position": [0.55, 0.0]}]}}
    )
    assert obs["arm_torque"].shape == (7,)
    assert abs(obs["object_pos"][1]) < 0.03  # placed at y = 0, perceived with the lab's noise and offset
    env.close()


# ------------------------------------------------------------------------------------------- logging
def test_log_env_writes_readable_logs(tmp_path):
    plans = [p for p in excitation.plan_runs(quick=True) if p.name in ("latency_0", "lift_cube_0", "lift_cube_0_empty")]
    world = WorldParams(control_latency=0.02)
    logs = excitation.log_env(
        lambda kw: PickSortEnv(world=world, **{**kw, "sensors": tuple(kw["sensors"])}), tmp_path, plans=plans
    )
    assert [r.name for r in read_logs(tmp_path).runs] == ["latency_0", "lift_cube_0", "lift_cube_0_empty"]
    lift, empty = logs.runs[1], logs.runs[2]
    np.testing.assert_array_equal(lift.actions, empty.actions)  # the reference replays the lift's commands
    assert lift.obs["object_pos"][:, 2].max() > 0.2  # the planner lifted the placed cube
    assert set(lift.obs) >= {"arm_torque", "finger_current", "object_pos"}
    assert logs.lab_name.startswith("sim:")


def test_log_lab_cli_usage_error(tmp_path, capsys):
    from r2s2r_envs.cli import main

    target = tmp_path / "file"
    target.write_text("")
    assert main(["log-lab", "--out", str(target)]) == 2
    assert "not a directory" in capsys.readouterr().err
