"""``r2s2r`` subcommands of the grounding module: ``log-lab`` (run the excitation protocols on a lab, write logs).

``r2s2r_envs.cli`` calls :func:`add_subcommands` on its subparsers; every handler takes the parsed arguments and
returns an exit code (0 ok, 1 error, 2 usage error).

Example:
    r2s2r log-lab --lab default --out logs/default --seed 0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from r2s2r_envs.argtypes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from r2s2r_envs.grounding import fit_cli


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``log-lab`` to the ``r2s2r`` command.

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
    log.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    log.add_argument("--quick", action="store_true", help="fewer, shorter runs (a reduced budget)")
    log.add_argument("--quiet", action="store_true", help="no per-run lines")
    log.set_defaults(func=_log_lab)
    fit_cli.add_subcommands(subparsers)  # sysid


def _log_lab(args: argparse.Namespace) -> int:
    from r2s2r_envs.grounding.excitation import log_lab

    if args.out.exists() and not args.out.is_dir():
        print(f"r2s2r log-lab: --out {args.out} exists and is not a directory", file=sys.stderr)
        return EXIT_USAGE
    start = time.perf_counter()
    try:
        logs = log_lab(args.lab, args.out, seed=args.seed, quick=args.quick, progress=None if args.quiet else print)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as exc:
        print(f"r2s2r log-lab: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(
        f"{len(logs.runs)} runs ({len(logs.fit)} fit, {len(logs.heldout)} held out) of lab {logs.lab_name!r} "
        f"written to {args.out} in {time.perf_counter() - start:.1f} s"
    )
    return EXIT_OK
