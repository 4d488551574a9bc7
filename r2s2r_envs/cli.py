"""The ``r2s2r`` command: a thin shell over the library.

Examples::

    r2s2r envs
    r2s2r demo --env PickSort-Ungrounded-v0 --episodes 10
    r2s2r demo --env PickSort-Real-v0 --episodes 20 --lab default --json
    r2s2r demo --env PickSort-Ungrounded-v0 --episodes 1 --video demo.mp4 --num-objects 2
    r2s2r demo --env PickSort-WorldGrounded-v0 --grounding my_lab.json --episodes 10

``demo`` evaluates the demonstrator that comes with an env (``r2s2r_envs.behavior.make_demonstrator``) with the
evaluation protocol (:func:`r2s2r_envs.evaluation.protocol.evaluate`, docs/protocol.md) and reports the success
rate (Wilson 95% interval), sort accuracy, time to sort and failure causes.  ``--seed S`` is the base seed:
episode ``i`` uses ``episode_seeds(S, i)`` (:mod:`r2s2r_envs.envs.seeding`); the default is the fixed protocol's
``EVALUATION_BASE_SEED``.  The other subcommands (datasets, grounding, behavior,
training, evaluation) come from the modules listed in ``SUBCOMMAND_MODULES``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

import r2s2r_envs  # registers the envs and demonstrators
from r2s2r_envs.argtypes import (
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_json_option,
    add_no_progress_option,
    add_seed_option,
    add_workers_option,
    positive_int,
    report_error,
)
from r2s2r_envs.env_cli import add_env_source_options, add_task_options, env_source_kwargs, task_kwargs
from r2s2r_envs.env_cli import check_grounding as check_grounding  # re-exported: what every --grounding accepts
from r2s2r_envs.env_cli import check_lab as check_lab  # re-exported: what every --lab accepts
from r2s2r_envs.evaluation import protocol
from r2s2r_envs.evaluation.protocol import (
    EVALUATION_BASE_SEED,
    RENDER_HINT,  # noqa: F401  (re-exported for callers of the former CLI helpers)
    EnvArgumentError,
    EvaluationResult,
    RenderError,
    UnknownEnvError,
    check_env_id,
    evaluate,
)
from r2s2r_envs.extras import MissingExtraError, extra_of, install_hint
from r2s2r_envs.paths import check_output_file

ENV_PREFIX = protocol.ENV_PREFIX
#: The env whose physics come from a lab (``--lab``).
LAB_ENV_ID = "PickSort-Real-v0"


def registered_env_ids() -> list[str]:
    """Every PickSort id in Gymnasium's registry (the shipped ones plus any registered later)."""
    return protocol.picksort_env_ids()


def default_episode_steps(env_id: str) -> int:
    """The time limit of ``env_id`` in control steps: its spec's ``episode_steps``, else the PickSort default."""
    from r2s2r_envs.envs import PickSortEnv

    default = inspect.signature(PickSortEnv).parameters["episode_steps"].default
    return int(gym.spec(env_id).kwargs.get("episode_steps", default))


def _lab_name(provenance: dict[str, Any]) -> str | None:
    lab = provenance.get("lab")
    return lab.get("name") if isinstance(lab, dict) else lab


def _format_summary(result: EvaluationResult) -> str:
    s = result.summary
    low, high = s["success_rate_ci95"]
    any_low, any_high = s["success_rate_any_step_ci95"]
    time_to_sort = "n/a" if s["mean_time_to_sort"] is None else f"{s['mean_time_to_sort']:.2f} s"
    causes = ", ".join(f"{k}: {v}" for k, v in s["failure_causes"].items() if v) or "none"
    n = s["episodes"]
    where = [f"policy: {result.policy['name'] or result.policy['class']}"]
    if "num_objects" in result.provenance:
        k = result.provenance["num_objects"]
        where.append(f"{k} object{'' if k == 1 else 's'}")
    if _lab_name(result.provenance) is not None:
        where.append(f"lab: {_lab_name(result.provenance)}")
    lines = [
        f"env:              {result.env_id}  ({', '.join(where)})",
        f"episodes:         {n}, base seed {result.base_seed} (episode i: episode_seeds({result.base_seed}, i))",
        f"success rate:     {s['success_rate']:.3f}  (95% Wilson CI {low:.3f}-{high:.3f}, "
        f"{round(s['success_rate'] * n)}/{n} episodes)",
        f"  at any step:    {s['success_rate_any_step']:.3f}  (95% Wilson CI {any_low:.3f}-{any_high:.3f})",
        f"sort accuracy:    {s['sort_accuracy']:.3f}",
        f"time to sort:     {time_to_sort}  (mean over successful episodes)",
        f"failure causes:   {causes}  (episodes by their first failure)",
    ]
    if result.video:
        lines.append(f"video:            {result.video} (first episode)")
    return "\n".join(lines)


# ---------------------------------------------------------------------- subcommands
ALL_ENVS = "all"
# --env all shows the grounding variants in the order of the study's table, then the lab: the newest family first.
SHOWCASE_ORDER = tuple(
    f"PickSort-{variant}-{version}"
    for version in ("v1", "v0")
    for variant in ("Ungrounded", "WorldGrounded", "BehaviorGrounded", "FullyGrounded", "Real")
)


def _format_side_by_side(results: list[EvaluationResult]) -> str:
    """One row per env: the suite's variants and the lab side by side."""
    header = (
        f"{'env':30s} {'demonstrator':12s} {'success (95% CI)':>24s} {'sort acc.':>9s} {'time to sort':>12s}  failures"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        s = r.summary
        low, high = s["success_rate_ci95"]
        n = s["episodes"]
        success = f"{round(s['success_rate'] * n)}/{n} ({low:.2f}-{high:.2f})"
        tts = "n/a" if s["mean_time_to_sort"] is None else f"{s['mean_time_to_sort']:.1f} s"
        causes = ", ".join(f"{k} {v}" for k, v in s["failure_causes"].items() if v) or "none"
        who = r.policy["name"] or r.policy["class"]
        lines.append(f"{r.env_id:30s} {who:12s} {success:>24s} {s['sort_accuracy']:>9.2f} {tts:>12s}  {causes}")
    return "\n".join(lines)


def _cmd_demo_all(args: argparse.Namespace) -> int:
    unsupported = [f"--{n.replace('_', '-')}" for n in ("lab", "grounding", "video") if getattr(args, n) is not None]
    if unsupported:
        message = (
            f"{', '.join(unsupported)} apply to one env; with --env all every id runs with its registered defaults "
            "(give one --env ID to change them)"
        )
        return report_error("demo", message, EXIT_USAGE)
    ids = registered_env_ids()
    ordered = [i for i in SHOWCASE_ORDER if i in ids] + [i for i in ids if i not in SHOWCASE_ORDER]
    results = [_evaluate_demonstrator(args, env_id, task_kwargs(args)) for env_id in ordered]
    if args.json:
        print("[" + ",".join(r.to_json() for r in results) + "]")
    else:
        print(_format_side_by_side(results))
    return EXIT_OK


def _evaluate_demonstrator(args: argparse.Namespace, env_id: str, env_kwargs: dict[str, Any]) -> EvaluationResult:
    """``demo``'s evaluation of the demonstrator that comes with ``env_id``."""
    from r2s2r_envs.behavior import make_demonstrator

    return evaluate(
        env_id,
        make_demonstrator,
        episodes=args.episodes,
        base_seed=args.seed,
        env_kwargs=env_kwargs,
        progress=not args.no_progress,
        video=args.video,  # None with --env all
        workers=args.workers,
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.env == ALL_ENVS:
        return _cmd_demo_all(args)
    env_kwargs = task_kwargs(args)
    try:
        if args.video is not None:
            check_output_file(args.video, option="--video", suffix=".mp4")
        check_env_id(args.env)  # a non-PickSort Gymnasium id has no demonstrator either
        env_kwargs = env_source_kwargs(args.env, env_kwargs, lab=args.lab, grounding=args.grounding)
        result = _evaluate_demonstrator(args, args.env, env_kwargs)
    except (UsageError, UnknownEnvError, EnvArgumentError, RenderError, ValueError) as e:
        return report_error("demo", e, EXIT_USAGE)
    print(result.to_json() if args.json else _format_summary(result))
    return EXIT_OK


def _cmd_envs(args: argparse.Namespace) -> int:
    rows = []
    for env_id in registered_env_ids():
        spec = gym.spec(env_id)
        rows.append(
            {
                "id": env_id,
                "entry_point": spec.entry_point if isinstance(spec.entry_point, str) else repr(spec.entry_point),
                "demonstrator": spec.kwargs.get("demonstrator"),
                "episode_steps": default_episode_steps(env_id),
            }
        )
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['id']:32s} demonstrator={r['demonstrator']}  episode_steps={r['episode_steps']}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The ``r2s2r`` argument parser, with the subcommands of every module in ``SUBCOMMAND_MODULES`` that exists."""
    parser = argparse.ArgumentParser(
        prog="r2s2r", description="Real2Sim2Real PickSort environments: demos, datasets, benchmarks."
    )
    parser.add_argument("--version", action="version", version=f"r2s2r_envs {r2s2r_envs.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="evaluate an env's demonstrator and report success",
        description="Evaluate the demonstrator that comes with an env with the evaluation protocol "
        "(docs/protocol.md) and report its success rate (Wilson 95% CI), sort accuracy, time to sort "
        "and failure causes. Episode i of base seed S resets the env and the demonstrator with "
        "episode_seeds(S, i) (r2s2r_envs.envs.seeding).",
    )
    demo.add_argument(
        "--env",
        required=True,
        metavar="ID",
        help=f"env id, one of {registered_env_ids()}, or 'all': every id side by side (each with its own demonstrator)",
    )
    demo.add_argument("--episodes", type=positive_int, default=10, metavar="N", help="episodes (default 10)")
    add_seed_option(demo, EVALUATION_BASE_SEED, f"base seed (default {EVALUATION_BASE_SEED}, the fixed protocol's)")
    add_task_options(demo)
    add_env_source_options(demo)
    demo.add_argument("--video", default=None, metavar="PATH", help="write an MP4 of the first episode")
    add_workers_option(demo, "worker processes (default 1; the result does not depend on it)")
    add_json_option(demo, "the evaluation result (one object, per-episode records included)")
    add_no_progress_option(demo)
    demo.set_defaults(func=_cmd_demo)

    envs = sub.add_parser("envs", help="list the registered PickSort env ids")
    add_json_option(envs, "the list")
    envs.set_defaults(func=_cmd_envs)

    _add_module_subcommands(sub)
    return parser


#: Modules that add subcommands (each has ``add_subcommands(subparsers)``), in the order ``--help`` lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "r2s2r_envs.datasets.cli",  # generate, replay, datasets
    "r2s2r_envs.grounding.cli",  # log-lab, sysid
    "r2s2r_envs.behavior.cli",  # fit-behavior, compare-behavior
    "r2s2r_envs.policies.cli",  # train
    "r2s2r_envs.evaluation_cli",  # evaluate, leaderboard
    "r2s2r_envs.course.cli",  # course labs, course check
    "r2s2r_envs.ablation.cli",  # ablation
)


def _add_module_subcommands(sub: argparse._SubParsersAction) -> None:
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            # Only an absent CLI module is tolerated (a part of the suite not built yet); a module that fails to
            # import for another reason is a bug to surface.
            if e.name != name:
                raise
            continue
        module.add_subcommands(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``r2s2r``; returns the exit code (0 ok, 1 error, 2 usage error).

    A :class:`~r2s2r_envs.argtypes.UsageError` that a subcommand did not report itself is printed as
    ``r2s2r COMMAND: error: ...`` with exit code 2.  A ``ValueError``, ``TypeError``, ``KeyError`` or ``OSError``
    that a subcommand did not report itself is printed as one line (``r2s2r COMMAND: error: ...``, exit code 1),
    and so is a missing module of an extra, with the command that installs the extra (:mod:`r2s2r_envs.extras`);
    with ``R2S2R_TRACEBACK=1`` it is raised instead.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # `r2s2r ... | head`: the reader left; not an error of ours.  Point stdout at devnull so the interpreter's
        # final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except ModuleNotFoundError as e:
        extra = extra_of(e.name)
        if extra is None or os.environ.get(TRACEBACK_ENV):
            raise
        text = str(e) if isinstance(e, MissingExtraError) else f"{e}; {install_hint(extra)}"
        return report_error(args.command, f"{text} (set {TRACEBACK_ENV}=1 for the traceback)")
    except UsageError as e:  # bad input a handler left to the shell: reported as every command reports it
        return report_error(args.command, e, EXIT_USAGE)
    except (ValueError, TypeError, KeyError, OSError) as e:
        # The last resort for bad input a handler did not catch: one line, not a traceback (TRACEBACK_ENV shows it).
        if os.environ.get(TRACEBACK_ENV):
            raise
        return report_error(args.command, f"{_one_line(e)} (set {TRACEBACK_ENV}=1 for the traceback)")


#: Set to show the traceback of an error the command reports in one line.
TRACEBACK_ENV = "R2S2R_TRACEBACK"


def _one_line(error: BaseException) -> str:
    """An exception as a message: the suite's own errors by their text, builtin ones with their type."""
    text = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
    if isinstance(error, OSError) and error.filename is not None:
        text = f"{error.filename}: {error.strerror or text}"
    return text if type(error).__module__.startswith("r2s2r_envs") else f"{type(error).__name__}: {text}"


if __name__ == "__main__":
    sys.exit(main())
