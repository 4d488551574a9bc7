"""How a checkpoint's weights are stored: as trained (float32), or packed smaller for shipping.

``r2s2r train`` writes ``policy.pt`` as a plain ``state_dict`` of float32 tensors. A shipped checkpoint (the model
zoo) may store them packed, which :func:`unpack_state_dict` undoes on load, so every reader sees float32 tensors:

* ``"float16"``: every floating tensor in half precision (half the bytes);
* ``"int8"``: every weight matrix (a floating tensor of two or more dimensions with at least :data:`INT8_MIN_NUMEL`
  entries) as signed 8-bit integers with one float32 scale per output row (symmetric, the row's largest magnitude
  maps to 127), stored as the integer tensor under its own name and the scales under ``NAME`` +
  :data:`SCALE_SUFFIX`; every other floating tensor (biases, norms, small tensors) in float16. A quarter of the
  bytes; each weight is off by at most half its row's step (``max |w| / 254``).

:func:`pack_checkpoint` writes a packed copy of a checkpoint directory, its ``config.json`` saying how
(``weights_storage``) and pinning the new file's hash; :func:`storage_error` measures what packing changed.

Example::

    from r2s2r_envs.policies.weights import pack_checkpoint

    pack_checkpoint("runs/flow-s0", "zoo/r2s2r_envs_zoo/flow-real-only", storage="int8")
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from r2s2r_envs.mappings import check_choice
from r2s2r_envs.policies.checkpoint import read_checkpoint
from r2s2r_envs.policies.checkpoint_layout import CONFIG_FILE, WEIGHTS_FILE, CheckpointError, weights_digest
from r2s2r_envs.policies.zoo import resolve_checkpoint
from r2s2r_envs.safe_json import with_content_hash

#: How ``policy.pt`` may be stored; ``"float32"`` is what training writes.
STORAGES: tuple[str, ...] = ("float32", "float16", "int8")
#: The ``config.json`` field that says how the weights are stored (absent: float32, as trained).
STORAGE_FIELD = "weights_storage"
#: Name suffix of the per-row scales of an int8 tensor.
SCALE_SUFFIX = "@scale"
#: Smallest weight matrix stored as int8; smaller tensors are not worth a scale per row.
INT8_MIN_NUMEL = 1024
_INT8_MAX = 127


def _int8_worthy(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point() and tensor.ndim >= 2 and tensor.numel() >= INT8_MIN_NUMEL


def pack_state_dict(state: Mapping[str, torch.Tensor], storage: str) -> dict[str, torch.Tensor]:
    """``state`` stored as ``storage`` (one of :data:`STORAGES`); non-floating tensors are kept as they are.

    Raises:
        ValueError: an unknown storage (the message lists the valid ones), or a tensor name that ends in
            :data:`SCALE_SUFFIX` (it would read as a scale).
    """
    check_choice(storage, STORAGES, what="weights storage")
    clashes = [k for k in state if k.endswith(SCALE_SUFFIX)]
    if clashes:
        raise ValueError(f"tensor names may not end in {SCALE_SUFFIX!r} (the int8 scales' suffix): {clashes[:3]}")
    packed: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        tensor = tensor.detach().cpu()
        if not tensor.is_floating_point() or storage == "float32":
            packed[name] = tensor.clone()
        elif storage == "int8" and _int8_worthy(tensor):
            rows = tensor.to(torch.float32).reshape(tensor.shape[0], -1)
            scale = rows.abs().amax(dim=1) / _INT8_MAX
            scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row stays zero
            packed[name] = torch.round(rows / scale[:, None]).clamp(-_INT8_MAX, _INT8_MAX).to(torch.int8)
            packed[name] = packed[name].reshape(tensor.shape)
            packed[name + SCALE_SUFFIX] = scale
        else:
            packed[name] = tensor.to(torch.float16)
    return packed


def unpack_state_dict(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A ``state_dict`` as :func:`pack_state_dict` wrote it (any storage), with float32 floating tensors.

    Raises:
        CheckpointError: a scale without its int8 tensor, or one whose length is not the tensor's row count.
    """
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if name.endswith(SCALE_SUFFIX):
            if (owner := name.removesuffix(SCALE_SUFFIX)) not in state:
                raise CheckpointError(f"packed weights: scale {name!r} has no tensor {owner!r}")
            continue
        scale = state.get(name + SCALE_SUFFIX)
        if scale is not None:
            if tensor.dtype != torch.int8 or scale.ndim != 1 or scale.shape[0] != tensor.shape[0]:
                raise CheckpointError(
                    f"packed weights: {name!r} ({tensor.dtype}, {tuple(tensor.shape)}) does not fit its scales "
                    f"({tuple(scale.shape)}); an int8 tensor has one scale per row"
                )
            rows = tensor.to(torch.float32).reshape(tensor.shape[0], -1) * scale.to(torch.float32)[:, None]
            out[name] = rows.reshape(tensor.shape)
        else:
            out[name] = tensor.to(torch.float32) if tensor.is_floating_point() else tensor
    return out


def load_state_dict_file(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """A ``policy.pt`` read as data (``weights_only``), unpacked to float32 whatever its storage."""
    return unpack_state_dict(torch.load(path, map_location="cpu", weights_only=True))


def storage_error(state: Mapping[str, torch.Tensor], storage: str) -> dict[str, float]:
    """What packing ``state`` as ``storage`` changes: the largest absolute change of any weight, and the root mean
    square change relative to the weights' root mean square (over every floating tensor)."""
    restored = unpack_state_dict(pack_state_dict(state, storage))
    worst, change, size = 0.0, 0.0, 0.0
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            continue
        delta = restored[name] - tensor.to(torch.float32)
        worst = max(worst, float(delta.abs().max()) if delta.numel() else 0.0)
        change += float((delta**2).sum())
        size += float((tensor.to(torch.float32) ** 2).sum())
    return {"max_abs_change": worst, "relative_rms_change": (change / size) ** 0.5 if size else 0.0}


def pack_checkpoint(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    storage: str = "int8",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Writes a copy of the checkpoint ``source`` to the new directory ``out`` with its weights stored as
    ``storage``; its ``config.json`` records the storage (``weights_storage``), the new file's SHA-256 and the
    fields of ``extra`` (e.g. where the copy comes from), with its content hash made anew. The training log and loss
    plot are not copied (a shipped checkpoint needs neither).

    Returns:
        The new ``config.json`` content.

    Raises:
        CheckpointError: ``source`` is not a readable checkpoint.
        FileExistsError: ``out`` exists (nothing there is overwritten).
        ValueError: an unknown storage.
    """
    check_choice(storage, STORAGES, what="weights storage")
    data = read_checkpoint(source)
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists; pack_checkpoint writes a new directory and overwrites nothing")
    state = load_state_dict_file(resolve_checkpoint(source) / WEIGHTS_FILE)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save(pack_state_dict(state, storage), tmp / WEIGHTS_FILE)
    document = {**data, **(extra or {}), "weights_sha256": weights_digest(tmp / WEIGHTS_FILE), STORAGE_FIELD: storage}
    document = with_content_hash(document)
    (tmp / CONFIG_FILE).write_text(json.dumps(document, indent=2) + "\n")
    os.replace(tmp, out)
    return document


__all__ = [
    "INT8_MIN_NUMEL",
    "SCALE_SUFFIX",
    "STORAGES",
    "STORAGE_FIELD",
    "load_state_dict_file",
    "pack_checkpoint",
    "pack_state_dict",
    "storage_error",
    "unpack_state_dict",
]
