"""The perception protocols (``grounding.excitation``): ``perception_static``, ``perception_moving`` and
``perception_occlusion``, which expose the object estimator's calibration, delay, noise and occlusion."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from r2s2r_envs.envs.controller import finger_command
from r2s2r_envs.grounding.excitation_plan import HOME, JointCommands, RunPlan, nominal_layout_height, waypoint_policy
from r2s2r_envs.world import constants as C

# Static spots: three lanes across the belt (x, m) and a spread along it (y, m); category and lane rotate
# independently over runs (multiples of three), so the calibration's tilt (z error against x) and the object size
# (z error against the object's height) separate.
_LANES = (0.48, 0.55, 0.62)
PERCEPTION_REST_START = 5  # control steps after reset before placed objects count as at rest (a 1 mm drop)
# Frames of a moving run whose perceived track is fitted as a line: from when the estimator's history holds only
# frames taken since reset (delays up to 0.2 s), while the belt's fluctuation, which starts at zero, is still small.
INTERCEPT_STEPS = (5, 45)
# Where the hand crosses the scene camera's line of sight to the object: distance along the line from the
# object (m) and offset across it (m), one per sweep: the fingertips stay well above the object.
_SWEEPS = ((0.17, 0.0), (0.23, 0.025), (0.29, -0.04))
_SWEEP_HALF = 0.12  # half length of a sweep, m
_SWEEP_STEPS = 40  # control steps per sweep (0.12 m/s: the image-time hand is then within a few mm of the logged one)
_SWEEP_GAP = 15  # control steps to move between sweeps


def plans_perception_static(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    count, steps = (9, 30) if quick else (12, 50)
    plans = []
    for k in range(count):
        objects = []
        for i in range(3):
            category = C.CATEGORIES[(i + k) % 3]
            x = _LANES[(i + 2 * k) % 3]
            y = -0.45 + 0.38 * i + 0.11 * (k % 3) + 0.02 * (k // 3)
            yaw = math.pi / 2 if category == "bar" else 0.0  # a bar lies along the belt: it fits every lane
            objects.append({"category": category, "position": [x, round(y, 3)], "yaw": yaw})
        settings = {"spots_m": [o["position"] for o in objects], "rest_steps": [PERCEPTION_REST_START, steps + 1]}
        plans.append(
            cmd.still_plan(f"perception_static_{k}", "perception_static", settings, steps, objects, belt=False)
        )
    return plans


def plans_perception_moving(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    count, steps = (12, 50) if quick else (18, 60)
    plans = []
    for k in range(count):
        # Cubes and a bar (a ball rolls), ahead of the robot so they pass under the hand at home unhidden.
        objects: list[dict[str, Any]] = [
            {"category": c, "position": [_LANES[(i + k) % 3], round(0.25 + 0.2 * i + 0.02 * k, 3)], "yaw": 0.0}
            for i, c in enumerate(("cube", "bar", "cube"))
        ]
        settings = {"spots_m": [o["position"] for o in objects], "intercept_steps": list(INTERCEPT_STEPS)}
        plans.append(cmd.still_plan(f"perception_moving_{k}", "perception_moving", settings, steps, objects, belt=True))
    return plans


def sweep_path(obj: Sequence[float], camera: Sequence[float]) -> np.ndarray:
    """TCP positions (one per control step, m) of an occlusion run: sweeps across the line of sight from
    ``camera`` to an object centred at ``obj``, horizontally and perpendicular to it, at each of ``_SWEEPS``."""
    p, c = np.asarray(obj, dtype=float), np.asarray(camera, dtype=float)
    u = (c - p) / np.linalg.norm(c - p)
    across = np.cross(u, (0.0, 0.0, 1.0))
    across /= np.linalg.norm(across)
    normal = np.cross(across, u)  # perpendicular to the line of sight and to the sweep
    points: list[tuple[int, np.ndarray]] = []
    t = 25  # the first leg comes from wherever the TCP is (``waypoint_policy``)
    for j, (along, offset) in enumerate(_SWEEPS):
        centre = p + along * u + offset * normal
        sign = 1.0 if j % 2 == 0 else -1.0
        points.append((t, centre - sign * _SWEEP_HALF * across))
        t += _SWEEP_STEPS
        points.append((t, centre + sign * _SWEEP_HALF * across))
        t += _SWEEP_GAP
    path = np.empty((t + 1, 3))
    path[: points[0][0] + 1] = points[0][1]
    for (t0, p0), (t1, p1) in zip(points[:-1], points[1:]):
        for step in range(t0, t1 + 1):
            path[step] = p0 + (step - t0) / (t1 - t0) * (p1 - p0)
    path[points[-1][0] :] = points[-1][1]
    return path


def plans_perception_occlusion(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    from r2s2r_envs.grounding.perception_fit import scene_camera_position

    count = 3
    hand = finger_command(cmd.scene, cmd.hand_open[None])[0]
    camera = scene_camera_position()
    plans = []
    for k in range(count):
        spot = (_LANES[k % 3], round(-0.1 + 0.15 * k, 3))
        centre = (*spot, nominal_layout_height("cube"))
        path = sweep_path(centre, camera)
        plans.append(
            RunPlan(
                name=f"perception_occlusion_{k}",
                protocol="perception_occlusion",
                settings={
                    "spot_m": list(spot),
                    "camera_m": [float(v) for v in camera],
                    "sweeps_m": [list(s) for s in _SWEEPS],
                },
                control_mode="task",
                setup={
                    "belt": False,
                    "objects": [{"category": "cube", "position": list(spot)}],
                    "arm_qpos": list(HOME),
                },
                steps=len(path) - 1,
                policy=waypoint_policy(path, hand),
            )
        )
    return plans
