"""How long the test suite takes as ``make test`` runs it, and where the time goes.

Runs ``python -m pytest -q -n auto --dist worksteal`` (the Makefile's ``test`` target, its set-up already done)
with a JUnit XML report, and writes a JSON record: the wall time against the goal (issue 22: no slower than 6.5
minutes), the counts of passed, failed and skipped tests, the sum of the tests' own durations (setup, call and
teardown; on ``n`` workers the wall time is at least this sum over ``n``) and that sum per test file, the machine
and its load average before and after, and the slowest tests.  The wall time depends on the machine and its
load: run it on free cores.

Example::

    python benchmarks/test_suite_time.py --out benchmarks/results/test-suite/test_suite_time.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The Makefile's ``test`` target.
PYTEST_ARGS = ("-q", "-n", "auto", "--dist", "worksteal")
GOAL_S = 6.5 * 60


def run_suite(extra: list[str]) -> dict:
    """Runs the suite once; returns its wall time, counts and per-test durations."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "suite.xml"
        command = [sys.executable, "-m", "pytest", *PYTEST_ARGS, f"--junitxml={xml}", *extra]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        cases = ET.parse(xml).getroot().iter("testcase") if xml.is_file() else iter(())
        tests = []
        for case in cases:
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = "failed" if child.tag != "skipped" else "skipped"
            name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            tests.append({"test": name, "seconds": float(case.get("time", 0.0)), "outcome": outcome})
    return {
        "command": " ".join(["python", *command[1:3], *PYTEST_ARGS, *extra]),
        "returncode": done.returncode,
        "wall_s": round(wall, 1),
        "summary_line": (done.stdout.strip().splitlines() or [""])[-1],
        "tests": tests,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="JSON record")
    parser.add_argument("--slowest", type=int, default=25, help="slowest tests kept in the record (default 25)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    run = run_suite(args.pytest_args)
    tests = run.pop("tests")
    counts = {k: sum(t["outcome"] == k for t in tests) for k in ("passed", "failed", "skipped")}
    total = sum(t["seconds"] for t in tests)
    by_file: dict[str, float] = {}
    for t in tests:
        name = t["test"].split("::")[0]
        by_file[name] = round(by_file.get(name, 0.0) + t["seconds"], 2)
    workers = os.cpu_count() or 1
    record = {
        **run,
        "goal_s": GOAL_S,
        "goal_met": run["returncode"] == 0 and run["wall_s"] <= GOAL_S,
        "tests": counts,
        "sum_of_test_durations_s": round(total, 1),
        "workers": workers,
        "slowest": sorted(tests, key=lambda t: -t["seconds"])[: args.slowest],
        "seconds_by_file": dict(sorted(by_file.items(), key=lambda kv: -kv[1])),
        "machine": {
            "cpus": workers,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
    }
    print(
        f"test suite: {run['wall_s']:.0f} s wall ({run['wall_s'] / 60:.1f} min; goal {GOAL_S / 60:.1f} min: "
        f"{'met' if record['goal_met'] else 'not met'}), {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped; the tests' own durations sum to {total:.0f} s on {workers} workers "
        f"(their floor: {total / workers:.0f} s); exit code {run['returncode']}"
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"record: {args.out}", file=sys.stderr)
    return 0 if run["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
