"""Replay a stored demo: re-render it from its MuJoCo states, and check it re-simulates from its actions.

Example:
    r2s2r replay demos.hdf5 --demo 3 --video demo3.mp4 --check
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec

from r2s2r_envs.datasets.reader import DatasetFile, open_dataset


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


def make_env_for(dataset: DatasetFile, *, render_mode: str | None = "rgb_array") -> gym.Env:
    """Makes the env that generated ``dataset`` (same id, keyword arguments and time limit), state observations.

    Raises:
        gymnasium.error.Error: if that env is not registered in this installation.
    """
    generation = dataset.generation
    env_ref: Any = generation.get("env_id", dataset.env_id)
    if isinstance(env_ref, dict):  # an unregistered env stored as its EnvSpec JSON
        env_ref = EnvSpec.from_json(json.dumps(env_ref))
    kwargs = dict(generation.get("env_kwargs", dataset.env_args.get("env_kwargs", {})))
    kwargs["obs_mode"] = "state"
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if generation.get("max_episode_steps") is not None:
        kwargs["max_episode_steps"] = generation["max_episode_steps"]
    return gym.make(env_ref, **kwargs)


def replay_demo(
    path: str | os.PathLike[str],
    demo_id: int,
    *,
    video: str | os.PathLike[str] | None = None,
    fps: float | None = None,
    check: bool = False,
    tolerance: float = 1e-9,
) -> ReplayResult:
    """Re-renders a demo from its stored states and/or re-simulates it from its seed and actions.

    Args:
        path: the dataset file.
        demo_id: which demo.
        video: write a video of the demo here (``.mp4`` or ``.gif``), one frame per stored state.
        fps: video frame rate (default: the env's ``render_fps``).
        check: reset the env with the demo's seed, replay its actions and compare states (a deterministic
            sim reproduces them exactly; differences reveal nondeterminism or a changed env).
        tolerance: state difference above which a step counts as divergent.

    Returns:
        What was replayed and, with ``check``, how closely.
    """
    with open_dataset(path, verify="quick") as f:
        demo = f.demo(demo_id, obs_keys=[], next_obs=False)
        env = make_env_for(f, render_mode="rgb_array" if video is not None else None)
    video_path: Path | None = None
    max_err: float | None = None
    first_bad: int | None = None
    try:
        unwrapped = env.unwrapped
        seed = int(demo.attrs["seed"])
        if video is not None:
            import imageio.v2 as imageio

            video_path = Path(video)
            video_path.parent.mkdir(parents=True, exist_ok=True)
            env.reset(seed=seed if seed >= 0 else None)
            rate = fps or float(env.metadata.get("render_fps", 20))
            # Pillow's GIF writer takes a frame duration in ms, ffmpeg a frame rate.
            timing = {"duration": 1000.0 / rate, "loop": 0} if video_path.suffix.lower() == ".gif" else {"fps": rate}
            with imageio.get_writer(video_path, **timing) as out:
                for state in demo.states:
                    unwrapped.set_state(state)
                    out.append_data(np.asarray(unwrapped.render()))
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
