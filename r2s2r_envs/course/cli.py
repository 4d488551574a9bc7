"""``r2s2r course``: the course's exercises from the command line (docs/course.md).

Examples::

    r2s2r course labs                      # every exercise: lesson, lab, task, answer format
    r2s2r course labs --json
    r2s2r course check 2 answer.json       # grade an answer: exit 0 all right, 1 something wrong, 2 bad input
    r2s2r course check 5 answer.json --json
    r2s2r course seal my_lab.json --out course-mine.json   # a teacher seals a new exercise lab

``check`` never prints a solution: per answer key it says right or wrong, with a hint such as "off by more than
10 ms".
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from r2s2r_envs.argtypes import EXIT_ERROR, EXIT_OK, EXIT_USAGE, add_json_option, report_error

EXIT_WRONG = EXIT_ERROR  # the answer is wrong


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``course`` (with ``labs``, ``check`` and ``seal``) to the ``r2s2r`` command.

    Args:
        subparsers: the object returned by ``parser.add_subparsers()``.
    """
    course = subparsers.add_parser(
        "course",
        help="the course's exercises: list them, check an answer (docs/course.md)",
        description="Exercises of the sim-to-real course: each lesson ends with an exercise on a lab with a twist "
        "to diagnose (docs/course.md).",
    )
    sub = course.add_subparsers(dest="course_command", metavar="ACTION")
    labs = sub.add_parser(
        "labs",
        help="list the exercises: lesson, lab, task and answer format",
        description="List every exercise: its lesson, its lab (usable with --lab and gym.make(..., lab=NAME)), "
        "the task, the answer file's keys and how the checker grades them. Never a solution.",
    )
    add_json_option(labs, "the list")
    labs.set_defaults(func=_cmd_labs)

    check = sub.add_parser(
        "check",
        help="grade an answer file (exit 0: all right, 1: something wrong, 2: bad input)",
        description="Grade ANSWER (a JSON object, keys as `r2s2r course labs` lists them) for LESSON. Prints "
        "right or wrong per key with a hint that does not give the solution away. Exit status 0 when "
        "everything is right, 1 when something is wrong, 2 for bad input. Lessons 5 and 8 run planner "
        "episodes (about half a minute).",
    )
    check.add_argument("lesson", metavar="LESSON", help="lesson number, 0-8")
    check.add_argument("answer", metavar="ANSWER", help="the answer JSON file")
    add_json_option(check, "the grade (one object)")
    check.set_defaults(func=_cmd_check)

    seal = sub.add_parser(
        "seal",
        help="seal a lab file (a teacher's tool for new exercise labs)",
        description="Check a lab JSON file (docs/lab.md#format) and write it sealed (base64 of zlib-compressed "
        "JSON), so a student does not read its values at a glance. Sealed files load wherever a lab file does.",
    )
    seal.add_argument("lab", metavar="LAB", help="a lab JSON file, or a shipped lab name")
    seal.add_argument("--out", type=Path, required=True, help="the sealed file to write")
    seal.set_defaults(func=_cmd_seal)
    course.set_defaults(func=lambda args: _usage(course))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _wrap(text: str, first: str, rest: str) -> str:
    return textwrap.fill(text, width=110, initial_indent=first, subsequent_indent=rest)


def _format_exercise(ex: Any) -> str:
    pad = " " * 10
    lines = [f"Lesson {ex.lesson}: {ex.topic}", f"  lab:    {ex.lab}", _wrap(ex.task, "  task:   ", pad)]
    lines.append("  answer: a JSON object with")
    for key in ex.answer:
        optional = "" if key.required else ", optional"
        lines.append(_wrap(f"{key.key!r}: {key.meaning} ({key.tolerance}{optional})", "    ", pad))
    lines.append(f"  form:   {json.dumps(ex.example)}  (placeholder values, not the answer)")
    lines.append(_wrap(ex.check, "  check:  ", pad))
    return "\n".join(lines)


def _cmd_labs(args: argparse.Namespace) -> int:
    from r2s2r_envs.course.exercises import exercises

    if args.json:
        print(json.dumps([ex.to_dict() for ex in exercises()], indent=1))
    else:
        print("\n\n".join(_format_exercise(ex) for ex in exercises()))
        print("\nGrade an answer: r2s2r course check LESSON ANSWER.json")
    return EXIT_OK


def _read_answer(path: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"answer file {path!r} does not exist or is not a file (expected a JSON file)")
    from r2s2r_envs.safe_json import JSONFileError, read_json

    try:
        return read_json(p)
    except JSONFileError as e:
        raise ValueError(f"answer file {e}") from None


def _cmd_check(args: argparse.Namespace) -> int:
    from r2s2r_envs.course.checks import AnswerError, check_answer, runs_episodes
    from r2s2r_envs.course.exercises import LESSONS

    try:
        lesson = int(args.lesson)
    except ValueError:
        lesson = None
    try:
        if lesson is None or lesson not in LESSONS:
            raise AnswerError(f"unknown lesson {args.lesson!r}; lessons with an exercise: {list(LESSONS)}")
        answer = _read_answer(args.answer)
        if runs_episodes(lesson) and not args.json:
            print(f"lesson {lesson}: running planner episodes to grade the answer (about half a minute)...")
        result = check_answer(lesson, answer)
    except (AnswerError, ValueError) as e:
        return report_error("course check", e, EXIT_USAGE)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(f"lesson {result.lesson} ({result.lab}):")
        for item in result.items:
            print(f"  {item.message}")
        print("all right" if result.passed else "not yet: something is wrong")
    return EXIT_OK if result.passed else EXIT_WRONG


def _cmd_seal(args: argparse.Namespace) -> int:
    from r2s2r_envs.lab.config import load_lab, seal_lab

    try:
        lab = load_lab(args.lab)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as e:
        return report_error("course seal", e.args[0] if e.args else e, EXIT_USAGE)
    args.out.write_text(json.dumps(seal_lab(lab), indent=1) + "\n")
    print(f"sealed lab {lab.name!r} (config {lab.sha256()[:12]}) written to {args.out}")
    return EXIT_OK
