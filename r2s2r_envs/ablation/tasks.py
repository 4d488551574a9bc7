"""The ablation's units of work, each run in one process: make data, train, evaluate, attribute (mixture), and
with ``--lab`` the chain's stages (sysid, behavior fit: :mod:`.chain`).

:func:`execute_task` is what a Ray worker runs (``r2s2r_envs.ablation.runner`` wraps it with ``ray.remote``, the
resources the task declares, ``max_retries`` and ``retry_exceptions``); it needs only the task's JSON and the
output directory, so it runs the same on this machine and on a cluster node that sees the directory. Every task
goes through the suite's public APIs: the datasets generation API and reader, ``policies.train.train`` /
``policies.load_policy``, ``evaluation.evaluate``, and the lab only as ``gym.make("PickSort-Real-v0")``.

An attempt starts by deleting the partial output of an earlier attempt (a dataset generation instead resumes its
crash-safe file) and ends by writing ``task.json``; only then is the task finished (:mod:`.store`). A data task
records its dataset's data card (``card``: :mod:`r2s2r_envs.datasets.card`), which the report shows beside the
results. A control arm's data task (``config["arm"]``, :mod:`.arms`) is made by :mod:`.arm_data`: a paced
demonstrator calibrated first (its record keeps the target, the calibration and the pace achieved), a nominal world
with a sysid's sensing, or a cut of the variants' data to the scenes all solved (``matched``). A chain stage
that ran and cannot deliver (:class:`~r2s2r_envs.ablation.chain.StageError`) is not raised to Ray, which would retry
it for the same answer: it is recorded as a final failure (``Store.record_failure(final=True)``) and returned as
``{"stage_failed": reason}``; the runner then skips the tasks that need it.

With a lab (``config["lab"]``) a task of the lab env makes it with ``lab=`` that lab (the run directory's copy of a
lab file); ``config["inputs"]`` names the chain outputs an env takes (``grounding``: a sysid task's grounding file,
``behavior``: a behavior task's model), by task kind and key.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from r2s2r_envs.ablation.chain import (
    GROUNDING_FILE,
    LAB_ENV_ID,
    MODEL_FILE,
    StageError,
    lab_argument,
    run_behavior_task,
    run_sysid_task,
)
from r2s2r_envs.ablation.mixture import attribute_policy
from r2s2r_envs.ablation.store import RESULT_FILE, Store
from r2s2r_envs.datasets.card import data_card
from r2s2r_envs.envs.conditions import STANDARD_MIX
from r2s2r_envs.safe_json import read_json

DATASET_FILE = "data.hdf5"
POLICY_DIR = "policy"


class TaskError(RuntimeError):
    """A task that ran but could not produce its result (e.g. a generation that ran out of attempts)."""


def execute_task(task: dict[str, Any], root: str) -> dict[str, Any]:
    """Runs one task and marks it finished; returns its record.

    Args:
        task: :meth:`r2s2r_envs.ablation.design.Task.to_dict` output.
        root: the ablation's output directory (shared by every worker).

    Raises:
        Exception: whatever the task raised (Ray retries it up to ``max_retries`` times, then the runner records
            the failure).
    """
    store = Store(root)
    kind, key = task["kind"], task["key"]
    store.log_attempt(key, {"event": "start", "label": task["label"], **_where()})
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    try:
        out = store.start(kind, key, keep_partial=kind == "data")
        runner = {
            "sysid": _run_sysid,
            "data": _run_data,
            "behavior": _run_behavior,
            "train": _run_train,
            "eval": _run_eval,
            "mixture": _run_mixture,
        }[kind]
        record = runner(task, store, out)
    except StageError as exc:  # deterministic: recorded, not retried
        store.log_attempt(key, {"event": "error", "error": f"{type(exc).__name__}: {exc}"})
        store.record_failure(task, f"{type(exc).__name__}: {exc}", final=True)
        return {"kind": kind, "key": key, "label": task["label"], "stage_failed": f"{type(exc).__name__}: {exc}"}
    except BaseException as exc:
        store.log_attempt(key, {"event": "error", "error": f"{type(exc).__name__}: {exc}"})
        raise
    record = {"kind": kind, "key": key, "label": task["label"], "config": task["config"], **record}
    record["wall_time_s"] = time.perf_counter() - start
    record["cpu_time_s"] = _cpu_seconds() - cpu_start
    store.finish(kind, key, record)
    store.log_attempt(key, {"event": "end", "wall_time_s": record["wall_time_s"]})
    return record


def _where() -> dict[str, str]:
    """Where a task runs, for its attempt log: the host and, inside a Ray worker, the Ray node's id."""
    import socket

    where = {"host": socket.gethostname()}
    try:
        import ray

        if ray.is_initialized():
            where["ray_node"] = ray.get_runtime_context().get_node_id()
    except ImportError:  # a task run without Ray
        pass
    return where


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children, s (a task's cost, independent of the machine's load)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def env_kwargs_of(task: dict[str, Any], store: Store, env_id: str) -> dict[str, Any]:
    """The env arguments of a task's env: its ``env_kwargs``, the lab of a lab env (``config["lab"]``) and the
    chain outputs it takes (``config["inputs"]``)."""
    config = task["config"]
    kwargs = dict(config.get("env_kwargs") or {})
    if config.get("lab") is not None and env_id == LAB_ENV_ID:
        kwargs["lab"] = lab_argument(config["lab"], store.root)
    for argument, source in (config.get("inputs") or {}).items():
        # Found in the store the task runs in (a moved run directory or a record still resumes).
        name = GROUNDING_FILE if source["kind"] == "sysid" else MODEL_FILE
        kwargs[argument] = str(store.task_dir(source["kind"], source["key"]) / name)
    return kwargs


# ---------------------------------------------------------------------- chain stages
def _run_sysid(task: dict[str, Any], store: Store, out: Path) -> dict[str, Any]:
    return run_sysid_task(task, store.root, out)


def _run_behavior(task: dict[str, Any], store: Store, out: Path) -> dict[str, Any]:
    return run_behavior_task(task, data_path(store, task["deps"][0]), out)


def format_error(exc: BaseException) -> str:
    """One readable line (plus the last traceback frame) for a task's failure record."""
    cause = getattr(exc, "cause", None) or exc  # a RayTaskError wraps the task's own exception
    frames = traceback.extract_tb(cause.__traceback__) if cause.__traceback__ else []
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(cause).__name__}: {cause}{where}".strip()


# ---------------------------------------------------------------------- data
def _run_data(task: dict[str, Any], store: Store, out: Path) -> dict[str, Any]:
    config = task["config"]
    arm = config.get("arm") or {}
    if "match" in arm:
        return _matched_data(task, store, out)
    if config["canonical"] is not None:
        return _canonical_data(config, out)
    from r2s2r_envs.datasets.generate import generate

    env_kwargs = env_kwargs_of(task, store, config["env_id"])
    generate_kwargs = dict(config.get("generate_kwargs", {}))
    extra: dict[str, Any] = {}
    if "sensing_of" in arm:  # a nominal world seen through the sensing the chain's sysid identified
        from r2s2r_envs.ablation.arm_data import sensing_world
        from r2s2r_envs.grounding.result import load_grounding

        source = arm["sensing_of"]
        grounding = store.task_dir(source["kind"], source["key"]) / GROUNDING_FILE
        env_kwargs["world"] = sensing_world(load_grounding(str(grounding)).world)
    if "pace" in arm:
        generate_kwargs["demonstrator"], extra["pace"] = _paced_demonstrator(task, store, out, env_kwargs)
    result = generate(
        config["env_id"],
        config["episodes"],
        out / DATASET_FILE,
        seed=config["seed"],
        successes_only=True,
        env_kwargs=env_kwargs,
        episode_steps=config["episode_steps"],
        max_attempts=config["max_attempts"],
        progress=False,
        handle_signals=False,
        **generate_kwargs,
    )
    if not result.complete:
        raise TaskError(
            f"{config['label']}: generated {result.num_demos} of {config['episodes']} successful demos in "
            f"{result.attempts} attempts of {config['env_id']} (max_attempts {config['max_attempts']})"
        )
    if "pace" in extra:  # the paced demonstrator's pace on the data it made
        from r2s2r_envs.ablation.arm_data import measure_pace

        extra["pace"]["achieved"] = measure_pace(out / DATASET_FILE).to_dict()
    return {
        "dataset": str(out / DATASET_FILE),
        "sha256": result.content_hash,
        "num_demos": result.num_demos,
        "card": data_card(out / DATASET_FILE),  # written by generate
        **extra,
    }


def _paced_demonstrator(
    task: dict[str, Any], store: Store, out: Path, env_kwargs: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """The demonstrator of a paced control arm, its pace calibrated in the arm's env to the pace of the target
    dataset (a training dataset of the design: ``config["arm"]["pace"]["target"]``), and what the calibration did."""
    from r2s2r_envs.ablation.arm_data import PacedDemonstrator, PaceError, calibrate_generation, measure_pace

    config = task["config"]
    pace = config["arm"]["pace"]
    try:
        target = measure_pace(data_path(store, pace["target"]["key"]))
    except PaceError as exc:
        raise TaskError(f"{config['label']}: the target pace of {pace['target']['data']}: {exc}") from None
    calibration = calibrate_generation(
        pace["demonstrator"],
        target,
        env_id=config["env_id"],
        env_kwargs=env_kwargs,
        episode_steps=config["episode_steps"],
        generate_kwargs=config.get("generate_kwargs", {}),
        workdir=out / "calibration",
        episodes=pace["episodes"],
        rounds=pace["rounds"],
    )
    settings = tuple(sorted(calibration["settings"].items()))
    record = {"target": {**pace["target"], **target.to_dict()}, "calibration": calibration}
    return PacedDemonstrator(pace["demonstrator"], settings), record


def _matched_data(task: dict[str, Any], store: Store, out: Path) -> dict[str, Any]:
    """A success-matched arm's dataset: its variant's demos of the attempts every variant's demonstrator solved
    (``arm_data.matched_attempts``), in attempt order."""
    from r2s2r_envs.ablation.arm_data import PaceError, matched_attempts

    config = task["config"]
    match = config["arm"]["match"]
    paths = [data_path(store, key) for key in task["deps"]]
    try:
        found = matched_attempts(paths)
    except PaceError as exc:
        raise TaskError(f"{config['label']}: {exc}") from None
    if not found["attempts"]:
        raise TaskError(
            f"{config['label']}: no scene of the {found['compared']} attempts every variant made was solved by every "
            f"variant's demonstrator (solved per variant: {found['solved']}); give the variants more demos"
        )
    own = match["variants"].index(match["variant"])
    sha = write_subset(
        Path(paths[own]),
        out / DATASET_FILE,
        len(found["attempts"]),
        source_name=f"{match['variant']} data {task['deps'][own]}",
        demos=found["positions"][own],
    )
    matched = {
        "variants": match["variants"],
        "compared_attempts": found["compared"],
        "solved": found["solved"],
        "kept_attempts": found["attempts"],
    }
    return {
        "dataset": str(out / DATASET_FILE),
        "sha256": sha,
        "num_demos": len(found["attempts"]),
        "card": data_card(out / DATASET_FILE, store=True),
        "matched": matched,
    }


def _canonical_data(config: dict[str, Any], out: Path) -> dict[str, Any]:
    """A canonical dataset from the cache, or a file with its first ``episodes`` demos."""
    from r2s2r_envs.datasets.reader import open_dataset
    from r2s2r_envs.policies.data import resolve_path

    _name, path = resolve_path(config["canonical"])
    with open_dataset(path, verify="quick") as f:
        available, source_hash = f.num_demos, f.content_hash
    if config.get("expected_sha256") not in (None, source_hash):
        raise TaskError(
            f"{config['canonical']}: the cached {path} has content hash {source_hash[:16]}..., the design was "
            f"planned for {config['expected_sha256'][:16]}...; run the ablation again to plan for the new data"
        )
    if config["episodes"] > available:
        raise TaskError(f"{config['canonical']} has {available} demos, the design asks for {config['episodes']}")
    if config["episodes"] == available:
        # The cache's file is shared by every task: its card is read or computed, never written into it.
        card = data_card(path)
        return {
            "dataset": config["canonical"],
            "path": str(path),
            "sha256": source_hash,
            "num_demos": available,
            "card": card,
        }
    sha = write_subset(path, out / DATASET_FILE, config["episodes"], source_name=config["canonical"])
    return {
        "dataset": str(out / DATASET_FILE),
        "sha256": sha,
        "num_demos": config["episodes"],
        "subset_of": source_hash,
        "card": data_card(out / DATASET_FILE, store=True),
    }


def write_subset(
    source: Path, dest: Path, episodes: int, *, source_name: str, demos: Sequence[int] | None = None
) -> str:
    """Writes the first ``episodes`` demos of ``source`` (or those at positions ``demos`` of its demo order) to a
    new dataset file; returns its content hash.

    The provenance is the source's, plus ``subset_of`` (the source's name, content hash and the demos taken), so a
    result trained on the subset names exactly which demos it saw. The demos keep their executed ``actions`` and
    their clean ``action_labels``.

    Raises:
        NoCleanLabelsError: ``source`` is a file of schema version 1 or 2 whose actions contain injected noise: it
            has no clean labels for the subset to keep (regenerate it).
    """
    import numpy as np

    from r2s2r_envs.datasets.reader import open_dataset
    from r2s2r_envs.datasets.writer import DatasetWriter, Episode

    with open_dataset(source, verify="quick") as f:
        label_array = f.label_array()  # before anything is written
        provenance = dict(f.provenance)
        chosen = list(range(episodes)) if demos is None else [int(i) for i in demos]
        provenance["subset_of"] = {"name": source_name, "sha256": f.content_hash, "demos": chosen}
        generation = {"subset_of": provenance["subset_of"], "source_generation": f.generation}
        with DatasetWriter.create(
            dest,
            provenance=provenance,
            env_args=f.env_args,
            generation=generation,
            episodes_requested=episodes,
            overwrite=True,
        ) as writer:
            for demo_id in (f.demo_ids[i] for i in chosen):
                demo = f.demo(demo_id, states=True)
                attrs = demo.attrs
                observations = {k: np.concatenate([demo.obs[k], demo.next_obs[k][-1:]]) for k in demo.obs}
                writer.append(
                    Episode(
                        observations=observations,
                        actions=demo.actions,
                        action_labels=f.read(demo_id, label_array),
                        rewards=demo.rewards,
                        states=demo.states,
                        terminated=bool(attrs["terminated"]),
                        truncated=bool(attrs["truncated"]),
                        seed=attrs["seed"],
                        demonstrator_seed=attrs["demonstrator_seed"],
                        attempt=attrs["attempt"],
                        success=bool(attrs["success"]),
                        success_any_step=bool(attrs["success_any_step"]),
                        failure_cause=attrs["failure_cause"],
                        time_to_sort=attrs["time_to_sort"],
                        unstable=bool(attrs["unstable"]),
                        object_outcomes=list(attrs["object_outcomes"]),
                    ),
                    attempts=attrs["attempt"] + 1,
                )
            return writer.content_hash


def data_argument(store: Store, key: str) -> str:
    """What ``TrainConfig.real`` / ``sim`` gets for a finished data task: a canonical name or its file in the store."""
    record = store.done_record("data", key)
    if "path" in record:  # a whole canonical dataset, read from the dataset cache by its name
        return str(record["dataset"])
    return str(store.task_dir("data", key) / DATASET_FILE)


def data_path(store: Store, key: str) -> str:
    """The HDF5 file of a finished data task."""
    record = store.done_record("data", key)
    return str(record["path"]) if "path" in record else data_argument(store, key)


def has_output(store: Store, kind: str, key: str) -> bool:
    """Whether the files a finished task made for the tasks after it are still there: a training's checkpoint, a
    generated dataset, a grounding file, a behavior model (a committed record keeps ``task.json`` and small
    results; a canonical dataset lives in the dataset cache, checked before any work)."""
    from r2s2r_envs.policies.checkpoint import CONFIG_FILE

    folder = store.task_dir(kind, key)
    if kind == "train":
        return (folder / POLICY_DIR / CONFIG_FILE).is_file()
    if kind == "data":
        return "path" in store.done_record("data", key) or (folder / DATASET_FILE).is_file()
    if kind == "sysid":
        return (folder / GROUNDING_FILE).is_file()
    if kind == "behavior":
        return (folder / MODEL_FILE).is_file()
    return True


# ---------------------------------------------------------------------- train
def policy_dir(store: Store, key: str) -> Path:
    """The checkpoint directory of a train task, found in the store it lives in (so a run directory that moved,
    or a cluster node that mounts it elsewhere, still finds it)."""
    return store.task_dir("train", key) / POLICY_DIR


def _run_train(task: dict[str, Any], store: Store, out: Path) -> dict[str, Any]:
    from r2s2r_envs.policies.config import TrainConfig
    from r2s2r_envs.policies.train import train

    config = dict(task["config"])
    rf = config["real_fraction"]
    deps = list(task["deps"])
    real = (data_argument(store, deps.pop(0)),) if rf > 0 else ()
    sim = (data_argument(store, deps.pop(0)),) if deps else ()
    tuples: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in config.items()}
    result = train(TrainConfig(**tuples, real=real, sim=sim, out=str(out / POLICY_DIR), progress=False, overwrite=True))
    return {
        "policy": str(out / POLICY_DIR),
        "metadata": result.metadata,
        "final_loss": result.final_loss,
        "load_time_s": result.load_time_s,
        "train_time_s": result.train_time_s,
        "samples_per_s": result.samples_per_s,
    }


# ---------------------------------------------------------------------- eval
def _episodes_of(config: dict[str, Any]) -> dict[str, Any]:
    """``evaluate``'s episode arguments of an eval task: nominal legacy episodes, or the standard mix of conditions
    on the task's split scaled to its episodes (``AblationDesign.eval_split``); an intervention's
    (``config["condition"]``, docs/ablation.md#interventions): its episodes under that condition alone, on the task's
    split or else the legacy seeds (the nominal evaluation's episodes)."""
    if config.get("condition") is not None:
        return {"split": config.get("split") or "legacy", "conditions": {config["condition"]: config["episodes"]}}
    if config.get("split") is None:
        return {"episodes": config["episodes"]}

    scale = config["episodes"] // sum(STANDARD_MIX.values())
    return {"split": config["split"], "conditions": {c: n * scale for c, n in STANDARD_MIX.items()}}


def _run_eval(task: dict[str, Any], store: Store, out: Path) -> dict[str, Any]:
    from r2s2r_envs.evaluation import evaluate
    from r2s2r_envs.policies import load_policy

    config = task["config"]
    policy = load_policy(policy_dir(store, task["deps"][0]))
    episodes = _episodes_of(config)
    fewest = min(episodes["conditions"].values()) if "conditions" in episodes else config["episodes"]
    result = evaluate(
        config["env_id"],
        policy,
        **episodes,
        env_kwargs=env_kwargs_of(task, store, config["env_id"]),
        progress=False,
        batch=min(int(task.get("batch", 1)), fewest),  # at most a condition's episodes
        threads=max(1, int(task.get("num_cpus") or 1)),  # the cores the task declared, not the machine's
    )
    (out / RESULT_FILE).write_text(result.to_json(indent=2) + "\n")
    return {"result": str(out / RESULT_FILE), "summary": result.summary}


def read_result(store: Store, key: str) -> Any:
    """The :class:`~r2s2r_envs.evaluation.EvaluationResult` of a finished eval task (checked on reading), from
    ``result.json`` or a record's ``result.json.gz`` (:meth:`Store.result_file`)."""
    from r2s2r_envs.evaluation.result_files import read_result_file

    return read_result_file(store.result_file(key))


# ---------------------------------------------------------------------- mixture
def _run_mixture(task: dict[str, Any], store: Store, out: Path) -> dict[str, Any]:
    config = task["config"]
    policy_key, real_key, sim_key = task["deps"]
    summary = attribute_policy(
        policy_dir=str(policy_dir(store, policy_key)),
        real_data=data_path(store, real_key),
        sim_data=data_path(store, sim_key),
        episodes=config["episodes"],
        neighbors=config["neighbors"],
        env_kwargs=env_kwargs_of(task, store, LAB_ENV_ID),
        out=out,
    )
    return {"summary": summary}


def load_json(path: Path) -> Any:
    """Reads a JSON file with the suite's bounded, strict reader (``safe_json.read_json``)."""
    return read_json(path)
