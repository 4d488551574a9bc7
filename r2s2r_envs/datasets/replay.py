"""Replay a stored simulated demo: re-render it from its MuJoCo states, and check it re-simulates from its actions.

Replay is for simulated datasets: a lab dataset (domain ``"real"``) carries no simulator state, so there is nothing
to re-render or compare (docs/datasets.md, "Schema version 2").

A dataset is data, never code: the env is rebuilt only from a registered id whose name starts with ``PickSort-``
(or an id the caller allows explicitly in Python), with the env arguments recorded in the file. No env spec, entry
point or other ``module:function`` read from the file is ever imported or passed to Gymnasium, and no path: a
recorded argument that would make the env open a file (``world``, ``grounding``, ``behavior``, ``lab``) must be a
value or a shipped name (``datasets.env_values``; ``trust_paths=True`` opts out for a dataset one made oneself).

Example:
    r2s2r replay demos.hdf5 --demo 3 --video demo3.mp4 --check
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import gymnasium as gym
import numpy as np

from r2s2r_envs.datasets.env_values import check_recorded
from r2s2r_envs.datasets.reader import DatasetFile, open_dataset
from r2s2r_envs.datasets.schema import DatasetError

if TYPE_CHECKING:

    class SimulatedEnv(Protocol):
        """What generation and replay use of a simulated env's ``env.unwrapped`` (a PickSort env, the toy env)."""

        def get_state(self) -> np.ndarray: ...

        def set_state(self, state: np.ndarray) -> None: ...

        def render(self) -> Any: ...


#: Registered ids replay rebuilds without being told: the suite's own envs.
REPLAYABLE_PREFIX = "PickSort-"
# gymnasium.make's own arguments: never taken from a file (version-1 files recorded the time limit as
# max_episode_steps; it maps onto the env's episode_steps).
_GYM_MAKE_ARGUMENTS = ("disable_env_checker",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplayResult:
    """Outcome of :func:`replay_demo`.

    Attributes:
        demo_id: the demo replayed.
        num_steps: its transitions.
        video: the video written, if any.
        max_state_error: with ``check``: the largest absolute difference between a re-simulated state and
            the stored one (0.0 means bit-identical).
        first_divergent_step: with ``check``: the first step whose state differs by more than ``tolerance``.
    """

    demo_id: int
    num_steps: int
    video: Path | None = None
    max_state_error: float | None = None
    first_divergent_step: int | None = None


def replay_env_id(dataset: DatasetFile, *, allow_env_ids: Collection[str] = ()) -> str:
    """The registered id replay may rebuild for ``dataset``.

    Args:
        dataset: the open file.
        allow_env_ids: ids to accept besides the registered ``PickSort-*`` ones (e.g. a test env registered in
            this process); they must be registered too.

    Raises:
        DatasetError: a lab dataset, an env recorded as a spec rather than an id, or an id that is not registered or
            not allowed.
    """
    _refuse_real(dataset)
    generation = dataset.generation
    env_ref: Any = generation.get("env_id", dataset.env_args.get("env_name"))
    if not isinstance(env_ref, str):
        raise DatasetError(
            f"{dataset.path} records its env as {type(env_ref).__name__} (an env spec), not a registered id: replay "
            "makes envs only from registered ids, never from a spec or entry point read from a file"
        )
    if not (env_ref.startswith(REPLAYABLE_PREFIX) or env_ref in set(allow_env_ids)):
        raise DatasetError(
            f"{dataset.path} was made by env {env_ref!r}: replay rebuilds only registered {REPLAYABLE_PREFIX}* ids "
            "(or ids allowed explicitly in Python: replay_demo(..., allow_env_ids=[...]))"
        )
    if env_ref not in gym.registry:
        raise DatasetError(
            f"{dataset.path} was made by env {env_ref!r}, which is not registered in this installation; "
            f"registered {REPLAYABLE_PREFIX}* ids: {sorted(k for k in gym.registry if k.startswith(REPLAYABLE_PREFIX))}"
        )
    return env_ref


def replay_env_kwargs(
    dataset: DatasetFile, *, trust_paths: bool = False, allow_env_ids: Collection[str] = ()
) -> dict[str, Any]:
    """The env arguments recorded in ``dataset`` (JSON values), with the time limit as ``episode_steps``.

    Args:
        dataset: the open file.
        trust_paths: pass on recorded arguments that name local files (``grounding="my.json"``), which the env then
            opens; only for a dataset you made yourself (a file from elsewhere could name any path).
        allow_env_ids: as for :func:`replay_env_id`.

    Raises:
        DatasetError: the recorded arguments are not a JSON object, hold ``gymnasium.make``'s own arguments, or
            (without ``trust_paths``) name a local file instead of holding a value or a shipped name.
    """
    generation = dataset.generation
    recorded = generation.get("env_kwargs") if "env_id" in generation else dataset.env_args.get("env_kwargs", {})
    if not isinstance(recorded, Mapping):
        raise DatasetError(f"{dataset.path}: the recorded env arguments are not a JSON object: {recorded!r}")
    kwargs = dict(recorded)
    # Version 1 kept the time limit as Gymnasium's max_episode_steps; the env's own episode_steps replaces it.
    steps = kwargs.pop("max_episode_steps", None) or generation.get("max_episode_steps")
    if steps is not None:
        kwargs.setdefault("episode_steps", steps)
    wrong = sorted(k for k in kwargs if k in _GYM_MAKE_ARGUMENTS)
    if wrong:
        raise DatasetError(f"{dataset.path}: the recorded env arguments hold gymnasium.make arguments {wrong}")
    if not trust_paths:
        check_recorded(dataset.path, replay_env_id(dataset, allow_env_ids=allow_env_ids), kwargs)
    return kwargs


def make_env_for(
    dataset: DatasetFile,
    *,
    render_mode: str | None = "rgb_array",
    allow_env_ids: Collection[str] = (),
    trust_paths: bool = False,
) -> gym.Env:
    """Makes the env that generated ``dataset`` (same registered id and env arguments), state observations.

    Args:
        dataset: the open file (a simulated dataset).
        render_mode: the env's render mode.
        allow_env_ids: ids to accept besides the registered ``PickSort-*`` ones (see :func:`replay_env_id`).
        trust_paths: let recorded arguments name local files (see :func:`replay_env_kwargs`).

    Raises:
        DatasetError: the dataset cannot be replayed (see :func:`replay_env_id`), its arguments name a local file
            (see :func:`replay_env_kwargs`) or the env refuses its arguments.
    """
    env_id = replay_env_id(dataset, allow_env_ids=allow_env_ids)
    kwargs = replay_env_kwargs(dataset, trust_paths=trust_paths, allow_env_ids=allow_env_ids)
    kwargs["obs_mode"] = "state"
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        return gym.make(env_id, **kwargs)
    except (gym.error.Error, TypeError, ValueError) as exc:
        raise DatasetError(f"{dataset.path}: cannot make env {env_id!r} with the recorded arguments: {exc}") from exc


def replay_demo(
    path: str | os.PathLike[str],
    demo_id: int,
    *,
    video: str | os.PathLike[str] | None = None,
    fps: float | None = None,
    check: bool = False,
    tolerance: float = 1e-9,
    allow_env_ids: Collection[str] = (),
    trust_paths: bool = False,
) -> ReplayResult:
    """Re-renders a simulated demo from its stored states and/or re-simulates it from its seed and actions.

    Args:
        path: the dataset file (a simulated dataset).
        demo_id: which demo.
        video: write a video of the demo here (``.mp4`` or ``.gif``), one frame per stored state.
        fps: video frame rate (default: the env's ``render_fps``).
        check: reset the env with the demo's seed, replay its actions and compare states (a deterministic
            sim reproduces them exactly; differences reveal nondeterminism or a changed env).
        tolerance: state difference above which a step counts as divergent.
        allow_env_ids: registered ids to rebuild besides the ``PickSort-*`` ones (a test env, say).
        trust_paths: let recorded env arguments name local files, which the env then opens: only for a dataset you
            made yourself with an older version (this version records such files by value).

    Returns:
        What was replayed and, with ``check``, how closely.

    Raises:
        DatasetError: the file is unusable, a lab dataset (no simulator state), made by an env replay does
            not rebuild, or (without ``trust_paths``) its env arguments name a local file.
        KeyError: no such demo.
    """
    with open_dataset(path, verify="quick") as f:
        _refuse_real(f)
        demo = f.demo(demo_id, obs_keys=[], next_obs=False)
        env = make_env_for(
            f,
            render_mode="rgb_array" if video is not None else None,
            allow_env_ids=allow_env_ids,
            trust_paths=trust_paths,
        )
    assert demo.states is not None  # a simulated dataset always has them (checked when the file was opened)
    video_path: Path | None = None
    max_err: float | None = None
    first_bad: int | None = None
    try:
        unwrapped = cast("SimulatedEnv", env.unwrapped)  # _refuse_real(): not the lab
        seed = int(demo.attrs["seed"])
        if video is not None:
            import imageio.v2 as imageio

            video_path = Path(video)
            video_path.parent.mkdir(parents=True, exist_ok=True)
            env.reset(seed=seed if seed >= 0 else None)
            rate = fps or float(env.metadata.get("render_fps", 20))
            # Pillow's GIF writer takes a frame duration in ms, ffmpeg a frame rate.
            gif = video_path.suffix.lower() == ".gif"
            timing: dict[str, Any] = {"duration": 1000.0 / rate, "loop": 0} if gif else {"fps": rate}
            with imageio.get_writer(video_path, **timing) as out:
                for state in demo.states:
                    unwrapped.set_state(state)
                    # imageio's stub types Writer.__enter__ as returning the base class; out is the Writer.
                    out.append_data(np.asarray(unwrapped.render()))  # type: ignore[attr-defined]
        if check:
            env.reset(seed=seed if seed >= 0 else None)
            errors = np.empty(demo.num_samples)
            for t, action in enumerate(demo.actions):
                errors[t] = float(np.max(np.abs(np.asarray(unwrapped.get_state()) - demo.states[t])))
                env.step(action)
            max_err = float(errors.max())
            bad = np.flatnonzero(errors > tolerance)
            first_bad = int(bad[0]) if len(bad) else None
    finally:
        env.close()
    return ReplayResult(
        demo_id=int(demo_id),
        num_steps=demo.num_samples,
        video=video_path,
        max_state_error=max_err,
        first_divergent_step=first_bad,
    )


def _refuse_real(dataset: DatasetFile) -> None:
    if dataset.domain == "real":
        raise DatasetError(
            f"{dataset.path} is a lab dataset (domain 'real'): lab datasets carry no simulator state and cannot be "
            "replayed; replay is for simulated datasets"
        )
