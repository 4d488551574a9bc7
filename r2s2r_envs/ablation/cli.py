"""``r2s2r ablation``: the grounding ablation on Ray (a thin shell over :func:`r2s2r_envs.ablation.run_ablation`).

Examples:
    r2s2r ablation --quick --out runs/ablation-quick              # one seed, about 10 minutes on 2 cores
    r2s2r ablation --out runs/ablation                            # the full design (needs the canonical datasets)
    r2s2r ablation --address auto --out /shared/ablation          # on the Ray cluster this node belongs to
    r2s2r ablation --quick --variants Ungrounded,FullyGrounded --methods flow --out runs/x
    r2s2r ablation --quick --report-only --out runs/ablation-quick  # rebuild the report from finished results
    r2s2r ablation --out runs/ablation --seeds-for 3               # seeds needed to detect 3 points there
    r2s2r ablation --out runs/ablation --project 2,16              # its wall time on 2 and 16 cores, projected
    r2s2r ablation --methods flow --steps 12000 --no-sweep --out runs/ablation-12k  # a longer training budget
    r2s2r ablation --recipe gpu --train-device cuda --out runs/ablation-gpu  # the gpu recipe, four per GPU
    r2s2r ablation --recipe v1 --out runs/ablation-v1              # the first policies' recipe (earlier records)
    r2s2r ablation --lab my_lab.json --quick --out runs/my-lab      # the whole chain on another lab (sysid, demos,
                                                                    # behavior fit, the variants' data, train, eval)
    r2s2r ablation --quick --arms all --out runs/control-arms       # with the control arms (preset control-arms)
    r2s2r ablation --quick --interventions nominal-timing --out runs/ablation-quick  # the policies again in the lab
                                                                    # without its loop delays, on the nominal belt

A re-run with the same ``--out`` skips every finished task (results are keyed by their config hash). Exit codes:
0 every task finished, 1 some tasks failed (the others' results and the report are written), 2 bad input (nothing
ran). docs/ablation.md describes the design and the outputs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from r2s2r_envs.ablation.design import (
    ARM_NAMES,
    DEFAULT_METHODS,
    INTERVENTIONS,
    PRESETS,
    VARIANTS,
    AblationDesign,
    DesignError,
    image_track,
    lab_design,
)
from r2s2r_envs.argtypes import EXIT_ERROR, EXIT_OK, EXIT_USAGE, comma_list, positive_int, report_error
from r2s2r_envs.policies.config import RECIPES


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(comma_list(text))


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in comma_list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``ablation`` to the ``r2s2r`` command.

    Args:
        subparsers: the object returned by ``parser.add_subparsers()``.
    """
    p = subparsers.add_parser(
        "ablation",
        help="the grounding ablation: real-only vs co-training with each grounding variant, on Ray",
        description="Train policies on the lab demos alone and co-trained with each grounding variant's sim demos "
        "(at the mixing rule's real_fraction), evaluate each in the lab and in its own variant, and report the "
        "four-variant table, the effect of world and behavior grounding with 95% intervals, their "
        "interaction, a real_fraction sweep and the mixture analysis. Tasks run on Ray (locally by default); a "
        "re-run skips finished tasks. Writes DIR/results (for r2s2r leaderboard), DIR/leaderboard and "
        "DIR/report. See docs/ablation.md.",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_true",
        help="one seed, fewer demos, steps and episodes (about 10 minutes on 2 cores; with --lab also sysid's quick "
        "budget: within 45 minutes)",
    )
    size.add_argument("--smoke", action="store_true", help="a tiny one-object design that only checks the pipeline")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (a re-run resumes it)")
    p.add_argument(
        "--lab",
        default=None,
        metavar="LAB",
        help="run the whole Real2Sim2Real chain on this lab (a shipped lab name, a lab JSON file or draw:SEED, a "
        "lab drawn from the documented ranges that nobody tuned for): identify its world (sysid, the demonstrator "
        "tuned there), record its demos by its own teleoperator, fit the behavior model, generate the four "
        "variants' data from that grounding, train, evaluate in that lab, analyse; every stage cached by its "
        "inputs' hashes (default: the default lab's canonical data and shipped groundings)",
    )
    p.add_argument(
        "--track",
        choices=("state", "image"),
        default="state",
        help="what the policies observe: state (default), or image (both cameras at 64 px and the robot's own state, "
        "recipe cpu-image; needs --lab, whose chain makes every dataset with cameras)",
    )
    p.add_argument("--address", default=None, metavar="RAY_ADDRESS", help="join this Ray cluster ('auto': this node's)")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N", help="CPUs of a local Ray (default: all)")
    p.add_argument(
        "--methods",
        type=_comma_list,
        default=None,
        metavar="M,M",
        help=f"methods (default {','.join(DEFAULT_METHODS)})",
    )
    p.add_argument(
        "--variants",
        type=_comma_list,
        default=None,
        metavar="V,V",
        help=f"grounding variants (default: {','.join(VARIANTS)})",
    )
    p.add_argument(
        "--arms",
        type=_comma_list,
        default=None,
        metavar="A,A",
        help=f"control arms to add, or 'all' ({','.join(ARM_NAMES)}): data variants that split each axis's effect "
        "(world = physics + re-tune, behavior = pace + style, the same scenes in every variant, the lab's sensing on "
        "nominal physics); docs/ablation.md#control-arms",
    )
    p.add_argument(
        "--interventions",
        type=_comma_list,
        default=None,
        metavar="NAME,NAME",
        help=f"diagnostic conditions, or 'all' ({','.join(INTERVENTIONS)}), under which the table's policies are "
        "evaluated again in the lab (their trainings reused), and each axis's effect there set beside its effect "
        "under nominal; docs/ablation.md#interventions",
    )
    p.add_argument(
        "--seeds",
        type=_seeds,
        default=None,
        metavar="S,S",
        help="training seeds of the table, and of the sweep unless --sweep-seeds (default: the design's)",
    )
    p.add_argument(
        "--sweep-seeds",
        type=_seeds,
        default=None,
        metavar="S,S",
        help="training seeds of the sweep and the mixture analysis (default: the design's, or --seeds)",
    )
    p.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        metavar="N",
        help="training steps of every policy (default: the recipe's for the full design, 20,000 for cpu; "
        "1,000 --quick); a new budget is a new set of tasks, so use a new --out to keep its report apart",
    )
    p.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        default=None,
        help="training recipe of every policy (docs/baselines.md#recipes; default: cpu for the full design, v1 "
        "for --quick and --smoke); gpu needs --train-device cuda",
    )
    p.add_argument(
        "--train-device",
        choices=("cpu", "cuda"),
        default=None,
        help="where policies train (default cpu; cuda needs torch with a GPU on every node that trains)",
    )
    p.add_argument(
        "--gpus-per-training",
        type=float,
        default=None,
        metavar="F",
        help="share of a GPU each training declares to Ray with --train-device cuda (default 0.25: four per GPU)",
    )
    p.add_argument(
        "--eval-batch",
        type=positive_int,
        default=None,
        metavar="N",
        help="episodes each evaluation steps together, its policy answering for all at once (default 16; results "
        "are identical at every value, so finished evaluations are reused)",
    )
    p.add_argument(
        "--no-sweep",
        action="store_true",
        help="leave out the real_fraction sweep (the four-variant table and its mixture analysis only)",
    )
    p.add_argument(
        "--export-record",
        default=None,
        metavar="DEST",
        help="copy what a record keeps of --out to DEST (results, report, every task.json and small output; no "
        "checkpoint or dataset) and run nothing; DEST resumes like --out, training again only what a missing result "
        "needs",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="rebuild results, leaderboard and report from finished tasks; run nothing",
    )
    p.add_argument(
        "--seeds-for",
        type=_points,
        default=None,
        metavar="POINTS",
        help="how many training seeds per cell detect a difference of POINTS percentage points between two "
        "co-trained cells (80%% power, two-sided 5%%), from the variance in --out's report; runs nothing",
    )
    p.add_argument(
        "--project",
        type=_cores,
        default=None,
        metavar="CORES",
        help="project the wall time of --out's design (or, for a new --out, the one the options select) on each "
        "number of cores in CORES (e.g. 2,16) from the CPU time its finished tasks measured and those of "
        "--measured-from; runs nothing",
    )
    p.add_argument(
        "--project-json",
        action="store_true",
        help="with --project: print the projection as JSON (its record) instead of text",
    )
    p.add_argument(
        "--measured-from",
        action="append",
        default=[],
        metavar="DIR",
        help="with --project: another run directory (or record) whose finished tasks' CPU times estimate the tasks "
        "not run yet (repeatable)",
    )
    p.set_defaults(func=_cmd_ablation)


def _cores(text: str) -> tuple[int, ...]:
    try:
        cores = tuple(int(c) for c in text.split(","))
    except ValueError:
        cores = ()
    if not cores or min(cores) < 1:
        raise argparse.ArgumentTypeError(
            f"expected numbers of cores, each 1 or more, comma-separated (e.g. 2,16), got {text!r}"
        )
    return cores


def _project(args: argparse.Namespace) -> int:
    """Prints the projection of ``--project``; the exit code."""
    from r2s2r_envs.ablation.chain import LabError
    from r2s2r_envs.ablation.projection import ProjectionError, measured_records, project
    from r2s2r_envs.ablation.store import Store, StoreError

    stores = [Store(d) for d in (args.out, *args.measured_from)]
    try:
        manifests = [s.check_manifest() for s in stores]
        missing = [str(s.root) for s, m in zip(stores[1:], manifests[1:]) if m is None]
        if missing:
            raise StoreError(f"--measured-from {', '.join(missing)}: not an ablation run directory (no ablation.json)")
        design = AblationDesign.from_dict(manifests[0]["design"]) if manifests[0] else design_from_args(args)
        finished = measured_records(stores[:1])  # --out's own finished tasks, which count over the references'
        measured = {**measured_records(stores[1:]), **finished}
        whole = project(design.tasks(), measured, cores=args.project)
        rest = project(design.tasks(), measured, cores=args.project, finished=finished)
    except (StoreError, DesignError, ProjectionError, LabError) as e:
        return report_error("ablation", e, EXIT_USAGE)
    if args.project_json:  # a record of the projection, e.g. for a README that quotes it
        measured_in = [str(s.root) for s in stores]
        record = {"design": design.name, "measured_in": measured_in, "whole": whole.to_dict()}
        if finished:
            record["still_to_run"] = rest.to_dict()
        print(json.dumps(record, indent=2))
        return EXIT_OK
    print(f"design {design.name!r}, costs measured in {', '.join(str(s.root) for s in stores)}")
    print(whole.to_text())
    if finished:
        print(rest.to_text())
    return EXIT_OK


def _points(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value < 100):
        raise argparse.ArgumentTypeError(f"expected percentage points between 0 and 100 (e.g. 3), got {text!r}")
    return value


def _seeds_for(out: str, points: float) -> int:
    """Prints how many seeds detect ``points`` in the report of ``out``; the exit code."""
    from r2s2r_envs.ablation.analysis import METRIC_NAMES, METRICS, seeds_to_detect

    path = Path(out) / "report" / "report.json"
    if not path.is_file():
        return report_error("ablation", f"no report at {path}: run the ablation (or --report-only) first", EXIT_USAGE)
    report = json.loads(path.read_text())
    for metric in METRICS:
        try:
            n = seeds_to_detect(report, points / 100, metric=metric)
        except ValueError as e:
            return report_error("ablation", e, EXIT_USAGE)
        episodes = report["detectable"][metric]["episodes"]
        said = (
            f"{n} seeds per cell"
            if n is not None
            else "more than 1,000 seeds: the episode noise alone is larger; evaluate more episodes"
        )
        print(
            f"{METRIC_NAMES[metric]}: {points:g} points between two co-trained cells need {said} ({episodes} episodes)"
        )
    return EXIT_OK


def design_from_args(args: argparse.Namespace) -> AblationDesign:
    """The design the options select.

    Raises:
        LabError: ``--lab`` names a lab that cannot be made (unknown, missing, a bad field: named).
        DesignError: ``--recipe gpu`` without ``--train-device cuda``.
    """
    name = "smoke" if args.smoke else "quick" if args.quick else "full"
    if getattr(args, "lab", None) is not None:
        from r2s2r_envs.ablation.chain import resolve_lab

        design = lab_design(resolve_lab(args.lab), name)
    else:
        design = PRESETS[name]()
    changes: dict[str, Any] = {}
    if args.methods is not None:
        changes.update(
            methods=args.methods,
            sweep_methods=tuple(m for m in design.sweep_methods if m in args.methods) or args.methods[:1],
            mixture_methods=args.methods,
        )
    if args.variants is not None:
        changes["variants"] = args.variants
        if design.sweep_variant not in args.variants:
            changes["sweep_variant"] = None
    if getattr(args, "arms", None) is not None:
        changes["arms"] = ARM_NAMES if args.arms == ("all",) else args.arms  # checked by check_design, before work
    if getattr(args, "interventions", None) is not None:
        # Checked by check_design, before any work.
        changes["interventions"] = INTERVENTIONS if args.interventions == ("all",) else args.interventions
    if args.seeds is not None:
        changes["seeds"] = args.seeds
        changes["sweep_seeds"] = None  # the same seeds, unless given apart
    if args.sweep_seeds is not None:
        changes["sweep_seeds"] = args.sweep_seeds
    if args.eval_batch is not None:
        changes["eval_batch"] = args.eval_batch
    train = dict(design.train)
    if args.recipe is not None:
        if args.recipe == "gpu" and args.train_device != "cuda":
            raise DesignError("--recipe gpu is the GPU budget (100,000 steps, wider networks): add --train-device cuda")
        train["recipe"] = args.recipe
    if args.steps is not None:
        train["steps"] = args.steps
    if args.no_sweep:
        changes["sweep_variant"] = None
    if args.train_device is not None:
        train["device"] = args.train_device
        if args.train_device == "cuda":
            changes["train_gpus"] = 0.25 if args.gpus_per_training is None else args.gpus_per_training
    if args.gpus_per_training is not None and args.train_device != "cuda":
        changes["train_gpus"] = args.gpus_per_training  # check_design refuses GPUs for CPU trainings
    if train != design.train:
        changes["train"] = train
    design = dataclasses.replace(design, **changes) if changes else design
    if getattr(args, "track", "state") == "image":
        design = image_track(design)  # check_design refuses it without --lab, before any work
    return design


def _cmd_ablation(args: argparse.Namespace) -> int:
    from r2s2r_envs.ablation.analysis import print_table
    from r2s2r_envs.ablation.chain import LabError
    from r2s2r_envs.ablation.runner import AblationError, preflight, run_ablation, write_outputs
    from r2s2r_envs.ablation.store import Store, StoreError, export_record

    if getattr(args, "interventions", None) is not None and (args.seeds_for is not None or args.export_record):
        given = "--seeds-for" if args.seeds_for is not None else "--export-record"
        return report_error(
            "ablation",
            f"--interventions adds lab evaluations to a run; {given} runs nothing: drop --interventions (or run "
            f"without {given})",
            EXIT_USAGE,
        )
    if args.seeds_for is not None:
        return _seeds_for(args.out, args.seeds_for)
    if args.project is not None:
        return _project(args)
    if args.measured_from or args.project_json:
        given = "--measured-from" if args.measured_from else "--project-json"
        return report_error("ablation", f"{given} goes with --project (the projection it is about)", EXIT_USAGE)
    if args.export_record is not None:
        try:
            dest = export_record(args.out, args.export_record)
        except StoreError as e:
            return report_error("ablation", e, EXIT_USAGE)
        print(f"record of {args.out} written to {dest}")
        return EXIT_OK
    try:
        design = design_from_args(args)
    except (LabError, DesignError) as e:
        return report_error("ablation", e, EXIT_USAGE)
    try:
        if args.report_only:
            tasks = preflight(design, args.out)
            write_outputs(design, tasks, Store(args.out), log=lambda s: print(s, file=sys.stderr))
            print_table(Path(args.out) / "report" / "report.json")
            return EXIT_OK
        summary = run_ablation(
            design, args.out, address=args.address, workers=args.workers, log=lambda s: print(s, file=sys.stderr)
        )
    except AblationError as e:
        return report_error("ablation", e, EXIT_USAGE)
    print_table(Path(args.out) / "report" / "report.json")
    print(
        f"\n{summary.total} tasks: {summary.skipped} already finished, {summary.ran} run, "
        f"{len(summary.failed)} failed, {len(summary.blocked)} blocked; "
        f"{summary.wall_time_s:.0f} s. Report: {args.out}/report/report.md",
    )
    return EXIT_ERROR if summary.failed or summary.blocked else EXIT_OK
