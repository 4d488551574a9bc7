"""The human-like generator (``r2s2r_envs.behavior.humanlike``): the shipped model, its actions, the world it knows,
PickSort-BehaviorGrounded-v0, and the generator fitted to another operator's demos moving like that operator."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import r2s2r_envs  # noqa: F401  (registers the envs and demonstrators)
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.behavior.fit import fit_behavior, load_model, model_sha256, save_model, shipped_models
from r2s2r_envs.behavior.humanlike import HumanlikeGenerator, WorldKnowledge, world_knowledge
from r2s2r_envs.behavior.metrics import STRATEGY_TRAITS, TRAITS, compare, episode_features
from r2s2r_envs.behavior.segments import load_demos
from r2s2r_envs.datasets import open_dataset
from r2s2r_envs.datasets.generate import generate


def test_shipped_default_model_and_variant():
    assert "default" in shipped_models()
    model = load_model("default")
    demos = model["provenance"]["demos"]
    assert demos["domain"] == "real" and demos["env_id"] == "PickSort-Real-v0" and demos["successes"] > 0
    env = gym.make("PickSort-BehaviorGrounded-v0")
    assert env.unwrapped.demonstrator == "humanlike"
    prov = env.unwrapped.provenance()
    assert (
        prov["behavior"]["model"] == "default"
        and prov["world_params"] == gym.make("PickSort-Ungrounded-v0").unwrapped.provenance()["world_params"]
    )
    assert isinstance(make_demonstrator(env), HumanlikeGenerator)


def test_physics_equal_ungrounded():
    """Same seed and actions: identical observations and rewards (only the demonstrator differs)."""
    a, b = gym.make("PickSort-BehaviorGrounded-v0"), gym.make("PickSort-Ungrounded-v0")
    oa, _ = a.reset(seed=3)
    ob, _ = b.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(40):
        act = rng.uniform(-1, 1, a.action_space.shape).astype(np.float32)
        oa, ra, *_ = a.step(act)
        ob, rb, *_ = b.step(act)
        assert ra == rb and all(np.array_equal(oa[k], ob[k]) for k in oa)


def test_generator_actions_are_finite_and_in_range_over_many_seeds():
    env = gym.make("PickSort-BehaviorGrounded-v0", num_objects=2)
    gen = make_demonstrator(env)
    rng = np.random.default_rng(0)
    for seed in range(12):
        obs, _ = env.reset(seed=seed)
        gen.reset(seed=seed)
        for _ in range(120):
            action = gen.act(obs)
            assert action.shape == env.action_space.shape and action.dtype == np.float32
            assert np.all(np.isfinite(action)) and np.all(np.abs(action) <= 1.0)
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    # Garbage observations (NaN, inf, huge values) never produce a NaN or out-of-range action either.
    space = env.observation_space
    for k in range(300):
        obs = {key: rng.normal(0, 10 ** rng.integers(0, 6), s.shape).astype(np.float32) for key, s in space.items()}
        if k % 3 == 0:
            key = list(obs)[k % len(obs)]
            obs[key][rng.integers(len(obs[key]))] = [np.nan, np.inf, -np.inf][k % 3]
        action = gen.act(obs)
        assert np.all(np.isfinite(action)) and np.all(np.abs(action) <= 1.0)


def _episodes(env_id: str, seeds, noise: float = 0.0, **kwargs) -> list[list[str]]:
    env = gym.make(env_id, **kwargs)
    gen = make_demonstrator(env)
    rng = np.random.default_rng(0)
    outcomes = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        gen.reset(seed=seed)
        done = False
        while not done:
            action = gen.act(obs)
            if noise:
                action[:6] = np.clip(action[:6] + rng.normal(0.0, noise, 6), -1.0, 1.0)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        outcomes.append(list(info["object_outcomes"]))
    return outcomes


def test_generator_sorts_in_the_identified_world():
    # The closed loop's purpose: the open-loop generator sorted 77% of objects in PickSort-FullyGrounded-v0 (46% of
    # episodes); the closed-loop one about 95% (docs/behavior.md#measured). A modest bar on 4 seeded episodes.
    outcomes = _episodes("PickSort-FullyGrounded-v0", range(100, 104))
    sorted_share = np.mean([o == "sorted" for ep in outcomes for o in ep])
    assert sorted_share >= 0.75, outcomes


def test_generator_closes_the_loop_under_noise_injection():
    # Its commands follow from the measured hand each step, so the arm noise of generate --action-noise is corrected
    # like any other disturbance (no estimate of the controller's target to keep in step).
    outcomes = _episodes("PickSort-FullyGrounded-v0", range(200, 204), noise=0.1, num_objects=1)
    assert sum(ep == ["sorted"] for ep in outcomes) >= 3, outcomes


def test_world_knowledge_comes_from_the_env_or_is_given():
    fully = world_knowledge(gym.make("PickSort-FullyGrounded-v0"))
    grounding = gym.make("PickSort-WorldGrounded-v0").unwrapped.grounding
    assert fully.control_latency == pytest.approx(grounding.world.control_latency) and fully.control_latency > 0.02
    assert fully.perception_offset == pytest.approx(tuple(grounding.world.object_pos_offset))
    assert fully.tracking_gain == grounding.demonstrator_settings()["position_gain"]
    nominal = world_knowledge(gym.make("PickSort-BehaviorGrounded-v0"))
    assert nominal == WorldKnowledge() and nominal.control_latency == 0.0 and nominal.perception_offset == (0, 0, 0)
    env = gym.make("PickSort-BehaviorGrounded-v0")
    given = HumanlikeGenerator(env, world={"control_latency": 0.1, "tracking_gain": 0.3})
    assert given.settings["world"]["control_latency"] == 0.1 and given._lead_steps == 3
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['latency'\]"):
        HumanlikeGenerator(env, world={"latency": 0.1})
    with pytest.raises(ValueError, match="control_latency must be a number in"):
        HumanlikeGenerator(env, world={"control_latency": 3.0})


def test_generator_is_deterministic_given_its_seed():
    def run() -> list[np.ndarray]:
        env = gym.make("PickSort-BehaviorGrounded-v0")
        gen = make_demonstrator(env)
        obs, _ = env.reset(seed=11)
        gen.reset(seed=5)
        out = []
        for _ in range(60):
            out.append(gen.act(obs))
            obs, *_ = env.step(out[-1])
        return out

    assert all(np.array_equal(x, y) for x, y in zip(run(), run()))


def test_generator_refuses_joint_control():
    env = gym.make("PickSort-Ungrounded-v0", control_mode="joint")
    with pytest.raises(ValueError, match="task-space"):
        HumanlikeGenerator(env)


# ---------------------------------------------------------------------- another operator
# Another lab, another operator: the generator fitted to its demos moves like it, not like the default operator.
#
# A course does the same with three commands (docs/behavior.md#another-operator): collect demos in its lab, fit,
# generate in simulation and compare. The lab here differs from the default only in its operator (slower, tracking
# the object along the belt before descending, a pinch grasp); the operator keys are the lab config's documented
# ``operator`` section (docs/lab.md). The code never sees that section: only the demos it produced.
#
# The closed-loop generator fitted to these demos must also still work in the identified world: run there with the
# fitted model and the grounding file's latency and gain, it still moves like the fitted operator, and it meets issue
# 20's success goal there (75% for the default operator) within 10 points, on one-object episodes (the slow operator
# sorts no three-object episode; the three-object measurement: experiments/behavior-axis-v2/README.md).
OTHER_OPERATOR = {"name": "slow-follow-pinch", "operator": {"speed": 0.6, "approach": "follow", "grasp": "pinch"}}
DEMOS = 20
# One object per episode keeps the test short (a grasp per demo) and within reach of a slow operator.
ONE = {"num_objects": 1}
#: Issue 20's success goal in PickSort-FullyGrounded-v0, less the 10 points another operator may lose.
FULLY_GROUNDED_GOAL = 0.75 - 0.10


def share_classified_as_first(first, second, query) -> float:
    """Share of ``query``'s episodes that a logistic regression trained on ``first`` vs ``second`` puts in ``first``."""
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    cols = [TRAITS.index(t) for t in STRATEGY_TRAITS]
    a, b, q = (episode_features(s)[:, cols] for s in (first, second, query))
    x, y = np.vstack([a, b]), np.r_[np.ones(len(a)), np.zeros(len(b))]
    model = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), LogisticRegression()).fit(x, y)
    return float(model.predict(q).mean())


@pytest.mark.slow
def test_generated_motion_follows_the_operator_it_was_fitted_to(tmp_path):
    other, default, model, generated = (tmp_path / n for n in ("other.hdf5", "default.hdf5", "m.json", "gen.hdf5"))
    common = {"episodes": DEMOS, "successes_only": True, "progress": False}
    generate("PickSort-Real-v0", out=other, env_kwargs={"lab": OTHER_OPERATOR, **ONE}, seed=1, **common)
    generate("PickSort-Real-v0", out=default, env_kwargs=ONE, seed=1, **common)
    save_model(fit_behavior(other), model)
    generate(
        "PickSort-BehaviorGrounded-v0",
        out=generated,
        env_kwargs={"behavior": str(model), **ONE},
        seed=2,
        episodes=DEMOS,
        progress=False,
    )
    sets = {name: load_demos(p) for name, p in (("other", other), ("default", default), ("gen", generated))}
    to_other, to_default = compare(sets["gen"], sets["other"]), compare(sets["gen"], sets["default"])
    # The two operators are told apart, and a classifier trained to tell them apart (on the strategy and timing
    # traits; peak speed, jerk and release height also carry the worlds' differences, docs/behavior.md#metrics)
    # takes the generated episodes for the fitted operator's.
    assert compare(sets["other"], sets["default"]).auc > 0.9
    share = share_classified_as_first(sets["other"], sets["default"], sets["gen"])
    print(f"{share:.2f} of the generated episodes classified as the fitted operator's")
    assert share >= 0.8
    # Trait by trait: the generated means lie nearer the fitted operator's than the default operator's.
    near = 0
    traits = ("reach_duration", "follow_speed", "closure_spread", "thumb_lead", "arrival_to_grasp", "peak_speed")
    for name in traits:
        g = next(t for t in to_other.traits if t.trait == name)
        d = next(t for t in to_default.traits if t.trait == name)
        near += abs(g.mean_a - g.mean_b) < abs(d.mean_a - d.mean_b)
    print(f"{near} of {len(traits)} trait means nearer the fitted operator")
    assert near >= len(traits) - 1, f"only {near} of {len(traits)} traits nearer the fitted operator"
    assert to_other.dtw["distance"] < to_default.dtw["distance"]
    # Closed loop in the identified world, every attempt kept.
    fully = tmp_path / "fully.hdf5"
    generate(
        "PickSort-FullyGrounded-v0",
        out=fully,
        env_kwargs={"behavior": str(model), **ONE},
        seed=3,
        episodes=DEMOS,
        progress=False,
    )
    with open_dataset(fully) as f:
        solved = float(np.mean([f.demo_attrs(d)["success"] for d in f.demo_ids]))
        settings = f.provenance["demonstrator"]["settings"]
    # The generator that ran there is the closed-loop one with the fitted model, told the identified world's
    # latency and tracking gain by the env's grounding file (never the lab)...
    assert settings["model_sha256"] == model_sha256(load_model(model))
    assert settings["world"]["source"].startswith("env grounding") and settings["world"]["control_latency"] > 0
    # ... it keeps the fitted operator's style in that world ...
    share_fully = share_classified_as_first(sets["other"], sets["default"], load_demos(fully))
    print(f"{share_fully:.2f} of the FullyGrounded episodes classified as the fitted operator's")
    assert share_fully >= 0.8
    # ... and succeeds.
    print(f"{solved:.2f} of {DEMOS} one-object episodes solved in PickSort-FullyGrounded-v0")
    assert solved >= FULLY_GROUNDED_GOAL
