"""What a training run writes: the checkpoint directory (``r2s2r_envs.policies.checkpoint`` reads it) with the
policy's metadata, its weights, the training log and the loss plot."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from r2s2r_envs._version import __version__
from r2s2r_envs.datasets.loaders import TrajectoryDataset
from r2s2r_envs.policies.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    CONFIG_FILE,
    LOG_FILE,
    LOSS_PLOT,
    WEIGHTS_FILE,
    weights_digest,
)
from r2s2r_envs.policies.config import TrainConfig
from r2s2r_envs.policies.data import DatasetRef, grounding_variant
from r2s2r_envs.policies.method import method_name, module_digest
from r2s2r_envs.policies.pipeline import Pipeline
from r2s2r_envs.policies.trainee import user_method
from r2s2r_envs.safe_json import with_content_hash

#: The class ``load_policy`` returns (recorded as ``policy_class``).
POLICY_CLASS = "r2s2r_envs.policies.runtime.TrainedPolicy"


def run_metadata(
    config: TrainConfig, refs: list[DatasetRef], datasets: list[TrajectoryDataset], held_out: list[int]
) -> dict[str, Any]:
    """The policy metadata of a run (``config.json``'s ``metadata``); ``held_out``: each dataset's number of
    validation demos."""
    # ``episodes``: the demos the policy was given (trained on or held out for its validation loss).
    entries = [
        {
            "name": ref.name,
            "path": str(ref.path),
            "sha256": ref.content_hash,
            "domain": ref.domain,
            "env_id": ref.env_id,
            "episodes": ds.num_demos + n_val,
            "validation_episodes": n_val,
            "samples": len(ds),
        }
        for ref, ds, n_val in zip(refs, datasets, held_out)
    ]
    variants = sorted({v for ref in refs if ref.domain == "sim" and (v := grounding_variant(ref.env_id))})
    real_env = [ref.env_id for ref in refs if ref.domain == "real"]
    cls = user_method(config)
    # A user's method: its name, its class and the SHA-256 of its module's file (what code trained the weights).
    user = {} if cls is None else {"method_class": config.method, "method_source_sha256": module_digest(config.method)}
    return {
        "method": config.method if cls is None else method_name(cls),
        "real_fraction": config.real_fraction,
        "variant": "+".join(variants) if variants else None,
        "datasets": entries,
        "training_seed": config.seed,
        "n_real_demos": sum(e["episodes"] for e in entries if e["domain"] == "real"),
        "n_sim_demos": sum(e["episodes"] for e in entries if e["domain"] == "sim"),
        "policy_class": POLICY_CLASS,
        "demos": config.demos,
        "env_id": real_env[0] if real_env else refs[0].env_id,
        "steps": config.steps,
        "recipe": config.recipe,
        "features": config.features,
        "versions": {"r2s2r_envs": __version__, "torch": torch.__version__},
        **user,
    }


#: The training log's fields that ``config.json`` repeats (its ``training`` section).
TRAINING_SUMMARY = (
    "final_loss",
    "load_time_s",
    "train_time_s",
    "samples_per_s",
    "threads",
    "device",
    "checkpoint_step",
)


def write_checkpoint(
    out: Path,
    config: TrainConfig,
    pipeline: Pipeline,
    model: torch.nn.Module,
    metadata: dict[str, Any],
    log: dict[str, Any],
    model_section: dict[str, Any],
) -> None:
    """Writes the checkpoint directory ``out``; ``config.json`` last, so that its presence marks a finished one."""
    out.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, out / WEIGHTS_FILE)
    (out / LOG_FILE).write_text(json.dumps(log) + "\n")
    plot_losses(out / LOSS_PLOT, config, log)
    document = {
        "format": CHECKPOINT_FORMAT,
        "checkpoint_version": CHECKPOINT_VERSION,
        "config": config.to_dict(),
        "metadata": metadata,
        "pipeline": pipeline.to_dict(),
        "model": model_section,
        "training": {k: log[k] for k in TRAINING_SUMMARY},
        "weights_sha256": weights_digest(out / WEIGHTS_FILE),
    }

    # config.json last, atomically: its presence marks a finished checkpoint.
    tmp = out / (CONFIG_FILE + ".tmp")
    tmp.write_text(json.dumps(with_content_hash(document), indent=2) + "\n")  # a hash of its own content
    os.replace(tmp, out / CONFIG_FILE)


def plot_losses(path: Path, config: TrainConfig, log: dict[str, Any]) -> None:
    """``loss.png``: the logged losses over the steps, smoothed over 1% of the run."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    history = log["history"]
    steps = np.arange(1, len(history["loss"]) + 1)
    window = max(1, len(steps) // 100)
    fig, ax = plt.subplots(figsize=(7, 4))
    for key in ("loss", "action", "domain"):
        if key in history and (key != "action" or "domain" in history):
            y = np.convolve(history[key], np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1 :], y, label=key)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log" if min(history["loss"]) > 0 else "linear")
    ax.set_title(f"{config.method}, real_fraction={config.real_fraction}, seed={config.seed}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
