"""Image datasets: what the canonical ``*-rgb64`` sets cost to make, store, read and export, against state-only sets.

For each canonical image set (``r2s2r_envs/datasets/canonical.json``, ``obs_mode`` with images: the lab v3 demos
and the four -v1 variants), generates ``--demos`` demos by its recipe (env, seed, success filter, demonstrator,
action noise, ``image_size``) and, in the same run, the same demos without images (``obs_mode="state"``); then
records per demo:

* generation time with and without images, and their ratio (the times are the run's, on whatever else the machine
  does: the ratio is the number to carry);
* HDF5 bytes: the images (``obs/`` and ``next_obs/`` of both cameras), the simulator states, the other arrays, and
  the whole file, beside the state-only file's;
* the read time of one demo (every array, as ``DatasetFile.demo`` reads it) with and without images;
* the LeRobot export (images as H.264 video): its bytes (videos, data, meta) and the decoded frames' error against
  the HDF5's (read back with the ffmpeg of ``imageio-ffmpeg``; H.264 is lossy);

plus, on the first set's first demo, the image storage options the writer chose between (gzip levels, chunk
lengths, lzf; ``r2s2r_envs/datasets/writer.py``), and the projection to each set's full size (GB and hours on 2
worker processes).  Writes the JSON (with its resolved config and the machine) to ``--out``.

Example:
    MUJOCO_GL=egl nice -n 5 python benchmarks/image_datasets.py --demos 20 \\
        --out benchmarks/results/dataset-speed/image-datasets.json
    MUJOCO_GL=egl python benchmarks/image_datasets.py --demos 3 --sets ungrounded-v1-1000-rgb64 --out /tmp/img.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from r2s2r_envs.datasets import open_dataset, schema
from r2s2r_envs.datasets.canonical import CanonicalDataset, load_spec
from r2s2r_envs.datasets.export import export_dataset

# Two worker processes generate 1.88x as fast as one (benchmarks/results/dataset-speed/dataset_speed.json,
# speedup_2_vs_1, the cores free): the projection's rate on the 2-core machine.
TWO_WORKER_SPEEDUP = 1.88
# Demos whose read is timed (the median is kept).
READ_DEMOS = 5
CAMERAS = ("scene_image", "wrist_image")


def image_sets(names: list[str] | None) -> list[CanonicalDataset]:
    """The canonical image sets, or those of ``names``."""
    entries = [e for e in load_spec() if e.image_size is not None]
    if names:
        known = {e.name: e for e in entries}
        missing = sorted(set(names) - set(known))
        if missing:
            raise SystemExit(f"not canonical image sets: {missing}; valid: {sorted(known)}")
        return [known[n] for n in names]
    return entries


def state_recipe(entry: CanonicalDataset) -> CanonicalDataset:
    """The same recipe without images."""
    kwargs = {k: v for k, v in entry.env_kwargs.items() if k != "image_size"}
    return dataclasses.replace(entry, name=entry.name + "-state", obs_mode="state", env_kwargs=kwargs)


def make(entry: CanonicalDataset, demos: int, out: Path, workers: int) -> dict[str, Any]:
    """Generates ``demos`` demos by ``entry``'s recipe; returns the wall and CPU time (one worker: this process and
    its rendering threads) and the attempts."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = entry.generate(out, episodes=demos, workers=workers, overwrite=True, progress=False)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "seconds": seconds,
        "seconds_per_demo": seconds / demos,
        "cpu_seconds": cpu,
        "cpu_seconds_per_demo": cpu / demos,
        "attempts": result.attempts,
        "demos": result.num_demos,
        "content_sha256": result.content_hash,
    }


def storage(path: Path) -> dict[str, Any]:
    """Bytes on disk per demo: images, simulator states, other arrays, the file; and the image arrays' filters."""
    parts = {"images": 0, "states": 0, "other_arrays": 0}
    filters: set[tuple[Any, ...]] = set()
    steps = 0
    with h5py.File(path, "r") as f:
        demos = list(f["data"].values())
        for grp in demos:
            steps += int(grp.attrs["num_samples"])

            def visit(name: str, obj: Any) -> None:
                if not isinstance(obj, h5py.Dataset):
                    return
                size = obj.id.get_storage_size()
                if schema.is_image(obj.shape[1:], obj.dtype):
                    parts["images"] += size
                    filters.add((obj.compression, obj.compression_opts, obj.chunks[0], obj.shuffle))
                elif name == "states":
                    parts["states"] += size
                else:
                    parts["other_arrays"] += size

            grp.visititems(visit)
    n = len(demos)
    out: dict[str, Any] = {f"{k}_bytes_per_demo": v / n for k, v in parts.items()}
    out["file_bytes_per_demo"] = path.stat().st_size / n
    out["steps_per_demo"] = steps / n
    out["image_filters"] = [
        {"compression": c, "level": lvl, "chunk_frames": frames, "shuffle": shuffle}
        for c, lvl, frames, shuffle in sorted(filters, key=str)
    ]
    return out


def read_time(path: Path) -> dict[str, Any]:
    """Median seconds (wall and CPU) to read one demo's every array (``DatasetFile.demo``), over the first demos."""
    times, cpu = [], []
    with open_dataset(path, verify="none") as f:
        ids = f.demo_ids[:READ_DEMOS]
        f.demo(ids[0])  # the first read opens HDF5's caches
        for k in ids:
            t0, c0 = time.perf_counter(), time.process_time()
            f.demo(k)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    return {
        "read_demo_seconds": statistics.median(times),
        "read_demo_cpu_seconds": statistics.median(cpu),
        "demos_timed": len(times),
    }


def folder_bytes(root: Path) -> dict[str, int]:
    """Bytes under ``root`` by top-level part (``videos``, ``data``, ``meta``) and in all."""
    parts: dict[str, int] = {}
    for p in root.rglob("*"):
        if p.is_file():
            top = p.relative_to(root).parts[0]
            parts[top] = parts.get(top, 0) + p.stat().st_size
    parts["total"] = sum(parts.values())
    return parts


def lerobot(path: Path, out: Path) -> dict[str, Any]:
    """Exports to LeRobot (images as video), measures it and reads the first episode's frames back."""
    import imageio_ffmpeg

    result = export_dataset(path, out, format="lerobot", verify="quick", progress=False)
    sizes = folder_bytes(out)
    n = result.episodes
    back: dict[str, Any] = {}
    with open_dataset(path, verify="none") as f:
        for key in CAMERAS:
            stored = f.read(f.demo_ids[0], f"obs/{key}")
            video = out / f"videos/observation.images.{key}/chunk-000/file-000.mp4"
            frames_total, _ = imageio_ffmpeg.count_frames_and_secs(str(video))
            reader = imageio_ffmpeg.read_frames(str(video))
            meta = next(reader)
            w, h = meta["size"]
            decoded = np.stack(
                [np.frombuffer(next(reader), np.uint8).reshape(h, w, 3) for _ in range(len(stored))]
            ).astype(np.int16)
            reader.close()
            err = np.abs(decoded - stored.astype(np.int16))
            mse = float(np.mean(err.astype(np.float64) ** 2))
            back[key] = {
                "frames_in_video": frames_total,
                "frames_in_hdf5": int(f.num_samples),
                "size": [h, w],
                "mean_abs_error": float(err.mean()),
                "psnr_db": float(10 * np.log10(255.0**2 / mse)) if mse > 0 else None,
            }
    return {
        "seconds": result.seconds,
        "episodes": n,
        "bytes_per_demo": {k: v / n for k, v in sizes.items()},
        "read_back": back,
    }


def storage_options(path: Path, scratch: Path) -> dict[str, Any]:
    """The image storage options on the first demo's two cameras: size against raw, write, read and one-frame read."""
    with h5py.File(path, "r") as f:
        grp = f["data"][schema.demo_group_name(0)]
        arrays = {key: grp[f"obs/{key}"][()] for key in CAMERAS}
    raw = sum(a.nbytes for a in arrays.values())
    t, h, w, c = arrays[CAMERAS[0]].shape
    options = {
        "gzip1-c16": dict(compression="gzip", compression_opts=1, chunks=(16, h, w, c)),
        "gzip4-c16": dict(compression="gzip", compression_opts=4, chunks=(16, h, w, c)),
        "gzip6-c16 (the writer's)": dict(compression="gzip", compression_opts=6, chunks=(16, h, w, c)),
        "gzip9-c16": dict(compression="gzip", compression_opts=9, chunks=(16, h, w, c)),
        "gzip6-c1": dict(compression="gzip", compression_opts=6, chunks=(1, h, w, c)),
        "gzip6-c64": dict(compression="gzip", compression_opts=6, chunks=(min(64, t), h, w, c)),
        "gzip6-c16-shuffle": dict(compression="gzip", compression_opts=6, chunks=(16, h, w, c), shuffle=True),
        "lzf-c16": dict(compression="lzf", chunks=(16, h, w, c)),
        "none-c16": dict(chunks=(16, h, w, c)),
    }
    out: dict[str, Any] = {"raw_bytes": raw, "frames": t, "size": [h, w]}
    for name, opts in options.items():
        file = scratch / "option.h5"
        t0 = time.perf_counter()
        with h5py.File(file, "w") as g:
            for key, arr in arrays.items():
                g.create_dataset(key, data=arr, fletcher32=True, **opts)
        write = time.perf_counter() - t0
        reads, frames = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            with h5py.File(file, "r") as g:
                for key in arrays:
                    g[key][()]
            reads.append(time.perf_counter() - t0)
        with h5py.File(file, "r") as g:
            for i in range(0, t, max(1, t // 8)):
                t0 = time.perf_counter()
                g[CAMERAS[0]][i]
                frames.append(time.perf_counter() - t0)
        size = file.stat().st_size
        out[name] = {
            "bytes": size,
            "ratio_to_raw": raw / size,
            "write_ms": 1e3 * write,
            "read_ms": 1e3 * min(reads),
            "one_frame_ms": 1e3 * statistics.median(frames),
        }
        file.unlink()
    return out


def machine() -> dict[str, Any]:
    """The machine and software (CPU model, cores, load when measured, versions)."""
    import mujoco

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model or platform.processor(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "mujoco": mujoco.__version__,
        "h5py": h5py.__version__,
        "hdf5": h5py.version.hdf5_version,
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()),
    }


def measure(entry: CanonicalDataset, demos: int, workers: int, scratch: Path) -> dict[str, Any]:
    """Everything for one image set and its state-only twin."""
    image_file, state_file = scratch / f"{entry.name}.hdf5", scratch / f"{entry.name}-state.hdf5"
    image = make(entry, demos, image_file, workers)
    state = make(state_recipe(entry), demos, state_file, workers)
    image |= storage(image_file) | read_time(image_file)
    state |= storage(state_file) | read_time(state_file)
    export = lerobot(image_file, scratch / f"{entry.name}-lerobot")
    per_demo_bytes = image["file_bytes_per_demo"]
    return {
        "env_id": entry.env_id,
        "image_size": entry.image_size,
        "demos": demos,
        "image": image,
        "state": state,
        "ratios": {
            "generation_image_over_state": image["seconds"] / state["seconds"],
            "generation_cpu_image_over_state": image["cpu_seconds"] / state["cpu_seconds"],
            "file_bytes_image_over_state": per_demo_bytes / state["file_bytes_per_demo"],
            "read_image_over_state": image["read_demo_seconds"] / state["read_demo_seconds"],
            "read_cpu_image_over_state": image["read_demo_cpu_seconds"] / state["read_demo_cpu_seconds"],
            "lerobot_over_hdf5": export["bytes_per_demo"]["total"] / per_demo_bytes,
        },
        "lerobot": export,
        "projection": {
            "episodes": entry.episodes,
            "gb": per_demo_bytes * entry.episodes / 1e9,
            "state_gb": state["file_bytes_per_demo"] * entry.episodes / 1e9,
            "lerobot_gb": export["bytes_per_demo"]["total"] * entry.episodes / 1e9,
            # From CPU time (what the two free cores of the 2-core machine give) and, an upper bound, wall time.
            "hours_2_workers": image["cpu_seconds_per_demo"] * entry.episodes / TWO_WORKER_SPEEDUP / 3600,
            "state_hours_2_workers": state["cpu_seconds_per_demo"] * entry.episodes / TWO_WORKER_SPEEDUP / 3600,
            "hours_2_workers_from_wall": image["seconds_per_demo"] * entry.episodes / TWO_WORKER_SPEEDUP / 3600,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=int, default=20, help="demos per set (default 20)")
    parser.add_argument("--sets", nargs="*", default=None, help="canonical image sets (default: every one)")
    parser.add_argument("--workers", type=int, default=1, help="generation workers (default 1: times per core)")
    parser.add_argument("--scratch", type=Path, default=None, help="folder for the files (default: a temporary one)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    args = parser.parse_args(argv)
    sets = image_sets(args.sets)
    config = {
        "demos": args.demos,
        "sets": [e.name for e in sets],
        "workers": args.workers,
        "two_worker_speedup": TWO_WORKER_SPEEDUP,
        "read_demos": READ_DEMOS,
        "mujoco_gl": os.environ.get("MUJOCO_GL"),
    }
    record: dict[str, Any] = {"config": config, "machine": machine(), "sets": {}}
    with tempfile.TemporaryDirectory(dir=args.scratch) as tmp:
        scratch = Path(tmp)
        t0 = time.perf_counter()
        for entry in sets:
            result = measure(entry, args.demos, args.workers, scratch)
            record["sets"][entry.name] = result
            r = result["ratios"]
            image = result["image"]
            print(
                f"{entry.name:32s} {image['cpu_seconds_per_demo']:6.2f} CPU s/demo "
                f"(x{r['generation_cpu_image_over_state']:.2f} state)  "
                f"{image['file_bytes_per_demo'] / 1e6:5.2f} MB/demo (x{r['file_bytes_image_over_state']:.2f})  "
                f"read {1e3 * image['read_demo_seconds']:5.1f} ms  "
                f"lerobot x{r['lerobot_over_hdf5']:.2f}",
                flush=True,
            )
        first = scratch / f"{sets[0].name}.hdf5"
        record["storage_options"] = {"set": sets[0].name, **storage_options(first, scratch)}
        record["seconds"] = time.perf_counter() - t0
    record["machine"]["load_average_end"] = list(os.getloadavg())
    record["totals"] = {
        "gb": sum(s["projection"]["gb"] for s in record["sets"].values()),
        "state_gb": sum(s["projection"]["state_gb"] for s in record["sets"].values()),
        "lerobot_gb": sum(s["projection"]["lerobot_gb"] for s in record["sets"].values()),
        "hours_2_workers": sum(s["projection"]["hours_2_workers"] for s in record["sets"].values()),
        "hours_2_workers_from_wall": sum(s["projection"]["hours_2_workers_from_wall"] for s in record["sets"].values()),
        "state_hours_2_workers": sum(s["projection"]["state_hours_2_workers"] for s in record["sets"].values()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
