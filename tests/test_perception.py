"""The camera-based object estimator (``envs.perception``) and the world fields that drive it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from r2s2r_envs.envs.perception import ObjectEstimator, PerceptionCamera
from r2s2r_envs.world.params import PERCEPTION_FIELDS, WorldParams

DT = 0.05
CAMERA = PerceptionCamera(position=(1.0, 0.0, 1.0))
ONE_HOT = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])  # a cube and a ball


def _estimator(cameras=(CAMERA,), jitter=0.0, **fields) -> ObjectEstimator:
    return ObjectEstimator(WorldParams(**fields), cameras, DT, 2, delay_jitter=jitter)


def _frames(est, positions, tcp=(0.0, 0.0, 2.0), seed=0, one_hot=ONE_HOT, speed=0.0):
    """Feed (T, 2, 3) true positions; return the estimator's frames."""
    rng = np.random.default_rng(seed)
    quat = np.tile([1.0, 0.0, 0.0, 0.0], 2)
    vel = np.zeros(12)
    vel[1], vel[7] = -speed, -speed
    est.reset(positions[0].reshape(-1), quat, vel, np.asarray(tcp))
    return [est.observe(p.reshape(-1), quat, vel, np.asarray(tcp), one_hot, rng) for p in positions]


def test_nominal_world_does_not_perceive_and_keeps_its_hash():
    world = WorldParams()
    assert not world.perceives
    assert not set(PERCEPTION_FIELDS) & set(world.to_dict())  # files from before the estimator keep their hash
    seeing = WorldParams(perception_delay=0.08)
    assert seeing.perceives and seeing.to_dict()["perception_delay"] == 0.08
    assert WorldParams.from_dict(seeing.to_dict()) == seeing


def test_delay_reports_the_past_interpolated_between_steps():
    track = np.array([[[0.5, 0.3 - 0.01 * t, 0.1], [0.5, 0.6, 0.1]] for t in range(12)])
    frames = _frames(_estimator(perception_delay=0.075), track)  # 1.5 control steps
    for t in range(4, 12):
        expected = 0.3 - 0.01 * (t - 1.5)
        assert frames[t]["object_pos"][1] == pytest.approx(expected, abs=1e-6)
        assert frames[t]["object_visible"].tolist() == [1.0, 1.0]


def test_calibration_error_depends_on_where_the_object_is():
    est = _estimator(object_pos_rotation=(0.0, 0.0, 0.02))  # 0.02 rad about the camera's vertical
    near = _frames(est, np.array([[[0.9, 0.0, 0.1], [0.2, 0.0, 0.1]]] * 2))[-1]["object_pos"].reshape(2, 3)
    error = near - np.array([[0.9, 0.0, 0.1], [0.2, 0.0, 0.1]])
    # A rotation about the (first) camera moves a far object more than a near one, sideways.
    assert abs(error[1, 1]) > 5 * abs(error[0, 1]) > 0
    assert abs(error[1, 1]) == pytest.approx(0.8 * 0.02, rel=0.01)


def test_hand_on_the_line_of_sight_hides_the_object_which_keeps_its_last_estimate():
    est = _estimator(hand_occlusion_radius=0.05, object_pos_noise=0.002)
    track = np.array([[[0.5, 0.3, 0.1], [0.5, -0.3, 0.1]]] * 6)
    rng = np.random.default_rng(1)
    quat, vel = np.tile([1.0, 0.0, 0.0, 0.0], 2), np.zeros(12)
    est.reset(track[0].reshape(-1), quat, vel, np.array([0.0, 0.0, 2.0]))
    seen = est.observe(track[0].reshape(-1), quat, vel, np.array([0.0, 0.0, 2.0]), ONE_HOT, rng)
    above_first = np.array([0.52, 0.3, 0.12])  # on the line from the camera to the first object
    hidden = est.observe(track[1].reshape(-1), quat, vel, above_first, ONE_HOT, rng)
    assert hidden["object_visible"].tolist() == [0.0, 1.0]
    assert np.array_equal(hidden["object_pos"][:3], seen["object_pos"][:3])  # held, not re-estimated
    assert not np.array_equal(hidden["object_pos"][3:], seen["object_pos"][3:])  # the other one is seen anew


def test_a_second_camera_sees_what_the_hand_hides_from_the_first():
    other = PerceptionCamera(position=(1.0, 0.6, 1.0), translation_error=(0.01, 0.0, 0.0))
    est = _estimator(cameras=(CAMERA, other), hand_occlusion_radius=0.05)
    frames = _frames(
        est, np.array([[[0.5, 0.3, 0.1], [0.5, -0.3, 0.1]]] * 3), tcp=(0.65, 0.21, 0.37)
    )  # on the first camera's line of sight only
    assert frames[-1]["object_visible"][0] == 1.0
    # Only the second camera sees it: its own calibration error shows in full, not averaged with the first.
    assert frames[-1]["object_pos"][0] == pytest.approx(0.51, abs=1e-6)
    assert frames[-1]["object_pos"][3] == pytest.approx(0.505, abs=1e-6)  # the other object: both cameras


def test_noise_grows_with_speed_dropouts_and_confusions_at_their_rates():
    n = 3000
    still = _frames(_estimator(object_pos_noise=0.002, object_pos_noise_speed=0.05), np.zeros((n, 2, 3)))
    moving = _frames(_estimator(object_pos_noise=0.002, object_pos_noise_speed=0.05), np.zeros((n, 2, 3)), speed=0.2)
    sd_still = np.std([f["object_pos"][0] for f in still])
    sd_moving = np.std([f["object_pos"][0] for f in moving])
    assert sd_still == pytest.approx(0.002, rel=0.1)
    assert sd_moving == pytest.approx(0.002 + 0.05 * 0.2, rel=0.1)
    frames = _frames(_estimator(object_dropout=0.2, category_confusion=0.1), np.zeros((n, 2, 3)))
    visible = np.mean([f["object_visible"] for f in frames])
    assert visible == pytest.approx(0.8, abs=0.03)
    shown = np.array([f["object_category"].reshape(2, 3).argmax(axis=1) for f in frames])
    seen = np.array([f["object_visible"] for f in frames]) > 0
    assert np.mean(shown[seen] != np.array([0, 1])[np.nonzero(seen)[1]]) == pytest.approx(0.1, abs=0.03)


def test_every_frame_draws_the_same_amount_whatever_is_seen():
    # Two estimators on the same stream: one whose hand hides everything, one that sees all.  The stream's state
    # after the frames is the same, so what is seen never shifts later noise.
    a, b = _estimator(hand_occlusion_radius=0.05), _estimator(hand_occlusion_radius=0.05)
    track = np.array([[[0.5, 0.3, 0.1], [0.5, 0.3, 0.1]]] * 5)
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    quat, vel = np.tile([1.0, 0.0, 0.0, 0.0], 2), np.zeros(12)
    for est, rng, tcp in ((a, rng_a, (0.5, 0.3, 0.1)), (b, rng_b, (0.0, 0.0, 2.0))):
        est.reset(track[0].reshape(-1), quat, vel, np.asarray(tcp))
        for p in track:
            est.observe(p.reshape(-1), quat, vel, np.asarray(tcp), ONE_HOT, rng)
    assert rng_a.random() == rng_b.random()


def test_env_runs_the_estimator_only_when_the_world_perceives():
    plain = gym.make("PickSort-Ungrounded-v0", sensors=["object_visible"])
    seeing = gym.make(
        "PickSort-Ungrounded-v0",
        world={"perception_delay": 0.1, "object_pos_noise": 0.003, "joint_pos_noise": 0.01},
        sensors=["object_visible"],
    )
    noisy_joints = gym.make("PickSort-Ungrounded-v0", world={"joint_pos_noise": 0.01, "object_pos_noise": 0.003})
    try:
        assert plain.unwrapped._perception is None and seeing.unwrapped._perception is not None
        assert plain.observation_space["object_visible"].shape == (3,)
        obs, _ = plain.reset(seed=0)
        assert obs["object_visible"].tolist() == [1.0, 1.0, 1.0]
        o1, _ = seeing.reset(seed=4)
        o2, _ = noisy_joints.reset(seed=4)
        # The sensor stream draws the same amount with and without the estimator: the joints read the same.
        assert np.array_equal(o1["arm_qpos"], o2["arm_qpos"])
        true = seeing.unwrapped.data.qpos[seeing.unwrapped.scene.object_pos_idx]
        assert np.abs(o1["object_pos"] - true).max() < 0.02
        for _ in range(3):
            o1, *_ = seeing.step(np.zeros(seeing.action_space.shape))
            o2, *_ = noisy_joints.step(np.zeros(noisy_joints.action_space.shape))
            assert np.array_equal(o1["arm_qpos"], o2["arm_qpos"])
    finally:
        for env in (plain, seeing, noisy_joints):
            env.close()


def test_object_visible_needs_object_observations():
    with pytest.raises(ValueError, match="object_visible.*obs_mode"):
        gym.make("PickSort-Ungrounded-v0", obs_mode="rgb", sensors=["object_visible"])


@pytest.mark.parametrize(
    "field,value",
    [
        ("perception_delay", 0.6),
        ("object_dropout", 0.7),
        ("object_pos_rotation", (0.0, 0.2, 0.0)),
        ("category_confusion", -0.1),
    ],
)
def test_out_of_range_estimator_fields_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        WorldParams(**{field: value})


def test_the_first_frames_are_as_delayed_as_the_rest():
    # An object riding at constant speed: from the reset frame on, the estimate trails it by the delay.
    track = np.array([[[0.5, 0.3 - 0.01 * t, 0.1], [0.5, 0.6, 0.1]] for t in range(6)])
    est = _estimator(perception_delay=0.05)  # one control step
    rng = np.random.default_rng(0)
    quat, vel = np.tile([1.0, 0.0, 0.0, 0.0], 2), np.zeros(12)
    vel[1] = -0.01 / DT
    est.reset(track[0].reshape(-1), quat, vel, np.array([0.0, 0.0, 2.0]))
    for t, p in enumerate(track):
        frame = est.observe(p.reshape(-1), quat, vel, np.array([0.0, 0.0, 2.0]), ONE_HOT, rng)
        assert frame["object_pos"][1] == pytest.approx(0.3 - 0.01 * (t - 1), abs=1e-6)
