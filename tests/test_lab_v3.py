"""Lab v3 (the shipped ``v3`` lab): its cameras, late commands, finger backlash and contact, the config sections
that hold them, and the operator who copes with a hand that hides what it holds."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from r2s2r_envs.lab import load_lab
from r2s2r_envs.lab.config import LabContact, LabPerception
from r2s2r_envs.lab.teleop import Calibration, Teleoperator
from r2s2r_envs.world.params import PERCEPTION_FIELDS

REAL = "PickSort-Real-v0"
GROUNDING = "r2s2r_envs/grounding/groundings/default.json"


class _Fixed:
    """A stand-in random stream: ``random()`` returns the given values in turn."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_v3_is_shipped_with_every_structural_section():
    lab = load_lab("v3")
    assert lab.name == "v3"
    assert len(lab.perception.cameras) == 2 and lab.perception.delay_jitter > 0
    assert lab.contact != LabContact()
    assert lab.effects.late_command_probability > 0 and lab.effects.finger_backlash > 0
    assert all(getattr(lab.world, f) != 0 for f in PERCEPTION_FIELDS if f != "object_pos_rotation")
    assert load_lab(lab.to_dict()) == lab  # the canonical form round-trips


def test_default_lab_keeps_the_hash_its_grounding_names():
    # The sections and effects added for v3 are written only when on: the v2 lab is the lab it was.
    lab = load_lab("default")
    assert lab.perception == LabPerception() and lab.contact == LabContact()
    assert not {"perception", "contact"} & set(lab.to_dict())
    with open(GROUNDING) as f:
        assert json.load(f)["provenance"]["lab"]["config_sha256"] == lab.sha256()


@pytest.mark.parametrize(
    "patch,match",
    [
        ({"perception": {"cameras": [{"name": "c", "position": [0, 0, 1], "tilt": 1}]}}, "unknown key.*tilt"),
        ({"perception": {"cameras": [{"position": [0, 0, 1]}]}}, "missing key.*name"),
        (
            {"perception": {"cameras": [{"name": "c", "position": [0, 0, 1], "rotation_error": [0, 0, 0.2]}]}},
            "rotation_error",
        ),
        ({"perception": {"delay_jitter": 0.5}}, "delay_jitter"),
        ({"perception": {"exposure": 1}}, "unknown lab perception key"),
        ({"contact": {"object_timeconst": 0.001}}, "object_timeconst"),
        ({"contact": {"cone": "pyramidal"}}, "unknown lab contact key"),
        ({"effects": {"late_command_probability": 0.9}}, "late_command_probability"),
        ({"world": {"perception_delay": 2.0}}, "perception_delay"),
    ],
)
def test_bad_new_sections_are_refused_naming_the_field(patch, match):
    with pytest.raises((KeyError, TypeError, ValueError), match=match):
        load_lab(patch)


def test_contact_and_cameras_reach_the_lab_env():
    env = gym.make(REAL, lab="v3")
    try:
        base = env.unwrapped
        geoms = base.scene.object_geoms.reshape(-1)
        assert np.all(base._model.geom_condim[geoms] == 6)
        assert np.allclose(base._model.geom_solref[geoms, 0], load_lab("v3").contact.object_timeconst)
        assert base._perception is not None and base._perception.num_cameras == 2
    finally:
        env.close()


def test_a_late_command_holds_the_last_one_then_comes_with_the_next():
    env = gym.make(REAL, lab={"effects": {"late_command_probability": 0.2}})
    try:
        base = env.unwrapped
        env.reset(seed=0)
        first, second, third = (np.full(base.action_space.shape, v, dtype=np.float64) for v in (0.1, 0.3, 0.5))
        base._effects_rng = _Fixed(0.9, 0.0, 0.9)  # on time, late, on time
        assert np.array_equal(base._late_command(first), first)
        held = base._late_command(second)
        assert np.all(held[:6] == 0.0) and np.array_equal(held[6:], first[6:])  # no new step, last fingers
        joined = base._late_command(third)
        assert np.allclose(joined[:6], 0.8) and np.array_equal(joined[6:], third[6:])  # the late step comes too
    finally:
        env.close()


def test_finger_backlash_ignores_a_reversal_within_the_band():
    env = gym.make(REAL, lab={"effects": {"finger_backlash": 0.05}})
    try:
        base = env.unwrapped
        env.reset(seed=0)
        close = np.zeros(base.action_space.shape)
        close[6:] = 0.5
        env.step(close)
        executed = base._ctrl[base.scene.hand_u].copy()
        close[6:] = 0.48  # a small reversal: inside the dead band for every joint
        env.step(close)
        assert np.array_equal(base._ctrl[base.scene.hand_u], executed)
    finally:
        env.close()


def test_operator_tells_a_held_estimate_without_the_visibility_key():
    env = gym.make(REAL, lab="v3")
    try:
        operator = Teleoperator(env, calibration=Calibration(lag_steps=3))  # no practice needed here
        obs, _ = env.reset(seed=1)
        meas = obs["object_pos"].reshape(-1, 3).astype(float)
        assert operator._visibility(obs, meas).all()
        again = operator._visibility(obs, meas.copy())  # the same estimate again: the estimator holds it
        assert not again.any()
        with_key = {**obs, "object_visible": np.array([1.0, 0.0, 1.0], dtype=np.float32)}
        assert operator._visibility(with_key, meas).tolist() == [True, False, True]
    finally:
        env.close()


@pytest.mark.slow
def test_operator_sorts_in_v3():
    # Practice and a few episodes in the lab whose hand hides what it holds: the operator keeps sorting.
    env = gym.make(REAL, lab="v3")
    try:
        operator = Teleoperator(env)
        sorted_objects = 0
        for seed in range(3):
            obs, _ = env.reset(seed=seed)
            operator.reset(seed=seed)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(operator.act(obs))
                done = terminated or truncated
            sorted_objects += info["object_outcomes"].count("sorted")
        assert sorted_objects >= 5  # of 9
        assert isinstance(operator.calibration.lag_steps, int)
    finally:
        env.close()


def test_a_policy_trained_with_visibility_asks_for_it_and_is_evaluated_with_it(tmp_path):
    """Lab demos recorded with ``object_visible`` train a ``task`` policy that reads it; the protocol then makes
    the lab with that sensor (and records it). Data without the key beside it: the run warns and goes without."""
    pytest.importorskip("torch")
    from r2s2r_envs.datasets.generate import generate
    from r2s2r_envs.evaluation.protocol import evaluate
    from r2s2r_envs.policies import load_policy
    from r2s2r_envs.policies.config import TrainConfig
    from r2s2r_envs.policies.train import train

    small = {"num_objects": 1, "episode_steps": 30, "lab": "v3"}
    real, sim = tmp_path / "lab.hdf5", tmp_path / "sim.hdf5"
    generate(REAL, 3, real, seed=5, progress=False, env_kwargs={**small, "sensors": ["object_visible"]})
    generate(
        "PickSort-Ungrounded-v0", 3, sim, seed=5, progress=False, env_kwargs={"num_objects": 1, "episode_steps": 30}
    )
    tiny = dict(steps=4, batch_size=8, hidden_dim=16, layers=2, feature_dim=8, action_chunk=4, execute_steps=2)
    base = dict(method="bc", features="task", demos="all", val_fraction=0.0, progress=False, **tiny)
    result = train(TrainConfig(real=(str(real),), real_fraction=1.0, out=str(tmp_path / "p"), **base))
    policy = load_policy(result.out)
    assert policy.sensors == ("object_visible",) and "object_visible" in policy.pipeline.obs_keys
    assert policy.pipeline.stage.visibility

    evaluated = evaluate(REAL, policy, episodes=2, conditions="nominal", split="dev", env_kwargs=small, progress=False)
    assert evaluated.env_kwargs["sensors"] == ["object_visible"]
    assert len(evaluated.records) == 2

    with pytest.warns(UserWarning, match=r"object_visible only when every dataset has it.*sim\.hdf5"):
        mixed = train(
            TrainConfig(real=(str(real),), sim=(str(sim),), real_fraction=0.5, out=str(tmp_path / "q"), **base)
        )
    assert load_policy(mixed.out).sensors == ()
