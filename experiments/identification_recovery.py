"""How well system identification recovers labs nobody tuned for (experiments/identification-recovery/).

For each seed, a lab is drawn from the documented ranges (``r2s2r_envs.lab.draw.draw_lab(seed, operator=False)``:
every world field and every unmodeled effect drawn), logged with ``log_lab(quick=True)`` and identified with
``identify(quick=True)``, the arm runs left out (the arm joint fit is not part of the recovery tolerances); the slow
test ``tests/test_grounding_identify.py::test_recovers_random_labs`` runs seed 202 the same way. The
identified world is compared with the drawn truth, which the identification never reads, against the tolerances of
docs/lab_logs.md#recovery.

Example::

    python experiments/identification_recovery.py --seeds 1,2,101,202 --work runs/recovery \\
        --out runs/recovery/identification_recovery.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import r2s2r_envs  # noqa: F401  (registers the envs)
from r2s2r_envs.grounding import excitation
from r2s2r_envs.grounding.identify import identify
from r2s2r_envs.grounding.replay import NOISE_FIELDS as REPLAY_RANDOM_FIELDS
from r2s2r_envs.lab.draw import draw_lab
from r2s2r_envs.provenance import versions

#: The sensor noise levels (the replay's random processes, the belt's fluctuation apart).
NOISE_FIELDS = tuple(f for f in REPLAY_RANDOM_FIELDS if f.endswith("_noise"))
#: error name -> (how it is measured, tolerance or None): the recovery tolerances of docs/lab_logs.md#recovery.
TOLERANCES: dict[str, tuple[str, float | None]] = {
    "belt_speed": ("relative", 0.05),
    "control_latency": ("absolute, s", 0.010),
    "object_mass": ("relative, worst category", 0.20),
    "object_friction": ("relative", 0.20),
    "finger_kp": ("relative", 0.25),
    "finger_kv": ("relative", None),
    "finger_force_limit": ("relative", None),
    "object_pos_offset": ("absolute, worst axis, m", 0.003),
    "noise": ("relative, worst level", 0.30),
    "belt_speed_fluctuation": ("relative", None),
    "belt_fluctuation_time": ("relative", None),
    "object_size_scale": ("absolute", None),
}


def errors(world: Any, truth: dict[str, Any]) -> dict[str, float]:
    """Identification errors of ``world`` against the drawn ``truth`` (see ``TOLERANCES``)."""

    def rel(field: str) -> float:
        got, want = np.asarray(getattr(world, field), dtype=float), np.asarray(truth[field], dtype=float)
        if np.any(want == 0):
            return float("nan")  # undefined: a zero truth (a steady belt, a noiseless sensor)
        return float(np.max(np.abs(got / want - 1.0)))

    def absolute(field: str) -> float:
        return float(np.max(np.abs(np.asarray(getattr(world, field)) - np.asarray(truth[field]))))

    out = {}
    for name, (how, _) in TOLERANCES.items():
        if name == "noise":
            out[name] = max(rel(f) for f in NOISE_FIELDS if truth[f] > 0)
        elif how.startswith("relative"):
            out[name] = rel(name)
        else:
            out[name] = absolute(name)
    return {k: round(v, 5) for k, v in out.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1,2,101,202", help="lab seeds, comma-separated (default 1,2,101,202)")
    parser.add_argument("--work", type=Path, required=True, help="folder for the labs and their logs")
    parser.add_argument("--out", type=Path, required=True, help="the JSON record")
    args = parser.parse_args(argv)
    labs = []
    start = time.time()
    for seed in [int(s) for s in args.seeds.split(",")]:
        lab = draw_lab(seed, name=f"random-{seed}", operator=False)
        folder = args.work / f"random-{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "lab.json"
        path.write_text(json.dumps(lab, indent=1) + "\n")
        t0 = time.time()
        logs = excitation.log_lab(path, folder / "logs", seed=seed, quick=True)
        t1 = time.time()
        logs = dataclasses.replace(logs, runs=[r for r in logs.runs if not r.protocol.startswith("arm_")])
        world = identify(logs, quick=True).world
        t2 = time.time()
        err = errors(world, lab["world"])
        failed = [k for k, (_, tol) in TOLERANCES.items() if tol is not None and err[k] > tol]
        labs.append(
            {
                "seed": seed,
                "lab": lab,
                "identified": dataclasses.asdict(world),
                "errors": err,
                "outside_tolerance": failed,
                "log_time_s": round(t1 - t0, 1),
                "identify_time_s": round(t2 - t1, 1),
            }
        )
        print(f"lab {seed}: outside tolerance {failed or 'none'}; errors {err}", flush=True)
    record = {
        "study": "identification-recovery",
        "budget": "quick, arm runs left out",
        "tolerances": {k: {"measured": how, "tolerance": tol} for k, (how, tol) in TOLERANCES.items()},
        "labs": labs,
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "versions": versions(),
        "wall_time_s": round(time.time() - start, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, default=lambda o: np.asarray(o).tolist()) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
