"""``r2s2r`` subcommands of the grounding module: ``log-lab`` (run the excitation protocols on a lab, write logs),
``sysid`` (``fit_cli``) and ``tune-planner`` (tune the scripted demonstrator in a simulated world).

``r2s2r_envs.cli`` calls :func:`add_subcommands` on its subparsers; every handler takes the parsed arguments and
returns an exit code (0 ok, 1 error, 2 usage error).

Example:
    r2s2r log-lab --lab default --out logs/default --seed 0
    r2s2r tune-planner --env PickSort-WorldGrounded-v0 --workers 2 --out tuned_planner.json
    r2s2r tune-planner --grounding my_lab.json --workers 2 --update-grounding
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from r2s2r_envs.argtypes import (
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_seed_option,
    add_workers_option,
    positive_int,
    report_error,
)
from r2s2r_envs.env_cli import add_env_source_options, env_source_kwargs
from r2s2r_envs.grounding import fit_cli


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``log-lab``, ``sysid`` and ``tune-planner`` to the ``r2s2r`` command.

    Args:
        subparsers: the object returned by ``parser.add_subparsers()``.
    """
    log = subparsers.add_parser(
        "log-lab",
        help="run the excitation protocols on a lab and write HDF5 logs (docs/lab_logs.md)",
        description="Run every excitation protocol on PickSort-Real-v0 (only commands, sensors and operator "
        "set-up, as on a real cell) and write one HDF5 file per run plus manifest.json, with a fixed split into "
        "fitting and held-out runs.",
    )
    log.add_argument("--lab", default="default", help="a shipped lab name or a lab JSON file (default: default)")
    log.add_argument("--out", type=Path, required=True, help="output directory")
    add_seed_option(log, 0, "base seed (default 0)")
    log.add_argument("--quick", action="store_true", help="fewer, shorter runs (a reduced budget)")
    log.add_argument("--quiet", action="store_true", help="no per-run lines")
    log.add_argument(
        "--visual",
        action="store_true",
        help="run the visual protocols instead (camera calibration, appearance frames; images at "
        "160 x 160): a visual log for r2s2r sysid --visual-logs",
    )
    log.set_defaults(func=_log_lab)
    fit_cli.add_subcommands(subparsers)  # sysid
    tune = subparsers.add_parser(
        "tune-planner",
        help="tune the scripted demonstrator's settings in a simulated (grounded) world (docs/grounding.md)",
        description="Run every combination of a grid of scripted-planner settings on the same episodes of a "
        "simulated env and choose by episode success, then sort accuracy, then the settings nearest the defaults. "
        "Never the lab, never the evaluation protocol's seeds.",
    )
    tune.add_argument(
        "--env", default="PickSort-WorldGrounded-v0", metavar="ID", help="simulated env id (default: %(default)s)"
    )
    add_env_source_options(tune, lab=False)
    tune.add_argument(
        "--grid",
        default=None,
        metavar="GRID",
        help="NAME=V1,V2;NAME=... over PlannerConfig fields (default: "
        "lead_time=0.05,0.1;position_gain=0.2,0.3,0.45,0.6)",
    )
    tune.add_argument("--episodes", type=positive_int, default=40, help="episodes per grid point (default 40)")
    add_seed_option(tune, None, "base seed of the tuning episodes (default 314159)")
    add_workers_option(tune)
    tune.add_argument("--out", type=Path, default=None, metavar="FILE", help="write the result as JSON")
    tune.add_argument(
        "--update-grounding",
        action="store_true",
        help="store the choice in the --grounding FILE as its demonstrator section: PickSort-WorldGrounded-v0 with "
        "that file then demonstrates with it (r2s2r sysid does this after identification)",
    )
    tune.set_defaults(func=_tune_planner)


def _log_lab(args: argparse.Namespace) -> int:
    from r2s2r_envs.grounding.excitation import log_lab
    from r2s2r_envs.grounding.visual import log_visual

    if args.out.exists() and not args.out.is_dir():
        return report_error("log-lab", f"--out {args.out} exists and is not a directory", EXIT_USAGE)
    start = time.perf_counter()
    run = log_visual if args.visual else log_lab
    try:
        logs = run(args.lab, args.out, seed=args.seed, quick=args.quick, progress=None if args.quiet else print)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as exc:
        return report_error("log-lab", exc)
    print(
        f"{len(logs.runs)} runs ({len(logs.fit)} fit, {len(logs.heldout)} held out) of lab {logs.lab_name!r} "
        f"written to {args.out} in {time.perf_counter() - start:.1f} s"
    )
    return EXIT_OK


def _tune_planner(args: argparse.Namespace) -> int:
    from r2s2r_envs.grounding.result import GroundingFileError
    from r2s2r_envs.grounding.tuning import (
        DEFAULT_GRID,
        GROUNDED_ENV,
        TUNING_BASE_SEED,
        TuningError,
        parse_grid,
        tune_grounding,
        tune_planner,
    )

    if args.out is not None and args.out.is_dir():
        return report_error("tune-planner", f"--out {args.out} is a directory; give a JSON file", EXIT_USAGE)
    if args.update_grounding and (args.grounding is None or args.env != GROUNDED_ENV):
        message = (
            f"--update-grounding needs --grounding FILE and --env {GROUNDED_ENV} (the env that demonstrates with the "
            "file's settings)"
        )
        return report_error("tune-planner", message, EXIT_USAGE)
    try:
        env_kwargs = env_source_kwargs(args.env, grounding=args.grounding)
    except UsageError as exc:
        return report_error("tune-planner", exc, EXIT_USAGE)
    start = time.perf_counter()
    settings = {
        "grid": DEFAULT_GRID,
        "episodes": args.episodes,
        "base_seed": TUNING_BASE_SEED if args.seed is None else args.seed,
        "workers": args.workers,
        "log": lambda line: print(line, file=sys.stderr),
    }
    try:
        if args.grid is not None:
            settings["grid"] = parse_grid(args.grid)
        if args.update_grounding:
            _, tuning = tune_grounding(args.grounding, **settings)
        else:
            tuning = tune_planner(args.env, env_kwargs=env_kwargs, **settings)
    except (TuningError, GroundingFileError) as exc:
        return report_error("tune-planner", exc, EXIT_USAGE)
    print(f"tuned in {tuning.env_id}, {tuning.episodes} episodes per point (base seed {tuning.base_seed}):")
    print(tuning.table())
    print(f"chosen: {tuning.chosen} (default {tuning.default}); {time.perf_counter() - start:.0f} s")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(tuning.to_dict(), indent=2) + "\n")
        print(f"wrote {args.out}")
    if args.update_grounding:
        print(f"stored {tuning.chosen} in {args.grounding} as the demonstrator of {GROUNDED_ENV}")
    return EXIT_OK
