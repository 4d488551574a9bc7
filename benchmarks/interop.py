"""Interoperability: export speed, peak memory and round trip of `r2s2r datasets export` on the canonical datasets.

For each dataset (default ``lab-50`` and ``ungrounded-1000``, from ``$R2S2R_DATA_DIR`` or
``~/.cache/r2s2r_envs/datasets``):

* the LeRobot export in a fresh process, timed (goal: ``ungrounded-1000`` in under 2 minutes on the 2-core
  machine), with its peak resident memory over the process's before the export and, in a second run, the largest
  rise of the Python/numpy heap within one episode (tracemalloc) and pyarrow's memory pool's peak (the parquet
  writer's buffers), against the largest demo's exported arrays (goal: under 2x one demo's arrays plus the
  writer's buffers); the same on the first ``--prefix`` demos, to show the peak does not grow with the number of
  demos;
* the round trip, read back with pyarrow: every frame count, action, executed action, reward, done flag and
  observation (``observation.state`` and each key) equal to the HDF5's, bit for bit;
* LeRobot's own ``LeRobotDataset(root=DIR)`` (no hub) in the interpreter ``--lerobot-python`` (lerobot 0.6 needs
  Python >= 3.12 and torch < 2.12: its own venv): length, episodes and the same arrays, bit for bit;
* the Minari export of ``lab-50``, loaded back with ``minari.load_dataset``: actions and observations bit for bit.

Example (one core):
    taskset -c 1 python benchmarks/interop.py --lerobot-python /tmp/lerobot-venv/bin/python \\
        --out benchmarks/results/interop/interop.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
DATASETS = ("lab-50", "ungrounded-1000")
GOAL_SECONDS = 120.0


def _cache_dir() -> Path:
    return Path(os.environ.get("R2S2R_DATA_DIR", Path.home() / ".cache" / "r2s2r_envs" / "datasets"))


# -- one export, in its own process ------------------------------------------------------------------


def child_export(path: Path, out: Path, fmt: str, trace: bool) -> dict[str, Any]:
    """Exports ``path`` and measures; runs in a fresh process."""
    import psutil
    import pyarrow as pa

    from r2s2r_envs.datasets import export, open_dataset
    from r2s2r_envs.datasets.export import lerobot

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    _warm_up(out.parent / f".warm-up-{os.getpid()}", fmt)
    source = path
    with open_dataset(source, verify="none") as f:
        largest = max(f.demo_ids, key=f.demo_length)
        demo_bytes = _exported_bytes(f, largest)
        lengths = [f.demo_length(d) for d in f.demo_ids]
    rss_before = psutil.Process().memory_info().rss
    episode_peaks: list[int] = []
    rss_trace: list[list[int]] = []
    if not trace and fmt == "lerobot":
        # Resident memory after the file is opened (before the first episode) and after every 100th episode.
        original_add = lerobot._LeRobotWriter.add_episode
        proc = psutil.Process()

        def sampled(self: Any, demo_id: int) -> None:
            if self.episodes == 0:
                rss_trace.append([0, proc.memory_info().rss >> 20])
            original_add(self, demo_id)
            if self.episodes % 100 == 0 or self.episodes == len(lengths):
                rss_trace.append([self.episodes, proc.memory_info().rss >> 20])

        lerobot._LeRobotWriter.add_episode = sampled  # type: ignore[method-assign]
    if trace:
        import tracemalloc

        # The heap's rise within each episode over its level before it: the demo's arrays as read and converted.
        original = lerobot._LeRobotWriter.add_episode

        def measured(self: Any, demo_id: int) -> None:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            original(self, demo_id)
            episode_peaks.append(tracemalloc.get_traced_memory()[1] - before)
            tracemalloc.reset_peak()

        lerobot._LeRobotWriter.add_episode = measured  # type: ignore[method-assign]
        tracemalloc.start()
    t0 = time.perf_counter()
    result = export.export_dataset(source, out, format=fmt, progress=False)
    seconds = time.perf_counter() - t0
    record: dict[str, Any] = {
        "format": fmt,
        "demos": result.episodes,
        "frames": result.frames,
        "seconds": round(seconds, 2),
        "frames_per_second": round(result.frames / seconds),
        "largest_demo_frames": max(lengths),
        "largest_demo_exported_bytes": demo_bytes,
        "source_sha256": result.source_sha256,
    }
    if trace:
        import tracemalloc

        tracemalloc.stop()
        if episode_peaks:
            record["episode_heap_rise_max_bytes"] = int(max(episode_peaks))
            record["episode_heap_rise_over_largest_demo"] = round(max(episode_peaks) / demo_bytes, 2)
        record["pyarrow_pool_peak_bytes"] = int(pa.default_memory_pool().max_memory())
    else:
        peak_rss = _peak_rss()
        record["rss_before_bytes"] = int(rss_before)
        record["peak_rss_growth_bytes"] = int(max(0, peak_rss - rss_before))
        if rss_trace:
            record["rss_mib_after_episodes"] = rss_trace
    record["output_bytes"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return record


def _peak_rss() -> int:
    """This process's peak resident memory, bytes: VmHWM, which starts anew at exec (``ru_maxrss`` would keep the
    parent's peak across fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # not Linux: KiB there too on most systems


def _warm_up(folder: Path, fmt: str) -> None:
    """Exports a tiny synthetic dataset first, so that the modules an export imports on first use (the world
    constants, tqdm, minari, ...) are loaded before the memory baseline is taken."""
    from r2s2r_envs.datasets import export
    from r2s2r_envs.datasets.toy import write_synthetic_dataset

    folder.mkdir(parents=True)
    try:
        write_synthetic_dataset(folder / "tiny.hdf5", [3, 2])
        export.export_dataset(folder / "tiny.hdf5", folder / "out", format=fmt, progress=False)
    finally:
        shutil.rmtree(folder)


def _exported_bytes(f: Any, demo_id: int) -> int:
    """Bytes of the arrays of one demo the LeRobot export reads (low-dimensional obs, actions, labels, rewards,
    dones)."""
    n = f.demo_length(demo_id)
    total = 0
    for shape, dtype in f.obs_spec().values():
        total += n * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return total + 2 * n * f.action_dim * 4 + n * 4 + n  # actions and labels (float32), rewards, dones


def _write_prefix(path: Path, out: Path, limit: int) -> None:
    """A valid dataset of the first ``limit`` demos of ``path`` (re-written with the writer)."""
    from r2s2r_envs.datasets import DatasetWriter, Episode, open_dataset

    with (
        open_dataset(path, verify="none") as f,
        DatasetWriter.create(
            out, provenance=f.provenance, env_args=f.env_args, generation=f.generation, overwrite=True
        ) as w,
    ):
        for demo_id in f.demo_ids[:limit]:
            d = f.demo(demo_id)
            obs = {k: np.concatenate([d.obs[k], d.next_obs[k][-1:]]) for k in d.obs}
            a = d.attrs
            w.append(
                Episode(
                    observations=obs,
                    actions=d.actions,
                    action_labels=d.action_labels,
                    rewards=d.rewards,
                    states=d.states,
                    terminated=bool(a["terminated"]),
                    truncated=bool(a["truncated"]),
                    seed=a["seed"],
                    success=bool(a["success"]),
                ),
                flush=False,
            )


# -- round trips ------------------------------------------------------------------------------------------


def check_parquet(path: Path, out: Path) -> dict[str, Any]:
    """Reads the export back with pyarrow and compares every array with the HDF5, bit for bit."""
    import pyarrow.parquet as pq

    from r2s2r_envs.datasets import open_dataset

    t0 = time.perf_counter()
    episodes = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    files = {}
    mismatches: list[str] = []
    compared = 0
    with open_dataset(path, verify="none") as f:
        low_dim = [k for k, (s, d) in f.obs_spec().items() if len(s) == 1]
        labels = f.label_array()
        if len(episodes) != f.num_demos:
            mismatches.append(f"{len(episodes)} episodes, the file has {f.num_demos} demos")
        for ep, demo_id in zip(episodes, f.demo_ids):
            key = (ep["data/chunk_index"], ep["data/file_index"])
            if key not in files:
                files = {key: pq.read_table(out / f"data/chunk-{key[0]:03d}/file-{key[1]:03d}.parquet")}
                first = files[key].column("index")[0].as_py()
            table = files[key]
            lo, hi = ep["dataset_from_index"] - first, ep["dataset_to_index"] - first
            part = table.slice(lo, hi - lo)
            want = {
                "observation.state": np.concatenate([f.read(demo_id, f"obs/{k}") for k in low_dim], axis=1),
                "action": f.read(demo_id, labels),
                "action.executed": f.read(demo_id, "actions"),
                "next.reward": f.read(demo_id, "rewards"),
                "next.done": f.read(demo_id, "dones").astype(bool),
                **{f"observation.{k}": f.read(demo_id, f"obs/{k}") for k in low_dim},
            }
            if hi - lo != f.demo_length(demo_id) or ep["r2s2r/demo_id"] != demo_id:
                mismatches.append(f"demo {demo_id}: {hi - lo} frames, the file has {f.demo_length(demo_id)}")
            for name, expected in want.items():
                got = _numpy(part.column(name))
                if got.dtype != expected.dtype or not np.array_equal(got, expected):
                    mismatches.append(f"demo {demo_id}: {name} differs")
                compared += 1
    return {
        "arrays_compared": compared,
        "bit_for_bit": not mismatches,
        "mismatches": mismatches[:10],
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _numpy(col: Any) -> np.ndarray:
    import pyarrow as pa

    col = col.combine_chunks()
    if pa.types.is_fixed_size_list(col.type):
        return col.flatten().to_numpy().reshape(len(col), col.type.list_size)
    return col.to_numpy(zero_copy_only=False)


def child_lerobot_check(path: Path, out: Path) -> dict[str, Any]:
    """Runs in the lerobot venv: LeRobotDataset(root=out) against the HDF5, bit for bit."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import lerobot
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from r2s2r_envs.datasets import open_dataset

    t0 = time.perf_counter()
    ds = LeRobotDataset(f"r2s2r/{path.stem}", root=out, video_backend="pyav")
    load_seconds = time.perf_counter() - t0
    hf = ds.hf_dataset.with_format("numpy")
    columns = {name: np.asarray(hf[name]) for name in ("observation.state", "action", "action.executed", "index")}
    mismatches: list[str] = []
    with open_dataset(path, verify="none") as f:
        low_dim = [k for k, (s, d) in f.obs_spec().items() if len(s) == 1]
        labels = f.label_array()
        if len(ds) != f.num_samples or ds.num_episodes != f.num_demos:
            mismatches.append(
                f"{len(ds)} frames / {ds.num_episodes} episodes, the file {f.num_samples} / {f.num_demos}"
            )
        start = 0
        for demo_id in f.demo_ids:
            n = f.demo_length(demo_id)
            want = {
                "observation.state": np.concatenate([f.read(demo_id, f"obs/{k}") for k in low_dim], axis=1),
                "action": f.read(demo_id, labels),
                "action.executed": f.read(demo_id, "actions"),
            }
            for name, expected in want.items():
                got = columns[name][start : start + n]
                if got.dtype != expected.dtype or not np.array_equal(got, expected):
                    mismatches.append(f"demo {demo_id}: {name} differs")
            start += n
        # A few items through __getitem__, LeRobot's training path (torch tensors).
        rng = np.random.default_rng(0)
        items = sorted(int(i) for i in rng.choice(len(ds), size=min(20, len(ds)), replace=False))
        offsets = np.cumsum([0] + [f.demo_length(d) for d in f.demo_ids])
        for i in items:
            item = ds[i]
            demo_id = int(np.searchsorted(offsets, i, side="right") - 1)
            t = i - int(offsets[demo_id])
            if not np.array_equal(item["action"].numpy(), f.read(demo_id, labels)[t]):
                mismatches.append(f"item {i}: action differs")
            if not np.array_equal(item["observation.arm_qpos"].numpy(), f.read(demo_id, "obs/arm_qpos")[t]):
                mismatches.append(f"item {i}: observation.arm_qpos differs")
    return {
        "lerobot_version": lerobot.__version__,
        "python": platform.python_version(),
        "frames": len(ds),
        "episodes": ds.num_episodes,
        "fps": ds.fps,
        "items_checked": len(items),
        "bit_for_bit": not mismatches,
        "mismatches": mismatches[:10],
        "load_seconds": round(load_seconds, 2),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def check_minari(path: Path, out: Path, dataset_id: str) -> dict[str, Any]:
    import minari

    from r2s2r_envs.datasets import open_dataset

    os.environ["MINARI_DATASETS_PATH"] = str(out)
    ds = minari.load_dataset(dataset_id)
    mismatches: list[str] = []
    with open_dataset(path, verify="none") as f:
        labels = f.label_array()
        for episode, demo_id in zip(ds.iterate_episodes(), f.demo_ids):
            if not np.array_equal(episode.actions, f.read(demo_id, labels)):
                mismatches.append(f"demo {demo_id}: actions differ")
            for key in f.obs_keys:
                if not np.array_equal(episode.observations[key][:-1], f.read(demo_id, f"obs/{key}")):
                    mismatches.append(f"demo {demo_id}: {key} differs")
        if ds.total_episodes != f.num_demos or ds.total_steps != f.num_samples:
            mismatches.append(f"{ds.total_episodes} episodes / {ds.total_steps} steps")
    return {
        "minari_version": minari.__version__,
        "episodes": ds.total_episodes,
        "steps": ds.total_steps,
        "bit_for_bit": not mismatches,
        "mismatches": mismatches[:10],
    }


# -- driver -------------------------------------------------------------------------------------------------


def _run_child(args: list[str]) -> dict[str, Any]:
    return _run_with(sys.executable, args)


def _run_with(python: str, args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([python, str(HERE), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict[str, Any]:
    import pyarrow

    from r2s2r_envs._version import __version__

    work = Path(tempfile.mkdtemp(prefix="interop-", dir=args.work_dir))
    record: dict[str, Any] = {
        "benchmark": "interop",
        "command": " ".join(sys.argv),
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "affinity": sorted(os.sched_getaffinity(0)),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": {"r2s2r_envs": __version__, "pyarrow": pyarrow.__version__, "numpy": np.__version__},
        "goals": {"export_seconds": GOAL_SECONDS},
        "datasets": {},
    }
    try:
        for name in args.datasets:
            path = _cache_dir() / f"{name}.hdf5"
            entry: dict[str, Any] = {"file": str(path), "file_bytes": path.stat().st_size}
            out = work / f"{name}-lerobot"
            entry["lerobot_export"] = _run_child(["export", str(path), str(out), "lerobot"])
            entry["lerobot_round_trip_pyarrow"] = check_parquet(path, out)
            if args.lerobot_python:
                entry["lerobot_dataset"] = _run_with(args.lerobot_python, ["lerobot-check", str(path), str(out)])
            traced = work / f"{name}-lerobot-traced"
            entry["lerobot_export_traced"] = _run_child(["export", str(path), str(traced), "lerobot", "--trace"])
            shutil.rmtree(traced)
            if args.prefix:
                first = work / f"{name}-first{args.prefix}.hdf5"
                _write_prefix(path, first, args.prefix)
                prefix = work / f"{name}-lerobot-first{args.prefix}"
                entry[f"lerobot_export_first{args.prefix}"] = _run_child(["export", str(first), str(prefix), "lerobot"])
                shutil.rmtree(prefix)
                first.unlink()
            shutil.rmtree(out)
            if name in args.minari:
                mout = work / f"{name}-minari"
                entry["minari_export"] = _run_child(["export", str(path), str(mout), "minari"])
                entry["minari_round_trip"] = check_minari(path, mout, f"r2s2r/{name}-v0")
                shutil.rmtree(mout)
            export = entry["lerobot_export"]
            if "seconds" in export:
                entry["goal_export_under_2_min"] = export["seconds"] < GOAL_SECONDS
            record["datasets"][name] = entry
            print(json.dumps({name: entry}, indent=2), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return record


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    exp = sub.add_parser("export", help="(internal) one measured export")
    exp.add_argument("path", type=Path)
    exp.add_argument("out", type=Path)
    exp.add_argument("format")
    exp.add_argument("--trace", action="store_true")
    chk = sub.add_parser("lerobot-check", help="(internal) LeRobotDataset against the HDF5; run in the lerobot venv")
    chk.add_argument("path", type=Path)
    chk.add_argument("out", type=Path)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--minari", nargs="*", default=["lab-50"], help="datasets also exported to Minari")
    parser.add_argument("--prefix", type=int, default=50, help="also export the first N demos (0: no)")
    parser.add_argument("--lerobot-python", default=None, help="interpreter of a venv with lerobot installed")
    parser.add_argument("--work-dir", default=None, help="scratch folder (default: the system's)")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON record here")
    args = parser.parse_args()
    if args.command == "export":
        print(json.dumps(child_export(args.path, args.out, args.format, args.trace)))
    elif args.command == "lerobot-check":
        print(json.dumps(child_lerobot_check(args.path, args.out)))
    else:
        record = run(args)
        text = json.dumps(record, indent=2) + "\n"
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text)
        print(text)


if __name__ == "__main__":
    main()
