"""The lab's teleoperator: its success in the default lab, another operator's, and what practice is worth
(experiments/teleoperator/).

Each row evaluates the lab's own demonstrator (the teleoperator of the row's lab) with the evaluation protocol
(base seed 271828, Wilson 95% intervals, episodes by their first failure):

* ``default``: the default lab;
* ``default, no practice``: the same operator without its warm-up episodes (``practice_episodes: 0``);
* ``other operator`` and ``other operator, 1 object``: the default lab's physics and effects with another
  operator (slower, follows the object, pinches, places);
* ``harder cell`` with and without practice: the default lab with an 80 ms control latency and a camera 2 cm off
  along the belt, where what practice learns (the lag, the offset) matters more.

Example::

    python experiments/teleoperator.py --workers 2 --out runs/teleoperator.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import r2s2r_envs  # noqa: F401  (registers the envs)
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.evaluation.protocol import evaluate
from r2s2r_envs.provenance import versions

OTHER_OPERATOR = {
    "speed": 0.8,
    "approach": "follow",
    "grasp": "pinch",
    "release": "place",
    "reaction_time": 0.4,
    "variability": 0.4,
}
HARDER_WORLD = {"control_latency": 0.08, "object_pos_offset": [0.0, 0.02, 0.0]}

#: label -> (lab, other env arguments, episodes)
ROWS: dict[str, tuple[dict[str, Any], dict[str, Any], int]] = {
    "default": ({"name": "default"}, {}, 100),
    "default, no practice": ({"name": "default-no-practice", "operator": {"practice_episodes": 0}}, {}, 100),
    "other operator": ({"name": "other-operator", "operator": OTHER_OPERATOR}, {}, 100),
    "other operator, 1 object": ({"name": "other-operator", "operator": OTHER_OPERATOR}, {"num_objects": 1}, 100),
    "harder cell": ({"name": "harder-cell", "world": HARDER_WORLD}, {}, 50),
    "harder cell, no practice": (
        {"name": "harder-cell-no-practice", "world": HARDER_WORLD, "operator": {"practice_episodes": 0}},
        {},
        50,
    ),
}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=None, help=f"labels separated by ';' (default: all of {list(ROWS)})")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (the records do not depend on it)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON record")
    args = parser.parse_args(argv)
    labels = list(ROWS) if args.rows is None else [r.strip() for r in args.rows.split(";")]
    unknown = [r for r in labels if r not in ROWS]
    if unknown:
        parser.error(f"unknown row(s) {unknown}; rows: {list(ROWS)}")
    rows = []
    start = time.time()
    for label in labels:
        lab, kwargs, episodes = ROWS[label]
        t0 = time.time()
        result = evaluate(
            "PickSort-Real-v0",
            make_demonstrator,
            episodes=episodes,
            env_kwargs={"lab": lab, **kwargs},
            workers=args.workers,
            progress=False,
        )
        s = result.summary
        rows.append({"label": label, "lab": lab, "env_kwargs": kwargs, "wall_time_s": round(time.time() - t0, 1), **s})
        low, high = s["success_rate_ci95"]
        print(
            f"{label:26s} success {s['success_rate']:.2f} [{low:.3f}, {high:.3f}] sort accuracy "
            f"{s['sort_accuracy']:.2f} causes {s['failure_causes']}",
            flush=True,
        )
    record = {
        "study": "teleoperator",
        "rows": rows,
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "versions": versions(),
        "wall_time_s": round(time.time() - start, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
