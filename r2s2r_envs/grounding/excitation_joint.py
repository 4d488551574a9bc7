"""The open-loop joint-mode protocols (``grounding.excitation``): ``sensing_rest``, ``belt_ride``,
``finger_steps``, ``latency``, ``arm_steps`` and ``arm_chirp``, each a generator of its runs' joint targets."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from r2s2r_envs.grounding.excitation_plan import HOME, JointCommands, RunPlan
from r2s2r_envs.world import constants as C


def _hold_pattern(levels: list[float], hold_steps: int) -> np.ndarray:
    return np.repeat(np.asarray(levels, dtype=float), hold_steps)


def _chirp(steps: int, dt: float, f0: float, f1: float, amplitude: float) -> np.ndarray:
    t = np.arange(steps) * dt
    duration = steps * dt
    phase = 2.0 * math.pi * (f0 * t + 0.5 * (f1 - f0) / duration * t * t)
    envelope = np.minimum(1.0, np.minimum(t, duration - t) / 0.5)  # 0.5 s fade in and out
    return amplitude * envelope * np.sin(phase)


# Per arm joint: step amplitudes (rad) and chirp amplitude (rad).  Shoulder and elbow move the most mass, so
# smaller amplitudes keep the hand well above the belt.
_ARM_STEP_AMPLITUDES = ((0.1, 0.3, 0.5), (0.05, 0.15, 0.25), (0.1, 0.3, 0.5), (0.05, 0.15, 0.25)) + (
    (0.15, 0.4, 0.7),
) * 3
_ARM_CHIRP_AMPLITUDE = (0.25, 0.12, 0.25, 0.12, 0.4, 0.4, 0.4)


def plans_arm(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    plans = []
    joints = range(7)
    hold = 10 if quick else 14
    for j in joints:
        amps = _ARM_STEP_AMPLITUDES[j]
        levels = [0.0]
        for a in amps:  # steps of several amplitudes, each with a reversal through zero
            levels += [a, -a, 0.0]
        pattern = _hold_pattern(levels, hold)
        arm, hand = cmd.hold(len(pattern))
        arm[:, j] += pattern
        plans.append(
            cmd.plan(
                f"arm_steps_j{j + 1}",
                "arm_steps",
                {"joint": j + 1, "amplitudes_rad": list(amps), "hold_s": hold * dt},
                arm,
                hand,
            )
        )
    chirp_steps = 80 if quick else 120
    for j in joints:
        wave = _chirp(chirp_steps, dt, 0.3, 2.5, _ARM_CHIRP_AMPLITUDE[j])
        arm, hand = cmd.hold(chirp_steps)
        arm[:, j] += wave
        plans.append(
            cmd.plan(
                f"arm_chirp_j{j + 1}",
                "arm_chirp",
                {"joint": j + 1, "f0_hz": 0.3, "f1_hz": 2.5, "amplitude_rad": _ARM_CHIRP_AMPLITUDE[j]},
                arm,
                hand,
            )
        )
    return plans


def _finger_close(cmd: JointCommands, fraction: float) -> np.ndarray:
    return cmd.hand_open + fraction * (cmd.hand_hi - cmd.hand_open)


def plans_fingers(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    plans = []
    # (name, closing fraction of the range, ramp durations in control steps: 1 = a step)
    variants = [("large", 0.7, (1, 5, 20)), ("small", 0.25, (1, 3, 10)), ("mixed", 0.5, (1, 8, 1))]
    if quick:
        variants = variants[:2]
    for k, (label, fraction, ramps) in enumerate(variants):
        target = _finger_close(cmd, fraction)
        rows = [np.tile(cmd.hand_open, (6, 1))]
        for ramp in ramps:
            for a, b in ((cmd.hand_open, target), (target, cmd.hand_open)):
                s = np.linspace(0.0, 1.0, ramp + 1)[1:, None]
                rows.append(a + s * (b - a))
                rows.append(np.tile(b, (12, 1)))
        hand = np.concatenate(rows)
        arm = np.tile(np.asarray(HOME), (len(hand), 1))
        plans.append(
            cmd.plan(
                f"finger_steps_{k}_{label}",
                "finger_steps",
                {"closing_fraction": fraction, "ramp_s": [r * dt for r in ramps]},
                arm,
                hand,
            )
        )
    return plans


def plans_latency(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    plans = []
    count = 2 if quick else 3
    for k in range(count):
        hold = 8 + 2 * k  # different phases relative to the control clock
        levels = [0.0] + [(-1.0) ** i for i in range(8)]
        pattern = _hold_pattern(levels, hold)
        arm, hand = cmd.hold(len(pattern))
        arm[:, 0] += 0.08 * pattern
        arm[:, 6] += 0.2 * pattern
        hand = cmd.hand_open + np.outer((pattern + 1.0) * 0.5, 0.4 * (cmd.hand_hi - cmd.hand_open))
        hand[:hold] = cmd.hand_open
        plans.append(
            cmd.plan(
                f"latency_{k}",
                "latency",
                {"hold_s": hold * dt, "arm_step_rad": [0.08, 0.2], "finger_fraction": 0.4},
                arm,
                hand,
            )
        )
    return plans


# Spots (x, y on the belt, m) where the operator places cube, ball and bar for the sensing runs.
_REST_SPOTS = (
    ((0.51, 0.25), (0.59, -0.05), (0.55, -0.30)),
    ((0.58, 0.30), (0.50, 0.05), (0.56, -0.25)),
    ((0.55, 0.20), (0.55, -0.10), (0.52, 0.45)),
    ((0.60, 0.35), (0.53, 0.10), (0.57, -0.35)),
    ((0.50, 0.40), (0.57, 0.15), (0.54, -0.15)),
    ((0.56, 0.28), (0.52, -0.20), (0.58, 0.05)),
)


def plans_rest(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    count, steps = (4, 70) if quick else (6, 100)
    plans = []
    for k in range(count):
        objects = [{"category": c, "position": list(_REST_SPOTS[k][i]), "yaw": 0.0} for i, c in enumerate(C.CATEGORIES)]
        settings = {"spots_m": [list(s) for s in _REST_SPOTS[k]]}
        plans.append(cmd.still_plan(f"sensing_rest_{k}", "sensing_rest", settings, steps, objects, belt=False))
    return plans


def plans_belt(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    count, steps = (3, 240) if quick else (6, 400)
    plans = []
    for k in range(count):
        # Cubes and a bar: a ball rolls, and its centre follows changes of the belt speed only partly.
        objects: list[dict[str, Any]] = [
            {"category": c, "position": [0.55, 2.4 + 0.35 * i + 0.05 * k], "yaw": 0.0}
            for i, c in enumerate(("cube", "bar", "cube"))
        ]
        settings = {"start_y_m": [o["position"][1] for o in objects]}
        plans.append(cmd.still_plan(f"belt_ride_{k}", "belt_ride", settings, steps, objects, belt=True))
    return plans
