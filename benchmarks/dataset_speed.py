"""Dataset speed and memory: generation throughput (1 vs 2 workers), loader throughput, loading memory.

Measures, and prints as a table and JSON:

* generation throughput in demonstrations per minute with 1 and 2 worker processes, and the speedup
  (goal: 2 workers at least 1.8x faster; worker start-up is included, so use enough episodes);
* loader throughput in samples per second for low-dimensional data from the in-memory cache, numpy
  ``TrajectoryDataset.get_batch`` and the torch ``DataLoader`` fast path (goal: 50,000 samples/s or more);
* peak memory while loading, against the bytes of the arrays loaded (goal: at most about 2x);
* full verification speed (content hash and normalization statistics recomputed from the arrays; every read
  also checks the arrays' HDF5 fletcher32 checksums).

Example:
    python benchmarks/dataset_speed.py --env PickSort-Ungrounded-v0 --episodes 60 --out-dir runs/dataset_speed
    python benchmarks/dataset_speed.py --env toy --episodes 200      # the physics-free toy env, no MuJoCo
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.datasets import TrajectoryDataset, open_dataset
from r2s2r_envs.datasets.generate import generate
from r2s2r_envs.datasets.toy import register_toy_env, write_synthetic_dataset


def bench_generation(
    env: str, episodes: int, workers: list[int], out_dir: Path, env_kwargs: dict[str, Any], episode_steps: int | None
) -> dict[str, Any]:
    """Generates the same dataset with each worker count; returns demos/min per count and the hashes."""
    # Each env's own demonstrator (the toy env's is "toy-reacher").
    env_id = register_toy_env() if env == "toy" else env
    results: dict[str, Any] = {}
    for w in workers:
        out = out_dir / f"gen_w{w}.hdf5"
        t0 = time.perf_counter()
        r = generate(
            env_id,
            episodes,
            out,
            workers=w,
            seed=0,
            env_kwargs=env_kwargs,
            overwrite=True,
            episode_steps=episode_steps,
            progress=False,
        )
        elapsed = time.perf_counter() - t0
        with open_dataset(out, verify="none") as f:
            steps = f.num_samples
        results[str(w)] = {
            "seconds": elapsed,
            "demos_per_minute": 60 * episodes / elapsed,
            "steps_per_second": steps / elapsed,
            "content_hash": r.content_hash,
        }
    hashes = {v["content_hash"] for v in results.values()}
    out: dict[str, Any] = {"per_workers": results, "identical_content": len(hashes) == 1}
    if "1" in results and "2" in results:
        out["speedup_2_vs_1"] = results["2"]["demos_per_minute"] / results["1"]["demos_per_minute"]
    return out


def bench_loader(path: Path, batch_size: int, frame_stack: int, action_chunk: int, seconds: float) -> dict[str, Any]:
    """Loads the file (tracking memory) and samples batches for ``seconds``."""
    tracemalloc.start()
    t0 = time.perf_counter()
    ds = TrajectoryDataset(path, frame_stack=frame_stack, action_chunk=action_chunk, normalize="minmax", verify="none")
    load_s = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rng = np.random.default_rng(0)
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        ds.get_batch(rng.integers(0, len(ds), batch_size))
        n += batch_size
    numpy_rate = n / (time.perf_counter() - t0)
    out: dict[str, Any] = {
        "transitions": ds.num_transitions,
        "arrays_mb": ds.nbytes / 1e6,
        "load_seconds": load_s,
        "peak_traced_mb": peak / 1e6,
        "peak_over_arrays": peak / ds.nbytes,
        "numpy_samples_per_second": numpy_rate,
    }
    try:
        import torch
        from torch.utils.data import BatchSampler, DataLoader, RandomSampler

        from r2s2r_envs.datasets.torch_data import TorchTrajectoryDataset

        torch.set_num_threads(1)
        tds = TorchTrajectoryDataset(ds)
        loader = DataLoader(tds, sampler=BatchSampler(RandomSampler(tds), batch_size, drop_last=True), batch_size=None)
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in loader:
                n += batch_size
                if time.perf_counter() - t0 >= seconds:
                    break
        out["torch_samples_per_second"] = n / (time.perf_counter() - t0)
    except ImportError:
        out["torch_samples_per_second"] = None
    t0 = time.perf_counter()
    with open_dataset(path, verify="full"):
        pass
    verify_s = time.perf_counter() - t0
    out["verify_full_seconds"] = verify_s
    out["verify_mb_per_second"] = path.stat().st_size / 1e6 / verify_s
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PickSort-Ungrounded-v0", help="env id for generation, or 'toy'")
    parser.add_argument("--episodes", type=int, default=60, help="episodes per generation run (start-up amortized)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--env-kwargs", type=json.loads, default={}, help="JSON env arguments")
    parser.add_argument(
        "--episode-steps",
        "--max-episode-steps",
        dest="episode_steps",
        type=int,
        default=None,
        help="the env's time limit in steps (default: the env's own)",
    )
    parser.add_argument("--skip-generation", action="store_true")
    parser.add_argument("--loader-demos", type=int, default=500, help="synthetic demos for the loader benchmark")
    parser.add_argument("--loader-steps", type=int, default=300, help="steps per synthetic demo")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--frame-stack", type=int, default=2)
    parser.add_argument("--action-chunk", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0, help="time per throughput measurement")
    parser.add_argument("--out-dir", type=Path, default=None, help="keep files and results.json here")
    args = parser.parse_args(argv)

    tmp = None
    if args.out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="r2s2r_dataset_speed_")
        out_dir = Path(tmp.name)
    else:
        out_dir = args.out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
    }
    if not args.skip_generation:
        report["generation"] = bench_generation(
            args.env, args.episodes, args.workers, out_dir, args.env_kwargs, args.episode_steps
        )
    path = out_dir / "loader.hdf5"
    t0 = time.perf_counter()
    write_synthetic_dataset(path, [args.loader_steps] * args.loader_demos)
    report["synthetic_write_seconds"] = time.perf_counter() - t0
    report["loader"] = bench_loader(path, args.batch_size, args.frame_stack, args.action_chunk, args.seconds)
    report["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3

    if "generation" in report:
        g = report["generation"]
        for w, r in g["per_workers"].items():
            print(
                f"generation  {args.env} workers={w}: {r['demos_per_minute']:.1f} demos/min "
                f"({r['steps_per_second']:.0f} env steps/s, {r['seconds']:.1f} s for {args.episodes})"
            )
        if "speedup_2_vs_1" in g:
            print(
                f"generation  speedup 2 vs 1 workers: {g['speedup_2_vs_1']:.2f}x (goal >= 1.8x); "
                f"identical content: {g['identical_content']}"
            )
    lo = report["loader"]
    print(
        f"loader      {lo['transitions']} transitions, {lo['arrays_mb']:.1f} MB arrays, "
        f"loaded in {lo['load_seconds']:.2f} s"
    )
    print(
        f"loader      peak traced memory while loading {lo['peak_traced_mb']:.1f} MB = "
        f"{lo['peak_over_arrays']:.2f}x the arrays (goal <= ~2x)"
    )
    print(
        f"loader      numpy get_batch: {lo['numpy_samples_per_second']:,.0f} samples/s (batch {args.batch_size}, "
        f"frame_stack {args.frame_stack}, action_chunk {args.action_chunk}; goal >= 50,000)"
    )
    if lo["torch_samples_per_second"] is not None:
        print(f"loader      torch DataLoader (batched fetch): {lo['torch_samples_per_second']:,.0f} samples/s")
    print(f"verify      full verification: {lo['verify_mb_per_second']:.0f} MB/s of file")
    if args.out_dir is not None:
        (out_dir / "results.json").write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {out_dir / 'results.json'}")
    else:
        print(json.dumps(report, indent=2))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
