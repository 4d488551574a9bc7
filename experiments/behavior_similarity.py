"""How alike each demonstrator's motion is to the lab's demonstrations (experiments/behavior-similarity-v2/).

For every row, generates 50 successful demonstrations (base seed 0; kept in ``--work`` and reused by a re-run)
and compares them with the lab's (``--lab-demos``, the canonical ``lab-50``) with ``behavior.metrics.compare``:
the classifier two-sample AUC on all traits and on the strategy traits, the DTW distance of reach paths, and the
traits that separate the sets most (Cohen's d). Rows:

* the human-like generator in nominal sim (``PickSort-BehaviorGrounded-v0``) and in the identified world
  (``PickSort-FullyGrounded-v0``), the goal's subject;
* the scripted planner in nominal sim (``PickSort-Ungrounded-v0``), a contrast;
* both in the lab itself (``PickSort-Real-v0``);
* the lab's own teleoperator in nominal sim and in the identified world: the operator the generator is fitted
  to, moved to the generator's world. Its AUC against its own lab demonstrations is what any demonstrator in that
  world can be held to with these traits: the **same-world reference** (issue 20's goal: the generator's AUC at
  most the reference's + 0.05, on all traits and on the strategy traits, in each world). (Running the lab's
  operator model in a simulated env is a measurement made here, never by grounding code.)

The generator in the lab knows what the team knows of the lab: the shipped grounding file
(``behavior_axis.humanlike_in_lab``), never the lab's parameters. ``--rows`` picks rows by label (separated by ``;``);
the goals are checked on the rows present and written with the figures. ``--behavior MODEL`` gives the generator
rows another behavior model (e.g. fitted to another operator's demos, compared with ``--lab-demos`` those demos and
then the default operator's ``lab-50``; the second run reuses the generated sets:
experiments/behavior-axis-v2/README.md#another-operator); ``--operator-lab LAB_FILE`` gives the teleoperator
rows that lab's operator style (its same-world reference; default: the default lab's operator).

Example::

    r2s2r datasets make lab-50 --cache-dir runs
    MUJOCO_GL=egl python experiments/behavior_similarity.py --lab-demos runs/lab-50.hdf5 --work runs/similarity \\
        --workers 2 --out runs/behavior_similarity.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from behavior_axis import HumanlikeInLab, humanlike_in_lab  # noqa: E402

import r2s2r_envs  # noqa: E402,F401  (registers the envs and demonstrators)
from r2s2r_envs.behavior.fit import load_model, model_sha256  # noqa: E402
from r2s2r_envs.behavior.metrics import STRATEGY_TRAITS, compare  # noqa: E402
from r2s2r_envs.datasets.generate import generate  # noqa: E402


class StyledTeleoperator:
    """The lab's teleoperator with another lab's operator style (``--operator-lab``: the same-world reference of
    another operator, a measurement), as a picklable factory; its ``__name__`` (file names) and ``__qualname__``
    (how ``generate`` records it) name that lab and its config hash."""

    def __init__(self, lab: str) -> None:
        from r2s2r_envs.lab import load_lab

        config = load_lab(lab)
        self.style = dataclasses.asdict(config.operator)
        sha = config.identity()["config_sha256"][:12]
        self.__name__ = f"teleoperator-{config.name}-{sha}"
        self.__qualname__ = f"StyledTeleoperator[{config.name} {sha}]"

    def __call__(self, env):
        from r2s2r_envs.envs.demonstrators import make_demonstrator

        return make_demonstrator(env, "teleoperator", **self.style)


#: (row label, env id, demonstrator: a name, None for the env's own, or a factory).
ROWS: tuple[tuple[str, str, object], ...] = (
    ("generator, nominal sim", "PickSort-BehaviorGrounded-v0", None),
    ("generator, identified sim", "PickSort-FullyGrounded-v0", None),
    ("planner, nominal sim", "PickSort-Ungrounded-v0", None),
    ("generator, lab", "PickSort-Real-v0", humanlike_in_lab),
    ("planner, lab", "PickSort-Real-v0", "scripted"),
    ("teleoperator, nominal sim", "PickSort-Ungrounded-v0", "teleoperator"),
    ("teleoperator, identified sim", "PickSort-FullyGrounded-v0", "teleoperator"),
)
#: (generator row, its same-world reference row) of the similarity goal.
GOALS = (
    ("generator, nominal sim", "teleoperator, nominal sim"),
    ("generator, identified sim", "teleoperator, identified sim"),
)
#: The generator's AUC may exceed the same-world reference's by at most this.
GOAL_MARGIN = 0.05


def goals(rows: list[dict]) -> dict[str, dict]:
    """Issue 20's similarity goal on the rows present: per world and trait set, the generator's AUC, the
    reference's, and whether the first is at most the second + ``GOAL_MARGIN``."""
    by = {r["row"]: r for r in rows}
    out = {}
    for gen, ref in GOALS:
        if gen in by and ref in by:
            for key in ("auc_all", "auc_strategy"):
                g, r = by[gen][key], by[ref][key]
                out[f"{gen} vs {ref}, {key}"] = {"generator": g, "reference": r, "met": g <= r + GOAL_MARGIN}
    return out


def measure_row(label: str, env_id: str, demonstrator, args: argparse.Namespace) -> dict:
    env_kwargs: dict = {}
    tag = ""  # generator rows with --behavior: the model's hash in the file name (never resumes another's set)
    if args.behavior is not None and label.startswith("generator"):
        model = str(args.behavior.resolve())
        if demonstrator is humanlike_in_lab:
            demonstrator = HumanlikeInLab(model)
        else:
            env_kwargs = {"behavior": model}
            tag = f"-{model_sha256(load_model(model))[:12]}"
    if args.operator_lab is not None and label.startswith("teleoperator"):
        demonstrator = StyledTeleoperator(args.operator_lab)
    who = demonstrator if isinstance(demonstrator, str) or demonstrator is None else demonstrator.__name__
    name = f"{env_id.removeprefix('PickSort-').removesuffix('-v0')}-{who or 'own'}{tag}-{args.demos}.hdf5"
    path = args.work / name
    start = time.perf_counter()
    kwargs: dict = {} if demonstrator is None else {"demonstrator": demonstrator}
    if env_kwargs:
        kwargs["env_kwargs"] = env_kwargs
    made = generate(env_id, args.demos, path, workers=args.workers, successes_only=True, progress=False, **kwargs)
    generation_s = time.perf_counter() - start
    full = compare(args.lab_demos, path)
    strategy = compare(args.lab_demos, path, classifier_traits=STRATEGY_TRAITS)
    worst = sorted(full.traits, key=lambda t: -abs(t.effect_size))[:4]
    return {
        "row": label,
        "env_id": env_id,
        "demonstrator": who or "own",
        "file": str(path),
        "demos": made.num_demos,
        "attempts": made.attempts,
        "generation_s": round(generation_s, 1),
        "auc_all": round(full.auc, 3),
        "auc_strategy": round(strategy.auc, 3),
        "dtw_m": round(full.dtw["distance"], 3),
        "dtw_within_lab_m": round(full.dtw["within_a"], 3),
        "largest_differences": {t.trait: round(t.effect_size, 2) for t in worst},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab-demos", type=Path, required=True, help="the lab's demonstrations (lab-50.hdf5)")
    parser.add_argument("--work", type=Path, default=Path("runs/similarity"), help="where generated sets go")
    parser.add_argument("--demos", type=int, default=50, help="successful demos per generated set (default 50)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows", default=None, help="row labels separated by ';' (default: every row)")
    parser.add_argument("--behavior", type=Path, default=None, help="behavior model of the generator rows")
    parser.add_argument(
        "--operator-lab",
        default=None,
        help="lab file whose operator style the teleoperator rows take (default: the default lab's operator)",
    )
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    if args.behavior is not None and not args.behavior.is_file():
        parser.error(f"--behavior takes a behavior model file (r2s2r fit-behavior --out), got {str(args.behavior)!r}")
    labels = [r[0] for r in ROWS]
    chosen = labels if args.rows is None else [x.strip() for x in args.rows.split(";") if x.strip()]
    unknown = sorted(set(chosen) - set(labels))
    if unknown:
        parser.error(f"unknown row(s) {unknown}; rows: {labels}")
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| demonstrator, world | kept / attempts | AUC, all traits | AUC, strategy | DTW, m | largest |d| |")
    print("|---|---|---|---|---|---|")
    for label, env_id, demonstrator in (r for r in ROWS if r[0] in chosen):
        r = measure_row(label, env_id, demonstrator, args)
        rows.append(r)
        largest = ", ".join(f"{k} {v:+.2f}" for k, v in r["largest_differences"].items())
        print(
            f"| {label} | {r['demos']} / {r['attempts']} | {r['auc_all']:.3f} | {r['auc_strategy']:.3f} | "
            f"{r['dtw_m']:.3f} | {largest} |",
            flush=True,
        )
    print(f"DTW within the lab's own set: {rows[0]['dtw_within_lab_m']:.3f} m")
    met = goals(rows)
    for name, g in met.items():
        print(
            f"goal {name}: {g['generator']:.3f} vs {g['reference']:.3f} + {GOAL_MARGIN}: "
            + ("met" if g["met"] else "NOT met")
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "machine": platform.node(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "lab_demos": str(args.lab_demos),
            "demos": args.demos,
            "rows": chosen,
            "behavior": None if args.behavior is None else str(args.behavior),
            "operator_lab": args.operator_lab,
        }
        if args.behavior is not None:
            fitted = load_model(args.behavior)
            meta["behavior_model_sha256"] = model_sha256(fitted)
            meta["behavior_model_demos"] = fitted["provenance"]["demos"]
        args.out.write_text(json.dumps({"meta": meta, "rows": rows, "goals": met}, indent=2) + "\n")


if __name__ == "__main__":
    main()
