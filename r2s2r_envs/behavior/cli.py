"""``r2s2r`` subcommands of the behavior module: ``fit-behavior`` and ``compare-behavior``.

``r2s2r_envs.cli`` calls :func:`add_subcommands` on its subparsers; every handler takes the parsed arguments and
returns an exit code (0 ok, 1 error, 2 usage error).

Examples:
    r2s2r fit-behavior --demos lab-50.hdf5 --out my_model.json
    r2s2r compare-behavior lab-50.hdf5 behaviorgrounded-50.hdf5 --json --plot plots/
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from r2s2r_envs.argtypes import EXIT_OK, EXIT_USAGE, add_json_option, add_seed_option, report_error
from r2s2r_envs.mappings import check_keys


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``fit-behavior`` and ``compare-behavior`` to the ``r2s2r`` command.

    Args:
        subparsers: the object returned by ``parser.add_subparsers()``.
    """
    fit = subparsers.add_parser(
        "fit-behavior",
        help="fit the human-like generator to real (lab) demonstrations",
        description="Segment every grasp of a lab demonstration dataset and write the human-like generator's model "
        "(JSON, with the dataset's content hash and the fit settings). Use it with "
        "gym.make('PickSort-BehaviorGrounded-v0', behavior=MODEL) or --env-kwargs '{\"behavior\": \"MODEL\"}'.",
    )
    fit.add_argument("--demos", type=Path, required=True, help="lab dataset (r2s2r generate PickSort-Real-v0 ...)")
    fit.add_argument("--out", type=Path, required=True, help="model file to write (JSON)")
    fit.add_argument("--max-sources", type=int, default=None, help="most grasps kept as sources (default 90)")
    add_seed_option(fit, 0, "seed of the choice of sources (default 0)")
    fit.add_argument(
        "--min-grasps",
        type=int,
        default=None,
        help="fewest usable grasps of each category the demos' scenes hold (default 3)",
    )
    fit.set_defaults(func=_fit)

    cmp = subparsers.add_parser(
        "compare-behavior",
        help="compare how two demonstration sets move (per trait, DTW, classifier AUC)",
        description="Per-trait comparison of two demonstration datasets (speed profile, sub-movements, jerk, "
        "approach, timing, finger closure, release height), DTW distance of reach paths in the object's frame, and "
        "a classifier two-sample test (cross-validated AUC; 0.5 = indistinguishable). Compare sets made in the same "
        "world: a simulated set is held to the lab's teleoperator run in that world (r2s2r generate W --demonstrator "
        "teleoperator), compared with the lab's demos the same way (docs/behavior.md#metrics).",
    )
    cmp.add_argument("a", type=Path, metavar="A.hdf5", help="first dataset (e.g. the lab's demonstrations)")
    cmp.add_argument("b", type=Path, metavar="B.hdf5", help="second dataset (e.g. simulated demonstrations)")
    add_json_option(cmp, "the comparison")
    cmp.add_argument("--plot", type=Path, default=None, metavar="DIR", help="draw speed profiles and paths into DIR")
    add_seed_option(cmp, 0, "seed of the classifier's cross-validation (default 0)")
    cmp.add_argument(
        "--traits",
        default=None,
        metavar="LIST",
        help="traits the classifier sees: 'all' (default), 'strategy' (without those a world's sensing and actuators "
        "shape: for sets made in different worlds) or a comma-separated list",
    )
    cmp.set_defaults(func=_compare)


def _fit(args: argparse.Namespace) -> int:
    from r2s2r_envs.behavior.fit import FitSettings, fit_behavior, save_model
    from r2s2r_envs.behavior.segments import BehaviorDataError
    from r2s2r_envs.datasets.schema import DatasetError

    try:
        settings = FitSettings(
            max_sources=args.max_sources if args.max_sources is not None else FitSettings().max_sources,
            seed=args.seed,
            min_grasps_per_category=(
                args.min_grasps if args.min_grasps is not None else FitSettings().min_grasps_per_category
            ),
        )
    except ValueError as exc:
        return report_error("fit-behavior", exc, EXIT_USAGE)
    start = time.perf_counter()
    try:
        model = fit_behavior(args.demos, settings=settings)
    except (FileNotFoundError, DatasetError, BehaviorDataError) as exc:
        return report_error("fit-behavior", exc)
    save_model(model, args.out)
    demos = model["provenance"]["demos"]
    print(
        f"wrote {args.out}: {len(model['sources'])} source grasps from {demos['grasps']} grasps in "
        f"{demos['episodes']} demos ({demos['successes']} successful) of {demos['file']} "
        f"(sha256 {demos['content_sha256'][:12]}...), {time.perf_counter() - start:.1f} s"
    )
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from r2s2r_envs.behavior.metrics import STRATEGY_TRAITS, TRAITS, compare, plot
    from r2s2r_envs.behavior.segments import BehaviorDataError, load_demos
    from r2s2r_envs.datasets.schema import DatasetError

    named = {None: TRAITS, "all": TRAITS, "strategy": STRATEGY_TRAITS}
    traits = named.get(args.traits) or [t.strip() for t in args.traits.split(",") if t.strip()]
    try:
        check_keys(traits, TRAITS, what="trait", error=ValueError)
    except ValueError as exc:
        return report_error("compare-behavior", exc, EXIT_USAGE)
    try:
        a, b = load_demos(args.a), load_demos(args.b)
        result = compare(a, b, seed=args.seed, classifier_traits=traits)
        files = plot(a, b, args.plot) if args.plot is not None else []
    except (FileNotFoundError, DatasetError, BehaviorDataError, ValueError) as exc:
        return report_error("compare-behavior", exc)
    if args.json:
        out = result.to_dict()
        out["plots"] = [str(f) for f in files]
        print(json.dumps(out, indent=2))
    else:
        print(result.table())
        for f in files:
            print(f"plot: {f}")
    return EXIT_OK
