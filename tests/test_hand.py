"""The hand geometry module (r2s2r_envs.envs.hand): one home for what the demonstrators know of the hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from r2s2r_envs.envs import hand
from r2s2r_envs.envs.controller import finger_command, finger_command_for_range
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import build_model, scene_layout
from r2s2r_envs.world.params import nominal


@pytest.mark.parametrize("numpy_math", [False, True])
@pytest.mark.parametrize("yaw", [-3.0, -np.pi / 2, 0.0, 0.4, 2.5])
def test_down_quat_points_the_hand_down_at_its_yaw(yaw, numpy_math):
    quat = hand.down_quat(yaw, numpy_math=numpy_math)
    assert np.linalg.norm(quat) == pytest.approx(1.0)
    assert hand.hand_yaw(quat, numpy_math=numpy_math) == pytest.approx(math.remainder(yaw, 2 * math.pi), abs=1e-12)


def test_grasp_postures_open_touch_squeeze_in_order():
    layout = scene_layout()
    flex = [hand.JOINT_INDEX[j] for j in ("if_mcp", "mf_mcp", "rf_mcp", "th_mcp")]
    for category in C.CATEGORIES:
        open_q, touch_q, closed_q = hand.grasp_postures(layout, category)
        assert np.all(open_q[flex] < touch_q[flex]) and np.all(touch_q[flex] < closed_q[flex])
        assert touch_q[flex[3]] - open_q[flex[3]] == pytest.approx(hand.PRESHAPE_MARGIN)
        assert closed_q[flex[3]] - touch_q[flex[3]] == pytest.approx(hand.SQUEEZE)
    np.testing.assert_array_equal(hand.open_posture(), hand.finger_posture(-0.22, -0.22, 0.0))


def test_grasp_yaw_crosses_a_bar_and_aligns_a_ball_with_the_belt():
    eef = hand.down_quat(0.3)
    obj = np.array([math.cos(0.1), 0.0, 0.0, math.sin(0.1)])  # yaw 0.2 about the vertical
    for numpy_math in (False, True):
        assert hand.grasp_yaw(eef, obj, "ball", numpy_math=numpy_math) == pytest.approx(np.pi / 2)
        bar = hand.grasp_yaw(eef, obj, "bar", numpy_math=numpy_math)
        assert math.remainder(bar - (0.2 + np.pi / 2), np.pi) == pytest.approx(0.0, abs=1e-9)


def test_quat_yaw_is_hand_yaw_in_closed_form_over_arrays():
    yaws = np.array([-3.0, -np.pi / 2, 0.0, 0.4, 2.5])
    quats = np.stack([hand.down_quat(y) for y in yaws])
    np.testing.assert_allclose(hand.quat_yaw(quats), [hand.hand_yaw(q) for q in quats], atol=1e-12)
    assert hand.quat_yaw(quats.reshape(5, 1, 4)).shape == (5, 1)


def test_object_grasp_yaw_reads_object_i_of_an_observation():
    eef = hand.down_quat(0.3)
    objects = np.array([[1.0, 0.0, 0.0, 0.0], [math.cos(0.1), 0.0, 0.0, math.sin(0.1)]], dtype=np.float32)
    obs = {"eef_quat": eef, "object_quat": objects.reshape(-1)}
    for numpy_math in (False, True):
        expected = hand.grasp_yaw(eef, objects[1], "bar", numpy_math=numpy_math)
        assert hand.object_grasp_yaw(obs, 1, "bar", numpy_math=numpy_math) == expected


def test_finger_command_for_range_is_the_controllers_on_the_nominal_limits():
    scene = SceneView(build_model(nominal(), 3), 3)
    layout = scene_layout()
    np.testing.assert_array_equal(layout.hand_joint_range, scene.hand_range)
    q = np.random.default_rng(0).uniform(-2.0, 2.0, (50, 16))
    np.testing.assert_array_equal(finger_command_for_range(layout.hand_joint_range, q), finger_command(scene, q))
