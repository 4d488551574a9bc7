"""The package's type check: mypy's errors may only shrink.

Runs mypy with the settings in pyproject.toml (``[tool.mypy]``) and compares its errors with the baseline
``.ci/mypy-baseline.txt``, one line per error as ``path: [code] message`` (line numbers left out, so that edits
elsewhere in a file do not change it). Fails when an error is not in the baseline (a new one, or one more of a
kind); says when errors of the baseline are gone, so that ``--update`` can shrink it. ``--update`` rewrites the
baseline from the current errors and refuses to add any.

    python .ci/typecheck.py            # check (make typecheck; make lint runs it)
    python .ci/typecheck.py --update   # after fixing errors: shrink the baseline
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
_ERROR = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<message>.*?)\s+\[(?P<code>[a-z-]+)\]$")


def current_errors() -> Counter[str]:
    """mypy's errors on the package, as baseline lines with their counts."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty", "--show-error-codes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    errors: Counter[str] = Counter()
    unparsed = []
    for line in done.stdout.splitlines():
        if ": note: " in line or not line.strip():
            continue
        m = _ERROR.match(line)
        if m is None:
            unparsed.append(line)
            continue
        message = re.sub(r" on line \d+", "", m["message"])
        errors[f"{m['path']}: [{m['code']}] {message}"] += 1
    if done.returncode not in (0, 1) or unparsed:
        sys.exit(f"mypy did not run as expected (exit {done.returncode}):\n" + "\n".join(unparsed or [done.stderr]))
    return errors


def read_baseline() -> Counter[str]:
    if not BASELINE.is_file():
        return Counter()
    return Counter(line for line in BASELINE.read_text().splitlines() if line and not line.startswith("#"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="shrink the baseline to the current errors")
    args = parser.parse_args(argv)
    now, baseline = current_errors(), read_baseline()
    # Without a baseline file, --update writes the first one.
    new = now - baseline if BASELINE.is_file() or not args.update else Counter()
    gone = baseline - now
    if new:
        print(f"{sum(new.values())} type error(s) not in {BASELINE.name}:", file=sys.stderr)
        for line in sorted(new.elements()):
            print(f"  {line}", file=sys.stderr)
        print("Fix them (run `python -m mypy` for their line numbers); the baseline only shrinks.", file=sys.stderr)
        return 1
    if args.update:
        header = "# mypy errors of the package that are tolerated for now; only ever shrinks (.ci/typecheck.py).\n"
        BASELINE.write_text(header + "".join(f"{line}\n" for line in sorted(now.elements())))
        print(f"baseline: {sum(now.values())} error(s), {sum(gone.values())} removed")
        return 0
    print(f"type check: {sum(now.values())} known error(s), none new", end="")
    print(f"; {sum(gone.values())} fixed: run `python .ci/typecheck.py --update`" if gone else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
