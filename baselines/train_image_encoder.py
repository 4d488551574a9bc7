"""Trains the frozen camera encoder ``sim-pose`` (the ``cpu-image-cached`` recipe's) on simulator renders only.

The encoder is ``conv-gn``'s architecture (``r2s2r_envs.policies.vision``) with the convolutions shared by the two
cameras and a spatial-softmax head and output layer of its own per camera: one trunk sees twice the images per
weight and ships once, which halves the file (the repository has little room), while each view (the scene from above,
the wrist from the hand) keeps its own keypoints. It learns to tell where the objects are: from one frame of both
cameras, a small MLP head (discarded afterwards) predicts each object's position relative to the hand and in the
world, its category and its status (on the belt, held, in a bin, elsewhere), the objects ordered next object first
as the ``task`` features order them (``r2s2r_envs.policies.features.TaskFeatures``: held, then reachable on the belt
from the most downstream), so that a slot means the same thing in every frame. The targets are read from the
simulated dataset's recorded object state, which only the simulator knows; the policy never sees them.

Data: ``--train-demos`` demos of the canonical Ungrounded image set (``ungrounded-v1-1000-rgb64``, 64 px renders of
``PickSort-Ungrounded-v1``) and ``--val-demos`` other demos held out for validation, drawn with ``--seed``; every
``--stride``-th frame. No lab image is read: a file whose domain is not ``sim`` is refused.

Training: AdamW with warm-up and cosine decay, random shifts of up to ``--shift`` px and mild brightness, contrast
and colour jitter per image (generic augmentations against appearance the renders do not show), one torch thread,
every draw seeded: the same command on one machine writes the same file.

Writes the packed weights (``r2s2r_envs.policies.weights``, int8 per-row scales; with each camera's feature mean
and deviation over the training frames, so the frozen features are standardized) to ``--weights`` and a record
(``--record``): the resolved settings, the data's content hash and demo ids, the training time (wall and CPU),
the parameters, the file's SHA-256 and size, and on the held-out demos the error of each target against a trivial
baseline that predicts the training mean (root mean square error, and for the one-hot targets the accuracy of the
largest entry against the most frequent class), measured with the shipped (int8) weights and with the float32 ones.
Pin the printed SHA-256 in ``r2s2r_envs.policies.config.FROZEN_ENCODERS``.

Example::

    nice -n 15 python baselines/train_image_encoder.py \\
        --weights r2s2r_envs/policies/encoders/sim-pose.pt --record experiments/image-encoder/sim-pose.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.policies.config import CAMERA_KEYS, FROZEN_ENCODERS
from r2s2r_envs.policies.data import resolve_path
from r2s2r_envs.policies.features import TASK_KEYS, TaskFeatures
from r2s2r_envs.policies.vision import ConvGN, random_shift
from r2s2r_envs.policies.weights import pack_state_dict, unpack_state_dict

ROOT = Path(__file__).resolve().parents[1]
ENCODER = "sim-pose"
#: The per-object targets, in :class:`TaskFeatures` names, and which of them are one-hot (scored by accuracy too).
TARGETS: tuple[str, ...] = ("rel_pos", "pos", "category", "status")
ONE_HOT: tuple[str, ...] = ("category", "status")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
    """The run's settings (recorded, resolved, in the record)."""

    data: str
    train_demos: int
    val_demos: int
    stride: int
    val_stride: int
    steps: int
    batch_size: int
    lr: float
    warmup_steps: int
    weight_decay: float
    shift: int
    jitter: float
    head_width: int
    seed: int
    threads: int


class PoseNet(nn.Module):
    """The encoder (one ``conv-gn`` per camera sharing the convolutions) and its training head."""

    def __init__(self, cameras: tuple[str, ...], keypoints: int, out_dim: int, targets: int, width: int) -> None:
        super().__init__()
        self.cameras = cameras
        self.heads = nn.ModuleDict({c: ConvGN(keypoints=keypoints, out_dim=out_dim) for c in cameras})
        for c in cameras[1:]:
            self.heads[c].net = self.heads[cameras[0]].net  # one trunk for every camera
        self.head = nn.Sequential(
            nn.Linear(len(cameras) * out_dim, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU()
        )
        self.out = nn.Linear(width, targets)

    def features(self, images: dict[str, torch.Tensor]) -> torch.Tensor:
        """``{camera: (N, 3, H, W)}`` to the concatenated, unstandardized features ``(N, cameras * out_dim)``."""
        n = len(images[self.cameras[0]])
        maps = self.heads[self.cameras[0]].net(torch.cat([images[c] for c in self.cameras]))
        parts = [self.heads[c].out(self.heads[c].pool(maps[k * n : (k + 1) * n])) for k, c in enumerate(self.cameras)]
        return torch.cat(parts, dim=-1)

    def forward(self, images: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.out(self.head(self.features(images)))

    def encoder_state(self) -> dict[str, torch.Tensor]:
        """The shipped layout (``r2s2r_envs.policies.vision.split_frozen_state``): ``trunk.*``, ``<camera>.pool.*``,
        ``<camera>.out.*``."""
        trunk = self.heads[self.cameras[0]].net
        state = {f"trunk.{k}": v.detach().clone() for k, v in trunk.state_dict().items()}
        for c in self.cameras:
            for part in ("pool", "out"):
                sub = getattr(self.heads[c], part).state_dict()
                state.update({f"{c}.{part}.{k}": v.detach().clone() for k, v in sub.items()})
        return state

    def load_encoder_state(self, state: dict[str, torch.Tensor]) -> None:
        """Loads :meth:`encoder_state`'s layout (the feature statistics, if present, are ignored)."""
        trunk = {k.removeprefix("trunk."): v for k, v in state.items() if k.startswith("trunk.")}
        self.heads[self.cameras[0]].net.load_state_dict(trunk)
        for c in self.cameras:
            for part in ("pool", "out"):
                prefix = f"{c}.{part}."
                sub = {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}
                getattr(self.heads[c], part).load_state_dict(sub)


def target_columns(stage: TaskFeatures) -> tuple[list[int], list[str]]:
    """Indices and names of the targets among the task features (per object: :data:`TARGETS`)."""
    names = stage.names()
    wanted = [
        i
        for i, n in enumerate(names)
        if n.startswith("object") and n.split(".", 1)[1].split("[", 1)[0] in TARGETS and "bin_rel" not in n
    ]
    return wanted, [names[i] for i in wanted]


def load_frames(path: Path, demo_ids: list[int], stride: int) -> tuple[dict[str, np.ndarray], np.ndarray, list[str]]:
    """Every ``stride``-th frame of the demos (uint8, per camera) and its targets (float32), with the targets' names."""
    frames: dict[str, list[np.ndarray]] = {c: [] for c in CAMERA_KEYS}
    obs: dict[str, list[np.ndarray]] = {k: [] for k in TASK_KEYS}
    with open_dataset(path, verify="none") as f:
        if f.domain != "sim":
            raise SystemExit(f"{path} holds {f.domain} data; the encoder trains on simulator renders only")
        for demo in demo_ids:
            for c in CAMERA_KEYS:
                frames[c].append(f.read(demo, f"obs/{c}")[::stride])
            for k in TASK_KEYS:
                obs[k].append(f.read(demo, f"obs/{k}")[::stride])
    stacked = {k: np.concatenate(v)[:, None] for k, v in obs.items()}  # (N, 1, ...): one frame per sample
    stage = TaskFeatures(stacked["object_pos"].shape[-1] // 3)
    columns, names = target_columns(stage)
    targets = stage(stacked)[:, 0, columns].astype(np.float32)
    return {c: np.concatenate(v) for c, v in frames.items()}, targets, names


def to_images(frames: np.ndarray) -> torch.Tensor:
    """uint8 ``(N, H, W, 3)`` to float ``(N, 3, H, W)`` in [0, 1], as the pipeline scales frames."""
    return torch.from_numpy(np.asarray(frames, dtype=np.float32) / 255.0).permute(0, 3, 1, 2)


def augment(images: torch.Tensor, shift: int, jitter: float, generator: torch.Generator) -> torch.Tensor:
    """Random shift (up to ``shift`` px, the border repeated) and per-image brightness, contrast and per-channel
    gain, each a factor in ``[1 - jitter, 1 + jitter]``; clipped to [0, 1]. ``(N, 3, H, W)``."""
    n = len(images)
    x = random_shift(images.permute(0, 2, 3, 1)[:, None], shift, generator)[:, 0].permute(0, 3, 1, 2)
    if jitter > 0:
        factor = 1.0 + jitter * (2 * torch.rand((n, 3), generator=generator) - 1)
        brightness, contrast = factor[:, 0, None, None, None], factor[:, 1, None, None, None]
        gain = 1.0 + jitter * (2 * torch.rand((n, 3, 1, 1), generator=generator) - 1)
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        x = ((x - mean) * contrast + mean) * brightness * gain
    return x.clamp(0.0, 1.0)


def lr_factor(step: int, s: Settings) -> float:
    if step < s.warmup_steps:
        return (step + 1) / s.warmup_steps
    progress = (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


@torch.no_grad()
def predict(model: PoseNet, frames: dict[str, np.ndarray], chunk: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """The model's (standardized) predictions and unstandardized features of every frame, in chunks."""
    model.eval()
    preds, feats = [], []
    n = len(frames[CAMERA_KEYS[0]])
    for s in range(0, n, chunk):
        images = {c: to_images(frames[c][s : s + chunk]) for c in CAMERA_KEYS}
        f = model.features(images)
        feats.append(f.numpy())
        preds.append(model.out(model.head(f)).numpy())
    model.train()
    return np.concatenate(preds), np.concatenate(feats)


def scores(
    pred: np.ndarray, truth: np.ndarray, train_mean: np.ndarray, names: list[str], train_targets: np.ndarray
) -> dict[str, Any]:
    """Per target and per group (target kind, over objects and axes): RMSE against the training-mean baseline's; for
    one-hot groups per object, the accuracy of the largest entry against always predicting the most frequent class."""
    per_target = {}
    for j, name in enumerate(names):
        rmse = float(np.sqrt(np.mean((pred[:, j] - truth[:, j]) ** 2)))
        base = float(np.sqrt(np.mean((train_mean[j] - truth[:, j]) ** 2)))
        per_target[name] = {"rmse": rmse, "baseline_rmse": base}
    groups: dict[str, Any] = {}
    for kind in TARGETS:
        cols = [j for j, n in enumerate(names) if n.split(".", 1)[1].startswith(kind + "[")]
        err = np.sqrt(np.mean((pred[:, cols] - truth[:, cols]) ** 2))
        base = np.sqrt(np.mean((train_mean[cols] - truth[:, cols]) ** 2))
        entry: dict[str, Any] = {"rmse": float(err), "baseline_rmse": float(base), "ratio": float(err / base)}
        if kind in ONE_HOT:
            objects = sorted({names[j].split(".")[0] for j in cols})
            acc, base_acc = [], []
            for obj in objects:
                oc = [j for j in cols if names[j].startswith(obj + ".")]
                true_class = truth[:, oc].argmax(axis=1)
                majority = np.bincount(train_targets[:, oc].argmax(axis=1), minlength=len(oc)).argmax()
                acc.append(float(np.mean(pred[:, oc].argmax(axis=1) == true_class)))
                base_acc.append(float(np.mean(true_class == majority)))
            entry.update(accuracy=float(np.mean(acc)), baseline_accuracy=float(np.mean(base_acc)))
        groups[kind] = entry
    return {"groups": groups, "targets": per_target}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="ungrounded-v1-1000-rgb64", help="canonical name or HDF5 file (sim)")
    parser.add_argument("--train-demos", type=int, default=200)
    parser.add_argument("--val-demos", type=int, default=50)
    parser.add_argument("--stride", type=int, default=2, help="every N-th frame of a training demo")
    parser.add_argument("--val-stride", type=int, default=4, help="every N-th frame of a validation demo")
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=64, help="frames per step (each with both cameras)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup-steps", type=int, default=200)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--shift", type=int, default=4, help="random shift, pixels")
    parser.add_argument("--jitter", type=float, default=0.15, help="brightness/contrast/gain jitter, a share")
    parser.add_argument("--head-width", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--weights", type=Path, default=ROOT / "r2s2r_envs/policies/encoders/sim-pose.pt")
    parser.add_argument("--record", type=Path, default=ROOT / "experiments/image-encoder/sim-pose.json")
    args = parser.parse_args(argv)
    s = Settings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Settings)})
    spec = FROZEN_ENCODERS[ENCODER]
    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    wall0, cpu0 = time.perf_counter(), time.process_time()

    name, path = resolve_path(s.data)
    with open_dataset(path, verify="none") as f:
        content_hash, env_id, all_ids = f.content_hash, f.env_id, list(f.demo_ids)
    rng = np.random.default_rng(s.seed)
    chosen = rng.permutation(all_ids)[: s.train_demos + s.val_demos].tolist()
    train_ids, val_ids = sorted(chosen[: s.train_demos]), sorted(chosen[s.train_demos :])
    train_frames, train_targets, names = load_frames(path, train_ids, s.stride)
    val_frames, val_targets, _ = load_frames(path, val_ids, s.val_stride)
    load_s = time.perf_counter() - wall0
    print(f"loaded {len(train_targets)} training and {len(val_targets)} validation frames in {load_s:.0f} s")

    mean = train_targets.mean(axis=0)
    std = np.maximum(train_targets.std(axis=0), 1e-3)  # a constant target (an object always elsewhere) stays finite
    norm_train = torch.from_numpy((train_targets - mean) / std)
    model = PoseNet(CAMERA_KEYS, spec.keypoints, spec.out_dim, len(names), s.head_width)
    encoder_params = sum(v.numel() for v in model.encoder_state().values())
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: lr_factor(k, s))
    generator = torch.Generator().manual_seed(s.seed)
    batches = np.random.default_rng([s.seed, 1])
    history = []
    t_train = time.perf_counter()
    for step in range(s.steps):
        idx = np.sort(batches.integers(0, len(norm_train), size=s.batch_size))
        images = {c: augment(to_images(train_frames[c][idx]), s.shift, s.jitter, generator) for c in CAMERA_KEYS}
        loss = F.mse_loss(model(images), norm_train[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        history.append(float(loss.detach()))
        if step % 500 == 0 or step == s.steps - 1:
            rate = (step + 1) / (time.perf_counter() - t_train)
            print(f"step {step}: loss {np.mean(history[-100:]):.4f} ({rate:.2f} steps/s)", flush=True)
    train_s = time.perf_counter() - t_train

    float_pred, _ = predict(model, val_frames)
    float_scores = scores(float_pred * std + mean, val_targets, mean, names, train_targets)
    # What ships: the encoder's weights packed as int8 (the head, discarded, stays as trained).
    packed = pack_state_dict(model.encoder_state(), "int8")
    model.load_encoder_state(unpack_state_dict(packed))
    shipped_pred, _ = predict(model, val_frames)
    shipped_scores = scores(shipped_pred * std + mean, val_targets, mean, names, train_targets)
    _, train_features = predict(model, train_frames)
    stats: dict[str, torch.Tensor] = {}
    for k, c in enumerate(CAMERA_KEYS):
        part = train_features[:, k * spec.out_dim : (k + 1) * spec.out_dim]
        stats[f"{c}.mean"] = torch.from_numpy(part.mean(axis=0).astype(np.float32))
        stats[f"{c}.std"] = torch.from_numpy(np.maximum(part.std(axis=0), 1e-6).astype(np.float32))
    args.weights.parent.mkdir(parents=True, exist_ok=True)
    torch.save({**packed, **pack_state_dict(stats, "int8")}, args.weights)
    digest = hashlib.sha256(args.weights.read_bytes()).hexdigest()

    record = {
        "encoder": ENCODER,
        "purpose": "the frozen camera encoder of the cpu-image-cached recipe, trained on simulator renders only",
        "command": "python baselines/train_image_encoder.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "settings": dataclasses.asdict(s),
        "data": {
            "name": name,
            "content_sha256": content_hash,
            "env_id": env_id,
            "domain": "sim",
            "train_demo_ids": train_ids,
            "validation_demo_ids": val_ids,
            "train_frames": len(train_targets),
            "validation_frames": len(val_targets),
            "lab_images_used": 0,
        },
        "targets": {
            "per_object": list(TARGETS),
            "order": "the task features' object order: held, reachable on the belt (most downstream first), the rest",
            "names": names,
            "units": "positions in m (world axes; rel_pos = object - hand); category and status one-hot",
        },
        "validation": {
            "shipped_int8": shipped_scores,
            "float32": float_scores,
            "baseline": "the training targets' mean (accuracy: the most frequent class)",
        },
        "parameters": {"encoder": encoder_params, "head_discarded": sum(p.numel() for p in model.head.parameters())},
        "weights": {
            "file": os.path.relpath(args.weights.resolve(), ROOT),
            "sha256": digest,
            "bytes": args.weights.stat().st_size,
            "storage": "int8 per-row scales (r2s2r_envs.policies.weights); norms, biases and statistics float16",
        },
        "time": {
            "load_s": load_s,
            "train_s": train_s,
            "wall_s": time.perf_counter() - wall0,
            "cpu_s": time.process_time() - cpu0,
            "steps_per_s": s.steps / train_s,
        },
        "loss": {"first_100": float(np.mean(history[:100])), "last_100": float(np.mean(history[-100:]))},
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "torch": torch.__version__,
            "load_average_end": os.getloadavg(),
        },
    }
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps(record, indent=2) + "\n")
    for kind, g in shipped_scores["groups"].items():
        extra = f", accuracy {g['accuracy']:.3f} vs {g['baseline_accuracy']:.3f}" if "accuracy" in g else ""
        print(f"{kind}: rmse {g['rmse']:.4f} vs baseline {g['baseline_rmse']:.4f} (x{g['ratio']:.2f}){extra}")
    print(f"wrote {args.weights} ({args.weights.stat().st_size:,} bytes, sha256 {digest}) and {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
