"""Small helpers shared by the course lessons: run an `r2s2r` command, film sim and lab side by side.

Everything here uses the suite's public interface only (``gymnasium.make``, the demonstrators, the ``r2s2r``
command line); a student may read it like any lesson cell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import r2s2r_envs  # noqa: F401  (registers the PickSort ids)


def quick_mode() -> bool:
    """True when ``R2S2R_COURSE_QUICK=1``: the lessons then use small budgets (what CI runs)."""
    return os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"


def output_dir(lesson: str) -> Path:
    """Where a lesson writes its files: ``$R2S2R_COURSE_OUT/<lesson>`` (default ``course_output/<lesson>``)."""
    out = Path(os.environ.get("R2S2R_COURSE_OUT", "course_output")) / lesson
    out.mkdir(parents=True, exist_ok=True)
    return out


def r2s2r(*args: Any, check: bool = True, tail: int = 40) -> subprocess.CompletedProcess[str]:
    """Run ``r2s2r ARGS...`` (what you would type in a terminal), print the command and the last lines of its
    output, and return the finished process (``.stdout`` holds everything it printed).

    Args:
        args: Command-line arguments, e.g. ``"demo", "--env", "PickSort-Real-v0", "--episodes", 5``.
        check: Raise ``RuntimeError`` with the command's error output when it exits with a non-zero code.
        tail: How many lines of its output to print (0: none).
    """
    words = [str(a) for a in args]
    print("$ r2s2r " + " ".join(words))
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    done = subprocess.run(
        [sys.executable, "-m", "r2s2r_envs.cli", *words], capture_output=True, text=True, env=env, check=False
    )
    if tail:
        lines = done.stdout.strip().splitlines()
        print("\n".join(lines[-tail:]))
    if check and done.returncode != 0:
        raise RuntimeError(f"r2s2r {' '.join(words)} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def film(
    env: gym.Env,
    policy: Any,
    seed: int,
    *,
    max_steps: int = 500,
    every: int = 2,
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Run one episode of ``policy`` on ``env`` (made with ``render_mode="rgb_array"``) and keep every
    ``every``-th rendered frame.  Returns the frames and the last ``info``."""
    obs, info = env.reset(seed=seed)
    policy.reset(seed)
    frames = [env.render()]
    for t in range(max_steps):
        obs, _, terminated, truncated, info = env.step(policy.act(obs))
        if t % every == every - 1:
            frames.append(env.render())
        if terminated or truncated:
            break
    return frames, info


def side_by_side(
    make_left: Callable[[], gym.Env],
    make_right: Callable[[], gym.Env],
    make_policy: Callable[[gym.Env], Any],
    path: str | Path,
    *,
    seed: int = 0,
    max_steps: int = 300,
    every: int = 2,
) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """Film the same episode (same seed) in two envs and write one MP4 with the two views side by side.

    Args:
        make_left, make_right: Make the two envs (with ``render_mode="rgb_array"``; keep ``render_size`` small,
            a multiple of 16 px, e.g. (128, 160), which video encoders want).
        make_policy: ``f(env) -> policy`` (``reset(seed)``, ``act(obs)``), e.g. ``make_demonstrator``.
        path: The MP4 to write.
        seed: The episode's reset seed, the same in both envs.
        max_steps: Control steps filmed at most.
        every: Keep every ``every``-th frame (20 Hz control: 2 gives a 10 fps video played at 10 fps, real time).

    Returns:
        The path and the last ``info`` of each episode (left, right).
    """
    import imageio.v2 as imageio

    runs = []
    for make in (make_left, make_right):
        env = make()
        try:
            runs.append(film(env, make_policy(env), seed, max_steps=max_steps, every=every))
        finally:
            env.close()
    (left, info_left), (right, info_right) = runs
    n = max(len(left), len(right))
    left = left + [left[-1]] * (n - len(left))  # the shorter episode holds its last frame
    right = right + [right[-1]] * (n - len(right))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fps = 20 // every
    with imageio.get_writer(path, format="FFMPEG", fps=fps, codec="libx264", pixelformat="yuv420p") as out:
        for a, b in zip(left, right):
            gap = np.full((a.shape[0], 16, 3), 255, dtype=np.uint8)  # frame sizes stay multiples of 16 px
            out.append_data(np.concatenate([a, gap, b], axis=1))
    return path, info_left, info_right


def show_video(path: str | Path, width: int = 480) -> Any:
    """The video embedded in the notebook (an ``IPython.display.Video``); as a script, just its path."""
    try:
        from IPython import get_ipython
        from IPython.display import Video
    except ImportError:  # pragma: no cover - IPython comes with the course extra
        return str(path)
    if get_ipython() is None:
        return str(path)
    return Video(str(path), embed=True, width=width)


def wilson_bars(ax: Any, labels: Sequence[str], results: Sequence[Any], title: str = "") -> None:
    """Bar plot of success rates with their Wilson 95% intervals (``EvaluationResult.summary``)."""
    rates = [r.summary["success_rate"] for r in results]
    low = [r.summary["success_rate"] - r.summary["success_rate_ci95"][0] for r in results]
    high = [r.summary["success_rate_ci95"][1] - r.summary["success_rate"] for r in results]
    ax.bar(labels, rates, yerr=[low, high], capsize=4, color=[f"C{i}" for i in range(len(rates))])
    ax.set_ylim(0, 1)
    ax.set_ylabel("success rate (Wilson 95%)")
    if title:
        ax.set_title(title)


def show_exercise(lesson: int) -> None:
    """Print the exercise of a lesson as ``r2s2r course labs`` lists it: its lab, its task, the answer format."""
    from r2s2r_envs.course.exercises import exercise

    e = exercise(lesson)
    print(f"Exercise {e.lesson} ({e.topic}), lab {e.lab!r}\n{e.task}\nAnswer keys:")
    for key in e.answer:
        print(f"  {key.key}: {key.meaning} ({key.tolerance}{'' if key.required else ', optional'})")
    print(f"Example answer file: {json.dumps(e.example)}\nThe checker: {e.check}")
    print(f"Check with: r2s2r course check {e.lesson} answer_{e.lesson}.json")
