"""Shared fixtures.  Tests are hermetic (no network) and parametrized over every registered PickSort id."""

from __future__ import annotations

import json
import os

# MuJoCo chooses its OpenGL backend at import time; headless offscreen rendering needs EGL.  Set it before
# anything imports mujoco (an explicit choice in the environment wins).
os.environ.setdefault("MUJOCO_GL", "egl")

from pathlib import Path  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import r2s2r_envs  # noqa: E402  (registers the envs)

REPO_ROOT = Path(__file__).resolve().parents[1]
# Every PickSort id in the registry, so a newly registered variant cannot escape the tests.
ENV_IDS: tuple[str, ...] = r2s2r_envs.registered_ids()


@pytest.fixture(params=ENV_IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    """Every registered PickSort id."""
    return request.param


@pytest.fixture
def make_env():
    """``make_env(id, **kwargs)``: ``gym.make`` that closes what it made at the end of the test."""
    made: list[gym.Env] = []

    def _make(env_id: str, **kwargs) -> gym.Env:
        env = gym.make(env_id, **kwargs)
        made.append(env)
        return env

    yield _make
    for env in made:
        env.close()


def random_actions(env: gym.Env, n: int, seed: int) -> list[np.ndarray]:
    """A fixed stream of ``n`` in-range actions."""
    rng = np.random.default_rng(seed)
    shape = env.action_space.shape
    return [rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for _ in range(n)]


#: The observation keys of obs_mode "state".
STATE_KEYS: frozenset[str] = frozenset(
    {
        "arm_qpos",
        "arm_qvel",
        "hand_qpos",
        "hand_qvel",
        "eef_pos",
        "eef_quat",
        "object_pos",
        "object_quat",
        "object_vel",
        "object_category",
    }
)


def lab_file(tmp_path: Path, name: str) -> str:
    """A copy of the default lab under another name, written to a JSON file; returns its path."""
    from importlib import resources

    raw = json.loads(resources.files("r2s2r_envs.lab").joinpath("configs", "default.json").read_text())
    raw["name"] = name
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(raw))
    return str(path)


def downgrade_to_v2(path: Path, action_noise: float | None = None) -> str:
    """Rewrites a dataset of the current schema version the way version 2 stored it (no ``action_labels`` arrays or
    statistics, every hash recomputed), optionally recording ``action_noise`` in its generation settings as a noisy
    version-2 generation did; returns its v2 content hash."""
    import json

    import h5py

    from r2s2r_envs.datasets import schema
    from r2s2r_envs.datasets.writer import _store_content_hash

    labels = schema.ACTION_LABELS
    with h5py.File(path, "r+") as f:
        hashes = {}
        for grp in f["data"].values():
            del grp[labels]
            paths: list[str] = []
            grp.visititems(lambda name, obj, found=paths: found.append(name) if isinstance(obj, h5py.Dataset) else None)
            grp.attrs["arrays_sha256"] = arrays = schema.array_items_hash((n, grp[n][()]) for n in paths)
            hashes[int(grp.attrs["demo_id"])] = grp.attrs["sha256"] = schema.demo_hash(arrays, dict(grp.attrs))
        if labels in f["stats"]:
            del f["stats"][labels]
        if action_noise is not None:
            generation = json.loads(f.attrs["generation"])
            f.attrs["generation"] = schema.to_json({**generation, "action_noise": float(action_noise)})
        f.attrs["r2s2r_schema_version"] = 2
        _store_content_hash(f, hashes)
        return str(f.attrs["content_sha256"])


def downgrade_to_v1(path: Path) -> str:
    """Rewrites a dataset the way version 1 stored it (no ``action_labels``, array-only hashes); returns its v1
    content hash."""
    import h5py

    from r2s2r_envs.datasets import schema

    downgrade_to_v2(path)
    with h5py.File(path, "r+") as f:
        hashes = {}
        for grp in f["data"].values():
            hashes[int(grp.attrs["demo_id"])] = grp.attrs["sha256"] = str(grp.attrs["arrays_sha256"])
            del grp.attrs["arrays_sha256"]
        del f.attrs["content_parts"]
        f.attrs["r2s2r_schema_version"] = 1
        f.attrs["content_sha256"] = digest = schema.dataset_hash_v1(hashes)
    return digest


def assert_obs_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    """Bit-identical observation dicts."""
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=f"observation key {k!r} differs")


# Python code that makes torch absent, as on a machine without the torch extra, for a test's subprocess: an import
# hook refuses it (setting sys.modules["torch"] = None instead trips libraries that probe sys.modules, like scipy).
BLOCK_TORCH = (
    "import sys\n"
    "class NoTorch:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'torch' or name.startswith('torch.'):\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, NoTorch())\n"
)


def true_trajectory(env: gym.Env, seed: int, actions: list[np.ndarray]) -> np.ndarray:
    """The true object positions and arm joint angles after each of ``actions`` from ``reset(seed=seed)``: what the
    physics did, whatever the sensors reported."""
    base = env.unwrapped
    env.reset(seed=seed)
    poses = []
    for a in actions:
        env.step(a)
        poses.append(np.concatenate([base.scene.object_pos(base._data).ravel(), base.scene.arm_qpos(base._data)]))
    return np.array(poses)


#: The smallest training settings that still exercise every stage (tests of ``r2s2r train`` on toy data).
TINY_TRAIN: dict[str, int] = dict(
    steps=6, batch_size=16, hidden_dim=32, layers=2, feature_dim=16, action_chunk=4, execute_steps=2
)


def policy_toy_data(root: Path) -> dict[str, Path]:
    """Two synthetic datasets with PickSort's keys under ``root``: ``real`` (4 demos) and ``sim`` (10 demos)."""
    from r2s2r_envs.datasets.toy import write_synthetic_dataset

    paths = {"real": root / "real.hdf5", "sim": root / "sim.hdf5"}
    write_synthetic_dataset(paths["real"], [12, 9, 15, 10], domain="real", seed=1)
    write_synthetic_dataset(paths["sim"], [14, 8, 11, 13, 10, 9, 12, 10, 11, 9], domain="sim", seed=2)
    return paths


def tiny_train_config(data: dict[str, Path], out: Path, method: str = "flow", **kw: object):
    """A ``TrainConfig`` on ``policy_toy_data`` with ``TINY_TRAIN`` settings (``kw`` overrides them)."""
    from r2s2r_envs.policies.config import TrainConfig

    settings = {"real": (str(data["real"]),), "sim": (str(data["sim"]),), **TINY_TRAIN, "progress": False, **kw}
    return TrainConfig(method=method, real_fraction=settings.pop("real_fraction", 0.5), out=str(out), **settings)


def hand_made_result(env_id: str, sorted_counts: list[int], method: dict, indent: int | None = None) -> str:
    """An evaluation result's JSON text in which episode ``i`` sorts the first ``sorted_counts[i]`` of 3 objects
    (the rest missed); a lab id (``*Real*``) gets a lab's provenance."""
    from r2s2r_envs.evaluation import EVALUATION_BASE_SEED, EpisodeRecord, EvaluationResult, evaluation_seeds

    records = []
    for i, ((env_seed, policy_seed), k) in enumerate(zip(evaluation_seeds(len(sorted_counts)), sorted_counts)):
        records.append(
            EpisodeRecord(
                index=i,
                env_seed=int(env_seed),
                policy_seed=int(policy_seed),
                is_success=k == 3,
                success_any_step=k == 3,
                sort_accuracy=k / 3,
                time_to_sort=10.0 if k == 3 else None,
                failure_cause=None if k == 3 else "missed",
                object_outcomes=("sorted",) * k + ("missed",) * (3 - k),
                steps=100,
                episode_return=float(k),
                terminated=True,
                truncated=False,
                unstable=False,
            )
        )
    lab = {"domain": "real", "lab": {"name": "default", "config_sha256": "0" * 64}} if "Real" in env_id else {}
    result = EvaluationResult(
        env_id=env_id,
        env_kwargs={},
        provenance={"domain": "sim", **lab},
        policy={"name": "hand-made", "class": "tests.HandMade", "settings": None},
        method=method,
        base_seed=EVALUATION_BASE_SEED,
        records=tuple(records),
        versions={k: "test" for k in ("r2s2r_envs", "mujoco", "gymnasium", "numpy", "python")},
    )
    return result.to_json() if indent is None else result.to_json(indent=indent) + "\n"
