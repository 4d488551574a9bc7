"""One episode of the evaluation protocol: :func:`run_episode` and its :class:`EpisodeRecord`.

Episode ``i`` resets the env with ``env_seed`` and the policy with ``policy_seed`` and steps until the env ends it;
an action the env cannot take (or an error the policy raises) ends it as a ``policy_failure``, recorded instead of
crashing the run (docs/protocol.md).  :func:`r2s2r_envs.evaluation.protocol.evaluate` runs the episodes of an
evaluation through here, one at a time or (the same records) ``batch`` at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import mujoco

from r2s2r_envs.evaluation.policy import Policy, action_problem
from r2s2r_envs.evaluation.results import POLICY_FAILURE, EpisodeRecord

# MuJoCo picks its OpenGL backend when it is first imported, so MUJOCO_GL must be set before Python starts.
RENDER_HINT = (
    "offscreen rendering failed. On a headless Linux machine run with MUJOCO_GL=egl (e.g. "
    "`MUJOCO_GL=egl r2s2r demo ...`) and make sure the EGL libraries are installed "
    "(Debian/Ubuntu: apt-get install -y libegl1 libegl-mesa0 libgl1-mesa-dri)"
)


class RenderError(RuntimeError):
    """Offscreen rendering (for a video) is not available; the message says how to enable it."""


def run_episode(
    env: gym.Env, policy: Policy, *, env_seed: int, policy_seed: int, index: int = 0, writer: Any = None
) -> EpisodeRecord:
    """Run one episode: ``env.reset(seed=env_seed)``, ``policy.reset(policy_seed)``, step until it ends.

    An action the env cannot take (wrong shape, NaN/inf, complex, not numbers), or an exception raised by the
    policy's ``reset`` or ``act``, ends the episode as a policy failure: the objects still pending get the outcome
    ``policy_failure``, the record's ``policy_error`` says what was wrong, and the evaluation goes on.

    Args:
        env: A PickSort env.
        policy: The policy.
        env_seed: Seed of ``env.reset``.
        policy_seed: Seed of ``policy.reset``.
        index: Episode index recorded in the result.
        writer: Optional imageio writer; every ``env.render()`` frame is appended to it, the reset frame
            included (streamed, so memory stays flat however long the episode).

    Returns:
        The episode's record.

    Raises:
        RuntimeError: the env did not end the episode within its ``episode_steps``.
    """
    obs, info = env.reset(seed=int(env_seed))
    success_any_step = bool(info.get("is_success", False))
    try:
        policy.reset(int(policy_seed))
    except Exception as e:  # noqa: BLE001 - the policy is the user's code: its error is its failure, recorded
        error = f"reset: {action_problem(e, ())}"
        return policy_failure_record(info, error, index, env_seed, policy_seed, 0, 0.0, success_any_step)
    if writer is not None:
        writer.append_data(env.render())
    limit = getattr(env.unwrapped, "episode_steps", None)
    total, steps = 0.0, 0
    terminated = truncated = False
    shape = cast(tuple[int, ...], env.action_space.shape)  # a Box: never None
    while not (terminated or truncated):
        if limit is not None and steps >= limit:
            raise RuntimeError(f"the env did not end episode {index} within its episode_steps={limit} steps")
        try:
            action: Any = policy.act(obs)
        except Exception as e:  # noqa: BLE001 - the policy is the user's code: its error is its failure, recorded
            action = e
        problem = action_problem(action, shape)
        if problem is not None:
            error = f"step {steps}: {problem}"
            return policy_failure_record(info, error, index, env_seed, policy_seed, steps, total, success_any_step)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        steps += 1
        success_any_step = success_any_step or bool(info["is_success"])
        if writer is not None:
            writer.append_data(env.render())
    return episode_record(info, index, env_seed, policy_seed, steps, total, success_any_step, terminated, truncated)


def episode_record(
    info: Mapping[str, Any],
    index: int,
    env_seed: int,
    policy_seed: int,
    steps: int,
    total: float,
    success_any_step: bool,
    terminated: bool,
    truncated: bool,
) -> EpisodeRecord:
    """The record of an episode the env ended (``info``: its last)."""
    return EpisodeRecord(
        index=int(index),
        env_seed=int(env_seed),
        policy_seed=int(policy_seed),
        is_success=bool(info["is_success"]),
        success_any_step=success_any_step,
        sort_accuracy=float(info["sort_accuracy"]),
        time_to_sort=None if info["time_to_sort"] is None else float(info["time_to_sort"]),
        failure_cause=None if info["failure_cause"] is None else str(info["failure_cause"]),
        object_outcomes=tuple(info["object_outcomes"]),
        steps=steps,
        episode_return=total,
        terminated=bool(terminated),
        truncated=bool(truncated),
        unstable=bool(info.get("unstable", False)),
    )


def policy_failure_record(
    info: Mapping[str, Any],
    error: str,
    index: int,
    env_seed: int,
    policy_seed: int,
    steps: int,
    total: float,
    success_any_step: bool,
) -> EpisodeRecord:
    """The record of an episode stopped because the policy emitted an unusable action or raised (``info``: the
    last): truncated, unsuccessful, its pending objects failed by the policy."""
    record = episode_record(info, index, env_seed, policy_seed, steps, total, success_any_step, False, True)
    return dataclasses.replace(
        record,
        is_success=False,  # an action is only asked for while some object is pending
        time_to_sort=None,
        failure_cause=POLICY_FAILURE if record.failure_cause is None else record.failure_cause,
        object_outcomes=tuple(POLICY_FAILURE if o == "pending" else o for o in record.object_outcomes),
        unstable=False,
        policy_error=error,
    )


def filmed_episode(env: gym.Env, policy: Policy, seeds: tuple[int, int], video: str) -> EpisodeRecord:
    try:
        env.reset(seed=seeds[0])  # the episode resets again from the same seed: this only checks rendering
        env.render()
    except mujoco.FatalError as e:
        raise RenderError(f"{RENDER_HINT} (MuJoCo said: {e})") from e
    import imageio.v2 as imageio

    Path(video).parent.mkdir(parents=True, exist_ok=True)
    # libx264 + yuv420p plays everywhere; the render size (480x640) is a multiple of the 16-px macro block.
    writer = imageio.get_writer(
        video, format="FFMPEG", fps=env.metadata.get("render_fps", 20), codec="libx264", pixelformat="yuv420p"
    )
    try:
        return run_episode(env, policy, env_seed=seeds[0], policy_seed=seeds[1], index=0, writer=writer)
    finally:
        writer.close()
