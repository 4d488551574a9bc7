"""Thin the per-step training logs kept in records to what a reader plots.

``r2s2r train`` writes ``train_log.json`` with every step's losses (``history``: one list per loss, 20,000 values
each at the ``cpu`` recipe, about 1-2 MB a file).  A record keeps the curve, not every step: this tool replaces
each ``history`` list by the means of consecutive blocks of ``every`` steps (at most ``--points`` blocks, 200 by
default, the last block possibly shorter), rounded to 6 significant digits, and says so in ``history_thinned``::

    "history_thinned": {"every": 100, "steps": 20000, "points": 200, "value": "mean of each block of steps", ...}

Block ``i`` covers steps ``i * every + 1`` to ``min((i + 1) * every, steps)``; the plot ``r2s2r train`` draws
(``loss.png``, kept beside the log) smooths with a moving average of ``steps / 100`` steps, coarser than a block.
Every other field (validation losses, the checkpoint step, timings, sample counts) is kept as it was.  Thinning
is idempotent: a thinned log is left alone.  New training runs keep writing the full log; thin it when the run is
copied into ``experiments/`` (tests/test_packaging.py checks that every log there is thinned).

Example::

    python benchmarks/thin_train_logs.py experiments/            # thin every train_log.json below
    python benchmarks/thin_train_logs.py --check experiments/    # exit 1 if one is not thinned
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

LOG_NAME = "train_log.json"
#: Default number of points kept per loss.
POINTS = 200


def is_thin(log: dict[str, Any]) -> bool:
    """Whether a log has nothing to thin: thinned already, or without a per-step ``history``."""
    return "history_thinned" in log or not isinstance(log.get("history"), dict)


def thin(log: dict[str, Any], points: int = POINTS) -> dict[str, Any]:
    """The log with each ``history`` list replaced by its block means (a thinned log is returned unchanged)."""
    if is_thin(log):
        return log
    history: dict[str, list[float]] = log["history"]
    steps = max((len(v) for v in history.values()), default=0)
    every = max(1, math.ceil(steps / points))
    thinned = {
        key: [
            float(f"{sum(block) / len(block):.6g}")
            for i in range(0, len(values), every)
            if (block := values[i : i + every])
        ]
        for key, values in history.items()
    }
    out = dict(log)
    out["history"] = thinned
    out["history_thinned"] = {
        "every": every,
        "steps": steps,
        "points": math.ceil(steps / every),
        "value": "mean of each block of steps (block i: steps i*every+1 .. min((i+1)*every, steps)), 6 digits",
        "tool": "benchmarks/thin_train_logs.py",
    }
    return out


def logs_under(paths: list[Path]) -> list[Path]:
    """The ``train_log.json`` files named or found below the given paths."""
    found: list[Path] = []
    for path in paths:
        found.extend(sorted(path.rglob(LOG_NAME)) if path.is_dir() else [path])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="train_log.json files, or folders to search")
    parser.add_argument("--points", type=int, default=POINTS, help=f"points kept per loss (default {POINTS})")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a log is not thinned")
    args = parser.parse_args(argv)
    unthinned = []
    for path in logs_under(args.paths):
        log = json.loads(path.read_text())
        if is_thin(log):
            continue
        unthinned.append(path)
        if not args.check:
            before = path.stat().st_size
            path.write_text(json.dumps(thin(log, args.points)) + "\n")
            print(f"{path}: {before:,} -> {path.stat().st_size:,} bytes")
    if args.check and unthinned:
        print("not thinned (python benchmarks/thin_train_logs.py PATH):", *map(str, unthinned), sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
