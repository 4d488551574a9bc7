"""Check a log set completely before identification starts: what each stage will read, read now, in seconds.

``check_logs`` runs before ``identify`` fits anything (``identify`` and ``r2s2r sysid`` call it) and refuses, with
one ``LogError`` listing every problem found, logs that would otherwise fail minutes into a fit with a numerical
error, or yield a grounding file from corrupted values (docs/lab_logs.md#checks).  Per run it checks:

* the protocol is known (``excitation.PROTOCOLS``) and the env arguments are values the replay accepts
  (``LOG_ENV_KWARGS``; never a path or a world);
* the actions and every observation have the shape the env made with those arguments gives, a numeric dtype and
  only finite values within physical bounds (``PHYSICAL_LIMITS``); the timestamps increase and their period is the
  env's control period;
* the operator set-up is one the env's ``reset`` accepts;
* per stage (the stage names of ``identify``): the signals it reads, the control mode it replays in, the
  settings it reads (``joint``, ``category``, ``reference``, step windows inside the run), the objects it needs
  and the reference run a difference is taken against (present, of the same length).

The log set as a whole needs at least one fitting run and, for validation, one held-out run.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from typing import Any, TypeGuard

import numpy as np

from r2s2r_envs.grounding.logs import LogError, LogRun, LogSet
from r2s2r_envs.mappings import check_choice, check_keys

#: Env arguments a logged run may carry (values only: replay never opens a file a log names).
LOG_ENV_KWARGS = ("control_mode", "num_objects", "sensors", "episode_steps", "obs_mode", "reward_mode", "image_size")
#: Relative deviation of a run's median timestamp step from the env's control period that is accepted (jitter).
CONTROL_DT_TOLERANCE = 0.25
#: Largest magnitude of a logged value per signal, with its unit: far beyond anything the cell produces, so a value
#: past it is a corrupted log, not a measurement (sysid would spend minutes fitting it). Ref: joint angles span
#: less than a turn (angles are bounded by 2 turns in degrees, as some labs report them: 720); the cell is about
#: 2 m across; a Panda's joints take at most 87 N*m; commands are in [-1, 1] (docs/task.md#action).
PHYSICAL_LIMITS: dict[str, tuple[float, str]] = {
    "actions": (10.0, "command units"),
    "timestamps": (1e6, "s"),
    "obs/arm_qpos": (1e3, "rad, or degrees"),
    "obs/hand_qpos": (1e3, "rad, or degrees"),
    "obs/arm_qvel": (1e5, "rad/s, or degrees/s"),
    "obs/hand_qvel": (1e5, "rad/s, or degrees/s"),
    "obs/eef_pos": (100.0, "m"),
    "obs/object_pos": (100.0, "m"),
    "obs/object_vel": (1e3, "m/s and rad/s"),
    "obs/eef_quat": (10.0, "quaternion components"),
    "obs/object_quat": (10.0, "quaternion components"),
    "obs/object_category": (10.0, "one-hot"),
    "obs/arm_torque": (1e4, "N*m"),
    "obs/finger_current": (1e4, "N*m"),
}
#: The bound of a signal :data:`PHYSICAL_LIMITS` does not list.
DEFAULT_PHYSICAL_LIMIT = (1e6, "its unit")
#: Longest problem list a ``LogError`` spells out (the count of the rest follows).
MAX_LISTED = 12

# Stage -> (protocols it reads in the fitting split, signals it needs, control mode it replays in or None).
_STAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]] = {
    "sensing": (("sensing_rest",), (), None),
    "offset_and_size": (("sensing_rest", "push"), ("object_pos",), None),
    "belt": (("belt_ride",), ("object_vel", "object_pos"), None),
    "latency_and_fingers": (("finger_steps", "latency"), ("hand_qpos", "finger_current"), "joint"),
    "arm": (("arm_steps", "arm_chirp"), ("arm_qpos", "arm_torque"), "joint"),
    "mass": (("lift",), ("arm_torque", "object_pos"), None),
    "mass reference": (("lift_empty",), ("arm_torque",), None),
    "friction": (("push",), ("arm_torque",), None),
    "friction reference": (("push_empty",), ("arm_torque",), None),
    "perception calibration": (("perception_static",), ("object_pos", "object_quat", "object_category"), None),
    "perception delay": (("perception_moving",), ("object_pos",), None),
    "perception occlusion": (("perception_occlusion",), ("object_pos", "eef_pos", "object_visible"), None),
}
# Stage -> settings entries it reads that are a step window [t0, t1] within the run's T+1 observations.
_WINDOWS = {
    "offset_and_size": ("rest_steps",),
    "friction": ("push_steps",),
    "mass": ("mass_steps",),
    "perception calibration": ("rest_steps",),
    "perception delay": ("intercept_steps",),
}


def _stages_of(run: LogRun) -> list[str]:
    if run.split != "fit":
        return ["validation"]
    return [name for name, (protocols, _, _) in _STAGES.items() if run.protocol in protocols]


def _is_int(value: Any) -> TypeGuard[int | np.integer]:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_values(run: LogRun, problems: list[str]) -> None:
    where = f"run {run.name!r}"
    arrays = {"actions": run.actions, "timestamps": run.timestamps, **{f"obs/{k}": v for k, v in run.obs.items()}}
    for name, value in arrays.items():
        if value.dtype.kind not in "biuf":
            problems.append(f"{where}: {name} has dtype {value.dtype}; logged signals are numeric (float or int)")
            continue
        values = np.asarray(value, dtype=np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            problems.append(
                f"{where}: {name} holds {int(bad.sum())} non-finite value(s) (NaN or inf), first in row {row}; "
                "every logged value must be finite (log the run again)"
            )
            continue
        limit, unit = PHYSICAL_LIMITS.get(name, DEFAULT_PHYSICAL_LIMIT)
        beyond = np.abs(values) > limit
        if beyond.any():
            first = tuple(int(i) for i in np.argwhere(beyond)[0])
            problems.append(
                f"{where}: {name} holds {int(beyond.sum())} value(s) beyond +-{limit:g} {unit}, first in row "
                f"{first[0]} ({values[first]:.4g}); a logged value must be physically possible (log the run again)"
            )
    stamps = np.asarray(run.timestamps, dtype=np.float64)
    if np.isfinite(stamps).all() and run.steps and not (np.diff(stamps) > 0).all():
        problems.append(f"{where}: timestamps must increase strictly (s since reset, one per observation)")


def _check_against_env(run: LogRun, env: Any, problems: list[str]) -> None:
    where = f"run {run.name!r}"
    expected = env.action_space.shape
    if run.actions.ndim == 2 and tuple(run.actions.shape[1:]) != expected:
        problems.append(
            f"{where}: actions have {run.actions.shape[1]} columns; control_mode {run.control_mode!r} takes "
            f"{expected[0]}"
        )
    space = env.observation_space.spaces
    for key, value in run.obs.items():
        if key not in space:
            problems.append(f"{where}: obs/{key} is not an observation of the env; it has {sorted(space)}")
        elif tuple(value.shape[1:]) != space[key].shape:
            problems.append(
                f"{where}: obs/{key} has rows of shape {tuple(value.shape[1:])}; the env (with the run's env_kwargs) "
                f"gives {space[key].shape}"
            )
    dt = float(env.unwrapped.dt)
    if run.steps and np.isfinite(run.control_dt) and abs(run.control_dt - dt) > CONTROL_DT_TOLERANCE * dt:
        problems.append(
            f"{where}: timestamps step by {run.control_dt:.4g} s (median); the env's control period is {dt:g} s "
            f"(accepted within {CONTROL_DT_TOLERANCE:.0%})"
        )
    try:
        env.reset(seed=int(run.seed), options={"setup": run.setup} if run.setup else {})
    except (TypeError, ValueError) as exc:
        problems.append(f"{where}: the operator set-up is not one the env accepts: {exc}")


def _check_env_kwargs(run: LogRun, problems: list[str]) -> bool:
    try:
        check_keys(run.env_kwargs, LOG_ENV_KWARGS, what="env_kwargs key", where=f"run {run.name!r}", error=ValueError)
    except ValueError as exc:
        problems.append(f"{exc} (a log records values only, never a file)")
        return False
    if run.env_kwargs.get("control_mode", "task") != run.control_mode:
        problems.append(
            f"run {run.name!r}: control_mode {run.control_mode!r} differs from its env_kwargs' "
            f"{run.env_kwargs.get('control_mode', 'task')!r}"
        )
    return True


def _window(run: LogRun, key: str, where: str, problems: list[str]) -> None:
    if key not in run.settings:
        return
    value = run.settings[key]
    ok = (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(_is_int(v) for v in value)
        and 0 <= value[0] < value[1] <= run.steps + 1
    )
    if not ok:
        problems.append(
            f"{where}: settings {key!r} must be [t0, t1], integers with 0 <= t0 < t1 <= "
            f"{run.steps + 1} (the run's observations), got {value!r}"
        )


def _objects(run: LogRun) -> list[Any]:
    objects = run.setup.get("objects", []) if isinstance(run.setup, Mapping) else []
    return objects if isinstance(objects, list) else []


def _check_stage(run: LogRun, stage: str, logs: LogSet, problems: list[str]) -> None:
    from r2s2r_envs.world import constants as C

    where = f"run {run.name!r} ({run.protocol}, stage {stage})"
    _, signals, mode = _STAGES[stage]
    missing = [k for k in signals if k not in run.obs]
    if missing:
        problems.append(
            f"{where}: lacks the signal(s) {missing}; it has {sorted(run.obs)} (r2s2r log-lab logs them with "
            "sensors enabled)"
        )
    if mode is not None and run.control_mode != mode:
        problems.append(f"{where}: is replayed in {mode} mode, the run was logged in {run.control_mode!r} mode")
    for key in _WINDOWS.get(stage, ()):
        _window(run, key, where, problems)
    objects = _objects(run)
    if stage == "belt" and not any(isinstance(o, Mapping) and o.get("category") in ("cube", "bar") for o in objects):
        problems.append(f"{where}: needs a cube or a bar riding the belt in its set-up 'objects'")
    if stage in ("offset_and_size", "perception calibration", "perception delay", "perception occlusion") and (
        run.protocol != "push" and not objects
    ):
        problems.append(f"{where}: needs objects placed at measured spots in its set-up 'objects'")
    if stage == "arm":
        joint = run.settings.get("joint")
        if not _is_int(joint) or not 1 <= joint <= 7:
            problems.append(
                f"{where}: settings 'joint' must be the excited arm joint, an integer in 1..7, got {joint!r}"
            )
    if stage in ("mass", "friction"):
        category = run.settings.get("category")
        if stage == "mass" and category not in C.CATEGORIES:
            problems.append(f"{where}: settings 'category' must be one of {list(C.CATEGORIES)}, got {category!r}")
        reference = run.settings.get("reference")
        protocol = "lift_empty" if stage == "mass" else "push_empty"
        refs = {r.name: r for r in logs.by_protocol(protocol)}
        if reference not in refs:
            problems.append(
                f"{where}: settings 'reference' must name a fitting {protocol} run, got {reference!r}; the fitting "
                f"{protocol} runs are {sorted(refs)}"
            )
        elif refs[reference].steps != run.steps:
            problems.append(
                f"{where}: its reference {reference!r} has {refs[reference].steps} steps, the run {run.steps}; a "
                "reference replays the run's commands"
            )


def _env_key(run: LogRun) -> str:
    return json.dumps(run.env_kwargs, sort_keys=True, default=str)


def check_logs(logs: LogSet, *, validation: bool = True) -> None:
    """Refuse a log set that identification or validation could not use, before any fitting.

    Args:
        logs: Lab logs (``grounding.logs.read_logs``).
        validation: Also require the held-out runs validation needs (``identify`` alone does not).

    Raises:
        LogError: every problem found, one per line (the run, the signal or setting, the stage and what is
            accepted); up to ``MAX_LISTED`` are spelled out.
    """
    from r2s2r_envs.grounding.excitation import PROTOCOLS
    from r2s2r_envs.grounding.replay import make_sim_env
    from r2s2r_envs.world.params import nominal

    problems: list[str] = []
    if not logs.fit:
        problems.append("the logs have no fitting runs (split 'fit'); log the lab with `r2s2r log-lab`")
    if validation and not logs.heldout:
        problems.append("the logs have no held-out runs (split 'heldout'), which validation needs")
    envs: dict[str, Any] = {}
    try:
        for run in logs.runs:
            try:
                check_choice(run.protocol, sorted(PROTOCOLS), what="protocol")
            except ValueError as exc:
                problems.append(f"run {run.name!r}: {exc}")
                continue
            _check_values(run, problems)
            if _check_env_kwargs(run, problems):
                key = _env_key(run)
                if key not in envs:
                    try:
                        envs[key] = make_sim_env(run, nominal())
                    except (TypeError, ValueError) as exc:
                        envs[key] = None
                        problems.append(f"run {run.name!r}: env_kwargs {run.env_kwargs} are refused by the env: {exc}")
                if envs[key] is not None:
                    _check_against_env(run, envs[key], problems)
            for stage in _stages_of(run):
                if stage != "validation":
                    _check_stage(run, stage, logs, problems)
    finally:
        for env in envs.values():
            if env is not None:
                env.close()
    if problems:
        where = f" in {logs.directory}" if logs.directory is not None else ""
        listed = "\n".join(f"  - {p}" for p in problems[:MAX_LISTED])
        more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise LogError(f"{len(problems)} problem(s) in the logs{where}, found before fitting:\n{listed}{more}")


__all__ = ["CONTROL_DT_TOLERANCE", "LOG_ENV_KWARGS", "check_logs"]
