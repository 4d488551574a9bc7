"""The ``r2s2r`` command.

Examples::

    r2s2r envs
    r2s2r demo --env PickSort-Ungrounded-v0 --episodes 10 --seed 0
    r2s2r demo --env PickSort-Real-v0 --episodes 20 --json
    r2s2r demo --env PickSort-Ungrounded-v0 --episodes 1 --video demo.mp4

``demo`` runs the demonstrator that comes with an env (``env.unwrapped.demonstrator``) and reports the
success rate (Wilson 95% interval), sort accuracy, time to sort and failure causes.  Episode ``i`` uses seed
``seed + i``, so a run is reproducible from its printed seeds.  The dataset subcommands (``generate``,
``replay``, ``datasets``) are added by :mod:`r2s2r_envs.datasets.cli` when that module is present.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import mujoco

import r2s2r_envs  # registers the envs and demonstrators
from r2s2r_envs.envs.pick_sort import FAILURE_CAUSES
from r2s2r_envs.evaluation.stats import summarize_episodes

ENV_PREFIX = "PickSort-"
# MuJoCo picks its OpenGL backend when it is first imported, so MUJOCO_GL must be set before Python starts.
RENDER_HINT = (
    "offscreen rendering failed. On a headless Linux machine run with MUJOCO_GL=egl (e.g. "
    "`MUJOCO_GL=egl r2s2r demo ...`) and make sure the EGL libraries are installed "
    "(Debian/Ubuntu: apt-get install -y libegl1 libegl-mesa0 libgl1-mesa-dri)"
)
EXIT_OK = 0
EXIT_USAGE = 2


def registered_env_ids() -> list[str]:
    """Every PickSort id in Gymnasium's registry (the shipped ones plus any registered later)."""
    return sorted(k for k in gym.registry if k.startswith(ENV_PREFIX))


class UsageError(ValueError):
    """A bad command-line choice (unknown env id, invalid env argument); reported without a traceback."""


class UnknownEnvError(UsageError):
    """An env id that is not registered; the message lists the registered PickSort ids."""


def check_env_id(env_id: str) -> None:
    """Raise ``UnknownEnvError`` naming the registered PickSort ids if ``env_id`` is not one of them."""
    if env_id not in registered_env_ids():  # a non-PickSort Gymnasium id has no demonstrator either
        raise UnknownEnvError(f"unknown env id {env_id!r}; registered PickSort ids: {registered_env_ids()}")


def run_demo_episode(env: gym.Env, demonstrator: Any, seed: int, writer: Any = None) -> dict[str, Any]:
    """Run one episode of ``demonstrator`` on ``env`` from ``seed``.

    Args:
        env: A PickSort env made by ``gym.make`` (state observations).
        demonstrator: Built by ``r2s2r_envs.behavior.make_demonstrator(env)``.
        seed: Seed of ``env.reset``; also passed to ``demonstrator.reset``.
        writer: Optional imageio writer; every ``env.render()`` frame is appended to it (streamed, so memory
            stays flat however long the episode).

    Returns:
        The episode's final ``info`` fields ``is_success``, ``sort_accuracy``, ``failure_cause``,
        ``time_to_sort``, ``object_outcomes``, plus ``seed``, ``steps`` and ``return``.
    """
    obs, info = env.reset(seed=seed)
    demonstrator.reset(seed)
    if writer is not None:
        writer.append_data(env.render())
    total, steps = 0.0, 0
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(demonstrator.act(obs))
        total += float(reward)
        steps += 1
        done = terminated or truncated
        if writer is not None:
            writer.append_data(env.render())
    return {
        "seed": seed,
        "is_success": bool(info["is_success"]),
        "sort_accuracy": float(info["sort_accuracy"]),
        "failure_cause": info["failure_cause"],
        "time_to_sort": info["time_to_sort"],
        "object_outcomes": list(info["object_outcomes"]),
        "unstable": bool(info["unstable"]),
        "steps": steps,
        "return": total,
    }


def run_demo(
    env_id: str,
    episodes: int,
    seed: int = 0,
    *,
    num_objects: int | None = None,
    video: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the env's demonstrator for ``episodes`` episodes (seeds ``seed .. seed + episodes - 1``).

    Args:
        env_id: A registered PickSort id.
        episodes: Number of episodes, >= 1.
        seed: Seed of the first episode.
        num_objects: Objects per episode (default: the env's default).
        video: Path of an MP4 of the first episode (rendered with ``render_mode="rgb_array"``).
        progress: Show a tqdm progress bar on stderr.

    Returns:
        A JSON-serializable summary (see ``r2s2r demo --json``).

    Raises:
        UnknownEnvError: ``env_id`` is not registered.
        UsageError: the env rejects an argument (e.g. ``num_objects`` out of range).
        ValueError: ``episodes`` < 1.
    """
    from tqdm import tqdm

    from r2s2r_envs.behavior import make_demonstrator

    check_env_id(env_id)
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    kwargs: dict[str, Any] = {}
    if num_objects is not None:
        kwargs["num_objects"] = num_objects
    if video is not None:
        kwargs["render_mode"] = "rgb_array"
    try:
        env = gym.make(env_id, **kwargs)
    except (TypeError, ValueError, KeyError) as e:  # the env names what is valid; pass that on
        raise UsageError(f"cannot make {env_id} with {kwargs}: {e}") from e
    try:
        demonstrator = make_demonstrator(env)
        results = []
        writer = None
        if video is not None:
            try:
                env.reset(seed=seed)
                env.render()
            except mujoco.FatalError as e:
                raise UsageError(f"{RENDER_HINT} (MuJoCo said: {e})") from e
            import imageio.v2 as imageio

            # libx264 + yuv420p plays everywhere; the render size (480x640) is a multiple of the 16-px macro block.
            writer = imageio.get_writer(video, format="FFMPEG", fps=env.metadata.get("render_fps", 20),
                                        codec="libx264", pixelformat="yuv420p")
        try:
            for i in tqdm(range(episodes), desc=env_id, unit="ep", file=sys.stderr, disable=not progress):
                results.append(run_demo_episode(env, demonstrator, seed + i, writer=writer if i == 0 else None))
                if i == 0 and writer is not None:
                    writer.close()
                    writer = None
        finally:
            if writer is not None:
                writer.close()
        summary = {
            "env_id": env_id,
            "episodes": episodes,
            "seed": seed,
            "seeds": [seed + i for i in range(episodes)],
            "num_objects": env.unwrapped.num_objects,
            "demonstrator": {"name": demonstrator.name, "settings": demonstrator.settings},
            **summarize_episodes(results, FAILURE_CAUSES),
            "video": video,
            "results": results,
        }
    finally:
        env.close()
    return summary


def _format_summary(s: dict[str, Any]) -> str:
    low, high = s["success_rate_ci95"]
    time_to_sort = "n/a" if s["mean_time_to_sort"] is None else f"{s['mean_time_to_sort']:.2f} s"
    causes = ", ".join(f"{k}: {v}" for k, v in s["failure_causes"].items() if v) or "none"
    lines = [
        f"env:              {s['env_id']}  (demonstrator: {s['demonstrator']['name']}, "
        f"{s['num_objects']} objects, seeds {s['seeds'][0]}..{s['seeds'][-1]})",
        f"success rate:     {s['success_rate']:.3f}  (95% Wilson CI {low:.3f}-{high:.3f}, "
        f"{round(s['success_rate'] * s['episodes'])}/{s['episodes']} episodes)",
        f"sort accuracy:    {s['sort_accuracy']:.3f}",
        f"time to sort:     {time_to_sort}  (mean over successful episodes)",
        f"failure causes:   {causes}",
    ]
    if s.get("video"):
        lines.append(f"video:            {s['video']} (first episode)")
    return "\n".join(lines)


# ---------------------------------------------------------------------- subcommands
def _cmd_demo(args: argparse.Namespace) -> int:
    try:
        summary = run_demo(args.env, args.episodes, args.seed, num_objects=args.num_objects, video=args.video,
                           progress=not args.no_progress)
    except UsageError as e:
        print(f"r2s2r demo: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(summary))
    else:
        print(_format_summary(summary))
    return EXIT_OK


def _cmd_envs(args: argparse.Namespace) -> int:
    rows = []
    for env_id in registered_env_ids():
        spec = gym.spec(env_id)
        rows.append({
            "id": env_id,
            "entry_point": spec.entry_point if isinstance(spec.entry_point, str) else repr(spec.entry_point),
            "demonstrator": spec.kwargs.get("demonstrator"),
            "max_episode_steps": spec.max_episode_steps,
        })
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['id']:32s} demonstrator={r['demonstrator']}  max_episode_steps={r['max_episode_steps']}")
    return EXIT_OK


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``r2s2r`` argument parser, with the dataset subcommands when ``r2s2r_envs.datasets.cli`` exists."""
    parser = argparse.ArgumentParser(
        prog="r2s2r", description="Real2Sim2Real PickSort environments: demos, datasets, benchmarks."
    )
    parser.add_argument("--version", action="version", version=f"r2s2r_envs {r2s2r_envs.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="run an env's demonstrator and report success",
                          description="Run the demonstrator that comes with an env and report its success rate "
                                      "(Wilson 95%% CI), sort accuracy, time to sort and failure causes. "
                                      "Episode i uses seed SEED+i.")
    demo.add_argument("--env", required=True, metavar="ID", help=f"env id, one of {registered_env_ids()}")
    demo.add_argument("--episodes", type=_positive_int, default=10, metavar="N", help="episodes (default 10)")
    demo.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the first episode (default 0)")
    demo.add_argument("--num-objects", type=_positive_int, default=None, metavar="K",
                      help="objects per episode (default: the env's default, 3)")
    demo.add_argument("--video", default=None, metavar="PATH", help="write an MP4 of the first episode")
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    demo.set_defaults(func=_cmd_demo)

    envs = sub.add_parser("envs", help="list the registered PickSort env ids")
    envs.add_argument("--json", action="store_true", help="print a JSON list")
    envs.set_defaults(func=_cmd_envs)

    _add_dataset_subcommands(sub)
    return parser


def _add_dataset_subcommands(sub: argparse._SubParsersAction) -> None:
    try:
        datasets_cli = importlib.import_module("r2s2r_envs.datasets.cli")
    except ModuleNotFoundError as e:
        # Only an absent datasets CLI is tolerated; a datasets module that fails to import is a bug to surface.
        if e.name not in ("r2s2r_envs.datasets.cli", "r2s2r_envs.datasets"):
            raise
        return
    datasets_cli.add_subcommands(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``r2s2r``; returns the exit code (0 ok, 2 usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
