"""The goal measurement of issue 46, item 6: the docs' example method at the `cpu` recipe, in the lab.

Trains ``byo_bc:DomainWeightedBC`` (the block of docs/byo_method.md, copied here as ``byo_bc.py`` and checked to be
the same bytes) co-trained on lab-50 and worldgrounded-1000 at real_fraction 0.224 (the co-trained zoo policy's),
seed 0, with the page's commands, evaluates it with the protocol's default evaluation in the lab on the `state`
track, and writes ``summary.json`` (commands, hashes, figures beside `flow`'s from experiments/zoo-protocol-v2).
``--flow-ckpt DIR`` also trains and evaluates `flow` the same way on the same dataset builds (the zoo's was trained
on other builds).

    MUJOCO_GL=egl nice -n 5 python experiments/byo-method/run.py --ckpt runs/byo-method/dw-bc-s0 \
        --flow-ckpt runs/byo-method/flow-s0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
R2S2R = str(Path(sys.executable).with_name("r2s2r"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(argv: list[str], cwd: Path) -> float:
    print("$", " ".join(argv), flush=True)
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True)
    return time.perf_counter() - t0


def figure(summary: dict) -> dict:
    n = summary["episodes"]
    return {
        "success_rate": summary["success_rate"],
        "ci95": summary["success_rate_ci95"],
        "successes": round(summary["success_rate"] * n),
        "episodes": n,
        "failure_causes": summary["failure_causes"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ckpt", required=True, help="checkpoint directory (trained unless it holds one)")
    parser.add_argument("--flow-ckpt", help="also train and evaluate flow on the same builds, here")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    ckpt = Path(args.ckpt).resolve()
    page = (ROOT / "docs" / "byo_method.md").read_text()
    block = re.search(r"<!-- byo-method:[^>]*-->\s*```python\n(.*?)```", page, re.S)
    assert block and block.group(1) == (HERE / "byo_bc.py").read_text(), "byo_bc.py is not the docs' block"
    train = [R2S2R, "train", "--method", "byo_bc:DomainWeightedBC", "--real", "lab-50", "--sim", "worldgrounded-1000"]
    train += ["--real-fraction", "0.224", "--seed", "0", "--out", str(ckpt), "--no-progress"]
    result = HERE / "results" / "dw-bc-s0_lab.json"
    evaluate = [R2S2R, "evaluate", "--policy", str(ckpt), "--env", "PickSort-Real-v0", "--track", "state"]
    evaluate += ["--workers", str(args.workers), "--out", str(result), "--no-progress"]
    load = {"before": list(os.getloadavg())}
    train_wall = None if (ckpt / "config.json").is_file() else run(train, HERE)
    load["after_training"] = list(os.getloadavg())
    eval_wall = run(evaluate, HERE)
    load["after_evaluation"] = list(os.getloadavg())

    config = json.loads((ckpt / "config.json").read_text())
    data = json.loads(result.read_text())
    flow = json.loads((ROOT / "experiments" / "zoo-protocol-v2" / "summary.json").read_text())
    flow_row = next(r for r in flow["rows"] if r["name"] == "flow-cotrained-worldgrounded")
    ours = {c["name"]: figure(c["summary"]) for c in data["conditions"]}
    ours["all shifted"] = figure(data["shifted"])
    ours["all"] = figure(data["summary"])
    if args.flow_ckpt:
        flow_ckpt = Path(args.flow_ckpt).resolve()
        flow_train = [R2S2R, "train", "--method", "flow", *train[4:]]
        flow_train[flow_train.index("--out") + 1] = str(flow_ckpt)
        flow_result = HERE / "results" / "flow-s0_lab.json"
        flow_eval = [*evaluate[:3], str(flow_ckpt), *evaluate[4:]]
        flow_eval[flow_eval.index("--out") + 1] = str(flow_result)
        flow_train_wall = None if (flow_ckpt / "config.json").is_file() else run(flow_train, HERE)
        flow_eval_wall = run(flow_eval, HERE)
        load["after_flow"] = list(os.getloadavg())
        flow_data = json.loads(flow_result.read_text())
        flow_config = json.loads((flow_ckpt / "config.json").read_text())
        same = {c["name"]: figure(c["summary"]) for c in flow_data["conditions"]}
        same["all shifted"] = figure(flow_data["shifted"])
        same["all"] = figure(flow_data["summary"])
        flow_same = {
            "commands": {
                "train": " ".join(["r2s2r", *flow_train[1:]]),
                "evaluate": " ".join(["r2s2r", *flow_eval[1:]]),
            },
            "weights_sha256": flow_config["weights_sha256"],
            "datasets": [d["sha256"] for d in flow_config["metadata"]["datasets"]],
            "training": flow_config["training"],
            "result": {"path": str(flow_result.relative_to(ROOT)), "content_sha256": flow_data.get("content_sha256")},
            "figures": same,
            "wall_time_s": {"training": flow_train_wall, "evaluation": flow_eval_wall},
        }
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    summary = {
        "script": "experiments/byo-method/run.py",
        "commit": commit,
        "commands": {
            "train (cwd experiments/byo-method)": " ".join(["r2s2r", *train[1:]]),
            "evaluate": " ".join(["r2s2r", *evaluate[1:]]),
        },
        "method_file": {"path": "experiments/byo-method/byo_bc.py", "sha256": sha256(HERE / "byo_bc.py")},
        "checkpoint": {
            "weights_sha256": config["weights_sha256"],
            "config_content_sha256": config.get("content_sha256"),
            "method": config["metadata"]["method"],
            "method_class": config["metadata"]["method_class"],
            "method_source_sha256": config["metadata"]["method_source_sha256"],
            "datasets": [
                {k: d[k] for k in ("name", "sha256", "domain", "episodes", "validation_episodes")}
                for d in config["metadata"]["datasets"]
            ],
            "training": config["training"],
            "recipe": config["config"]["recipe"],
            "steps": config["config"]["steps"],
            "batch_size": config["config"]["batch_size"],
        },
        "result": {
            "path": str(result.relative_to(ROOT)),
            "content_sha256": data.get("content_sha256"),
            "split": data.get("split"),
            "track": data.get("track"),
        },
        "figures": ours,
        "flow_cotrained_worldgrounded": {
            "source": "experiments/zoo-protocol-v2/summary.json",
            **flow_row["test"],
        },
        "nominal_difference_points": round(
            100 * (ours["nominal"]["success_rate"] - flow_row["test"]["nominal"]["success_rate"]), 1
        ),
        "flow_same_builds": flow_same if args.flow_ckpt else None,
        "wall_time_s": {"training": train_wall, "evaluation": eval_wall},
        "load_average": load,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
    }
    (HERE / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v["success_rate"] for k, v in ours.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
