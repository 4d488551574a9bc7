"""The hardening probes (tests/hardening/probes.py) as tests: one test per family runs every probe of it and asserts
what the probe checks, for each probe: the command refuses the bad input (or takes its documented outcome, e.g. the
leaderboard skipping a folder named ``x.json`` with the reason), prints no ``Traceback``, names what was wrong (the
file, field, run or signal: the probe's ``expect`` text, and the ``expect_in`` texts in the files it writes), holds
none of the probe's forbidden texts (raw ``<script>``, a live ``javascript:`` link, torch's ``weights_only=False``
advice), and, for sysid logs, ends within 5 s of CPU time. The measured families are programs that exit 0 when their
goal holds: ``flips`` (every flip refused naming the file), ``fuzz`` (0 exceptions, 0 NaN, 0 observations outside
their space), ``writers`` (a second writer refused; after ``kill -9`` the same command resumes, nothing lost) and
the seeded result-file flips of ``results`` (none skipped or accepted silently).

Sampled, so that the file runs in a few minutes on 2 cores: ``flips``, ``fuzz`` and ``results`` try the first
inputs of the record's seeded sequences (``probes.TEST_SIZES``: 40 flips per JSON kind, 10 per checkpoint file, 10
per log file, 15 in a dataset's arrays; 1,000 fuzzed steps per id and mode; 100 result-file flips) instead of the
record's (``probes.FULL_SIZES``, benchmarks/hardening_probes.py). Every other probe runs as in the record.

A probe with a failure known by design (``Probe.known``) is left out of its family's test and expected to fail in
its own test: the lab config's flips (issue 25: lab configs carry no hash).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hardening.probes import FAMILIES, TEST_SIZES, failure_kinds, lab_config_flips, run_probe

pytestmark = pytest.mark.slow


def _failure(record: dict[str, Any]) -> str:
    """A failed probe as the assertion shows it: what it fed, which checks failed, what the suite said."""
    missing = "; ".join(record["expected_missing"] + [f"found {f}" for f in record["forbidden_found"]])
    return (
        f"- {record['name']}: {', '.join(failure_kinds(record))} (exit {record['exit_code']}, expected "
        f"{record['expected_exit']}; {record['wall_s']} s, {record['cpu_s']} s CPU; expected text "
        f"{record['expect']!r}{'; ' + missing if missing else ''})\n{record['output_tail'][-800:]}"
    )


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_probe_of_the_family_is_refused_clearly(family: str, tmp_path: Path) -> None:
    probes = FAMILIES[family](tmp_path, TEST_SIZES)
    assert probes, f"the family {family} made no probes"
    records = [run_probe(probe, tmp_path) for probe in probes if not probe.known]
    failed = [_failure(r) for r in records if not r["passed"]]
    assert not failed, f"{len(failed)} of {len(records)} {family} probes failed:\n" + "\n".join(failed)


class FlipsRead(AssertionError):
    """Flips in a file that its reader accepted: the known failure of lab configs."""


@pytest.mark.xfail(
    strict=True,
    raises=FlipsRead,
    reason="issue 25: lab configs are written by hand and carry no hash, so a flip that leaves valid JSON with a "
    "value within bounds is read",
)
def test_every_flip_in_a_lab_config_is_refused(tmp_path: Path) -> None:
    """Only the accepted flips are the known failure: a flip refused without naming the file, or a traceback, fails
    this test outright."""
    probe = lab_config_flips(TEST_SIZES)
    assert probe.known
    record = run_probe(probe, tmp_path)
    assert all(ok for check, ok in record["checks"].items() if check != "exit_ok"), _failure(record)
    assert " 0 refused without naming it" in record["output_tail"], _failure(record)
    if not record["passed"]:
        raise FlipsRead(_failure(record))
