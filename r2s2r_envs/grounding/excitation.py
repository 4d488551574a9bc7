"""Excitation protocols: what a team runs on a real cell to identify its simulator, and ``log_lab`` to run them.

Every protocol uses only what a real cell offers (docs/lab_logs.md): the command interface (task space or joint
mode), the sensors (with the opt-in ``arm_torque`` and ``finger_current``) and what a person in the room can do
at reset (``reset(options={"setup": ...})``: place objects at measured spots, stop the belt, start the arm at a
posture).  Each protocol names the ``WorldParams`` fields it exposes:

* ``sensing_rest``: robot and objects at rest on a stopped belt, objects placed at measured spots.  Exposes
  every noise level, ``object_pos_offset`` and ``object_size_scale``.
* ``belt_ride``: objects ride the running belt far upstream of the robot.  Exposes ``belt_speed``,
  ``belt_speed_fluctuation`` and ``belt_fluctuation_time``.
* ``finger_steps``: finger open/close steps and ramps at several speeds and amplitudes, free.  Exposes
  ``finger_kp``, ``finger_kv``, ``finger_force_limit`` and ``control_latency``.
* ``latency``: small alternating steps of arm and fingers at once.  Exposes ``control_latency``.
* ``arm_steps`` / ``arm_chirp``: per arm joint, steps of several amplitudes with reversals / a chirp, in joint
  mode.  Expose ``arm_damping``, ``arm_armature`` and ``arm_frictionloss``.
* ``lift``: the scripted planner picks one placed object off the stopped belt (the fingers close around it),
  lifts it and carries it to its bin; ``lift_empty`` replays the same commands with no object.  Together they
  expose ``object_mass`` per category (measured joint torques with minus without the object).
* ``push``: the hand pushes a cube that rests on a bar along the bar; ``push_empty`` replays the same commands
  with the bar alone.  Together they expose ``object_friction`` (object against object is the only contact
  where the objects' own friction decides).
* ``perception_static``: objects placed at spots spread over the stopped belt, robot at home.  Exposes the
  camera's calibration (``object_pos_offset``, ``object_pos_rotation``), ``object_quat_noise``,
  ``object_dropout`` and ``category_confusion``.
* ``perception_moving``: objects placed at measured spots on the running belt as the log starts.  Exposes
  ``perception_delay`` (the perceived track trails the true one by the belt speed times the delay) and
  ``object_pos_noise_speed``.
* ``perception_occlusion``: the open hand sweeps across the scene camera's line of sight to a placed object at
  several distances and offsets.  Exposes ``hand_occlusion_radius`` and ``object_pos_noise_occlusion``.

``log_lab`` runs every protocol on ``gym.make("PickSort-Real-v0", lab=LAB, ...)`` and writes the logs
(``grounding.logs``); the split into fitting and held-out runs is fixed by ``split_of``.

This module holds the protocol table (:data:`PROTOCOLS`, :func:`plan_runs`) and the runner; each protocol's runs
and commands come from its generator: ``excitation_joint`` (the open-loop joint-mode protocols),
``excitation_objects`` (``lift``, ``push``), ``excitation_perception`` (``perception_*``), on the run plan of
``excitation_plan``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from r2s2r_envs.grounding.excitation_joint import plans_arm, plans_belt, plans_fingers, plans_latency, plans_rest
from r2s2r_envs.grounding.excitation_objects import (
    LIFT_HEIGHT,
    LIFT_SPOT,
    PUSH_HEIGHT,
    PUSH_SPOT,
    PUSH_STEPS,
    SHAKE_AMPLITUDE,
    plans_lift,
    plans_push,
)
from r2s2r_envs.grounding.excitation_perception import (
    INTERCEPT_STEPS,
    PERCEPTION_REST_START,
    plans_perception_moving,
    plans_perception_occlusion,
    plans_perception_static,
    sweep_path,
)
from r2s2r_envs.grounding.excitation_plan import (
    HOME,
    NUM_OBJECTS,
    JointCommands,
    Policy,
    RunPlan,
    nominal_layout_height,
)
from r2s2r_envs.grounding.logs import LogRun, LogSet, write_logs
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.world.params import SENSOR_NOISE_FIELDS

if TYPE_CHECKING:
    from r2s2r_envs.envs.pick_sort import PickSortEnv

LAB_ID = "PickSort-Real-v0"
SENSORS = ("arm_torque", "finger_current", "object_visible")


def split_of(index: int, count: int, offset: int = 0) -> str:
    """The fixed split of run ``index`` among ``count`` runs of one protocol: every third run (counting from
    ``offset``; the second of two) is held out, a single run is for fitting."""
    if count == 1:
        return "fit"
    if count == 2:
        return "heldout" if index == 1 else "fit"
    return "heldout" if (index + offset) % 3 == 2 else "fit"


# Per protocol, where the held-out third starts: the chirps hold out other joints than the steps, so every
# arm joint keeps a fitting run.
_SPLIT_OFFSET = {"arm_chirp": 2}


PROTOCOLS: dict[str, tuple[str, ...]] = {
    "sensing_rest": (*SENSOR_NOISE_FIELDS, "object_pos_offset", "object_size_scale"),
    "belt_ride": ("belt_speed", "belt_speed_fluctuation", "belt_fluctuation_time"),
    "finger_steps": ("finger_kp", "finger_kv", "finger_force_limit", "control_latency"),
    "latency": ("control_latency",),
    "arm_steps": ("arm_damping", "arm_armature", "arm_frictionloss"),
    "arm_chirp": ("arm_damping", "arm_armature", "arm_frictionloss"),
    "lift": ("object_mass",),
    "lift_empty": ("object_mass",),
    "push": ("object_friction",),
    "push_empty": ("object_friction",),
    "perception_static": (
        "object_pos_offset",
        "object_pos_rotation",
        "object_size_scale",
        "object_quat_noise",
        "object_dropout",
        "category_confusion",
    ),
    "perception_moving": ("perception_delay", "object_pos_noise_speed"),
    "perception_occlusion": ("hand_occlusion_radius", "object_pos_noise_occlusion"),
}

# Perception runs come last: the runs before keep their index, so their reset seeds (``run_seed``) are unchanged.
_PLANNERS = (
    plans_rest,
    plans_belt,
    plans_fingers,
    plans_latency,
    plans_arm,
    plans_lift,
    plans_push,
    plans_perception_static,
    plans_perception_moving,
    plans_perception_occlusion,
)


def plan_runs(*, quick: bool = False, dt: float = 0.05) -> list[RunPlan]:
    """Every run of every protocol, in logging order (references after the runs they replay)."""
    cmd = JointCommands()
    return [plan for make in _PLANNERS for plan in make(cmd, dt, quick)]


#: Names of short runs in ``plan_runs(quick=True)``, one of each protocol but the finger steps and the arm chirp
#: (about 3 s to log in the nominal simulator): the small log set that the log checks' tests and
#: hardening probes (``tests/hardening/``) write and corrupt.
SMOKE_RUNS: tuple[str, ...] = (
    "sensing_rest_0",
    "sensing_rest_2",
    "belt_ride_0",
    "latency_0",
    "arm_steps_j1",
    "lift_cube_0",
    "lift_cube_0_empty",
    "push_0",
    "push_0_empty",
    "perception_static_0",
    "perception_moving_0",
    "perception_occlusion_0",
)


def _splits(plans: list[RunPlan]) -> dict[str, str]:
    """Fixed split per run name; a reference run shares the split of the run it replays."""
    by_protocol: dict[str, list[RunPlan]] = {}
    for p in plans:
        if p.replay_of is None:
            group = p.protocol if p.protocol != "lift" else f"lift_{p.settings['category']}"
            by_protocol.setdefault(group, []).append(p)
    split = {}
    for members in by_protocol.values():
        for i, p in enumerate(members):
            split[p.name] = split_of(i, len(members), _SPLIT_OFFSET.get(p.protocol, 0))
    for p in plans:
        if p.replay_of is not None:
            split[p.name] = split[p.replay_of]
    return split


def log_run(plan: RunPlan, split: str, seed: int, env_kwargs: dict[str, Any], record: dict[str, Any]) -> LogRun:
    """The logged run of ``plan``: what :func:`execute` recorded (``record``), with how it was made."""
    return LogRun(
        name=plan.name,
        protocol=plan.protocol,
        settings=plan.settings,
        split=split,
        seed=seed,
        control_mode=plan.control_mode,
        setup=plan.setup,
        env_kwargs=env_kwargs,
        actions=record["actions"],
        timestamps=record["timestamps"],
        obs=record["obs"],
    )


def execute(env: gym.Env, plan: RunPlan, seed: int, actions: np.ndarray | None = None) -> dict[str, Any]:
    """Run one plan on ``env``; returns the logged arrays (actions, timestamps, obs)."""
    obs, _ = env.reset(seed=seed, options={"setup": plan.setup})
    policy = plan.policy(env) if plan.policy is not None else None
    commands = actions if actions is not None else plan.actions
    observations = {k: [v] for k, v in obs.items()}
    sent, stamps = [], [0.0]
    for t in range(plan.steps):
        a = commands[t] if policy is None else np.asarray(policy(obs, t), dtype=np.float32)
        obs, _, _, truncated, info = env.step(a)
        sent.append(np.asarray(a, dtype=np.float32))
        stamps.append(float(info["elapsed_time"]))
        for k, v in obs.items():
            observations[k].append(v)
        if info["unstable"]:
            raise RuntimeError(f"run {plan.name}: the simulation became unstable at step {t}")
    return {
        "actions": np.asarray(sent, dtype=np.float32),
        "timestamps": np.asarray(stamps, dtype=np.float64),
        "obs": {k: np.asarray(v) for k, v in observations.items()},
    }


def env_kwargs_of(plan: RunPlan) -> dict[str, Any]:
    """The env arguments (besides the lab) a plan runs with; replay uses the same."""
    return {
        "control_mode": plan.control_mode,
        "num_objects": NUM_OBJECTS,
        "sensors": list(SENSORS),
        "episode_steps": plan.steps + 1,
        "obs_mode": "state",
    }


def run_seed(seed: int, index: int) -> int:
    """Reset seed of run ``index`` of a session with base seed ``seed``."""
    return int(np.random.SeedSequence(seed, spawn_key=(index,)).generate_state(1, np.uint32)[0])


def check_protocols(protocols: Sequence[str]) -> list[str]:
    """``protocols`` as a list of names of :data:`PROTOCOLS` (one name alone is taken as a list of one).

    Raises:
        ValueError: an unknown protocol name, or none given (naming the protocols).
    """
    names = [protocols] if isinstance(protocols, str) else list(protocols)
    check_keys(names, PROTOCOLS, what="protocol", error=ValueError)
    if not names:
        raise ValueError(f"no protocol given; valid (at least one): {list(PROTOCOLS)}")
    return names


def select_protocols(plans: list[RunPlan], protocols: Sequence[str] | None) -> list[RunPlan]:
    """The runs of ``plans`` whose protocol is in ``protocols`` (``None``: all), in logging order.

    Raises:
        ValueError: as :func:`check_protocols`.
    """
    if protocols is None:
        return plans
    names = check_protocols(protocols)
    return [p for p in plans if p.protocol in names]


def log_lab(
    lab: str | Path,
    out: str | Path,
    *,
    seed: int = 0,
    quick: bool = False,
    protocols: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> LogSet:
    """Run every protocol (or those of ``protocols``) on the lab and write the logs.

    Args:
        lab: A shipped lab name or a lab JSON file (what ``PickSort-Real-v0`` takes as ``lab=``).
        out: Output directory (``manifest.json`` plus one HDF5 file per run).
        seed: Base seed of the session (run ``i`` resets with ``run_seed(seed, i)``).
        quick: Fewer and shorter runs (a reduced budget for tests and quick looks).
        protocols: Names of :data:`PROTOCOLS` to run (``None``: all); identification leaves the fields only the
            others expose at nominal, flagged.
        progress: Called with one line per run (e.g. ``print``).

    Returns:
        The written logs, as read back.

    Raises:
        ValueError: an unknown protocol name.
    """
    lab_arg = lab if isinstance(lab, str) else str(lab)
    plans = select_protocols(plan_runs(quick=quick), protocols)
    return log_env(
        lambda kwargs: gym.make(LAB_ID, lab=lab_arg, **kwargs),
        out,
        seed=seed,
        quick=quick,
        progress=progress,
        plans=plans,
    )


def log_env(
    make_env: Callable[[dict[str, Any]], gym.Env],
    out: str | Path,
    *,
    seed: int = 0,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
    plans: list[RunPlan] | None = None,
) -> LogSet:
    """Run the protocols on envs made by ``make_env(env_kwargs)`` and write the logs (``log_lab`` on the lab;
    tests log a simulated env with a known world the same way).  The lab identity comes from the env's
    ``provenance()["lab"]``; a simulated env is named ``sim:<world sha256>``."""
    plans = plan_runs(quick=quick) if plans is None else plans
    splits = _splits(plans)
    runs: list[LogRun] = []
    logged: dict[str, np.ndarray] = {}
    identity: dict[str, str] | None = None
    for i, plan in enumerate(plans):
        start = time.perf_counter()
        kwargs = env_kwargs_of(plan)
        env = make_env(kwargs)
        try:
            if identity is None:
                prov = cast("PickSortEnv", env.unwrapped).provenance()  # the lab's or a simulated PickSort env
                identity = prov.get("lab") or {"name": f"sim:{prov['world_sha256'][:12]}", "config_sha256": ""}
            s = run_seed(seed, i)
            replay = logged[plan.replay_of] if plan.replay_of else None
            record = execute(env, plan, s, replay)
        finally:
            env.close()
        logged[plan.name] = record["actions"]
        runs.append(log_run(plan, splits[plan.name], s, kwargs, record))
        if progress is not None:
            progress(f"{plan.name:28s} {plan.protocol:14s} {splits[plan.name]:8s} {time.perf_counter() - start:5.2f} s")
    assert identity is not None
    return write_logs(out, runs, lab_name=identity["name"], lab_config_sha256=identity["config_sha256"], seed=seed)


__all__ = [
    "HOME",
    "INTERCEPT_STEPS",
    "LAB_ID",
    "LIFT_HEIGHT",
    "LIFT_SPOT",
    "NUM_OBJECTS",
    "PERCEPTION_REST_START",
    "PROTOCOLS",
    "PUSH_HEIGHT",
    "PUSH_SPOT",
    "PUSH_STEPS",
    "SENSORS",
    "SHAKE_AMPLITUDE",
    "SMOKE_RUNS",
    "Policy",
    "RunPlan",
    "check_protocols",
    "env_kwargs_of",
    "execute",
    "log_env",
    "log_lab",
    "nominal_layout_height",
    "plan_runs",
    "run_seed",
    "select_protocols",
    "split_of",
    "sweep_path",
]
