"""Drawn labs, version 2: does the lab's own teleoperator still sort most episodes in labs drawn with lab v3's
structure (``draw_lab(seed, version=2)``, ``"draw2:SEED"``; docs/lab.md#drawn-labs)?

Runs the teleoperator (``make_demonstrator(env)`` in ``PickSort-Real-v0``) in the version-2 drawn labs of the
given seeds, and in the shipped ``v3`` lab for reference, with the protocol's evaluation on the ``dev`` split's
nominal seeds (never ``test``).  The seeds were fixed before any run (0-5: the first six, none chosen).  Writes
``record.json`` beside this script: each lab's identity, the drawn values that matter most to the operator, success
with its 95% Wilson interval, first-failure causes and object outcomes.

``--diagnose`` runs, instead, each drawn lab twice more, once with lab v3's structure (its estimator fields,
cameras, delay jitter, contact model, late commands and finger backlash) in place of the drawn one and once with
lab v3's operator in place of the drawn one, to tell what a shortfall comes from (``diagnosis.json``).

Example::

    MUJOCO_GL=egl nice python experiments/drawn-labs-v2/drawn_labs_v2.py --episodes 20 --seeds 0 1 2 3 4 5
    MUJOCO_GL=egl nice python experiments/drawn-labs-v2/drawn_labs_v2.py --episodes 20 --seeds 0 1 2 3 4 5 --diagnose
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import r2s2r_envs
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.evaluation.stats import wilson_interval
from r2s2r_envs.lab.config import load_lab
from r2s2r_envs.lab.draw import draw_lab
from r2s2r_envs.world.params import PERCEPTION_FIELDS

HERE = Path(__file__).resolve().parent
SPLIT = "dev"
#: The drawn values reported per lab (world fields, then the lab's perception, contact and effects).
SHOWN_WORLD = (
    "belt_speed",
    "control_latency",
    "perception_delay",
    "object_pos_noise",
    "object_pos_noise_speed",
    "object_pos_noise_occlusion",
    "object_quat_noise",
    "object_dropout",
    "category_confusion",
    "hand_occlusion_radius",
)


def variant(seed: int, what: str) -> dict[str, Any]:
    """Version-2 drawn lab ``seed`` with lab v3's ``"structure"`` or ``"operator"`` in place of the drawn one."""
    config = draw_lab(seed, version=2)
    v3 = load_lab("v3").to_dict()
    config["name"] = f"drawn2-{seed}-v3-{what}"
    if what == "structure":
        config["world"].update({k: v3["world"][k] for k in PERCEPTION_FIELDS if k in v3["world"]})
        config["world"]["object_pos_rotation"] = [0.0, 0.0, 0.0]  # v3's (its cameras carry the rotation errors)
        config["perception"], config["contact"] = v3["perception"], v3["contact"]
        for k in ("late_command_probability", "finger_backlash"):
            config["effects"][k] = v3["effects"][k]
    else:
        config["operator"] = v3["operator"]
    return config


def _drawn(lab: str | dict[str, Any]) -> dict[str, Any]:
    config = load_lab(lab)
    shown: dict[str, Any] = {k: round(float(getattr(config.world, k)), 4) for k in SHOWN_WORLD}
    shown["delay_jitter"] = round(config.perception.delay_jitter, 4)
    shown["camera_rotation_error_max"] = round(
        max((abs(v) for c in config.perception.cameras for v in c.rotation_error), default=0.0), 4
    )
    shown["object_timeconst"] = round(config.contact.object_timeconst, 4)
    shown["rolling_friction"] = round(config.contact.rolling_friction, 5)
    shown["late_command_probability"] = round(config.effects.late_command_probability, 4)
    shown["finger_backlash"] = round(config.effects.finger_backlash, 4)
    shown["operator"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in config.operator.__dict__.items()}
    return {"name": config.name, "config_sha256": config.sha256(), "drawn": shown}


def run(lab: str | dict[str, Any], episodes: int) -> dict[str, Any]:
    start = time.perf_counter()
    result = evaluate(
        "PickSort-Real-v0",
        make_demonstrator,
        episodes=episodes,
        conditions="nominal",
        split=SPLIT,
        env_kwargs={"lab": lab},
        progress=False,
    )
    successes = sum(r.is_success for r in result.records)
    low, high = wilson_interval(successes, episodes)
    causes = Counter(r.failure_cause for r in result.records if r.failure_cause is not None)
    outcomes = Counter(o for r in result.records for o in r.object_outcomes)
    return {
        "lab": lab if isinstance(lab, str) else lab["name"],
        **_drawn(lab),
        "episodes": episodes,
        "successes": successes,
        "success": successes / episodes,
        "wilson_95": [low, high],
        "sort_accuracy": sum(r.sort_accuracy for r in result.records) / episodes,
        "first_failure": dict(causes.most_common()),
        "object_outcomes": dict(outcomes.most_common()),
        "base_seed": result.base_seed,
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--diagnose", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or HERE / ("diagnosis.json" if args.diagnose else "record.json")
    labs: list[Any] = [f"draw2:{s}" for s in args.seeds] + ["v3"]
    if args.diagnose:
        labs = [variant(s, what) for s in args.seeds for what in ("structure", "operator")]
    results = []
    for lab in labs:
        r = run(lab, args.episodes)
        results.append(r)
        print(
            f"{r['lab']:26s} {r['successes']:3d}/{r['episodes']} {100 * r['success']:5.1f}% "
            f"[{100 * r['wilson_95'][0]:.1f}, {100 * r['wilson_95'][1]:.1f}]  {r['first_failure']}  "
            f"{r['seconds']} s",
            flush=True,
        )
    drawn = [r for r in results if r["lab"].startswith("draw2:")] or results
    pooled = sum(r["successes"] for r in drawn), sum(r["episodes"] for r in drawn)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    record = {
        "script": "experiments/drawn-labs-v2/drawn_labs_v2.py",
        "command": f"MUJOCO_GL=egl nice python experiments/drawn-labs-v2/drawn_labs_v2.py --episodes "
        f"{args.episodes} --seeds {' '.join(map(str, args.seeds))}" + (" --diagnose" if args.diagnose else ""),
        "config": {
            "episodes": args.episodes,
            "conditions": "nominal",
            "split": SPLIT,
            "labs": [r["lab"] for r in results],
        },
        "machine": f"{platform.machine()}, {platform.system()}, python {platform.python_version()}",
        "commit": commit,
        "versions": {"r2s2r_envs": r2s2r_envs.__version__},
        "pooled_drawn": {
            "successes": pooled[0],
            "episodes": pooled[1],
            "success": pooled[0] / pooled[1],
            "wilson_95": list(wilson_interval(*pooled)),
        },
        "results": results,
    }
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
