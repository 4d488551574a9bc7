"""Datasets: robomimic-compatible HDF5 with provenance, generation, loaders and co-training mixtures.

* :mod:`~r2s2r_envs.datasets.schema`: the file layout, schema version, content hash and errors
  (docs/datasets.md).
* :class:`DatasetWriter` / :func:`open_dataset`: crash-safe writing and validated reading.
* :func:`~r2s2r_envs.datasets.generate.generate`: run an env's demonstrator (parallel, resumable) into a file.
* :class:`TrajectoryDataset`: in-memory numpy loader (frame stacks, action chunks, padding, normalization).
* :class:`CoTrainingMixture` and :func:`suggest_real_fraction`: real/sim batches by ``real_fraction``.
* :mod:`~r2s2r_envs.datasets.torch_data`: torch ``Dataset`` wrappers (the only module that imports torch).
"""

from __future__ import annotations

from r2s2r_envs.datasets.loaders import TrajectoryDataset
from r2s2r_envs.datasets.mixture import CoTrainingMixture, RealFractionSuggestion, suggest_real_fraction
from r2s2r_envs.datasets.reader import DatasetFile, Demo, open_dataset
from r2s2r_envs.datasets.schema import (
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    CorruptDatasetError,
    DatasetError,
    EmptyDatasetError,
    HashMismatchError,
    NoCleanLabelsError,
    NotADatasetError,
    UnsupportedSchemaError,
)
from r2s2r_envs.datasets.stats import Normalizer, RunningStats
from r2s2r_envs.datasets.writer import DatasetWriter, Episode

__all__ = [
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "CoTrainingMixture",
    "CorruptDatasetError",
    "DatasetError",
    "DatasetFile",
    "DatasetWriter",
    "Demo",
    "EmptyDatasetError",
    "Episode",
    "HashMismatchError",
    "NoCleanLabelsError",
    "Normalizer",
    "NotADatasetError",
    "RealFractionSuggestion",
    "RunningStats",
    "TrajectoryDataset",
    "UnsupportedSchemaError",
    "open_dataset",
    "suggest_real_fraction",
]
