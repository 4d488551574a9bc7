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
from typing import Any

import mujoco
import numpy as np

from r2s2r_envs.envs.config import ControlConfig
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.mappings import check_choice

CONTROL_MODES: tuple[str, ...] = ("task", "joint")
N_FINGER = 16
# TaskSpaceController's views into its own buffers (``_bind_views``) and into the MjData it drives (``_bind_data``),
# left out of its pickled state: pickle stores a view as an array of its own.
_VIEWS = ("_jacp", "_jacr", "_jac_site_arm", "_jac_t", "_err_rot", "_data", "_qpos", "_tcp_xpos", "_tcp_xmat")


def finger_targets(scene: SceneView, a: np.ndarray, scale: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """(16,) finger joint targets, rad, for normalized finger commands ``a`` in [-1, 1]; ``scale``: the scene's
    :func:`finger_scale`, for a caller that computed it once."""
    lo, half_span = finger_scale(scene) if scale is None else scale
    return lo + (a + 1.0) * half_span


def finger_scale(scene: SceneView) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, half_span)`` of the finger joints, as :func:`finger_targets` uses them: for code that maps a command
    every control step, to compute them once per model."""
    lo, hi = scene.hand_range[:, 0], scene.hand_range[:, 1]
    return lo.copy(), 0.5 * (hi - lo)


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
        self._jac_site = np.zeros((6, nv))  # the site Jacobian, translation rows above rotation rows
        self._jac = np.zeros((6, len(scene.arm_dof_adr)))
        self._err = np.zeros(6)
        self._bind_views()
        self._data: mujoco.MjData | None = None  # the MjData whose arrays ``_bind_data`` bound
        self._q_lo, self._q_hi = scene.arm_range[:, 0].copy(), scene.arm_range[:, 1].copy()
        self._ws = (tuple(config.workspace_low), tuple(config.workspace_high))
        self._dq, self._quat, self._local, self._axis = np.empty(4), np.empty(4), np.empty(3), np.empty(3)
        self._jjt, self._sol = np.empty((6, 6)), np.empty(6)
        self._target = (0.0, 0.0, 0.0)  # the TCP position target, m, as floats (see ``target_pos``)
        self.target_quat = np.array([1.0, 0.0, 0.0, 0.0])

    def _bind_views(self) -> None:
        # Views into the buffers above, which MuJoCo's helpers and numpy write through (rebuilt after unpickling).
        self._jacp, self._jacr = self._jac_site[:3], self._jac_site[3:]  # filled by mj_jacSite
        # The arm's columns of the site Jacobian: a view where the arm's dofs are contiguous (every PickSort scene).
        arm_v = self.scene.arm_v
        self._jac_site_arm = self._jac_site[:, arm_v] if isinstance(arm_v, slice) else None
        self._jac_t = self._jac.T
        self._err_rot = self._err[3:]  # the rotation error is computed into the error vector's tail

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in _VIEWS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bind_views()
        self._data = None

    def _bind_data(self, data: mujoco.MjData) -> None:
        # Views of the arrays of ``data`` read every step: each attribute access of the bindings builds a new array
        # object, and MuJoCo never moves an MjData's buffers.
        self._data, self._qpos = data, data.qpos
        self._tcp_xpos, self._tcp_xmat = data.site_xpos[self.scene.tcp_site], data.site_xmat[self.scene.tcp_site]

    @property
    def target_pos(self) -> np.ndarray:
        """(3,) the TCP position target, m (a copy)."""
        return np.array(self._target)

    def reset(self, data: mujoco.MjData) -> None:
        """Start from the current TCP pose (call after the episode's state is set and ``mj_forward``)."""
        self._target = tuple(self.scene.tcp_pos(data).tolist())
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
        if data is not self._data:
            self._bind_data(data)
        tx, ty, tz = self._tcp_xpos.tolist()
        ax, ay, az, rx, ry, rz = a[:6].tolist()
        (lx, ly, lz), (hx, hy, hz) = self._ws
        px, py, pz = self._target
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
        self._target = (gx, gy, gz)

        norm = math.sqrt(rx * rx + ry * ry + rz * rz)
        if norm > 0.0:
            angle = norm * cfg.max_angular_step
            dq, axis, new_quat = self._dq, self._axis, np.empty(4)
            axis[0], axis[1], axis[2] = rx / norm, ry / norm, rz / norm
            mujoco.mju_axisAngle2Quat(dq, axis, angle)
            mujoco.mju_mulQuat(new_quat, dq, self.target_quat)
            mujoco.mju_normalize4(new_quat)
            self.target_quat = new_quat

        # Damped least squares on the 6-D TCP error, plus a null-space pull towards the home posture:
        # dq = J+ e + (I - J+ J) p  ==  J+ (e - J p) + p,  one 6x6 Cholesky solve per control step.
        err, local, current = self._err, self._local, self._quat
        xmat = self._tcp_xmat
        mujoco.mju_mat2Quat(current, xmat)
        mujoco.mju_subQuat(local, self.target_quat, current)
        mujoco.mju_mulMatVec3(self._err_rot, xmat, local)
        err[0], err[1], err[2] = dx, dy, dz
        mujoco.mj_jacSite(model, data, self._jacp, self._jacr, scene.tcp_site)
        jac = self._jac
        jac[...] = self._jac_site[:, scene.arm_v] if self._jac_site_arm is None else self._jac_site_arm
        q = self._qpos[scene.arm_q]
        pull = cfg.nullspace_gain * (self._home_q - q)
        jjt = np.dot(jac, self._jac_t, out=self._jjt)
        jjt += self._ik_reg
        mujoco.mju_cholFactor(jjt, 0.0)
        # np.dot rather than @: the same BLAS call (cblas_dgemv, same arguments once normalized to column-major)
        # without the matmul ufunc's dispatch, which costs more than the product itself at these sizes.
        err -= np.dot(jac, pull)
        sol = self._sol
        mujoco.mju_cholSolve(sol, jjt, err)
        delta = np.dot(sol, jac) + pull
        # A gain of exactly 1.0 (the simulator's) leaves every element unchanged, so its product is skipped.
        q_des = q + (delta if type(gain) is float and gain == 1.0 else gain * delta)
        np.maximum(q_des, self._q_lo, out=q_des)
        return np.minimum(q_des, self._q_hi, out=q_des)


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
    check_choice(mode, CONTROL_MODES, what="control_mode")
    if mode == "task":
        return TaskSpaceController(scene, config)
    return JointController(scene, config)
