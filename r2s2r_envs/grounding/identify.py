"""Identify a ``WorldParams`` from lab logs: one parameter group at a time, from the protocol that exposes it.

docs/lab_logs.md lists the protocols and what each exposes.  The stages, in order (each uses the world found by
the stages before it):

1. **Sensing** (``sensing_rest``): each noise level is the pooled standard deviation of a signal that does not
   move (robot and objects at rest), with a chi-square 95% interval.
2. **Perception offset and object size** (``sensing_rest``): perceived minus simulated resting positions of
   objects placed at measured spots; x and y are the mean difference, z a regression on the categories' nominal
   half-heights (slope: ``object_size_scale`` - 1, intercept: the z offset), with t intervals.
3. **Belt** (``belt_ride``): the perceived object velocities, averaged over the objects riding together, give the
   belt speed and its Ornstein-Uhlenbeck fluctuation, fitted with white measurement noise by the exact Gaussian
   likelihood (a Kalman filter); Wald intervals from the Hessian, and a likelihood-ratio test of whether any
   fluctuation is distinguishable from the noise.
4. **Latency and finger servos** (``finger_steps``, ``latency``): latency, finger ``kp``, ``kv`` and force limit
   together by ``mujoco.sysid.optimize``, every candidate rolled out through ``mujoco.rollout``, intervals by
   ``mujoco.sysid.calculate_intervals``.  The simulator's actuator delay holds each command for whole physics
   steps (a cost flat between them, with no gradient); the fit reads one delay buffer with linear interpolation
   instead, which makes the latency continuous, and starts from the best latency of a coarse grid.
5. **Arm joints** (``arm_steps``, ``arm_chirp``): per joint, damping, armature and friction loss by
   ``mujoco.sysid.optimize`` on joint angle and measured torque.
6. **Object mass** (``lift`` minus ``lift_empty``): measured joint torques with minus without the object, matched
   by the simulated difference (linear in the mass), per category.
7. **Object friction** (``push`` minus ``push_empty``): the same for the force of pushing a bar along a bar
   stacked on it.
8. **Object estimator** (``perception_static``, ``perception_moving``, ``perception_occlusion``): the camera's
   calibration (refitting stage 2's offset and size with a rotation), delay, noise growth, dropout, confusion and
   occlusion radius, in closed form or by least squares (``grounding.perception_fit``).  Last, so that every stage
   before predicts with exact perception.  Where ``object_visible`` is logged, the sensing, belt and mass stages
   read an object only when the estimator saw it (a missed object's estimate is an old one, held).

Parameters the logs do not constrain are kept at nominal and listed in ``not_identifiable`` with the reason.
The lab's unmodeled effects (docs/lab.md#effects) bias some of these fits; docs/lab_logs.md says how much.

This module runs the stages and reports (:class:`Identification`); the stages live by what they identify:
``identify_sensing`` (1-3 and 8), ``identify_actuators`` (4-5, with the ``mujoco.sysid`` driver),
``identify_objects`` (6-7), on the shared ``identify_common``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from r2s2r_envs.grounding.identify_actuators import (
    LATENCY_GRID_S,
    LATENCY_MAX_S,
    PHYSICS_DT,
    fit_arm,
    fit_latency_and_fingers,
)
from r2s2r_envs.grounding.identify_common import FitState
from r2s2r_envs.grounding.identify_objects import FRICTION_GRID, fit_friction, fit_mass
from r2s2r_envs.grounding.identify_sensing import (
    NOISE_SIGNALS,
    SETTLE_STEPS,
    fit_belt,
    fit_object_estimator,
    fit_offset_and_size,
    fit_sensing,
)
from r2s2r_envs.grounding.log_checks import check_logs
from r2s2r_envs.grounding.logs import LogSet
from r2s2r_envs.grounding.replay import make_sim_env
from r2s2r_envs.world.params import WorldParams

logger = logging.getLogger(__name__)

#: Why the fields kept at nominal by design are not fitted.
KEPT_NOMINAL = {
    "arm_kp": "kept at the datasheet value: in joint mode a servo gain error is indistinguishable from a "
    "low-level controller that executes only part of each command (an unmodeled effect, docs/lab.md#effects); "
    "fitting kp would absorb that effect into a parameter that then misleads task-space control",
    "arm_kv": "kept at the datasheet value: confounded with arm_damping (both resist joint velocity) and with the "
    "low-level controller's command gain",
    "arm_force_limit": "kept at the datasheet value: the excitation saturates it only on large steps, where the "
    "limit and the armature trade off; a real team takes it from the drive's datasheet",
}


def inert_fields(world: WorldParams) -> set[str]:
    """Fields whose value has no effect in ``world``, so a grounding needs no estimate of them: the belt's
    fluctuation time when the belt does not fluctuate (``belt_speed_fluctuation`` 0, as identified when no
    fluctuation stands out of the measurement noise)."""
    return {"belt_fluctuation_time"} if world.belt_speed_fluctuation == 0.0 else set()


@dataclasses.dataclass
class Identification:
    """The result of ``identify``.

    Attributes:
        world: Every ``WorldParams`` field: identified ones at their estimate, the rest at nominal.
        intervals: Field -> 95% [low, high] (elementwise lists for vector fields; [value, value] for fields kept
            at nominal, infinite bounds where the data gives none).
        identified: Fields fitted from the logs.
        not_identifiable: Field -> why it was kept at nominal.
        details: Per stage: estimates, method, residuals, runs used.
        wall_time_s: Time ``identify`` took, s.
    """

    world: WorldParams
    intervals: dict[str, list]
    identified: list[str]
    not_identifiable: dict[str, str]
    details: dict[str, Any]
    wall_time_s: float


# --------------------------------------------------------------------------------------------- identify
def identify(logs: LogSet, *, quick: bool = False, workers: int = 1) -> Identification:
    """Fit a ``WorldParams`` to the fitting runs of ``logs`` (the held-out runs are left for validation).

    Args:
        logs: Lab logs (``grounding.logs.read_logs``).
        quick: Fewer optimizer iterations and bootstrap draws (a reduced budget for tests).
        workers: Threads for ``mujoco.rollout``.

    Returns:
        The identified world with 95% intervals, the fields fitted and those kept at nominal with the reason.

    Raises:
        LogError: the logs are not fit for identification (``grounding.log_checks.check_logs``: no fitting runs,
            non-finite values, wrong shapes, missing signals, settings or references; each named with its run
            and stage).
    """
    if not isinstance(logs, LogSet):
        raise TypeError(f"identify needs a LogSet (grounding.logs.read_logs), got {type(logs).__name__}")
    check_logs(logs, validation=False)  # every problem the stages would meet, before any fitting
    start = time.perf_counter()
    fit = FitState()
    stages = {}

    def stage(name: str, fn: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        fn()
        stages[name] = round(time.perf_counter() - t0, 3)
        logger.info("identify: %s done in %.1f s", name, stages[name])

    rest = logs.by_protocol("sensing_rest")
    stage("sensing", lambda: fit_sensing(rest, fit))
    # Objects rest untouched in the sensing runs and at the start of the push runs (a bar stacked on a bar).
    stage("offset_and_size", lambda: fit_offset_and_size(rest + logs.by_protocol("push"), fit))
    stage("belt", lambda: fit_belt(logs.by_protocol("belt_ride"), fit, quick))
    fingers = logs.by_protocol("finger_steps") + logs.by_protocol("latency")
    if quick and logs.by_protocol("finger_steps"):  # the finger steps alone expose all four
        fingers = logs.by_protocol("finger_steps")
    stage("latency_and_fingers", lambda: fit_latency_and_fingers(fingers, fit, quick, workers))
    arm = logs.by_protocol("arm_steps") + logs.by_protocol("arm_chirp")
    stage("arm", lambda: fit_arm(arm, fit, quick, workers))
    stage("mass", lambda: fit_mass(logs, fit, quick))
    stage("friction", lambda: fit_friction(logs, fit, quick))
    # Last: every stage before predicts with exact perception (an object the hand holds stays where it is).
    stage("perception", lambda: fit_object_estimator(logs, fit))

    for field, reason in KEPT_NOMINAL.items():
        fit.flag(field, reason)
    world = fit.world()
    intervals: dict[str, list] = {}
    for field in WorldParams.field_names():
        if field in fit.intervals:
            intervals[field] = fit.intervals[field]
        else:
            value = getattr(world, field)
            intervals[field] = [[v, v] for v in value] if isinstance(value, tuple) else [value, value]
            fit.flag(field, "not exposed by any protocol in the logs")
    fit.details["stage_time_s"] = stages
    return Identification(
        world=world,
        intervals=intervals,
        identified=[f for f in WorldParams.field_names() if f in fit.values],
        not_identifiable={f: r for f, r in fit.reasons.items() if f not in fit.values},
        details=fit.details,
        wall_time_s=time.perf_counter() - start,
    )


__all__ = [
    "FRICTION_GRID",
    "KEPT_NOMINAL",
    "LATENCY_GRID_S",
    "LATENCY_MAX_S",
    "NOISE_SIGNALS",
    "PHYSICS_DT",
    "SETTLE_STEPS",
    "Identification",
    "identify",
    "inert_fields",
    "make_sim_env",
]
