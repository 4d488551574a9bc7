"""How well world grounding identifies the object estimator (experiments/grounding-v3/).

Two measurements, both at the quick budget (``log_lab(quick=True)``, ``identify(quick=True)``):

* **A simulated world with a known estimator** (one camera, as the simulators model it; lab v3's sizes): the
  sensing and perception protocols and one grasp logged in ``PickSort-Ungrounded``'s env with that world, per seed;
  the identified estimator fields against the truth (what ``tests/test_grounding_perception.py`` checks on seed 3).
* **Lab v3** (two cameras with their own calibration errors, delay jitter; docs/lab.md#perception): ``run_sysid``
  on the whole quick protocol set (logs reused from ``WORK/logs`` when there), the held-out validation (also of
  the grounded world with exact perception), and the estimator fields against the lab's config, which
  identification never reads.  Where two cameras have no
  one-camera equivalent the record gives the one-camera value they amount to for objects both cameras see
  (calibration: the mean of the cameras' error fields; position noise: divided by sqrt(2)).

Example::

    python experiments/grounding_v3.py --sim-seeds 3,4,5 --work runs/grounding-v3 \\
        --out experiments/grounding-v3/grounding_v3.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

import r2s2r_envs  # noqa: F401  (registers the envs)
from r2s2r_envs.envs.perception import rotation_matrix
from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.grounding import excitation, perception_fit
from r2s2r_envs.grounding.identify import identify
from r2s2r_envs.grounding.sysid import run_sysid
from r2s2r_envs.grounding.validation import validate
from r2s2r_envs.provenance import versions
from r2s2r_envs.world.params import WorldParams, nominal

SCALARS = (
    "perception_delay",
    "object_pos_noise_speed",
    "object_pos_noise_occlusion",
    "object_quat_noise",
    "object_dropout",
    "category_confusion",
    "hand_occlusion_radius",
    "object_pos_noise",
)
KNOWN = dataclasses.replace(
    nominal(),
    object_pos_noise=0.004,
    object_vel_noise=0.02,
    object_pos_offset=(0.003, -0.002, 0.001),
    perception_delay=0.08,
    object_pos_noise_speed=0.03,
    object_pos_noise_occlusion=0.01,
    object_pos_rotation=(0.006, -0.004, 0.005),
    object_quat_noise=0.05,
    object_dropout=0.03,
    category_confusion=0.01,
    hand_occlusion_radius=0.06,
)
PROTOCOLS = ("sensing_rest", *perception_fit.PERCEPTION_PROTOCOLS)


def belt_grid() -> np.ndarray:
    """Points on the belt where the calibration error fields are compared (objects' centres), m."""
    xs, ys = np.meshgrid(np.linspace(0.46, 0.64, 4), np.linspace(-0.45, 0.6, 8))
    return np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, 0.125)], axis=1)


def field_error(world: WorldParams, truth_field: np.ndarray) -> list[float]:
    found = perception_fit.calibration_error(belt_grid(), world.object_pos_rotation, world.object_pos_offset)
    return np.abs(found - truth_field).max(axis=0).round(6).tolist()


def sim_recovery(seed: int, work: Path) -> dict[str, Any]:
    plans = [
        p
        for p in excitation.plan_runs(quick=True)
        if p.protocol in PROTOCOLS or p.name in ("lift_cube_0", "lift_cube_0_empty")
    ]
    start = time.perf_counter()
    logs = excitation.log_env(
        lambda kw: PickSortEnv(world=KNOWN, **{**kw, "sensors": tuple(kw["sensors"])}),
        work / f"sim-{seed}",
        seed=seed,
        plans=plans,
    )
    result = identify(logs, quick=True)
    truth = perception_fit.calibration_error(belt_grid(), KNOWN.object_pos_rotation, KNOWN.object_pos_offset)
    return {
        "seed": seed,
        "estimate": {f: getattr(result.world, f) for f in SCALARS},
        "interval": {f: result.intervals[f] for f in SCALARS},
        "error": {f: round(getattr(result.world, f) - getattr(KNOWN, f), 6) for f in SCALARS},
        "rotation": list(result.world.object_pos_rotation),
        "offset": list(result.world.object_pos_offset),
        "field_error_m": field_error(result.world, truth),
        "occlusion": {k: result.details["perception"]["occlusion"][k] for k in ("misclassified_frames", "frames")},
        "wall_time_s": round(time.perf_counter() - start, 1),
    }


def v3_truth(config: dict[str, Any]) -> dict[str, Any]:
    """The lab's estimator fields, and the one-camera values two cameras amount to for objects both see."""
    world, cams = config["world"], config["perception"]["cameras"]
    shared = rotation_matrix(world.get("object_pos_rotation", [0.0, 0.0, 0.0])) - np.eye(3)
    offset = np.asarray(world.get("object_pos_offset", [0.0, 0.0, 0.0]))
    c0 = np.asarray(cams[0]["position"])
    grid = belt_grid()
    fields = []
    for cam in cams:
        a = rotation_matrix(cam["rotation_error"]) - np.eye(3)
        b = np.asarray(cam["translation_error"]) - a @ np.asarray(cam["position"]) + offset - shared @ c0
        fields.append(grid @ (a + shared).T + b)
    k = math.sqrt(len(cams))
    truth = {f: world.get(f, 0.0) for f in SCALARS}
    effective = dict(truth)
    effective["object_pos_noise"] = truth["object_pos_noise"] / k
    effective["object_pos_noise_speed"] = truth["object_pos_noise_speed"] / k
    return {"config": truth, "one_camera": effective, "field": np.mean(fields, axis=0)}


def lab_v3(work: Path) -> dict[str, Any]:
    logs = work / "logs" if (work / "logs" / "manifest.json").exists() else None
    start = time.perf_counter()
    result = run_sysid(
        work / "grounding.json",
        logs=logs,
        lab="v3",
        log_dir=work / "logs",
        quick=True,
        workers=2,
        tune_episodes=0,
    )
    grounding = result.grounding
    world = grounding.world
    config = json.loads(Path(r2s2r_envs.__file__).with_name("lab").joinpath("configs", "v3.json").read_text())
    truth = v3_truth(config)
    details = result.identification.details["perception"] if result.identification else {}
    # The same grounding with exact perception: what identifying the estimator changes in held-out validation.
    exact = validate(result.logs.heldout, perception_fit.exact_perception(world)).nrmse
    return {
        "logs_reused": logs is not None,
        "estimate": {f: getattr(world, f) for f in SCALARS},
        "interval": {f: grounding.intervals.get(f) for f in SCALARS},
        "not_identifiable": {f: grounding.not_identifiable[f] for f in SCALARS if f in grounding.not_identifiable},
        "truth_config": truth["config"],
        "truth_one_camera": truth["one_camera"],
        "rotation": list(world.object_pos_rotation),
        "offset": list(world.object_pos_offset),
        "object_size_scale": {"estimate": world.object_size_scale, "config": config["world"]["object_size_scale"]},
        "field_error_m": field_error(world, truth["field"]),
        "occlusion": {k: details.get("occlusion", {}).get(k) for k in ("misclassified_frames", "frames", "runs")},
        "delay_per_run_s": details.get("moving", {}).get("delay_per_run_s"),
        "validation": dict(grounding.validation).get("nrmse"),
        "validation_exact_perception": exact,
        "unmodeled": dict(grounding.validation).get("unmodeled"),
        "wall_time_s": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim-seeds", default="3,4,5", help="seeds of the simulated world's logs (comma separated)")
    parser.add_argument("--work", type=Path, default=Path("runs/grounding-v3"), help="logs and grounding file")
    parser.add_argument("--out", type=Path, required=True, help="the JSON record to write")
    parser.add_argument("--skip-lab", action="store_true", help="only the simulated world")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "config": {"sim_seeds": args.sim_seeds, "work": str(args.work), "budget": "quick"},
        "known_world": {f: getattr(KNOWN, f) for f in (*SCALARS, "object_pos_rotation", "object_pos_offset")},
        "versions": versions(),
        "machine": platform.platform(),
    }
    record["sim"] = [sim_recovery(int(s), args.work) for s in args.sim_seeds.split(",") if s]
    if not args.skip_lab:
        record["lab_v3"] = lab_v3(args.work)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, default=float) + "\n")
    print(json.dumps(record, indent=1, default=float)[:4000])


if __name__ == "__main__":
    main()
