"""The camera-based object estimator: what an env reports of its objects when it sees them through cameras.

A real cell does not read object poses from a simulator: cameras see the objects and a pose estimator turns the
images into positions, orientations and categories.  ``ObjectEstimator`` models that pipeline, frame by frame
(one frame per control step):

* **delay**: the estimate describes the object ``perception_delay`` s ago (interpolated between control steps),
  optionally with a per-frame jitter;
* **calibration**: each camera has an extrinsic error (a rotation about its centre and a translation), so the
  error depends on where the object is; a shared error (``object_pos_rotation`` about the first camera,
  ``object_pos_offset``) applies to every camera;
* **noise** that grows with the object's speed and as the hand comes close to covering it;
* **occlusion**: the hand (a sphere of ``hand_occlusion_radius`` around the TCP, where it was at the image's
  time) hides an object from a camera when it lies on the line of sight; a visible object is the mean of the
  cameras that see it; an object no camera sees, or one the estimator misses (``object_dropout``), keeps its
  last estimate and reads as not visible (the ``object_visible`` observation key);
* **orientation noise** and rare **category confusion**, frame by frame.

Simulated worlds run it with one camera (the scene camera) and the world's parameters (``WorldParams``:
``perception_delay`` ... ``hand_occlusion_radius``); a lab may see through several cameras of its own, each with
its own calibration error, and with delay jitter (docs/lab.md#perception).  Every frame draws the same number of
random values from the estimator's own stream, whatever is visible, so what is seen never shifts later noise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import mujoco
import numpy as np

from r2s2r_envs.world.params import WorldParams

N_CATEGORIES = 3


@dataclasses.dataclass(frozen=True, kw_only=True)
class PerceptionCamera:
    """One camera of the estimator.

    Attributes:
        position: Where the camera is, m (world frame).
        rotation_error: Its extrinsic rotation error about its own centre, rotation vector, rad.
        translation_error: Its extrinsic translation error, m.
    """

    position: tuple[float, float, float]
    rotation_error: tuple[float, float, float] = (0.0, 0.0, 0.0)
    translation_error: tuple[float, float, float] = (0.0, 0.0, 0.0)


def rotation_matrix(rotvec: Sequence[float]) -> np.ndarray:
    """(3, 3) rotation matrix of a rotation vector (axis times angle, rad)."""
    v = np.asarray(rotvec, dtype=float)
    angle = float(np.linalg.norm(v))
    if angle == 0.0:
        return np.eye(3)
    quat, mat = np.empty(4), np.empty(9)
    mujoco.mju_axisAngle2Quat(quat, v / angle, angle)
    mujoco.mju_quat2Mat(mat, quat)
    return mat.reshape(3, 3)


class ObjectEstimator:
    """Frame-by-frame object estimates of ``num_objects`` objects (see the module docstring).

    Args:
        world: The world whose estimator parameters apply.
        cameras: The cameras that see the objects (at least one).
        dt: Control period, s (one frame per control step).
        num_objects: Number of object slots.
        delay_jitter: Standard deviation of the per-frame variation of the delay, s (0: a constant delay).
    """

    def __init__(
        self,
        world: WorldParams,
        cameras: Sequence[PerceptionCamera],
        dt: float,
        num_objects: int,
        delay_jitter: float = 0.0,
    ) -> None:
        if not cameras:
            raise ValueError("the object estimator needs at least one camera")
        self.world, self.dt, self.n = world, float(dt), int(num_objects)
        self.delay_jitter = float(delay_jitter)
        self._centres = np.array([c.position for c in cameras], dtype=float)
        shared_rotation = rotation_matrix(world.object_pos_rotation) - np.eye(3)
        shared_offset = np.asarray(world.object_pos_offset, dtype=float) - shared_rotation @ self._centres[0]
        # Per camera: p_seen = p + A_k p + b_k (an affine error field; camera k rotates about its own centre).
        self._a = np.stack([rotation_matrix(c.rotation_error) - np.eye(3) + shared_rotation for c in cameras])
        self._b = np.stack(
            [
                np.asarray(c.translation_error, dtype=float)
                - (rotation_matrix(c.rotation_error) - np.eye(3)) @ centre
                + shared_offset
                for c, centre in zip(cameras, self._centres)
            ]
        )
        longest = world.perception_delay + 4.0 * self.delay_jitter
        self._length = int(math.ceil(longest / self.dt)) + 2  # frames kept: the oldest one interpolation needs
        n, k = self.n, len(cameras)
        self._normals = k * n * 3 + n * 3 + n * 3 + 1
        self._uniforms = 3 * n
        self._pos = np.zeros((self._length, n, 3))
        self._quat = np.zeros((self._length, n, 4))
        self._vel = np.zeros((self._length, n, 6))
        self._tcp = np.zeros((self._length, 3))
        self._head = 0
        self._last: dict[str, np.ndarray] = {}

    @property
    def num_cameras(self) -> int:
        return len(self._centres)

    def reset(self, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray, tcp: np.ndarray) -> None:
        """Start an episode: the frames before it show the objects moving as they move now (no sudden start).  The
        reset's own frame is the first ``observe``: the history ends one control period before it."""
        pos, quat, vel = (np.asarray(x, dtype=float).reshape(self.n, -1) for x in (pos, quat, vel))
        for k in range(self._length):
            age = (self._length - k) * self.dt
            self._pos[k] = pos - vel[:, :3] * age
            self._quat[k] = quat
            self._vel[k] = vel
            self._tcp[k] = tcp
        self._head = self._length - 1
        self._last = {}

    def observe(
        self,
        pos: np.ndarray,
        quat: np.ndarray,
        vel: np.ndarray,
        tcp: np.ndarray,
        one_hot: np.ndarray,
        rng: np.random.Generator,
    ) -> dict[str, np.ndarray]:
        """Record this control step's true state and return the frame's estimates.

        Args:
            pos, quat, vel: True object positions (3N), orientations (4N, w x y z) and velocities (6N).
            tcp: True TCP position (3,), m: the hand that may hide objects.
            one_hot: True categories, one-hot (3N).
            rng: The estimator's random stream.

        Returns:
            ``object_pos`` (3N), ``object_quat`` (4N), ``object_vel`` (6N), ``object_category`` (3N) and
            ``object_visible`` (N, 1 seen / 0 not seen this frame), float32.
        """
        w, n = self.world, self.n
        self._head = (self._head + 1) % self._length
        h = self._head
        self._pos[h] = np.asarray(pos, dtype=float).reshape(n, 3)
        self._quat[h] = np.asarray(quat, dtype=float).reshape(n, 4)
        self._vel[h] = np.asarray(vel, dtype=float).reshape(n, 6)
        self._tcp[h] = tcp

        z = rng.standard_normal(self._normals)
        u = rng.random(self._uniforms)
        delay = w.perception_delay + self.delay_jitter * z[-1]
        lag = min(max(delay / self.dt, 0.0), self._length - 2.0)
        k0 = int(lag)
        frac = lag - k0
        i0, i1 = (h - k0) % self._length, (h - k0 - 1) % self._length
        p = (1.0 - frac) * self._pos[i0] + frac * self._pos[i1]
        v = (1.0 - frac) * self._vel[i0] + frac * self._vel[i1]
        q = (1.0 - frac) * self._quat[i0] + frac * self._quat[i1]
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        hand = (1.0 - frac) * self._tcp[i0] + frac * self._tcp[i1]

        # Each camera: is the hand on its line of sight to each object, and how close is it to being?
        k = self.num_cameras
        ray = p[None, :, :] - self._centres[:, None, :]  # (k, n, 3)
        to_hand = hand[None, None, :] - self._centres[:, None, :]
        t = np.clip(np.sum(to_hand * ray, axis=2) / np.maximum(np.sum(ray * ray, axis=2), 1e-12), 0.0, 1.0)
        miss = np.linalg.norm(self._centres[:, None, :] + t[..., None] * ray - hand[None, None, :], axis=2)
        r = w.hand_occlusion_radius
        if r > 0.0:
            seen = miss >= r
            closeness = np.clip(2.0 - miss / r, 0.0, 1.0)
        else:
            seen = np.ones((k, n), dtype=bool)
            closeness = np.zeros((k, n))
        speed = np.linalg.norm(v[:, :3], axis=1)
        sigma = (
            w.object_pos_noise + w.object_pos_noise_speed * speed[None, :] + w.object_pos_noise_occlusion * closeness
        )
        noise = z[: k * n * 3].reshape(k, n, 3) * sigma[..., None]
        per_camera = p[None] + np.einsum("kij,knj->kni", self._a, p[None].repeat(k, 0)) + self._b[:, None, :] + noise
        visible = seen.any(axis=0) & (u[:n] >= w.object_dropout)
        weights = seen / np.maximum(seen.sum(axis=0), 1)
        est_pos = np.sum(per_camera * weights[..., None], axis=0)
        est_pos[~seen.any(axis=0)] = per_camera[0, ~seen.any(axis=0)]  # for the first frame's hold only

        off = k * n * 3
        rot = z[off : off + 3 * n].reshape(n, 3) * w.object_quat_noise
        est_quat = q.copy()
        if w.object_quat_noise > 0.0:
            for j in range(n):
                noise_q = np.empty(4)
                angle = float(np.linalg.norm(rot[j]))
                if angle > 0.0:
                    mujoco.mju_axisAngle2Quat(noise_q, rot[j] / angle, angle)
                    mujoco.mju_mulQuat(est_quat[j], noise_q, q[j])
        est_vel = v.copy()
        est_vel[:, :3] += z[off + 3 * n : off + 6 * n].reshape(n, 3) * w.object_vel_noise

        cats = np.asarray(one_hot, dtype=float).reshape(n, N_CATEGORIES).argmax(axis=1)
        confused = u[n : 2 * n] < w.category_confusion
        other = (cats + 1 + (u[2 * n :] * (N_CATEGORIES - 1)).astype(int)) % N_CATEGORIES
        shown = np.where(confused, other, cats)
        est_cat = np.zeros((n, N_CATEGORIES))
        est_cat[np.arange(n), shown] = 1.0

        frame = {
            "object_pos": est_pos,
            "object_quat": est_quat,
            "object_vel": est_vel,
            "object_category": est_cat,
        }
        if self._last:  # what no camera sees keeps its last estimate
            hidden = ~visible
            for key, value in frame.items():
                value[hidden] = self._last[key][hidden]
        self._last = {key: value.copy() for key, value in frame.items()}
        out = {key: value.reshape(-1).astype(np.float32) for key, value in frame.items()}
        out["object_visible"] = visible.astype(np.float32)
        return out
