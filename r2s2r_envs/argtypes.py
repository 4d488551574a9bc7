"""What the ``r2s2r`` subcommands share: argument types (argparse ``type=`` callables) and exit codes."""

from __future__ import annotations

import argparse
import json
from typing import Any

#: Exit codes of every ``r2s2r`` subcommand: done; the command ran but failed (or, for ``course check``, the answer
#: is wrong); bad usage or input, reported before any work; interrupted by Ctrl-C (128 + SIGINT).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse reports anything else as a usage error)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (argparse reports anything else as a usage error)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line (argparse reports anything else as a usage error)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"num_objects\": 1}}', got {text!r}")
    return value
