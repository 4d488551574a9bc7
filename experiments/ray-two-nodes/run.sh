#!/usr/bin/env bash
# Two Ray nodes on one machine (a head and a worker node, one CPU each, token authentication on), then the smoke
# ablation design joined to them with --address; records the nodes, where each task ran, and the time.
# Usage: experiments/ray-two-nodes/run.sh OUT_DIR   (from the repository root, after `make setup`)
set -euo pipefail
out=${1:?usage: run.sh OUT_DIR}
mkdir -p "$out"
bin=$(dirname "$(command -v python)")
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN=$(python -c 'import secrets; print(secrets.token_hex(32))')  # a shared secret, never stored
export RAY_USAGE_STATS_ENABLED=0
port=${RAY_TWO_NODES_PORT:-6411}
address=127.0.0.1:$port
# Not `ray stop`: it stops every Ray process on the machine, other clusters' too. Only this cluster's processes, found
# by its own temporary folder (every one of them names it on its command line).
tmp=${RAY_TWO_NODES_TMP:-/tmp/ray-two-nodes}
cleanup() { pkill -f -- "$tmp/" >/dev/null 2>&1 || true; sleep 3; pkill -9 -f -- "$tmp/" >/dev/null 2>&1 || true; }
trap cleanup EXIT
start=$(date +%s)
"$bin/ray" start --head --node-ip-address 127.0.0.1 --port "$port" --num-cpus 1 --resources '{"head_node": 1}' \
  --include-dashboard false --disable-usage-stats --temp-dir "$tmp" > "$out/head.log" 2>&1
"$bin/ray" start --address "$address" --node-ip-address 127.0.0.1 --num-cpus 1 --resources '{"worker_node": 1}' \
  --disable-usage-stats > "$out/worker.log" 2>&1
sleep 10  # the autoscaler's view catches up with the second node
"$bin/ray" status --address "$address" > "$out/status.txt" 2>&1
"$bin/r2s2r" ablation --smoke --address "$address" --out "$out/run" > "$out/ablation.log" 2>&1
end=$(date +%s)
python - "$out" "$address" "$start" "$end" <<'PY'
import json, sys
from collections import Counter
from pathlib import Path
import ray

out, address, start, end = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ray.init(address=address, logging_level="ERROR")
nodes = {n["NodeID"]: ("head" if "head_node" in n["Resources"] else "worker") for n in ray.nodes() if n["Alive"]}
starts = [json.loads(line) for f in sorted((out / "run" / "store" / "attempts").glob("*.jsonl")) for line in f.open()]
starts = [e for e in starts if e.get("event") == "start"]
record = {
    "ray": ray.__version__,
    "auth_mode": "token",
    "nodes": sorted(nodes.values()),
    "task_starts": len(starts),
    "task_starts_per_node": dict(sorted(Counter(nodes.get(e.get("ray_node"), "unknown") for e in starts).items())),
    "wall_s": end - start,
}
(out / "placement.json").write_text(json.dumps(record, indent=2) + "\n")
print(json.dumps(record, indent=2))
PY
