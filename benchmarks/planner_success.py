"""Success of the scripted planner in three worlds over the same episodes: the world gap, measured.

The planner is evaluated with the evaluation protocol (``r2s2r_envs.evaluation.protocol.evaluate``,
docs/protocol.md) on the same N episodes (base seed S; episode i uses ``episode_seeds(S, i)``) in:

* ``sim``: ``PickSort-Ungrounded-v0``, the nominal simulator.  The issue's bar: every object sorted in at least
  90% of 100 episodes.
* ``lab-world``: ``PickSort-Ungrounded-v0`` with ``world=`` the lab's own world parameters.  An *oracle
  diagnostic*: this benchmark reads the lab config (``r2s2r_envs.lab.load_lab(NAME).world``) because it measures
  the gap, it is not grounding code and no grounding method may do this.  It splits the gap: sim -> lab-world is
  what the lab's world parameters cost (everything a ``WorldParams`` can express), lab-world -> lab what the
  lab's effects outside them cost (those no simulator world models).  The lab's parameters are withheld from
  the JSON written here.
* ``lab``: ``PickSort-Real-v0`` with ``lab=NAME``, the real-system stand-in.
* ``lab-unit-gain`` and ``lab-uniform-objects`` (only when asked for with ``--envs``): the lab with one of its
  unmodeled effects switched off (arm command gain 1; no per-object mass and friction variation), to measure how
  each effect moves the planner.  Also oracle diagnostics, for the lab's documentation.

It prints a table (success with its Wilson 95% interval, success at any step, sort accuracy, time to sort,
failure causes) and writes the resolved configuration and each world's evaluation result (per-episode records
included) as JSON.  Every world runs the scripted planner (``make_demonstrator(env, name="scripted")``).
``r2s2r demo --env PickSort-Ungrounded-v0 --seed S --episodes N`` reproduces the sim row; in the lab
``r2s2r demo`` runs the lab's own demonstrator, the teleoperator, so it does not reproduce the lab row.

Example::

    python benchmarks/planner_success.py --seeds 100 --workers 2 --out runs/planner_success.json
    python benchmarks/planner_success.py --envs sim,lab --lab default --seeds 20
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import r2s2r_envs  # noqa: E402  (registers the envs and demonstrators)
from r2s2r_envs.behavior import make_demonstrator  # noqa: E402
from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED, EvaluationResult, evaluate  # noqa: E402

#: World label -> env id; the order of the table.
WORLDS = {
    "sim": "PickSort-Ungrounded-v0",
    "lab-world": "PickSort-Ungrounded-v0",
    "lab": "PickSort-Real-v0",
    "lab-unit-gain": "PickSort-Real-v0",
    "lab-uniform-objects": "PickSort-Real-v0",
}
DEFAULT_WORLDS = ("sim", "lab-world", "lab")
# The lab's effects switched off, one at a time.
_EFFECT_OFF = {
    "lab-unit-gain": {"arm_command_gain": [1.0] * 7},
    "lab-uniform-objects": {"object_mass_variation": 0.0, "object_friction_variation": 0.0},
}
WITHHELD = "withheld: the lab's world parameters (oracle diagnostic; r2s2r_envs.lab.load_lab(NAME).world)"


def world_env_kwargs(world: str, lab: str, common: dict[str, Any]) -> dict[str, Any]:
    """``gym.make`` arguments of a world label (``lab-world`` reads the lab's world: an oracle)."""
    if world == "sim":
        return dict(common)
    if world == "lab-world":
        from r2s2r_envs.lab import load_lab  # the oracle read; see the module docstring

        return {**common, "world": load_lab(lab).world.to_dict()}
    if world in _EFFECT_OFF:
        from r2s2r_envs.lab import load_lab

        config = load_lab(lab).to_dict()
        config["effects"].update(_EFFECT_OFF[world])
        config["name"] = f"{config['name']}:{world}"
        return {**common, "lab": config}
    return {**common, "lab": lab}


def withhold_lab_world(result_dict: dict[str, Any]) -> dict[str, Any]:
    """A ``lab-world`` result without the lab's parameters (in its env arguments and the env's provenance)."""
    out = json.loads(json.dumps(result_dict))
    out["env_kwargs"]["world"] = WITHHELD
    for key in ("world_params", "world", "world_sha256"):
        if key in out["provenance"]:
            out["provenance"][key] = WITHHELD
    return out


def _parse_worlds(text: str) -> list[str]:
    worlds = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in worlds if w not in WORLDS]
    if unknown or not worlds:
        raise argparse.ArgumentTypeError(
            f"unknown world(s) {unknown or [text]}; valid: {list(WORLDS)} (comma-separated)"
        )
    return list(dict.fromkeys(worlds))


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--envs",
        type=_parse_worlds,
        default=list(DEFAULT_WORLDS),
        metavar="WORLDS",
        help=f"comma-separated subset of {','.join(WORLDS)} (default: {','.join(DEFAULT_WORLDS)})",
    )
    parser.add_argument(
        "--lab",
        default="default",
        metavar="NAME",
        help="shipped lab name or lab JSON file, for lab-world and lab (default: default)",
    )
    parser.add_argument(
        "--seeds",
        "--episodes",
        dest="episodes",
        type=_positive_int,
        default=100,
        metavar="N",
        help="episodes per world, the same in every world (default 100)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=EVALUATION_BASE_SEED,
        metavar="S",
        help=f"base seed (default {EVALUATION_BASE_SEED}, the fixed protocol's)",
    )
    parser.add_argument("--num-objects", type=_positive_int, default=None, help="objects per episode (env default)")
    parser.add_argument("--episode-steps", type=_positive_int, default=None, help="time limit (env default)")
    parser.add_argument("--workers", type=_positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("runs/planner_success.json"),
        help="JSON file of the config and results (default runs/planner_success.json)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if any(w != "sim" for w in args.envs):
        from r2s2r_envs.lab import available_labs

        if args.lab not in available_labs() and not Path(args.lab).is_file():
            parser.error(f"unknown lab {args.lab!r}: expected a shipped lab name {available_labs()} or a JSON file")

    common: dict[str, Any] = {}
    if args.num_objects is not None:
        common["num_objects"] = args.num_objects
    if args.episode_steps is not None:
        common["episode_steps"] = args.episode_steps

    results: dict[str, EvaluationResult] = {}
    for world in args.envs:
        results[world] = evaluate(
            WORLDS[world],
            functools.partial(make_demonstrator, name="scripted"),  # the planner in every world, not the env's own
            episodes=args.episodes,
            base_seed=args.seed,
            env_kwargs=world_env_kwargs(world, args.lab, common),
            workers=args.workers,
            progress=not args.no_progress,
        )

    print(
        f"{'world':<20} {'env':<24} {'success':>7} {'95% CI (Wilson)':>15} {'any step':>8} {'sort acc':>8} "
        f"{'t_sort':>7}  failure causes"
    )
    for world, r in results.items():
        s = r.summary
        low, high = s["success_rate_ci95"]
        t = "n/a" if s["mean_time_to_sort"] is None else f"{s['mean_time_to_sort']:.1f} s"
        causes = ", ".join(f"{k} {v}" for k, v in s["failure_causes"].items() if v) or "none"
        print(
            f"{world:<20} {r.env_id:<24} {s['success_rate']:>7.3f} {f'{low:.3f}-{high:.3f}':>15} "
            f"{s['success_rate_any_step']:>8.3f} {s['sort_accuracy']:>8.3f} {t:>7}  {causes}"
        )
    print(
        f"({args.episodes} episodes per world, base seed {args.seed}; lab {args.lab!r}; failure causes count "
        "episodes by their first failure)"
    )

    config = {
        **vars(args),
        "out": str(args.out),
        "worlds": {w: WORLDS[w] for w in args.envs},
        "demonstrator": "r2s2r_envs.behavior.make_demonstrator(env, name='scripted'): the scripted planner in every "
        "world (the lab's own demonstrator is the teleoperator)",
    }
    del config["envs"]
    written = {w: withhold_lab_world(r.to_dict()) if w == "lab-world" else r.to_dict() for w, r in results.items()}
    for w in _EFFECT_OFF:  # an inline lab config is withheld by the protocol already; say which effect was off
        if w in written:
            written[w]["effect_switched_off"] = _EFFECT_OFF[w]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"config": config, "package_version": r2s2r_envs.__version__, "results": written}, indent=2)
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
