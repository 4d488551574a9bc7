"""The world-grounded env and world randomization (r2s2r_envs.grounding.variants, .randomization)."""

from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import numpy as np
import pytest
from test_grounding_result import example_grounding, write_example

import r2s2r_envs  # noqa: F401  (registers the envs)
from r2s2r_envs.grounding.randomization import RandomizedWorld, RandomizedWorlds, WorldRandomization
from r2s2r_envs.grounding.result import GroundingFileError, load_grounding
from r2s2r_envs.grounding.variants import WorldGroundedEnv
from r2s2r_envs.world import WorldParams, nominal
from r2s2r_envs.world.params import FIELD_BOUNDS

ENV_ID = "PickSort-WorldGrounded-v0"
ENV_ID_SIM = "PickSort-Ungrounded-v0"


@pytest.fixture
def grounding_file(tmp_path):
    return write_example(tmp_path)


# ---------------------------------------------------------------------- the env
def test_env_runs_the_grounded_world_and_names_its_file(grounding_file):
    env = WorldGroundedEnv(grounding=str(grounding_file))
    env.reset(seed=0)
    env.step(np.zeros(env.action_space.shape, dtype=np.float32))
    g = load_grounding(grounding_file)
    assert env.world_params == g.world
    prov = env.provenance()
    assert prov["grounding"] == {
        "source": str(grounding_file),
        "sha256": g.file_sha256,
        "schema_version": 2,
        "lab": {"name": "test-lab", "config_sha256": "ab" * 32},
    }
    assert prov["world_sha256"] == g.world.sha256()
    json.dumps(prov)  # goes into datasets and results


def test_provenance_names_the_files_own_schema_version(tmp_path):
    old = load_grounding(write_example(tmp_path)).to_dict()
    old["schema_version"] = 1
    del old["demonstrator"]
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(old))
    identity = WorldGroundedEnv(grounding=str(v1)).grounding_identity()
    assert identity["schema_version"] == 1  # read as version 2 in memory, but the file says 1
    assert identity["sha256"] == load_grounding(v1).file_sha256
    assert load_grounding(v1).file_schema_version == 1


def test_the_planner_tuned_in_the_grounded_world_is_the_envs_demonstrator(tmp_path, grounding_file):
    from r2s2r_envs.behavior import make_demonstrator

    section = {"name": "scripted", "settings": {"position_gain": 0.3, "lead_time": 0.1}, "tuning": None}
    tuned = write_example(tmp_path, name="tuned.json", demonstrator=section)
    env = gym.make(ENV_ID, grounding=str(tuned))
    assert env.unwrapped.demonstrator_settings == {"position_gain": 0.3, "lead_time": 0.1}
    planner = make_demonstrator(env)
    assert planner.settings["position_gain"] == 0.3 and planner.settings["lead_time"] == 0.1
    assert make_demonstrator(env, "scripted").settings["position_gain"] == 0.6  # named: the same planner everywhere
    assert make_demonstrator(env, position_gain=0.45).settings["position_gain"] == 0.45  # given settings win
    # A file without the section, and the plain sim, keep the planner's defaults.
    untuned = gym.make(ENV_ID, grounding=str(grounding_file))
    assert untuned.unwrapped.demonstrator_settings == {}
    assert make_demonstrator(untuned).settings["position_gain"] == 0.6
    assert make_demonstrator(gym.make("PickSort-Ungrounded-v0")).settings["position_gain"] == 0.6
    # FullyGrounded shares the physics but its demonstrator is the human-like generator: no planner settings.
    fully = gym.make("PickSort-FullyGrounded-v0", grounding=str(tuned))
    assert fully.unwrapped.demonstrator_settings == {} and make_demonstrator(fully).name == "humanlike"
    # The shipped grounding carries the planner tuned in its world.
    shipped = gym.make(ENV_ID).unwrapped
    assert shipped.grounding.demonstrator["tuning"]["episodes"] >= 1
    assert shipped.demonstrator_settings == shipped.grounding.demonstrator["settings"]


def test_same_world_same_rollout_as_the_plain_sim(grounding_file):
    """The grounded env is PickSort with the file's world, nothing else."""
    a = WorldGroundedEnv(grounding=grounding_file)
    b = gym.make("PickSort-Ungrounded-v0", world=load_grounding(grounding_file).world).unwrapped
    oa, _ = a.reset(seed=5)
    ob, _ = b.reset(seed=5)
    act = np.random.default_rng(0).uniform(-1, 1, size=(5, *a.action_space.shape)).astype(np.float32)
    for x in act:
        oa, ra, *_ = a.step(x)
        ob, rb, *_ = b.step(x)
    for k in oa:
        np.testing.assert_array_equal(oa[k], ob[k])
    assert ra == rb


def test_registered_id_uses_the_shipped_grounding():
    if ENV_ID not in gym.registry:
        pytest.fail(f"{ENV_ID} is not registered")
    spec = gym.spec(ENV_ID)
    assert spec.entry_point == "r2s2r_envs.grounding.variants:WorldGroundedEnv"
    assert spec.kwargs["grounding"] == "default" and spec.kwargs["demonstrator"] == "scripted"
    json.dumps(spec.kwargs)
    env = gym.make(ENV_ID)
    assert env.unwrapped.world_params == load_grounding("default").world
    assert env.unwrapped.provenance()["grounding"]["source"] == "default"
    # The shipped intervals make valid randomization ranges (clipped where a t-interval crosses a field's bound).
    dr = WorldRandomization.from_grounding("default")
    assert set(dr.ranges) <= set(load_grounding("default").identified) and "control_latency" in dr.ranges
    rng = np.random.default_rng(0)
    assert all(_within(dr.sample(rng), dr) for _ in range(20))


def test_make_fails_at_once_on_a_missing_or_malformed_file(request, tmp_path, grounding_file):
    entry = "r2s2r_envs.grounding.variants:WorldGroundedEnv"
    env_id = "PickSort-TestGrounded-v0"
    gym.register(env_id, entry_point=entry, kwargs={"grounding": "default", "demonstrator": "scripted"})
    request.addfinalizer(lambda: gym.registry.pop(env_id, None))  # other tests iterate over the PickSort ids
    with pytest.raises(FileNotFoundError, match="absent.json"):
        gym.make(env_id, grounding=str(tmp_path / "absent.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "format": "r2s2r_envs.grounding"')
    with pytest.raises(GroundingFileError, match="not valid JSON"):
        gym.make(env_id, grounding=str(bad))
    other = tmp_path / "v3.json"
    data = json.loads(grounding_file.read_text())
    other.write_text(json.dumps({**data, "schema_version": 3}))
    with pytest.raises(GroundingFileError, match="reads grounding schema versions 1 and 2"):
        gym.make(env_id, grounding=str(other))


def test_env_arguments(grounding_file):
    with pytest.raises(TypeError, match="no 'world' argument"):
        WorldGroundedEnv(grounding=grounding_file, world="nominal")
    with pytest.raises(TypeError, match="'grounding'"):  # the valid arguments listed include the env's own
        WorldGroundedEnv(grounding=grounding_file, ground="x")
    env = WorldGroundedEnv(grounding=grounding_file, num_objects=2, control_mode="joint")
    assert env.num_objects == 2 and env.action_space.shape == (23,)


def test_reset_world_option_still_randomizes(grounding_file):
    env = WorldGroundedEnv(grounding=grounding_file)
    other = dataclasses.replace(load_grounding(grounding_file).world, belt_speed=0.05)
    env.reset(seed=0, options={"world": other})
    assert env.world_params.belt_speed == 0.05


# ---------------------------------------------------------------------- randomization
def _within(world: WorldParams, r: WorldRandomization) -> bool:
    for name in WorldParams.field_names():
        value = getattr(world, name)
        if name not in r.ranges:
            if value != getattr(r.center, name):
                return False
            continue
        pairs = r.ranges[name] if isinstance(value, tuple) else [r.ranges[name]]
        values = value if isinstance(value, tuple) else [value]
        if not all(lo <= v <= hi for (lo, hi), v in zip(pairs, values)):
            return False
    return True


def test_around_nominal_ranges_and_samples():
    r = WorldRandomization.around_nominal(0.2)
    w = nominal()
    assert r.ranges["belt_speed"] == pytest.approx((0.8 * w.belt_speed, 1.2 * w.belt_speed))
    assert r.ranges["object_mass"][2] == pytest.approx((0.16, 0.24))
    assert "control_latency" not in r.ranges and "object_pos_offset" not in r.ranges  # zero: no relative range
    assert r.ranges["object_size_scale"][1] <= FIELD_BOUNDS["object_size_scale"].maximum
    rng = np.random.default_rng(0)
    draws = [r.sample(rng) for _ in range(200)]
    assert all(_within(d, r) for d in draws)
    speeds = np.array([d.belt_speed for d in draws])
    assert speeds.min() < 0.07 and speeds.max() > 0.09  # spans the range, not stuck at the centre
    assert r.sample(np.random.default_rng(1)) == r.sample(np.random.default_rng(1))


def test_from_grounding_uses_the_intervals(grounding_file):
    g = load_grounding(grounding_file)
    r = WorldRandomization.from_grounding(grounding_file)
    assert r.center == g.world
    assert set(r.ranges) == {"belt_speed", "control_latency", "object_mass", "object_pos_noise"}
    assert r.ranges["belt_speed"] == pytest.approx((0.094, 0.096))
    assert r.ranges["object_mass"][0] == pytest.approx((0.10, 0.12))
    wide = WorldRandomization.from_grounding(g, widen=2.0, fields=["belt_speed"])
    assert set(wide.ranges) == {"belt_speed"}
    assert wide.ranges["belt_speed"] == pytest.approx((0.093, 0.097))
    rng = np.random.default_rng(3)
    assert all(_within(r.sample(rng), r) for _ in range(100))
    with pytest.raises(ValueError, match="arm_damping has no bounded interval"):
        WorldRandomization.from_grounding(g, fields=["arm_damping"])


def test_from_grounding_clips_to_what_a_field_accepts(tmp_path):
    g = example_grounding(intervals={"object_pos_noise": [-0.001, 0.005]})  # a t-interval may cross zero
    r = WorldRandomization.from_grounding(g)
    assert r.ranges["object_pos_noise"] == (0.0, 0.005)
    path = write_example(tmp_path, "unbounded.json", intervals={"control_latency": [0.02, None]})
    assert "control_latency" not in WorldRandomization.from_grounding(path).ranges  # kept at the estimate


def test_randomization_json_round_trip():
    r = WorldRandomization.around_nominal(0.1, fields=["belt_speed", "arm_damping"])
    text = r.to_json()
    assert WorldRandomization.from_json(text) == r
    data = json.loads(text)
    assert data["ranges"]["arm_damping"][0] == pytest.approx([0.9, 1.1])
    partial = WorldRandomization.from_dict({"center": {"belt_speed": 0.1}, "ranges": {"belt_speed": [0.09, 0.11]}})
    assert partial.center.belt_speed == 0.1


@pytest.mark.parametrize(
    ("ranges", "error", "message"),
    [
        ({"belt_speed": (0.09, 0.1)}, ValueError, "excludes the centre world's value 0.08"),
        ({"warp": (0, 1)}, KeyError, "unknown field(s) ['warp']"),
        ({"belt_speed": (0.1, 0.05)}, ValueError, "low <= high"),
        ({"object_mass": (0.1, 0.2)}, ValueError, "3 (low, high) pairs"),
        ({"belt_speed": (-0.1, 0.1)}, ValueError, "leaves what belt_speed accepts"),
        ({"belt_speed": (0.0, float("inf"))}, ValueError, "finite"),
    ],
)
def test_bad_ranges(ranges, error, message):
    with pytest.raises(error) as info:
        WorldRandomization(center=nominal(), ranges=ranges)
    assert message in str(info.value)


def test_bad_randomization_arguments():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        WorldRandomization.around_nominal(1.5)
    with pytest.raises(ValueError, match="control_latency is 0"):
        WorldRandomization.around_nominal(0.2, fields=["control_latency"])
    with pytest.raises(ValueError, match="format version 9"):
        WorldRandomization.from_dict({"version": 9, "ranges": {}})
    with pytest.raises(TypeError, match="Generator"):
        WorldRandomization().sample(0)  # type: ignore[arg-type]


def test_randomized_world_is_applied_at_reset_and_reproducible():
    r = WorldRandomization.around_nominal(0.3, fields=["belt_speed", "object_friction", "arm_damping"])
    env = RandomizedWorld(gym.make("PickSort-Ungrounded-v0"), r)
    _, info = env.reset(seed=11)
    first = env.unwrapped.world_params
    assert info["world"] == first.to_dict() and _within(first, r) and first != nominal()
    _, info2 = env.reset()
    assert env.unwrapped.world_params != first and info2["world"]["belt_speed"] != info["world"]["belt_speed"]
    again = RandomizedWorld(gym.make("PickSort-Ungrounded-v0"), r)
    again.reset(seed=11)
    assert again.unwrapped.world_params == first
    with pytest.raises(ValueError, match="draws the world itself"):
        env.reset(options={"world": "nominal"})


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_randomized_worlds_give_each_env_the_worlds_of_a_single_randomized_env(mode):
    r = WorldRandomization.around_nominal(0.3, fields=["belt_speed", "object_friction"])
    vec = RandomizedWorlds(gym.make_vec(ENV_ID_SIM, num_envs=2, episode_steps=3, autoreset_mode=mode), r)
    singles = [RandomizedWorld(gym.make(ENV_ID_SIM, episode_steps=3), r) for _ in range(2)]
    vec.reset(seed=40)
    expected = [[env.reset(seed=40 + i)[1]["world"]] for i, env in enumerate(singles)]
    for _ in range(3):  # episodes of 3 steps: a second and a third world per env
        expected[0].append(singles[0].reset()[1]["world"])
        expected[1].append(singles[1].reset()[1]["world"])
    seen: list[list[dict]] = [[w.to_dict()] for w in vec.worlds]
    base = vec.unwrapped
    actions = np.zeros(vec.action_space.shape)
    for _ in range(9):
        if mode == "Disabled" and base._ended.all():
            vec.reset(options={"reset_mask": np.ones(2, dtype=bool)})
            for i, w in enumerate(vec.worlds):
                seen[i].append(w.to_dict())
            continue
        vec.step(actions)
        for i, env in enumerate(base.envs):
            if env.world_params.to_dict() != seen[i][-1]:
                seen[i].append(env.world_params.to_dict())
            assert vec.worlds[i].to_dict() == seen[i][-1]  # what the wrapper says each env runs
    for i in range(2):
        assert len(seen[i]) >= 3 and seen[i] == expected[i][: len(seen[i])], i
    with pytest.raises(ValueError, match="draws the worlds itself"):
        vec.reset(options={"world": "nominal"})
    drawn = list(vec.worlds)
    with pytest.raises(ValueError, match="seed is a list of 3 seeds but num_envs=2"):
        vec.reset(seed=[1, 2, 3])
    with pytest.raises(TypeError, match="seed must be None, an int or a list"):
        vec.reset(seed="7")
    with pytest.raises(ValueError, match="must select at least one env"):
        vec.reset(options={"reset_mask": np.zeros(2, dtype=bool)})
    assert vec.worlds == drawn  # a refused reset changed nothing
    with pytest.raises(TypeError, match="PickSort vector env"):
        RandomizedWorlds(gym.make_vec(ENV_ID_SIM, num_envs=2, vectorization_mode="sync"), r)


def test_autoreset_options_are_used_once_and_checked():
    vec = gym.make_vec(ENV_ID_SIM, num_envs=2, episode_steps=1, autoreset_mode="SameStep")
    base = vec.unwrapped
    vec.reset(seed=0)
    world = dataclasses.replace(nominal(), belt_speed=0.09)
    base.set_autoreset_options(1, {"world": world})
    vec.step(np.zeros(vec.action_space.shape))  # both end and reset at once: env 1 in the given world
    assert base.envs[1].world_params == world and base.envs[0].world_params == nominal()
    vec.step(np.zeros(vec.action_space.shape))  # used once: env 1 keeps its world (reset without options)
    assert base.envs[1].world_params == world
    base.set_autoreset_options(0, {"world": world})
    vec.reset()  # an explicit reset clears them
    vec.step(np.zeros(vec.action_space.shape))
    assert base.envs[0].world_params == nominal()
    with pytest.raises(IndexError, match=r"env index in \[0, 2\)"):
        base.set_autoreset_options(2, None)
    with pytest.raises(TypeError, match="mapping of reset options"):
        base.set_autoreset_options(0, "world")


# ---------------------------------------------------------------------- command line: --grounding and --lab
def test_demo_takes_a_grounding_file(capsys, grounding_file):
    from r2s2r_envs import cli

    if ENV_ID not in gym.registry:
        pytest.fail(f"{ENV_ID} is not registered")
    argv = ["demo", "--env", ENV_ID, "--grounding", str(grounding_file), "--episodes", "1", "--episode-steps", "5"]
    assert cli.main([*argv, "--num-objects", "1", "--json", "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["env_kwargs"]["grounding"] == str(grounding_file)
    assert result["provenance"]["grounding"]["sha256"] == load_grounding(grounding_file).file_sha256


def test_demo_grounding_errors(capsys, tmp_path, grounding_file):
    from r2s2r_envs import cli

    assert cli.main(["demo", "--env", "PickSort-Ungrounded-v0", "--grounding", str(grounding_file)]) == 2
    assert "does not take one" in capsys.readouterr().err
    if ENV_ID in gym.registry:
        assert cli.main(["demo", "--env", ENV_ID, "--grounding", str(tmp_path / "none.json")]) == 2
        assert "none.json" in capsys.readouterr().err


def test_generate_takes_lab_and_grounding_options(capsys, tmp_path, grounding_file):
    from r2s2r_envs import cli

    base = [
        "generate",
        "--episodes",
        "1",
        "--episode-steps",
        "5",
        "--env-kwargs",
        '{"num_objects": 1}',
        "--no-progress",
    ]
    out = tmp_path / "real.hdf5"
    lab = tmp_path / "lab.json"
    lab.write_text(json.dumps({"name": "cli-lab", "world": {"belt_speed": 0.07}, "effects": {}}))
    argv = [*base[:1], "PickSort-Real-v0", *base[1:], "--demonstrator", "scripted", "--lab", str(lab)]
    assert cli.main([*argv, "--out", str(out)]) == 0
    from r2s2r_envs.datasets import open_dataset

    with open_dataset(out) as f:
        assert f.provenance["world"]["lab"]["name"] == "cli-lab"
    capsys.readouterr()
    # Options that do not apply, or given twice, are refused before anything runs: usage errors, exit code 2.
    argv = [*base[:1], "PickSort-Ungrounded-v0", *base[1:], "--grounding", str(grounding_file)]
    assert cli.main([*argv, "--out", str(tmp_path / "x.hdf5")]) == 2
    assert "--grounding applies to the envs that take a grounding" in capsys.readouterr().err
    argv = ["generate", "PickSort-Real-v0", "--episodes", "1", "--env-kwargs", '{"lab": "default"}', "--lab", "x"]
    assert cli.main([*argv, "--out", str(tmp_path / "y.hdf5")]) == 2
    assert "both set 'lab'" in capsys.readouterr().err
    assert not (tmp_path / "x.hdf5").exists() and not (tmp_path / "y.hdf5").exists()


def test_datasets_make_with_another_lab(capsys, tmp_path):
    from r2s2r_envs import cli

    spec = {
        "spec_version": 1,
        "datasets": [
            {"name": "tiny-lab", "env_id": "PickSort-Real-v0", "episodes": 1, "seed": 0, "successes_only": False,
             "env_kwargs": {"num_objects": 1, "episode_steps": 5}, "demonstrator": "scripted", "sha256": "0" * 64},
            {"name": "tiny-sim", "env_id": "PickSort-Ungrounded-v0", "episodes": 1, "seed": 0,
             "successes_only": False, "env_kwargs": {"num_objects": 1, "episode_steps": 5}},
        ],
    }  # fmt: skip
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    lab = tmp_path / "other.json"
    lab.write_text(json.dumps({"name": "other", "world": {}, "effects": {}}))
    argv = ["datasets", "make", "tiny-lab", "--spec", str(spec_path), "--cache-dir", str(tmp_path), "--no-progress"]
    assert cli.main([*argv, "--lab", str(lab)]) == 0
    assert (tmp_path / "tiny-lab+other.hdf5").exists()  # its own file, not the canonical one's
    assert "tiny-lab" in capsys.readouterr().out
    # Bad input found before any build: exit 2, as every command reports it (issue 50).
    assert cli.main([*argv[:2], "tiny-sim", *argv[3:], "--lab", str(lab)]) == 2
    assert "none of the selected does" in capsys.readouterr().err
    assert cli.main([*argv, "--lab", str(lab), "--update-spec"]) == 2
    assert "do not combine" in capsys.readouterr().err
