"""Copies trained checkpoints into the model zoo and evaluates what ships.

Each ``--entry NAME=CHECKPOINT_DIR`` becomes ``zoo/r2s2r_envs_zoo/NAME/`` (the zoo's data package, in this
checkout; reinstall it with ``pip install ./zoo`` afterwards) with the checkpoint's ``config.json`` and its weights
stored as float16 (half the size; ``load_policy`` computes in float32 as always), and the weights' hash updated in
``config.json``. The shipped entry is then evaluated with the protocol (``--episodes`` on the published seeds, in
the env its row is evaluated in, ``--env NAME=ENV_ID``), and the core package's zoo index
(``r2s2r_envs/policies/zoo/index.json``) records per entry: the description, method, recipe, the datasets' content
hashes, the measured success and sort accuracy of the shipped weights with the record they are in, and the SHA-256
of each shipped file (checked whenever ``zoo:NAME`` loads).

Example::

    python baselines/make_zoo.py --entry flow-sim-only=runs/reference/train/sim-only-flow-s0 \\
        --env flow-sim-only=PickSort-Ungrounded-v0 --describe "flow=sim-only flow on ungrounded-1000, seed 0" \\
        --record experiments/reference-cpu
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.policies import load_policy, read_checkpoint
from r2s2r_envs.policies.checkpoint import CONFIG_FILE, WEIGHTS_FILE, weights_digest
from r2s2r_envs.policies.zoo import HASHES_FIELD, ZOO_PACKAGE

ROOT = Path(__file__).resolve().parents[1]
#: Where this checkout keeps the zoo's data package's checkpoints, and the core package's zoo index.
DATA_ROOT = ROOT / "zoo" / ZOO_PACKAGE
INDEX = ROOT / "r2s2r_envs" / "policies" / "zoo" / "index.json"


def _pairs(values: list[str], what: str) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"{what} {v!r}: expected NAME=VALUE")
        out[name] = rest
    return out


def ship(name: str, source: Path, root: Path) -> Path:
    """Writes ``root/name`` from a checkpoint directory: config.json and float16 weights (hash updated)."""
    read_checkpoint(source)
    target = root / name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    state = torch.load(source / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    torch.save({k: v.half() if v.is_floating_point() else v for k, v in state.items()}, target / WEIGHTS_FILE)
    doc = json.loads((source / CONFIG_FILE).read_text())
    doc["weights_sha256"] = weights_digest(target / WEIGHTS_FILE)
    doc["zoo"] = {"weights_dtype": "float16", "source_weights_sha256": weights_digest(source / WEIGHTS_FILE)}
    (target / CONFIG_FILE).write_text(json.dumps(doc, indent=2) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entry", action="append", default=[], help="NAME=CHECKPOINT_DIR (repeatable)")
    parser.add_argument("--env", action="append", default=[], help="NAME=ENV_ID where the entry is evaluated")
    parser.add_argument("--describe", action="append", default=[], help="NAME=one-line description")
    parser.add_argument("--record", required=True, help="the record (folder) the entries' figures are in")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    entries, envs, descriptions = (
        _pairs(v, w) for v, w in ((args.entry, "--entry"), (args.env, "--env"), (args.describe, "--describe"))
    )
    missing = sorted(set(entries) - set(envs))
    if missing:
        parser.error(f"--env missing for {missing}")
    root, index_path = DATA_ROOT, INDEX
    index = json.loads(index_path.read_text()) if index_path.is_file() else {"package": ZOO_PACKAGE, "checkpoints": []}
    kept = [e for e in index["checkpoints"] if e["name"] not in entries]
    for name, source in entries.items():
        target = ship(name, Path(source), root)
        data = read_checkpoint(target)
        result = evaluate(envs[name], load_policy(target), episodes=args.episodes, workers=args.workers, progress=False)
        s = result.summary
        record = Path(args.record) / "zoo" / f"{name}.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(result.to_json(indent=1) + "\n")
        kept.append(
            {
                "name": name,
                "description": descriptions.get(name, ""),
                "method": data["metadata"]["method"],
                "recipe": data["config"]["recipe"],
                "real_fraction": data["metadata"]["real_fraction"],
                "datasets": [d["sha256"] for d in data["metadata"]["datasets"]],
                "dataset_names": [d["name"] for d in data["metadata"]["datasets"]],
                "evaluated_in": envs[name],
                "episodes": args.episodes,
                "success_rate": s["success_rate"],
                "success_rate_ci95": s["success_rate_ci95"],
                "sort_accuracy": s["sort_accuracy"],
                "record": str(record),
                HASHES_FIELD: {f: weights_digest(target / f) for f in (CONFIG_FILE, WEIGHTS_FILE)},
            }
        )
        print(
            f"{name}: {envs[name]} success {100 * s['success_rate']:.1f}%, sort accuracy "
            f"{100 * s['sort_accuracy']:.1f}% ({record})",
            flush=True,
        )
    index["checkpoints"] = sorted(kept, key=lambda e: e["name"])
    index_path.write_text(json.dumps(index, indent=2) + "\n")
    print(f"wrote {index_path}; reinstall the data package: pip install ./zoo")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
