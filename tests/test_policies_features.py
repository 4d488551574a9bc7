"""The policies' feature stage (``r2s2r_envs.policies.features``): a continuous hand rotation, objects relative to
the hand with the next one first, status inferred from positions, the shapes' yaw symmetries, observations only,
and the same features in training and at inference."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import r2s2r_envs  # noqa: F401 - registers the envs
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.policies.features import (
    TASK_KEYS,
    CellGeometry,
    FeatureError,
    TaskFeatures,
    make_features,
    quat_to_matrix,
)

GEOMETRY = CellGeometry.nominal()


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


def _down_quat(yaw: float) -> np.ndarray:
    """Hand pointing down (z to -z), pinch axis at ``yaw``: a half turn about x, then ``yaw`` about world z."""
    qx = np.array([0.0, 1.0, 0.0, 0.0])
    qz = _yaw_quat(yaw)
    w1, x1, y1, z1 = qz
    w2, x2, y2, z2 = qx
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def _obs(objects: list[tuple[list[float], str, float]], tcp=(0.5, 0.0, 0.3), hand_yaw: float = 0.0) -> dict:
    """One frame of state observations ``{key: (1, 1, ...)}`` with objects ``(position, category, yaw)``."""
    cats = {"cube": 0, "ball": 1, "bar": 2}
    n = len(objects)
    one_hot = np.zeros((n, 3))
    for k, (_, c, _) in enumerate(objects):
        one_hot[k, cats[c]] = 1.0
    frame = {
        "arm_qpos": np.zeros(7),
        "arm_qvel": np.zeros(7),
        "hand_qpos": np.zeros(16),
        "hand_qvel": np.zeros(16),
        "eef_pos": np.asarray(tcp, dtype=float),
        "eef_quat": _down_quat(hand_yaw),
        "object_pos": np.concatenate([np.asarray(p, dtype=float) for p, _, _ in objects]),
        "object_quat": np.concatenate([_yaw_quat(y) for _, _, y in objects]),
        "object_vel": np.zeros(6 * n),
        "object_category": one_hot.reshape(-1),
    }
    return {k: v[None, None].astype(np.float32) for k, v in frame.items()}


def _slot(features: TaskFeatures, x: np.ndarray, k: int, name: str) -> np.ndarray:
    names = features.names()
    idx = [i for i, n in enumerate(names) if n.startswith(f"object{k}.{name}")]
    return x[..., idx]


BELT_Z = GEOMETRY.belt_top + 0.03


def test_quaternion_sign_does_not_change_the_features() -> None:
    obs = _obs([([0.55, 0.1, BELT_Z], "cube", 0.3)], hand_yaw=-np.pi / 2)
    flipped = {**obs, "eef_quat": -obs["eef_quat"], "object_quat": -obs["object_quat"]}
    stage = TaskFeatures(1)
    np.testing.assert_allclose(stage(obs), stage(flipped), atol=1e-6)
    assert not np.allclose(obs["eef_quat"], flipped["eef_quat"])


def test_rotation_input_is_continuous_where_the_quaternion_flips() -> None:
    """A noise-free planner episode: ``eef_quat`` jumps (q to -q) where the hand yaws through about -90 degrees;
    the rotation features never jump between steps."""
    env = gym.make("PickSort-Ungrounded-v0")
    planner = make_demonstrator(env)
    obs, _ = env.reset(seed=5)  # its quaternion flips at step 123
    planner.reset(seed=5)
    quats, rot6 = [], []
    stage = TaskFeatures(3)
    for _ in range(500):
        quats.append(obs["eef_quat"].copy())
        rot6.append(stage({k: np.asarray(obs[k])[None, None] for k in TASK_KEYS})[0, 0, 3:9])
        obs, _, terminated, truncated, _ = env.step(planner.act(obs))
        if terminated or truncated:
            break
    env.close()
    quat_jump = np.abs(np.diff(np.stack(quats), axis=0)).max(axis=1)
    rot_jump = np.abs(np.diff(np.stack(rot6), axis=0)).max(axis=1)
    assert quat_jump.max() > 1.0, "this episode's quaternion should flip sign (the case the features fix)"
    assert rot_jump.max() < 0.3


def test_next_object_first_held_before_belt_and_downstream_first() -> None:
    tcp = (0.4, 0.0, 0.3)
    objects = [
        ([0.55, 0.4, BELT_Z], "ball", 0.0),  # upstream on the belt
        ([0.25, -0.22, 0.05], "cube", 0.0),  # in the cube bin
        ([0.55, -0.1, BELT_Z], "bar", 0.0),  # downstream on the belt: the next to pick
        ([0.55, -0.6, BELT_Z], "cube", 0.0),  # past the picking zone
    ]
    stage = TaskFeatures(4)
    x = stage(_obs(objects, tcp=tcp))
    status = [_slot(stage, x, k, "status")[0, 0] for k in range(4)]
    names = ["belt", "held", "bin", "elsewhere"]
    assert [names[int(np.argmax(s))] for s in status] == ["belt", "belt", "belt", "bin"]
    # Reachable on the belt, most downstream first, then the object past the zone, then the sorted one.
    ys = [float(_slot(stage, x, k, "pos")[0, 0, 1]) for k in range(4)]
    assert ys == pytest.approx([-0.1, 0.4, -0.6, -0.22], abs=1e-6)
    rel = _slot(stage, x, 0, "rel_pos")[0, 0]
    np.testing.assert_allclose(rel, np.array([0.55, -0.1, BELT_Z]) - np.array(tcp), atol=1e-6)
    bar_bin = _slot(stage, x, 0, "bin_rel")[0, 0]
    np.testing.assert_allclose(bar_bin, GEOMETRY.bin_center[2] - np.array(tcp), atol=1e-6)

    held = [([0.41, 0.0, 0.27], "cube", 0.0), *objects[:1]]  # lifted, at the hand
    stage = TaskFeatures(2)
    x = stage(_obs(held, tcp=tcp))
    assert np.argmax(_slot(stage, x, 0, "status")[0, 0]) == 1
    assert float(_slot(stage, x, 0, "pos")[0, 0, 1]) == pytest.approx(0.0, abs=1e-6)


def test_one_order_for_every_frame_of_a_stack() -> None:
    """The newest frame orders the slots; older frames keep the same object in a slot even if they would order
    differently on their own."""
    a = _obs([([0.55, 0.2, BELT_Z], "cube", 0.0), ([0.55, 0.1, BELT_Z], "ball", 0.0)])
    b = _obs([([0.55, 0.05, BELT_Z], "cube", 0.0), ([0.55, 0.1, BELT_Z], "ball", 0.0)])
    stack = {k: np.concatenate([a[k], b[k]], axis=1) for k in a}
    stage = TaskFeatures(2)
    x = stage(stack)
    cat0 = _slot(stage, x, 0, "category")[0]
    np.testing.assert_array_equal(cat0[0], cat0[1])  # the cube in slot 0 in both frames
    np.testing.assert_array_equal(cat0[1], [1, 0, 0])


@pytest.mark.parametrize(("category", "period"), [("cube", np.pi / 2), ("bar", np.pi)])
def test_yaw_features_respect_the_shapes_symmetry(category: str, period: float) -> None:
    stage = TaskFeatures(1)
    base = stage(_obs([([0.55, 0.0, BELT_Z], category, 0.2)], hand_yaw=0.5))
    turned = stage(_obs([([0.55, 0.0, BELT_Z], category, 0.2 + period)], hand_yaw=0.5))
    both = stage(_obs([([0.55, 0.0, BELT_Z], category, 0.2 + period)], hand_yaw=0.5 + period))
    other = stage(_obs([([0.55, 0.0, BELT_Z], category, 0.2 + period / 3)], hand_yaw=0.5))
    yaw = "yaw_sin2" if category == "bar" else "yaw_sin4"
    idx = stage.names().index(f"object0.{yaw}")
    assert base[0, 0, idx] == pytest.approx(turned[0, 0, idx], abs=1e-5)
    assert base[0, 0, idx] == pytest.approx(both[0, 0, idx], abs=1e-5)
    assert abs(base[0, 0, idx] - other[0, 0, idx]) > 0.1


def test_features_depend_on_observations_only() -> None:
    """The stage is a function of the observation arrays: the same arrays give the same features whatever env
    (or no env) they came from, and every feature changes with some observation key."""
    stage = TaskFeatures(3)
    rng = np.random.default_rng(0)
    obs = {
        k: rng.normal(size=(5, 2, s)).astype(np.float32)
        for k, s in {"arm_qpos": 7, "arm_qvel": 7, "hand_qpos": 16, "hand_qvel": 16, "eef_pos": 3}.items()
    }
    obs.update(
        eef_quat=rng.normal(size=(5, 2, 4)).astype(np.float32),
        object_pos=rng.normal(size=(5, 2, 9)).astype(np.float32),
        object_quat=rng.normal(size=(5, 2, 12)).astype(np.float32),
        object_vel=rng.normal(size=(5, 2, 18)).astype(np.float32),
        object_category=np.tile(np.eye(3, dtype=np.float32).reshape(-1), (5, 2, 1)),
    )
    first = stage(obs)
    np.testing.assert_array_equal(first, stage({k: v.copy() for k, v in obs.items()}))
    assert first.shape == (5, 2, stage.dim) and first.dtype == np.float32
    assert len(stage.names()) == stage.dim


def test_missing_key_is_named() -> None:
    shapes = {k: (3,) for k in TASK_KEYS if k != "object_vel"}
    with pytest.raises(FeatureError, match=r"object_vel.*features='raw'"):
        TaskFeatures.for_shapes(shapes)
    with pytest.raises(FeatureError, match="choose one of"):
        make_features("pixels", [], {})


def test_quat_to_matrix_is_a_rotation() -> None:
    q = np.random.default_rng(1).normal(size=(20, 4))
    r = quat_to_matrix(q)
    np.testing.assert_allclose(r @ np.swapaxes(r, -1, -2), np.broadcast_to(np.eye(3), r.shape), atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-9)


def test_visibility_is_one_more_feature_per_object_and_follows_its_object() -> None:
    """With ``object_visible`` each slot carries its object's flag (ordered with it); without, nothing changes."""
    objects = [([0.55, 0.3, BELT_Z], "cube", 0.0), ([0.55, -0.1, BELT_Z], "ball", 0.0)]  # the ball is next
    obs = _obs(objects)
    shapes = {k: v.shape[2:] for k, v in obs.items()}
    plain = TaskFeatures.for_shapes(shapes)
    seen = {**obs, "object_visible": np.array([[[1.0, 0.0]]], dtype=np.float32)}  # the ball is hidden
    stage = TaskFeatures.for_shapes({**shapes, "object_visible": (2,)})
    assert (plain.visibility, stage.visibility) == (False, True)
    assert stage.keys == [*TASK_KEYS, "object_visible"] and plain.keys == list(TASK_KEYS)
    x = stage(seen)
    assert x.shape == (1, 1, stage.dim) == (1, 1, plain.dim + 2) and len(stage.names()) == stage.dim
    assert float(_slot(stage, x, 0, "visible")[0, 0, 0]) == 0.0  # slot 0 is the ball, hidden
    assert float(_slot(stage, x, 1, "visible")[0, 0, 0]) == 1.0
    without = np.delete(x, [i for i, n in enumerate(stage.names()) if n.endswith(".visible")], axis=-1)
    np.testing.assert_array_equal(without, plain(obs))
    # A checkpoint's keys decide: a stage made without the key ignores it in the observations.
    assert make_features("task", list(TASK_KEYS), {**shapes, "object_visible": (2,)}).visibility is False
    with pytest.raises(FeatureError, match="one per object"):
        TaskFeatures.for_shapes({**shapes, "object_visible": (3,)})
