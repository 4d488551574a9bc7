"""Export to a Minari dataset (docs/interop.md#minari): :func:`export_minari`, through Minari's own
``create_dataset_from_buffers``. Needs ``minari`` (the ``interop`` extra)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.datasets.export.common import (
    INFO_KEY,
    VERIFICATION_TEXT,
    ExportError,
    ExportResult,
    ExportVerify,
    check_out,
    check_verify,
    demo_progress,
    staging,
)
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.schema import NoCleanLabelsError

#: A Minari dataset id: ``[namespace/...]name-vN`` of letters, digits, ``_`` and ``-`` (no ``..``, no leading ``/``).
MINARI_ID_RE = re.compile(r"(?:[A-Za-z0-9_][-\w]*/)*[A-Za-z0-9_][-\w]*-v\d+", re.ASCII)


def export_minari(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    dataset_id: str | None = None,
    progress: bool = True,
    verify: ExportVerify = "full",
) -> ExportResult:
    """Writes a dataset file as a Minari dataset, under ``out`` used as Minari's datasets folder
    (``MINARI_DATASETS_PATH=out``; docs/interop.md#minari).

    Each demo is an episode: ``observations`` a dict of the stored keys (``T + 1`` steps: the demo's ``obs`` and its
    last ``next_obs``), ``actions`` the demonstrator's clean labels (the executed actions where the file has none),
    ``rewards``, ``terminations`` and ``truncations`` from the demo's outcome; ``seed`` the env seed. The observation
    space is a ``Dict`` of ``Box`` spaces built from the file (images as ``uint8`` boxes, stored unencoded), the action
    space PickSort's ``Box(-1, 1)``. The dataset's description holds this package's provenance of the export as JSON.

    Args:
        path: the HDF5 dataset.
        out: the folder to hold the Minari dataset (``out/<dataset_id>/``); it must not exist or be empty.
        dataset_id: Minari id (default ``r2s2r/<file stem>-v0``).
        progress: show a progress bar.
        verify: how the file is verified before anything is written (see :func:`export_dataset`).

    Raises:
        ExportError: the output folder is not empty, ``dataset_id`` is not a Minari id, or minari is missing.
        DatasetError: the file is not a readable dataset.
    """
    try:
        import minari
        from gymnasium import spaces
        from minari.data_collector import EpisodeBuffer
    except ImportError as exc:
        raise ExportError(
            f"--format minari needs the minari package ({exc}); install the interop extra: "
            "pip install 'r2s2r_envs[interop]'"
        ) from None
    check_verify(verify)
    # Absolute: Minari joins MINARI_DATASETS_PATH with paths it already joined with it, which breaks a relative one.
    out = Path(out).absolute()
    check_out(out)
    dataset_id = f"r2s2r/{_id_part(Path(path).stem)}-v0" if dataset_id is None else dataset_id
    _check_dataset_id(dataset_id)
    start = time.perf_counter()
    with open_dataset(path, verify=verify) as f, staging(out) as tmp:
        spec = f.obs_spec()
        obs_space = spaces.Dict(
            {
                key: spaces.Box(0, 255, shape, np.uint8)
                if dtype == np.uint8
                else spaces.Box(-np.inf, np.inf, shape, np.float32)
                for key, (shape, dtype) in spec.items()
            }
        )
        action_space = spaces.Box(-1.0, 1.0, (f.action_dim,), np.float32)
        try:
            label_array = f.label_array()
        except NoCleanLabelsError:
            label_array = "actions"
        counts = {"frames": 0}

        def episodes() -> Iterator[Any]:
            for demo_id in demo_progress(f, progress, "export minari"):
                demo = f.demo(demo_id, states=False)
                n = demo.num_samples
                observations = {
                    key: np.concatenate([demo.obs[key], demo.next_obs[key][-1:]]).astype(spec[key][1], copy=False)
                    for key in spec
                }
                actions = demo.actions if label_array == "actions" else demo.action_labels
                terminations = np.zeros(n, dtype=bool)
                truncations = np.zeros(n, dtype=bool)
                terminations[-1] = bool(demo.attrs.get("terminated", False))
                truncations[-1] = bool(demo.attrs.get("truncated", False)) or not terminations[-1]
                seed = int(demo.attrs.get("seed", -1))
                counts["frames"] += n
                yield EpisodeBuffer(
                    id=None,
                    seed=seed if seed >= 0 else None,
                    observations=observations,
                    actions=np.asarray(actions, dtype=np.float32),
                    rewards=np.asarray(demo.rewards, dtype=np.float64),
                    terminations=terminations,
                    truncations=truncations,
                    infos={},
                )
                del demo, observations

        provenance = {
            "source_content_sha256": f.content_hash,
            "source_verification": VERIFICATION_TEXT[verify],
            "source_schema_version": f.schema_version,
            "domain": f.domain,
            "env_id": f.env_id,
            "env_kwargs": f.env_args.get("env_kwargs", {}),
            "actions": label_array,
            "provenance": f.provenance,
        }
        with _minari_root(tmp), warnings.catch_warnings():
            # Minari warns of every optional field left unset (code permalink, author email, eval env, env spec).
            warnings.filterwarnings("ignore", category=UserWarning, module=r"minari\.")
            dataset = minari.create_dataset_from_buffers(
                dataset_id=dataset_id,
                buffer=episodes(),  # consumed one episode at a time by Minari's storage
                env=None,
                observation_space=obs_space,
                action_space=action_space,
                algorithm_name=str((f.provenance.get("demonstrator") or {}).get("name", "unknown")),
                description=f"Exported by r2s2r_envs from {Path(path).name}. {INFO_KEY}: " + json.dumps(provenance),
                author="r2s2r_envs",
                requirements=["r2s2r_envs"],
                jpeg_encoding=False,
            )
            total = int(dataset.total_episodes)
        source = f.content_hash
    return ExportResult(
        format="minari",
        out=out,
        episodes=total,
        frames=counts["frames"],
        seconds=time.perf_counter() - start,
        source_sha256=source,
        dataset_id=dataset_id,
    )


@contextlib.contextmanager
def _minari_root(root: Path) -> Iterator[None]:
    """Points Minari at ``root`` for the duration (Minari finds its datasets through ``MINARI_DATASETS_PATH``)."""
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = before


def _id_part(stem: str) -> str:
    """A file stem as a Minari dataset name: lower case, ``[a-z0-9-]`` only."""
    text = "".join(c if c.isalnum() else "-" for c in stem.lower()).strip("-")
    return text or "dataset"


def _check_dataset_id(dataset_id: object) -> None:
    """Refuses a Minari id that is not ``[namespace/...]name-vN``: Minari makes its folders from the id, so ``..``
    or a leading ``/`` would write outside ``--out``, and an id without ``-vN`` fails inside Minari."""
    if not isinstance(dataset_id, str) or MINARI_ID_RE.fullmatch(dataset_id) is None:
        raise ExportError(
            f"--dataset-id {dataset_id!r} is not a Minari dataset id: give [NAMESPACE/]NAME-vVERSION of letters, "
            "digits, '_' and '-' (e.g. r2s2r/ungrounded-1000-v0); the id names folders under --out, so it cannot "
            "hold '..', '.' or start with '/'"
        )
