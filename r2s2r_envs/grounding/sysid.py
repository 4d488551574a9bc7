"""System identification as a library: identify a lab's world from its logs and write a grounding file
(docs/grounding.md).  ``r2s2r sysid`` (``grounding.fit_cli``) is its command line.

Examples of the command::

    r2s2r sysid --logs lab_logs/ --out my_lab.json --report report/
    r2s2r sysid --lab default --out default.json --planner-episodes 100 --workers 2
    r2s2r sysid --lab my_lab.json --out my_grounding.json --quick
    r2s2r sysid --logs lab_logs/ --out my_lab.json --tune-episodes 0   # keep the planner's defaults

With ``--lab LAB`` the lab is logged first (``r2s2r log-lab``'s protocols, into ``--log-dir``, default
``<FILE without .json>_logs/``), then fitted.  The stages: logging (``excitation.log_lab``), fitting
(``identify.identify`` on the fitting runs), validation on the held-out runs (``validation.validate``) and, with
``--planner-episodes N``, the scripted planner's success in the nominal sim, the grounded sim and the lab
(``validation.planner_success``), then the scripted demonstrator's tuning in the grounded world
(``tuning.tune_planner``, ``--tune-episodes`` per grid point, default 40, 10 with ``--quick``, 0 skips it),
stored as the file's ``demonstrator`` section; with ``--visual-logs DIR`` (or ``--lab LAB --visual``) the cameras
and look fitted from a visual log (``grounding.visual``), stored as its ``appearance`` section with the visual gap in
``validation``.  :func:`run_sysid` runs them all; ``fit_cli``'s handler
only parses arguments and prints.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from r2s2r_envs.grounding.result import Grounding, write_grounding
from r2s2r_envs.grounding.validation import Validation, planner_success, validate
from r2s2r_envs.provenance import versions
from r2s2r_envs.world.params import FIELD_UNITS, WorldParams, nominal

if TYPE_CHECKING:
    from r2s2r_envs.envs.pick_sort import PickSortEnv

LAB_ID = "PickSort-Real-v0"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SysidResult:
    """What :func:`run_sysid` produced.

    Attributes:
        grounding: The grounding written to ``out``.
        validation: Its validation (with the held-out predictions, for the report).
        identification: The ``identify`` result.
        logs: The ``LogSet`` fitted.
        out: The grounding file.
        sha256: The file's SHA-256.
        wall_time_s: Seconds per stage: ``logging`` (0 with ``--logs``), ``fitting``, ``validation``, ``planner``
            (0 without the planner table), ``tuning`` (0 without it), ``visual`` (with a visual log), ``total``.
        tuning: The demonstrator's tuning in the grounded world (``grounding.tuning.PlannerTuning``), or None.
    """

    grounding: Grounding
    validation: Validation
    identification: Any
    logs: Any
    out: Path
    sha256: str
    wall_time_s: dict[str, float]
    tuning: Any = None


def run_sysid(
    out: str | Path,
    *,
    logs: str | Path | None = None,
    lab: str | Path | None = None,
    log_dir: str | Path | None = None,
    seed: int = 0,
    quick: bool = False,
    protocols: Sequence[str] | None = None,
    workers: int = 1,
    planner_episodes: int = 0,
    tune_episodes: int | None = None,
    tune_grid: Mapping[str, Sequence[float]] | None = None,
    report: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    visual_logs: str | Path | None = None,
    visual: bool = False,
) -> SysidResult:
    """Log (with ``lab`` and no ``logs``), identify, validate, write the grounding file (and the report).

    Args:
        out: The grounding file to write.
        logs: An existing log directory (``r2s2r log-lab --out DIR``).
        lab: A shipped lab name or a lab JSON file: logged first when ``logs`` is None; with ``logs``, the lab
            those logs come from (its identity must match theirs), used for the planner table.
        log_dir: Where to log with ``lab`` (default ``<out without suffix>_logs``).
        seed: Base seed of the logging session.
        quick: Reduced budget for logging and fitting.
        protocols: With ``lab``, log only these protocols (``excitation.PROTOCOLS``; ``None``: all): the fields
            only the others expose stay at nominal, flagged.
        workers: Threads / processes for fitting and the planner table.
        planner_episodes: Episodes per env of the planner table (0: no table).
        tune_episodes: Episodes per grid point of the scripted demonstrator's tuning in the grounded world (None:
            40, 10 with ``quick``; 0: no tuning, the file's ``demonstrator`` is null and the planner keeps its
            defaults).
        tune_grid: The tuning grid (None: ``tuning.DEFAULT_GRID``).
        report: Directory of the HTML report (None: no report).
        progress: Called with one line per step (e.g. ``print``).
        visual_logs: A visual log of the same lab (``r2s2r log-lab --visual``): the cameras and look are fitted
            from it and stored as the file's ``appearance`` section, the visual gap in ``validation`` (None: the
            file has no appearance section, its envs render the spec sheet).
        visual: With ``lab``, log the visual protocols too (into ``<log dir>/visual``) and fit them.

    Raises:
        ValueError: neither ``logs`` nor ``lab``, or a lab whose identity does not match the logs.
        LogError: unreadable logs (a ``ValueError``).
    """
    from r2s2r_envs.grounding.identify import identify
    from r2s2r_envs.grounding.log_checks import check_logs
    from r2s2r_envs.grounding.logs import read_logs

    say = progress or (lambda line: None)
    out = Path(out)
    from r2s2r_envs.grounding.tuning import DEFAULT_GRID, GROUNDED_ENV, check_grid, tune_planner

    if tune_episodes is None:
        tune_episodes = 10 if quick else 40
    if tune_episodes < 0:
        raise ValueError(f"tune_episodes must be >= 0 (0: no tuning), got {tune_episodes}")
    grid = check_grid(DEFAULT_GRID if tune_grid is None else tune_grid)  # a bad grid fails before any work
    if protocols is not None:
        if logs is not None:
            raise ValueError("protocols selects what to log: give it with --lab, not with existing --logs")
        from r2s2r_envs.grounding.excitation import check_protocols

        check_protocols(protocols)  # unknown names fail before any work
    times = {"logging": 0.0, "fitting": 0.0, "validation": 0.0, "planner": 0.0, "tuning": 0.0}
    start = time.perf_counter()
    if visual and (lab is None or logs is not None or visual_logs is not None):
        raise ValueError("--visual logs the lab's visual protocols: give it with --lab, or pass --visual-logs DIR")
    if logs is None:
        if lab is None:
            raise ValueError("give --logs DIR (existing lab logs) or --lab LAB (log the lab first)")
        from r2s2r_envs.grounding.excitation import log_lab

        log_dir = Path(log_dir) if log_dir is not None else out.with_name(f"{out.stem}_logs")
        say(f"logging lab {lab} into {log_dir}")
        t0 = time.perf_counter()
        log_set = log_lab(lab, log_dir, seed=seed, quick=quick, protocols=protocols, progress=say)
        if visual:
            from r2s2r_envs.grounding.visual import log_visual

            visual_logs = Path(log_dir) / "visual"
            say(f"logging lab {lab}'s visual protocols into {visual_logs}")
            log_visual(lab, visual_logs, seed=seed, quick=quick, progress=say)
        times["logging"] = time.perf_counter() - t0
    else:
        log_set = read_logs(logs)
        check_logs(log_set)  # seconds, before minutes of fitting
        if lab is not None and (planner_episodes or 0) > 0:
            check_lab_matches(lab, log_set)
    say(f"fitting {len(log_set.fit)} runs ({len(log_set.heldout)} held out)")
    t0 = time.perf_counter()
    identification = identify(log_set, quick=quick, workers=workers)
    times["fitting"] = time.perf_counter() - t0
    say("validating on the held-out runs")
    t0 = time.perf_counter()
    validation = validate(log_set.heldout, identification.world)
    times["validation"] = time.perf_counter() - t0
    if planner_episodes > 0:
        planner_lab = lab if lab is not None else lab_for_logs(log_set)
        say(f"planner table: {planner_episodes} episodes in the nominal sim, the grounded sim and lab {planner_lab}")
        t0 = time.perf_counter()
        table = planner_success(
            identification.world, lab=planner_lab, episodes=planner_episodes, workers=workers, progress=False
        )
        times["planner"] = time.perf_counter() - t0
        validation = validation.with_planner(table)
    appearance, visual_gap = None, None
    if visual_logs is not None:
        say(f"fitting the cameras and look from the visual log {visual_logs}")
        t0 = time.perf_counter()
        appearance, visual_gap = fit_appearance_section(visual_logs, log_set, progress=say)
        times["visual"] = time.perf_counter() - t0
    provenance = _provenance(
        log_set, identification, seed=seed, quick=quick, protocols=protocols, workers=workers, times=times
    )
    checked = validation.to_dict() if visual_gap is None else {**validation.to_dict(), "visual_gap": visual_gap}
    grounding = Grounding.from_identification(identification, validation=checked, provenance=provenance)
    if appearance is not None:
        grounding = dataclasses.replace(grounding, appearance_section=appearance)
    tuning = None
    if tune_episodes > 0:
        say(f"tuning the scripted demonstrator in the grounded world: {tune_episodes} episodes per grid point")
        t0 = time.perf_counter()
        untuned = out.with_name(f".{out.name}.untuned")
        write_grounding(grounding, untuned)
        try:
            tuning = tune_planner(
                GROUNDED_ENV, grid=grid, episodes=tune_episodes, env_kwargs={"grounding": str(untuned)}, workers=workers
            )
        finally:
            untuned.unlink(missing_ok=True)
        times["tuning"] = time.perf_counter() - t0
        say(f"demonstrator: {tuning.chosen} (defaults {tuning.default})")
    times["total"] = time.perf_counter() - start
    provenance = _provenance(
        log_set, identification, seed=seed, quick=quick, protocols=protocols, workers=workers, times=times
    )
    grounding = dataclasses.replace(grounding, provenance=provenance)
    if tuning is not None:
        grounding = grounding.with_tuning(tuning)
    sha256 = write_grounding(grounding, out)
    if report is not None:
        from r2s2r_envs.grounding.report import write_report

        write_report(report, grounding, validation, log_set.heldout)
    return SysidResult(
        grounding=grounding,
        validation=validation,
        identification=identification,
        logs=log_set,
        out=out,
        sha256=sha256,
        wall_time_s=times,
        tuning=tuning,
    )


def fit_appearance_section(
    visual_logs: str | Path, log_set: Any, progress: Callable[[str], None] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The grounding file's ``appearance`` section and ``validation.visual_gap`` from a visual log of the lab
    ``log_set`` comes from (``grounding.visual.fit_visual``).

    Raises:
        ValueError: the visual log comes from another lab (a ``LogError`` if it is not a usable visual log).
    """
    from r2s2r_envs.grounding.logs import read_logs
    from r2s2r_envs.grounding.visual import fit_visual

    visual = read_logs(visual_logs)
    if visual.lab_config_sha256 != log_set.lab_config_sha256:
        raise ValueError(
            f"the visual log {str(visual_logs)!r} comes from lab {visual.lab_name} (config "
            f"{visual.lab_config_sha256[:12]}), the logs from {log_set.lab_name} (config "
            f"{log_set.lab_config_sha256[:12]}): give a visual log of the same lab"
        )
    fit = fit_visual(visual, progress=progress)
    section = {"look": fit.appearance.to_dict(), "logs": dict(visual.file_sha256s), "fit": fit.record()}
    return section, fit.validation()


def format_visual_gap(grounding: Grounding) -> str:
    """The visual-gap figure and reprojection error per camera, or where the look comes from without them."""
    figure = grounding.validation.get("visual_gap")
    if not figure:
        return f"Appearance: {grounding.appearance_origin}"
    lines = ["Visual gap on held-out frames (embedding-centroid distance; reprojection error, px)"]
    for camera, row in figure["cameras"].items():
        px = figure["reprojection_px"].get(camera, {})
        lines.append(
            f"  {camera:14s} gap {row['nominal']:.4g} -> {row['grounded']:.4g} "
            f"({row['reduction_percent']:.1f}% smaller)"
            f"  reprojection {px.get('nominal', float('nan')):.3g} -> {px.get('grounded', float('nan')):.3g} px"
        )
    return "\n".join(lines)


def lab_identity(lab: str | Path) -> dict[str, str]:
    """A lab's name and config hash, as its env discloses them (``provenance()["lab"]``)."""
    import gymnasium as gym

    env = gym.make(LAB_ID, lab=str(lab))
    try:
        return dict(cast("PickSortEnv", env.unwrapped).provenance()["lab"])  # the lab env is a PickSortEnv
    finally:
        env.close()


def check_lab_matches(lab: str | Path, log_set: Any) -> None:
    """Raise ValueError unless ``lab`` is the lab ``log_set`` was logged from (same name and config hash)."""
    identity = lab_identity(lab)
    if identity.get("config_sha256") != log_set.lab_config_sha256:
        raise ValueError(
            f"lab {str(lab)!r} (config {identity.get('config_sha256', '?')[:12]}) is not the lab the logs come from "
            f"({log_set.lab_name}, config {log_set.lab_config_sha256[:12]}): pass the logs' lab with --lab"
        )


def lab_for_logs(log_set: Any) -> str:
    """The shipped lab the logs name, if its config hash matches theirs; else ValueError asking for ``--lab``."""
    try:
        check_lab_matches(log_set.lab_name, log_set)
    except FileNotFoundError as e:
        raise ValueError(
            f"the logs come from lab {log_set.lab_name!r}, which is not a shipped lab: pass its file with --lab "
            "for the planner table"
        ) from e
    return log_set.lab_name


def _provenance(
    log_set: Any,
    identification: Any,
    *,
    seed: int,
    quick: bool,
    protocols: Sequence[str] | None,
    workers: int,
    times: dict[str, float],
) -> dict[str, Any]:
    identification_record: dict[str, Any] = {
        "quick": bool(quick),
        "workers": int(workers),
        "wall_time_s": round(float(getattr(identification, "wall_time_s", times["fitting"])), 3),
        "methods": _methods(getattr(identification, "details", {})),
    }
    if protocols is not None:  # only a subset of the protocols was logged
        identification_record["protocols"] = sorted(protocols)
    return {
        "lab": {"name": log_set.lab_name, "config_sha256": log_set.lab_config_sha256},
        "logs": dict(log_set.file_sha256s),
        "versions": versions("r2s2r_envs", "mujoco", "numpy", "python"),
        "seed": int(log_set.seed) if log_set.seed is not None else int(seed),
        "wall_time_s": {k: round(float(v), 3) for k, v in times.items()},
        "identification": identification_record,
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def _methods(details: Any) -> dict[str, str]:
    """Stage -> the method ``identify`` reports for it (the details' full residuals stay out of the file)."""
    if not isinstance(details, dict):
        return {}
    return {str(stage): str(d["method"])[:300] for stage, d in details.items() if isinstance(d, dict) and "method" in d}


# ---------------------------------------------------------------------- printing
def _fmt(v: float | None) -> str:
    if v is None:
        return "-inf/inf"
    return "inf" if math.isinf(v) else f"{v:.4g}"


def _unit(name: str) -> str:
    unit = FIELD_UNITS.get(name, "")
    return "" if unit == "dimensionless" else unit


def format_parameters(grounding: Grounding) -> str:
    """The identified parameters with their 95% intervals, and the not-identifiable ones with the reasons."""
    nom = nominal()
    lines = ["Identified parameters (95% intervals)"]
    lines.append(f"  {'field':24s} {'nominal':>10s} {'identified':>11s}  {'95% interval':24s} unit")
    for name in WorldParams.field_names():
        value = getattr(grounding.world, name)
        refs = [r for r in grounding.identified if r == name or r.startswith(f"{name}[")]
        if not refs:
            continue
        vector = isinstance(value, tuple)
        values = list(value) if vector else [value]
        noms = list(getattr(nom, name)) if vector else [getattr(nom, name)]
        interval = grounding.intervals.get(name)
        pairs = interval if vector and interval is not None else [interval] * len(values)
        for k, (v, n, pair) in enumerate(zip(values, noms, pairs)):
            label = f"{name}[{k}]" if vector else name
            if vector and name not in refs and label not in refs:
                continue
            ci = "-" if pair is None else f"[{_fmt(pair[0])}, {_fmt(pair[1])}]"
            lines.append(f"  {label:24s} {n:>10.4g} {v:>11.4g}  {ci:24s} {_unit(name)}")
    if grounding.not_identifiable:
        lines.append("Not identifiable (kept at nominal)")
        for ref, reason in grounding.not_identifiable.items():
            lines.append(f"  {ref:24s} {reason}")
    return "\n".join(lines)


__all__ = [
    "LAB_ID",
    "SysidResult",
    "check_lab_matches",
    "fit_appearance_section",
    "format_parameters",
    "format_visual_gap",
    "lab_for_logs",
    "lab_identity",
    "run_sysid",
]
