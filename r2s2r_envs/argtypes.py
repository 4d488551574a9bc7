"""What the ``r2s2r`` subcommands share: argument types (argparse ``type=`` callables), exit codes and the usage
error, with the one way every command reports an error."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

#: Exit codes of every ``r2s2r`` subcommand: done; the command ran but failed (or, for ``course check``, the answer
#: is wrong); bad usage or input, reported before any work; interrupted by Ctrl-C (128 + SIGINT).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(ValueError):
    """Bad usage or input of a command, found before any work (an option the env does not take, a lab or grounding
    that does not load): every ``r2s2r`` command reports it as ``r2s2r COMMAND: error: MESSAGE`` with exit code
    :data:`EXIT_USAGE`, the message naming what was wrong and what is accepted."""


def report_error(command: str, error: BaseException | str, code: int = EXIT_ERROR) -> int:
    """Prints ``error`` as every ``r2s2r`` command reports one, ``r2s2r COMMAND: error: MESSAGE`` on stderr, and
    returns ``code`` (:data:`EXIT_USAGE` for bad input found before any work, :data:`EXIT_ERROR` for a failed run).

    A ``KeyError`` prints its message, not its quoted repr.
    """
    message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
    print(f"r2s2r {command}: error: {message}", file=sys.stderr)
    return code


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


def comma_list(text: str) -> list[str]:
    """Comma-separated items, blanks dropped: ``"a, b,"`` -> ``["a", "b"]``."""
    return [item for item in (part.strip() for part in text.split(",")) if item]


# -- options that mean the same in every command -------------------------------------------------------------------


def add_workers_option(parser: argparse.ArgumentParser, help: str = "worker processes (default 1)") -> None:
    """``--workers W``: processes that share the work, an integer >= 1 (default 1)."""
    parser.add_argument("--workers", type=positive_int, default=1, metavar="W", help=help)


def add_seed_option(parser: argparse.ArgumentParser, default: int | None, help: str) -> None:
    """``--seed S``: the base seed of the command's randomness, an integer >= 0."""
    parser.add_argument("--seed", type=non_negative_int, default=default, metavar="S", help=help)


def add_json_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json``: print ``what`` as JSON on stdout instead of the text report."""
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON instead of text")


def add_no_progress_option(parser: argparse.ArgumentParser) -> None:
    """``--no-progress``: no progress bar on stderr (``args.no_progress``)."""
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
