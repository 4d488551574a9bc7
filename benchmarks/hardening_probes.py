"""Hardening probes (issues 25, 50): runs the probe families at full size and writes their record.

The probes (bad input fed to the suite as a hostile or careless user would, by kind) are defined in
tests/hardening/probes.py, whose docstring says what each family does and when a probe passes;
tests/hardening/test_hardening.py runs the same families as slow tests (``make test``), the sampled ones smaller.
This script runs every probe at the record's sizes (``FULL_SIZES``) and writes the record (``--out``, default
benchmarks/results/hardening/probes.json): every probe's command, exit code, wall and CPU time, checks and the tail
of its output; benchmarks/results/hardening/README.md reads it.

Example:

    MUJOCO_GL=egl .venv/bin/python benchmarks/hardening_probes.py --out benchmarks/results/hardening/probes.json
    MUJOCO_GL=egl .venv/bin/python benchmarks/hardening_probes.py --quick --families checkpoints,sysid
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "hardening" / "probes.json"
sys.path.insert(0, str(REPO_ROOT / "tests"))

from hardening.probes import FAMILIES, FULL_SIZES, failure_kinds, run_probe, summarize  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--families", default=",".join(FAMILIES), help=f"comma-separated families (default all): {', '.join(FAMILIES)}"
    )
    parser.add_argument("--quick", action="store_true", help="only a handful of probes per family")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON record (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {list(FAMILIES)}")
    os.environ.setdefault("MUJOCO_GL", "egl")
    sys.path.insert(0, str(REPO_ROOT))
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="r2s2r-probes-") as tmpdir:
        for family in families:
            tmp = Path(tmpdir) / family
            tmp.mkdir()
            t0 = time.perf_counter()
            probes = FAMILIES[family](tmp, FULL_SIZES)
            setup_s = time.perf_counter() - t0
            if args.quick:
                probes = [p for p in probes if p.quick]
            print(f"== {family}: {len(probes)} probes (inputs made in {setup_s:.1f} s)", flush=True)
            for probe in probes:
                record = run_probe(probe, tmp)
                records.append(record)
                status = "pass" if record["passed"] else "FAIL " + ",".join(failure_kinds(record))
                if probe.known and not record["passed"]:
                    status += " (known)"
                print(
                    f"{status:<28} {family:<12} {record['wall_s']:>6.1f}s rc={record['exit_code']!s:<4} "
                    f"{probe.name}: {record['message'][:110]}",
                    flush=True,
                )
    summary = summarize(records)
    out = {
        "script": "benchmarks/hardening_probes.py",
        "command": " ".join(["benchmarks/hardening_probes.py", *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "families": families,
        "quick": args.quick,
        "wall_s": round(time.perf_counter() - started, 1),
        "summary": summary,
        "probes": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(
        f"summary: {summary['passed']}/{summary['probes']} passed ({summary['known_failures']} failures known by "
        f"design), {summary['tracebacks']} tracebacks, {summary['unclear_messages']} unclear messages, failures by "
        f"kind {summary['failures_by_kind']}; record {args.out}"
    )
    return 0 if summary["failed"] == summary["known_failures"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
