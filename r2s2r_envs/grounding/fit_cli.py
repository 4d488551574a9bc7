"""``r2s2r sysid``: identify a lab's world from its logs and write a grounding file (docs/grounding.md).

Examples::

    r2s2r sysid --logs lab_logs/ --out my_lab.json --report report/
    r2s2r sysid --lab default --out default.json --planner-episodes 100 --workers 2
    r2s2r sysid --lab my_lab.json --out my_grounding.json --quick
    r2s2r sysid --logs lab_logs/ --out my_lab.json --tune-episodes 0   # keep the planner's defaults

The stages and the library function, :func:`~r2s2r_envs.grounding.sysid.run_sysid`, live in
``r2s2r_envs.grounding.sysid``; this module only parses arguments and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from r2s2r_envs.argtypes import (
    EXIT_OK,
    EXIT_USAGE,
    add_seed_option,
    add_workers_option,
    non_negative_int,
    report_error,
)
from r2s2r_envs.grounding.result import GroundingFileError
from r2s2r_envs.grounding.sysid import SysidResult, format_parameters, format_visual_gap, run_sysid
from r2s2r_envs.paths import check_output_file


# ---------------------------------------------------------------------- command line
def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``sysid`` to the ``r2s2r`` command."""
    p = subparsers.add_parser(
        "sysid",
        help="identify a lab's world from its logs and write a grounding file",
        description="Fit WorldParams to lab logs (mujoco.sysid), validate on the held-out runs and write a grounding "
        "file: the input of PickSort-WorldGrounded-v0 (gym.make(..., grounding=FILE)). See docs/grounding.md.",
    )
    source = p.add_argument_group("logs (one of)")
    source.add_argument("--logs", type=Path, default=None, metavar="DIR", help="a log directory (r2s2r log-lab)")
    source.add_argument(
        "--lab",
        default=None,
        metavar="LAB",
        help="log this lab first (a shipped lab name or a lab JSON file); with --logs, the lab the logs come from "
        "(for the planner table)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="FILE", help="the grounding file to write (JSON)")
    p.add_argument("--log-dir", type=Path, default=None, metavar="DIR", help="where --lab logs go (<FILE>_logs/)")
    p.add_argument("--report", type=Path, default=None, metavar="DIR", help="write an HTML report to DIR/index.html")
    p.add_argument(
        "--planner-episodes",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="scripted planner's success over N episodes in the nominal sim, the grounded sim and the lab "
        "(default 0: no planner table; 100 for the shipped grounding)",
    )
    p.add_argument(
        "--tune-episodes",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="tune the scripted demonstrator in the grounded world on N episodes per grid point and store the "
        "choice in the file (default 40, 10 with --quick; 0: keep the planner's defaults)",
    )
    p.add_argument(
        "--visual-logs",
        type=Path,
        default=None,
        metavar="DIR",
        help="a visual log of the same lab (r2s2r log-lab --visual): fit its cameras and look into the file's "
        "appearance section (without it the grounded envs render the spec sheet)",
    )
    p.add_argument("--visual", action="store_true", help="with --lab: log and fit the visual protocols too")
    p.add_argument("--quick", action="store_true", help="reduced logging and fitting budget (a quick look)")
    add_workers_option(p, "threads/processes (default 1)")
    add_seed_option(p, 0, "base seed of logging (default 0)")
    p.add_argument("--quiet", action="store_true", help="print only the result tables")
    p.set_defaults(func=cmd_sysid)


def cmd_sysid(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r sysid``."""
    from r2s2r_envs.grounding.logs import LogError

    if args.logs is None and args.lab is None:
        return report_error("sysid", "give --logs DIR or --lab LAB", EXIT_USAGE)
    try:
        check_output_file(args.out, option="--out", suffix=".json")
    except ValueError as e:
        return report_error("sysid", e, EXIT_USAGE)
    if args.report is not None and args.report.exists() and not args.report.is_dir():
        return report_error(
            "sysid", f"--report {args.report} is a file; the report is written into a folder", EXIT_USAGE
        )
    if args.visual_logs is not None and not args.visual_logs.is_dir():
        return report_error(
            "sysid", f"--visual-logs {args.visual_logs} is not a directory (r2s2r log-lab --visual)", EXIT_USAGE
        )
    if args.logs is not None and not args.logs.is_dir():
        return report_error(
            "sysid", f"--logs {args.logs} is not a directory (write one with r2s2r log-lab)", EXIT_USAGE
        )
    try:
        result = run_sysid(
            args.out,
            logs=args.logs,
            lab=args.lab,
            log_dir=args.log_dir,
            seed=args.seed,
            quick=args.quick,
            workers=args.workers,
            planner_episodes=args.planner_episodes,
            tune_episodes=args.tune_episodes,
            report=args.report,
            progress=None if args.quiet else (lambda line: print(line, file=sys.stderr)),
            visual_logs=args.visual_logs,
            visual=args.visual,
        )
    except (LogError, GroundingFileError, ValueError, FileNotFoundError) as e:
        return report_error("sysid", e)
    print(format_parameters(result.grounding))
    print()
    print(result.validation.format())
    print()
    print(format_visual_gap(result.grounding))
    print()
    if result.tuning is not None:
        t = result.tuning
        print(f"demonstrator tuned in the grounded world ({t.episodes} episodes per point, base seed {t.base_seed}):")
        print(t.table())
        print(f"chosen: {t.chosen} (defaults {t.default})")
        print()
    times = ", ".join(f"{k} {v:.1f} s" for k, v in result.wall_time_s.items())
    print(f"wrote {result.out} (sha256 {result.sha256[:16]}...); wall time: {times}")
    if args.report is not None:
        print(f"report: {Path(args.report) / 'index.html'}")
    return EXIT_OK


__all__ = ["SysidResult", "add_subcommands", "cmd_sysid", "format_parameters", "run_sysid"]
