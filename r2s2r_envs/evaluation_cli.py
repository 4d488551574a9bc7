"""``r2s2r`` subcommands over the evaluation package: ``evaluate`` and ``leaderboard`` (a command module at the top,
beside ``env_cli``: it resolves policies, from the layer above evaluation).

``r2s2r_envs.cli`` calls :func:`add_subcommands` on its subparsers; every handler takes the parsed arguments
and returns an exit code (0 ok, 1 error, 2 usage error).  Both are thin shells: ``evaluate`` over
:func:`r2s2r_envs.evaluation.protocol.evaluate` (docs/protocol.md), ``leaderboard`` over
:func:`r2s2r_envs.evaluation.leaderboard.build_leaderboard` (docs/leaderboard.md).

Examples:
    r2s2r evaluate --policy runs/bc_seed0 --env PickSort-Real-v0 --episodes 100 --workers 2 --out results/bc0_lab.json
    r2s2r evaluate --policy my_pkg.policies:make_policy --env PickSort-Ungrounded-v0 --episodes 20 --json
    r2s2r evaluate --policy zoo:flow-real-only --env PickSort-Real-v0 --episodes 100 --batch 16 --out lab.json
    r2s2r evaluate --policy zoo:flow-real-only --env PickSort-Real-v0 --panel --batch 16 --out results/panel/
    r2s2r leaderboard results/ --out leaderboard/
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from r2s2r_envs.argtypes import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    add_json_option,
    add_no_progress_option,
    add_seed_option,
    add_workers_option,
    positive_int,
    report_error,
)
from r2s2r_envs.env_cli import add_env_source_options, add_task_options, env_source_kwargs, task_kwargs
from r2s2r_envs.evaluation.panels import (
    DEFAULT_PANEL,
    LAB_ENV_ID,
    PANELS,
    PanelError,
    check_panel_call,
    evaluate_panel,
    get_panel,
)
from r2s2r_envs.evaluation.policy import ClassPolicy, PolicySpecError  # noqa: F401  (re-exported)
from r2s2r_envs.evaluation.protocol import (
    EVALUATION_BASE_SEED,
    EnvArgumentError,
    EvaluationResult,
    PolicyError,
    RenderError,
    ResultSchemaError,
    UnknownEnvError,
    check_env_id,
    evaluate,
    picksort_env_ids,
)
from r2s2r_envs.evaluation.splits import SPLITS, STANDARD
from r2s2r_envs.evaluation.tracks import TRACKS, get_track
from r2s2r_envs.paths import check_output_file
from r2s2r_envs.policies.policy_spec import DirectoryPolicy, resolve_policy_spec  # noqa: F401  (re-exported)
from r2s2r_envs.workers import WorkerDiedError


def _format_summary(result: EvaluationResult) -> str:
    s, m = result.summary, result.method
    low, high = s["success_rate_ci95"]
    n = s["episodes"]
    time_to_sort = "n/a" if s["mean_time_to_sort"] is None else f"{s['mean_time_to_sort']:.2f} s"
    causes = ", ".join(f"{k}: {v}" for k, v in s["failure_causes"].items() if v) or "none"
    lab = result.provenance.get("lab")
    lab_name = lab.get("name") if isinstance(lab, dict) else lab
    where = f"{result.env_id}" + (f" (lab: {lab_name})" if lab_name else "")
    trained = ", ".join(
        f"{k}={m[k]}"
        for k in ("variant", "real_fraction", "training_seed", "n_real_demos", "n_sim_demos")
        if m.get(k) is not None
    )
    return "\n".join(
        [
            f"env:              {where}",
            f"policy:           {m['method']} ({m['policy_class']}){', ' + trained if trained else ''}",
            f"episodes:         {n}, split {result.split}{_SPLIT_NOTES.get(result.split, '')}",
            f"success rate:     {s['success_rate']:.3f}  (95% Wilson CI {low:.3f}-{high:.3f}, "
            f"{round(s['success_rate'] * n)}/{n} episodes)",
            *_condition_lines(result),
            f"sort accuracy:    {s['sort_accuracy']:.3f}",
            f"time to sort:     {time_to_sort}  (mean over successful episodes)",
            f"failure causes:   {causes}  (episodes by their first failure)",
            f"policy failures:  {s['policy_failures']}  (episodes stopped for a NaN or wrong-shape action)",
            *_track_lines(result),
            f"wall time:        {result.wall_time_s:.1f} s",
        ]
    )


def _track_lines(result: EvaluationResult) -> list[str]:
    """The track the result was evaluated for, and why it is off it (``--track``)."""
    if result.track is None:
        return []
    t = result.track
    if t["on_track"]:
        return [f"track:            {t['name']} v{t['version']}: on the track"]
    return [f"track:            {t['name']} v{t['version']}: OFF-TRACK (listed apart on the leaderboard)"] + [
        f"  - {why}" for why in t["reasons"]
    ]


_SPLIT_NOTES = {
    "dev": " (for development choices, not for reported figures)",
    "legacy": " (the seeds of every result before the splits: to reproduce old results, not for new figures)",
    "custom": " (seeds of your own: not comparable with the protocol's)",
}


def _condition_lines(result: EvaluationResult) -> list[str]:
    """One line per condition and one for "all shifted", when the result holds more than nominal alone."""
    if [c.condition for c in result.conditions] == ["nominal"]:
        return []
    figures = [(c.condition, result.condition_summaries[c.condition]) for c in result.conditions]
    if result.shifted_summary is not None:
        figures.append(("all shifted", result.shifted_summary))
    lines = []
    for name, s in figures:
        low, high = s["success_rate_ci95"]
        n = s["episodes"]
        lines.append(
            f"  {name + ':':<16}{s['success_rate']:.3f}  (95% Wilson CI {low:.3f}-{high:.3f}, "
            f"{round(s['success_rate'] * n)}/{n} episodes)"
        )
    return lines


def _parse_conditions(text: str | None) -> str | list[str] | dict[str, int] | None:
    """``--conditions``: ``standard``, ``NAME[,NAME...]`` or ``NAME=N[,NAME=N...]`` (the protocol checks names)."""
    if text is None or text == STANDARD:
        return text
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not all("=" in item for item in items):
        if any("=" in item for item in items):
            raise ValueError(f"--conditions {text!r}: give every condition a count (NAME=N,...) or none")
        return items
    counts = {}
    for item in items:
        name, _, count = item.partition("=")
        if not count.isdigit():
            raise ValueError(f"--conditions {text!r}: {item!r} needs an episode count, an integer >= 1")
        counts[name] = int(count)
    return counts


def panel_outputs(panel: str, out: Path | None) -> dict[str, Path]:
    """The result file of each lab of ``panel`` in the ``--out`` folder: ``<panel>-<lab>.json`` (``:`` as ``-``).

    Raises:
        ValueError: ``--out`` is a file, or one of the files exists (a panel never overwrites a result).
    """
    if out is None:
        return {}
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; with --panel, --out is a folder that takes one result per lab")
    files = {lab: out / f"{panel}-{lab.replace(':', '-')}.json" for lab in get_panel(panel).labs}
    for path in files.values():
        check_output_file(path, option="--out", suffix=".json")
        if path.exists():
            raise ValueError(f"--out {out}: {path.name} exists; a panel run never overwrites a result (another folder)")
    return files


def _write_result(result: EvaluationResult, out: Path) -> str:
    text = result.to_json(indent=2)
    EvaluationResult.from_json(text)  # a result this package cannot read back is a bug: fail before writing it
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    return text


#: Bad input, found before or while the run starts: exit code 2 (a worker that died: 1).
_USAGE_ERRORS = (PolicyError, UnknownEnvError, EnvArgumentError, RenderError, ResultSchemaError, ValueError)


def _report_run_error(error: Exception) -> int:
    return report_error("evaluate", error, EXIT_ERROR if isinstance(error, WorkerDiedError) else EXIT_USAGE)


def _policy(args: argparse.Namespace) -> Any:
    """The policy or factory ``--policy`` names, with a checkpoint's execution settings."""
    settings = {k: getattr(args, k) for k in ("execute_steps", "temporal_ensemble") if getattr(args, k) is not None}
    return resolve_policy_spec(args.policy, threads=1 if args.workers > 1 else None, **settings)


def _protocol_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments of ``evaluate`` / ``evaluate_panel`` that the options set alike in both."""
    return {
        "episodes": args.episodes,
        "base_seed": args.seed,
        "conditions": _parse_conditions(args.conditions),
        "split": args.split,
        "progress": not args.no_progress,
        "video": args.video,
        "workers": args.workers,
        "method": {"method": args.method} if args.method else None,
        "batch": args.batch,
    }


def _cmd_evaluate_panel(args: argparse.Namespace, env_kwargs: dict[str, Any]) -> int:
    """``--panel``: every lab of the panel, one result file per lab in the ``--out`` folder."""
    try:
        if args.lab is not None:
            raise PanelError(f"--panel names its own labs; --lab {args.lab} was given too: give one of them")
        get_panel(args.panel)
        check_env_id(args.env)
        check_panel_call(args.env, env_kwargs, args.video)
        env_kwargs = env_source_kwargs(args.env, env_kwargs, grounding=args.grounding)
        files = panel_outputs(args.panel, args.out)
        policy = _policy(args)

        def done(lab: str, result: EvaluationResult) -> None:
            if lab in files:
                _write_result(result, files[lab])
            print(f"lab {lab}:", file=sys.stderr)
            print(
                _format_summary(result) + (f"\nresult:           {files[lab]}" if lab in files else ""), file=sys.stderr
            )

        results = evaluate_panel(
            policy, args.panel, env_id=args.env, env_kwargs=env_kwargs, on_result=done, **_protocol_settings(args)
        )
    except (*_USAGE_ERRORS, WorkerDiedError) as e:
        return _report_run_error(e)
    except OSError as e:  # checked before the run; the disk may still fill up
        return report_error("evaluate", f"cannot write into --out {args.out}: {e.strerror or e}")
    if args.json:
        print("[" + ",\n".join(r.to_json(indent=2) for r in results.values()) + "]")
    else:
        rates = ", ".join(f"{lab} {r.summary['success_rate']:.3f}" for lab, r in results.items())
        print(f"panel {args.panel} ({len(results)} labs): success rate {rates}")
    return EXIT_OK


def _check_track_args(args: argparse.Namespace) -> None:
    """``--track``: a known track, and no option that sets another evaluation (the protocol checks
    ``--split``/``--conditions`` against the track and names both).

    Raises:
        ValueError: an unknown track (listing the valid ones), or ``--panel``/``--episodes``/``--seed`` beside it.
    """
    track = get_track(args.track)
    if args.panel is not None and args.panel != track.panel:
        where = "one lab" if track.panel is None else f"panel {track.panel!r}"
        raise ValueError(f"--track {track.name} evaluates on {where}; --panel {args.panel} was given too: give one")
    if track.panel is not None:
        raise ValueError(f"--track {track.name} evaluates on panel {track.panel!r}: not supported by evaluate yet")
    for option, value in (("--episodes", args.episodes), ("--seed", args.seed)):
        if value is not None:
            raise ValueError(
                f"--track {track.name} fixes the evaluation (its conditions on the {track.split!r} split); "
                f"{option} {value} was given too: give one of them"
            )


def _cmd_evaluate(args: argparse.Namespace) -> int:
    env_kwargs = task_kwargs(args)
    if args.track is not None:
        try:
            _check_track_args(args)
        except ValueError as e:
            return report_error("evaluate", e, EXIT_USAGE)
    if args.panel is not None:
        return _cmd_evaluate_panel(args, env_kwargs)
    try:
        # Outputs first: a run of minutes must not end in a file that cannot be written.
        if args.out is not None:
            check_output_file(args.out, option="--out", suffix=".json")
        if args.video is not None:
            check_output_file(args.video, option="--video", suffix=".mp4")
        check_env_id(args.env)
        env_kwargs = env_source_kwargs(args.env, env_kwargs, lab=args.lab, grounding=args.grounding)
        policy = _policy(args)
        result = evaluate(args.env, policy, env_kwargs=env_kwargs, track=args.track, **_protocol_settings(args))
    except (*_USAGE_ERRORS, WorkerDiedError) as e:
        return _report_run_error(e)
    text = result.to_json(indent=2)
    EvaluationResult.from_json(text)  # a result this package cannot read back is a bug: fail before writing it
    if args.out is not None:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        except OSError as e:  # checked before the run; the disk may still fill up
            return report_error("evaluate", f"cannot write --out {args.out}: {e.strerror or e}")
    print(text if args.json else _format_summary(result))
    if args.out is not None and not args.json:
        print(f"result:           {args.out}")
    return EXIT_OK


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    from r2s2r_envs.evaluation.leaderboard import LeaderboardError, build_leaderboard

    if not Path(args.results_dir).is_dir():  # bad input, found before any work
        message = f"results folder {args.results_dir} does not exist (expected a folder of result JSON files)"
        return report_error("leaderboard", message, EXIT_USAGE)
    try:
        board = build_leaderboard(args.results_dir, args.out, title=args.title, skip_damaged=args.skip_damaged)
    except LeaderboardError as e:
        return report_error("leaderboard", e)
    print(f"{len(board.results)} results, {len(board.rows)} rows -> {args.out}/leaderboard.md, index.html")
    for path, reason in board.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    return EXIT_OK


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``evaluate`` and ``leaderboard`` to the ``r2s2r`` command.

    Args:
        subparsers: the object returned by ``parser.add_subparsers()``.
    """
    ev = subparsers.add_parser(
        "evaluate",
        help="evaluate a trained or your own policy with the evaluation protocol",
        description="Run the evaluation protocol (docs/protocol.md: published seeds, per-episode records, success "
        "rate with a Wilson 95% interval) on a PickSort env and write a result JSON that the leaderboard reads "
        "(docs/leaderboard.md). A NaN or wrong-shape action ends its episode as a policy failure.",
    )
    ev.add_argument(
        "--policy",
        required=True,
        metavar="DIR|MODULE:FACTORY",
        help="a checkpoint directory (r2s2r train --out DIR) or module:factory (or file.py:factory): a function "
        "f(env) -> Policy, a policy class or object importable from the current directory (docs/byo_method.md)",
    )
    ev.add_argument("--env", required=True, metavar="ID", help=f"env id, one of {picksort_env_ids()}")
    ev.add_argument(
        "--panel",
        nargs="?",
        const=DEFAULT_PANEL,
        default=None,
        metavar="NAME",
        help=f"run on every lab of a lab panel (default {DEFAULT_PANEL}; one of {sorted(PANELS)}), {LAB_ENV_ID} only; "
        "--out is then a folder taking one result per lab; costs one evaluation per lab (docs/protocol.md#lab-panel)",
    )
    add_env_source_options(ev)
    ev.add_argument(
        "--conditions",
        default=None,
        metavar="LIST",
        help="evaluation conditions: standard (the default: nominal 50, fast-belt 25, novel-objects 25 episodes), "
        "NAME[,NAME...] or NAME=N[,NAME=N...] (docs/protocol.md#conditions)",
    )
    ev.add_argument(
        "--split",
        default=None,
        metavar="SPLIT",
        help=f"seed split, one of {list(SPLITS)} (default test; dev for every development choice; "
        "docs/protocol.md#dev-and-test-splits)",
    )
    ev.add_argument(
        "--track",
        default=None,
        metavar="NAME",
        help=f"evaluate as a track says and record whether the result is on it (datasets, training samples), one of "
        f"{sorted(TRACKS)}; --split/--conditions may only repeat it (docs/leaderboard.md#tracks)",
    )
    ev.add_argument(
        "--episodes",
        type=positive_int,
        default=None,
        metavar="N",
        help="episodes of each condition; alone (without --conditions and --split): N nominal episodes on the "
        "legacy seeds, as before the splits",
    )
    add_workers_option(ev)
    ev.add_argument(
        "--batch",
        type=positive_int,
        default=1,
        metavar="N",
        help="envs stepped together per process in the native vector env, the policy answering for all at once "
        "(act_batch; default 1); records are identical to --batch 1's, and compose with --workers",
    )
    add_seed_option(
        ev,
        None,
        f"base seed of a nominal run at seeds of your own (with --episodes; split custom, not comparable; "
        f"{EVALUATION_BASE_SEED}: the legacy seeds)",
    )
    add_task_options(ev)
    ev.add_argument("--method", default=None, metavar="NAME", help="method name in the result (overrides metadata)")
    ev.add_argument(
        "--execute-steps", type=positive_int, default=None, metavar="N", help="a checkpoint's actions per chunk"
    )
    ev.add_argument(
        "--temporal-ensemble",
        type=float,
        default=None,
        metavar="K",
        help="a checkpoint's temporal ensembling weight (0: receding horizon)",
    )
    ev.add_argument("--video", default=None, metavar="PATH", help="write an MP4 of the first episode")
    ev.add_argument("--out", type=Path, default=None, metavar="FILE", help="write the result JSON here")
    add_json_option(ev, "the result")
    add_no_progress_option(ev)
    ev.set_defaults(func=_cmd_evaluate)

    lb = subparsers.add_parser(
        "leaderboard",
        help="build the leaderboard (Markdown + static HTML) from a folder of result JSONs",
        description="Read every evaluation result under RESULTS_DIR (other JSON files are skipped and listed), "
        "group them by method, variant and real_fraction (mean over training seeds), and write "
        "leaderboard.md, index.html (plots inline, works offline) and leaderboard.json to --out "
        "(docs/leaderboard.md).",
    )
    lb.add_argument(
        "results_dir",
        type=Path,
        metavar="RESULTS_DIR",
        help="folder searched recursively for *.json and *.json.gz (gzip-compressed) result files",
    )
    lb.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    lb.add_argument("--title", default="PickSort co-training leaderboard", help="page title")
    lb.add_argument(
        "--skip-damaged",
        action="store_true",
        help="build without files that look like damaged results (invalid JSON or a wrong format in a file holding "
        "a result's keys; listed as skipped) instead of failing",
    )
    lb.set_defaults(func=_cmd_leaderboard)
