"""The robot's controllers: a normalized action becomes joint position targets for the arm and the fingers.

* ``TaskSpaceController`` (``control_mode="task"``, the default): the first six action components move a TCP
  target (displacement and axis-angle rotation per control step, world frame); damped-least-squares inverse
  kinematics with a null-space pull towards the home posture turns the target into arm joint targets.
* ``JointController`` (``control_mode="joint"``): the first seven action components are arm joint position
  targets, -1 the lower and +1 the upper joint limit (for excitation experiments and users who command joints).

In both, the remaining 16 components are finger joint targets, -1 lower and +1 upper limit.  The controllers read
the simulation only through a ``SceneView``; demonstrators can build one on any PickSort model.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from r2s2r_envs.envs.config import ControlConfig
from r2s2r_envs.envs.scene import SceneView

CONTROL_MODES: tuple[str, ...] = ("task", "joint")
N_FINGER = 16


def finger_targets(scene: SceneView, a: np.ndarray) -> np.ndarray:
    """(16,) finger joint targets, rad, for normalized finger commands ``a`` in [-1, 1]."""
    lo, hi = scene.hand_range[:, 0], scene.hand_range[:, 1]
    return lo + (a + 1.0) * (0.5 * (hi - lo))


def finger_command(scene: SceneView, q: np.ndarray) -> np.ndarray:
    """Inverse of ``finger_targets``: normalized commands for finger joint angles ``q`` (clipped to [-1, 1])."""
    return finger_command_for_range(scene.hand_range, q)


def finger_command_for_range(hand_range: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``finger_command`` for joint limits known without a model: ``hand_range`` (16, 2), rad (the nominal
    layout's ``hand_joint_range``, which the demonstrators use)."""
    lo, hi = hand_range[:, 0], hand_range[:, 1]
    return np.clip(2.0 * (np.asarray(q) - lo) / (hi - lo) - 1.0, -1.0, 1.0)


class TaskSpaceController:
    """Damped-least-squares task-space control of the arm (see the module docstring).

    Args:
        scene: Named view of the model the controller drives.
        config: Step sizes, IK damping, workspace box and home posture.
    """

    arm_dim = 6

    def __init__(self, scene: SceneView, config: ControlConfig) -> None:
        self.scene = scene
        self.config = config
        nv = scene.model.nv
        self._home_q = np.asarray(config.home_arm_qpos, dtype=float)
        self._ik_reg = config.ik_damping**2 * np.eye(6)
        self._jacp = np.zeros((3, nv))
        self._jacr = np.zeros((3, nv))
        self._jac = np.zeros((6, len(scene.arm_dof_adr)))
        self._err = np.zeros(6)
        self._q_lo, self._q_hi = scene.arm_range[:, 0].copy(), scene.arm_range[:, 1].copy()
        self._ws = (tuple(config.workspace_low), tuple(config.workspace_high))
        self._dq, self._quat, self._local, self._rot_err = np.empty(4), np.empty(4), np.empty(3), np.empty(3)
        self._jjt, self._sol = np.empty((6, 6)), np.empty(6)
        self.target_pos = np.zeros(3)
        self.target_quat = np.array([1.0, 0.0, 0.0, 0.0])

    def reset(self, data: mujoco.MjData) -> None:
        """Start from the current TCP pose (call after the episode's state is set and ``mj_forward``)."""
        self.target_pos = self.scene.tcp_pos(data)
        self.target_quat = self.scene.tcp_quat(data)

    def arm_targets(
        self, model: mujoco.MjModel, data: mujoco.MjData, a: np.ndarray, gain: np.ndarray | float
    ) -> np.ndarray:
        """(7,) arm joint targets, rad, for the task-space command ``a`` (6,) in [-1, 1].

        ``gain`` scales the joint displacement that reaches the servos (1 in a well-tuned robot).
        """
        # Hot path (once per control step): the 3-vectors in Python floats and the matrix work through MuJoCo's C
        # helpers into preallocated buffers; numpy's per-call overhead would otherwise dominate at these sizes.
        cfg, scene = self.config, self.scene
        tx, ty, tz = data.site_xpos[scene.tcp_site].tolist()
        ax, ay, az, rx, ry, rz = a[:6].tolist()
        (lx, ly, lz), (hx, hy, hz) = self._ws
        px, py, pz = self.target_pos.tolist()
        step = cfg.max_linear_step
        gx = min(max(px + ax * step, lx), hx)
        gy = min(max(py + ay * step, ly), hy)
        gz = min(max(pz + az * step, lz), hz)
        dx, dy, dz = gx - tx, gy - ty, gz - tz
        dist = math.sqrt(dx * dx + dy * dy + dz * dz)
        if dist > cfg.max_target_lead:  # no wind-up while the arm is blocked
            k = cfg.max_target_lead / dist
            dx, dy, dz = dx * k, dy * k, dz * k
            gx, gy, gz = tx + dx, ty + dy, tz + dz
        self.target_pos = np.array((gx, gy, gz))

        norm = math.sqrt(rx * rx + ry * ry + rz * rz)
        if norm > 0.0:
            angle = norm * cfg.max_angular_step
            dq, new_quat = self._dq, np.empty(4)
            mujoco.mju_axisAngle2Quat(dq, np.array((rx / norm, ry / norm, rz / norm)), angle)
            mujoco.mju_mulQuat(new_quat, dq, self.target_quat)
            mujoco.mju_normalize4(new_quat)
            self.target_quat = new_quat

        # Damped least squares on the 6-D TCP error, plus a null-space pull towards the home posture:
        # dq = J+ e + (I - J+ J) p  ==  J+ (e - J p) + p,  one 6x6 Cholesky solve per control step.
        err, local, current = self._err, self._local, self._quat
        xmat = data.site_xmat[scene.tcp_site]
        mujoco.mju_mat2Quat(current, xmat)
        mujoco.mju_subQuat(local, self.target_quat, current)
        mujoco.mju_mulMatVec3(self._rot_err, xmat, local)
        err[:3] = (dx, dy, dz)
        err[3:] = self._rot_err
        mujoco.mj_jacSite(model, data, self._jacp, self._jacr, scene.tcp_site)
        jac = self._jac
        jac[:3] = self._jacp[:, scene.arm_v]
        jac[3:] = self._jacr[:, scene.arm_v]
        q = data.qpos[scene.arm_q]
        pull = cfg.nullspace_gain * (self._home_q - q)
        jjt = np.dot(jac, jac.T, out=self._jjt)
        jjt += self._ik_reg
        mujoco.mju_cholFactor(jjt, 0.0)
        err -= jac @ pull
        sol = self._sol
        mujoco.mju_cholSolve(sol, jjt, err)
        q_des = q + gain * (sol @ jac + pull)
        return np.minimum(np.maximum(q_des, self._q_lo), self._q_hi)


class JointController:
    """Arm joint position targets straight from the action (see the module docstring)."""

    arm_dim = 7

    def __init__(self, scene: SceneView, config: ControlConfig) -> None:
        self.scene = scene
        self.config = config

    def reset(self, data: mujoco.MjData) -> None:
        """Nothing to remember between steps."""

    def arm_targets(
        self, model: mujoco.MjModel, data: mujoco.MjData, a: np.ndarray, gain: np.ndarray | float
    ) -> np.ndarray:
        """(7,) arm joint targets, rad, for normalized joint targets ``a`` (7,) in [-1, 1]."""
        lo, hi = self.scene.arm_range[:, 0], self.scene.arm_range[:, 1]
        target = lo + (a[:7] + 1.0) * 0.5 * (hi - lo)
        q = data.qpos[self.scene.arm_qpos_adr]
        return q + gain * (target - q)


def make_controller(mode: str, scene: SceneView, config: ControlConfig) -> TaskSpaceController | JointController:
    """The controller of ``control_mode`` ``mode``.

    Raises:
        ValueError: unknown mode; the message lists the valid ones.
    """
    if mode == "task":
        return TaskSpaceController(scene, config)
    if mode == "joint":
        return JointController(scene, config)
    raise ValueError(f"unknown control_mode {mode!r}; valid: {list(CONTROL_MODES)}")
