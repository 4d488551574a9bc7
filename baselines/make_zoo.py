"""Copies trained checkpoints into the model zoo and evaluates what ships.

Each ``--entry NAME=CHECKPOINT_DIR`` becomes ``zoo/r2s2r_envs_zoo/NAME/`` (the zoo's data package, in this
checkout; reinstall it with ``pip install ./zoo`` afterwards) with the checkpoint's ``config.json`` and its weights
packed as ``--storage`` (default int8, a quarter of float32's bytes: ``r2s2r_envs.policies.weights``;
``load_policy`` computes in float32 as always), the weights' hash updated in ``config.json``. The shipped entry is
then evaluated as packed with the protocol's evaluation (the standard mix on the ``test`` split, in the env its row
is evaluated in, ``--env NAME=ENV_ID``), and the core package's zoo index
(``r2s2r_envs/policies/zoo/index.json``) records per entry: the description, method, recipe, the datasets' content
hashes, the measured success and sort accuracy of the shipped weights with the record they are in, and the SHA-256
of each shipped file (checked whenever ``zoo:NAME`` loads).

Example::

    python baselines/make_zoo.py --entry flow-sim-only=runs/reference/train/sim-only-flow-s0 \\
        --env flow-sim-only=PickSort-Ungrounded-v0 --describe "flow=sim-only flow on ungrounded-1000, seed 0" \\
        --record experiments/zoo-int8
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.policies import load_policy, read_checkpoint
from r2s2r_envs.policies.checkpoint import CONFIG_FILE, WEIGHTS_FILE, weights_digest
from r2s2r_envs.policies.weights import STORAGES, pack_checkpoint
from r2s2r_envs.policies.zoo import HASHES_FIELD, ZOO_PACKAGE
from r2s2r_envs.safe_json import gzip_bytes

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


def ship(name: str, source: Path, root: Path, storage: str) -> Path:
    """Writes ``root/name`` from a checkpoint directory: its config.json and its weights packed as ``storage``."""
    source_config = read_checkpoint(source)
    origin = source_config.get("zoo", {}).get("source_weights_sha256", source_config["weights_sha256"])
    target = root / name
    if target.exists():
        shutil.rmtree(target)
    pack_checkpoint(source, target, storage=storage, extra={"zoo": {"source_weights_sha256": origin}})
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entry", action="append", default=[], help="NAME=CHECKPOINT_DIR (repeatable)")
    parser.add_argument("--env", action="append", default=[], help="NAME=ENV_ID where the entry is evaluated")
    parser.add_argument("--describe", action="append", default=[], help="NAME=one-line description")
    parser.add_argument("--record", required=True, help="the record (folder) the entries' figures are in")
    parser.add_argument("--storage", default="int8", choices=STORAGES, help="how the weights ship (default int8)")
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
        target = ship(name, Path(source), root, args.storage)
        data = read_checkpoint(target)
        result = evaluate(envs[name], load_policy(target), workers=args.workers, progress=False)  # the protocol's
        s = result.summary
        record = Path(args.record) / "zoo" / f"{name}.json.gz"  # compressed, as records keep results
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_bytes(gzip_bytes((result.to_json(indent=1) + "\n").encode()))
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
                "evaluation": "the standard mix on the test split",
                "episodes": len(result.records),
                "weights_storage": args.storage,
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
