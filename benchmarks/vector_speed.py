"""How much faster the native vector env and batched evaluation run than one env at a time.

Two measurements, each as a ratio against its reference timed in the same run, in interleaved rounds (so machine
load hits both sides alike):

* ``make_vec``: env steps/s of ``gym.make_vec(ENV, num_envs=N)`` (default N = 8, physics in
  ``min(N, cores)`` threads) with random actions, against one single env (``gym.make``) stepping the same number
  of env steps.  Also the vector env with one thread, which isolates the cost of stepping envs together from the
  gain of the threads.  Goal (issue 23): >= 1.7x on 2 free cores (the physics limit is 2x).
* ``two processes``: in the same rounds, two single envs stepping in two processes at once (started together at a
  barrier), against one: the parallel ceiling this machine gives this workload (2x on two free physical cores;
  less where the cores share execution units or other work runs), which ``make_vec``'s ratio is read against.
* ``physics``: the part of a step that parallelizes, ``mj_step`` alone (no controller, rules or Python around
  it), in one process against two processes and two threads at once: the ceiling of the physics on this
  machine's cores (processes) and what threads lose to the GIL (threads).
* ``evaluate``: wall time of ``evaluate(ENV, policy, episodes=E, batch=B)`` and of ``workers=W`` with
  ``batch=B // W`` each (the two composed), against ``evaluate(..., workers=W)`` (default B = 16, W = 2) on lab
  episodes with a trained policy (default the shipped ``zoo:flow-real-only``); the records of all three must be
  identical, and the script checks it.  Goal (issue 23): >= 3x for 100 lab episodes of a flow policy on 2 cores.
* ``floor``: after the evaluate rounds, the env steps those episodes took (the records' ``steps``), stepped with
  random actions and no policy in ``W`` processes at once: about the wall time of the physics and env Python alone
  on this machine's cores, which no batching can beat (the reference pays it too), so ``workers_s / floor_s`` is
  the most any batched path could gain over ``workers=W`` here.  Random actions stand in for the policy's, so the
  contacts differ: an estimate.
* ``threads`` (``--threads-curve 1,2,4,8,16``, off by default): the scaling curve of ``make_vec(N)`` over its
  physics threads, env steps/s per thread count against one single env, in interleaved rounds (issue 23 asks for
  1..16 threads on a machine that has them; give ``--num-envs`` at least the largest count).
* ``ppo`` (``--ppo-steps S``, off by default): env steps/s of the RL baseline's training (``baselines/rl_dr.py``:
  PPO with a world drawn at every reset, the PPO update in one torch thread) with ``num_envs`` N (the vector env)
  against 1 (one env), ``S`` env steps each, the same rollout of 1,024 steps per update (``n_steps`` 1024 / N) so
  both do the same updates: the end-to-end gain of the batched env for RL on this machine.

It prints the ratios and writes a JSON record (resolved config, per-round figures, the machine and its load
average) to ``--out``.

Example::

    MUJOCO_GL=egl python benchmarks/vector_speed.py --out benchmarks/results/vector-speed/vector_speed.json
    MUJOCO_GL=egl python benchmarks/vector_speed.py --skip-evaluate --num-envs 8 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported: headless offscreen rendering

import gymnasium as gym
import mujoco
import numpy as np

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.evaluation.protocol import evaluate

_WORKER: dict = {}
#: Env steps per PPO update in the ppo part, whatever ``num_envs`` (``n_steps`` = this / ``num_envs``).
PPO_ROLLOUT = 1024


def _start_worker(env_id: str, seed: int, barrier: Any) -> None:
    env = gym.make(env_id)  # the spawned process imported this module, which registered the ids
    env.reset(seed=seed)
    _WORKER.update(env=env, rng=np.random.default_rng(seed), barrier=barrier)


def _worker_steps(steps: int) -> float:
    """Steps the worker's env ``steps`` times once every worker is ready; returns the seconds taken."""
    _WORKER["barrier"].wait()
    return _random_steps_seconds(_WORKER["env"], _WORKER["rng"], steps)


def _worker_physics(steps: int) -> float:
    """Runs ``steps`` control steps of the worker env's raw physics (``mj_step`` only) once every worker is ready;
    returns the seconds taken."""
    env = _WORKER["env"].unwrapped
    _WORKER["barrier"].wait()
    t = time.perf_counter()
    _physics([env], steps)
    return time.perf_counter() - t


def _random_steps_seconds(env: gym.Env, rng: np.random.Generator, steps: int) -> float:
    """Seconds of ``steps`` random-action steps of one env (reset when an episode ends)."""
    t = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(rng.uniform(-1.0, 1.0, size=env.action_space.shape))
        if terminated or truncated:
            env.reset()
    return time.perf_counter() - t


def _single_steps_per_s(env: gym.Env, rng: np.random.Generator, steps: int) -> float:
    """Env steps/s of ``steps`` random-action steps of one env."""
    return steps / _random_steps_seconds(env, rng, steps)


def _vector_seconds(env: Any, rng: np.random.Generator, steps: int) -> tuple[float, float]:
    """Wall and process CPU seconds of ``steps`` random-action steps of a vector env (it autoresets)."""
    t, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        env.step(rng.uniform(-1.0, 1.0, size=(env.num_envs, *env.single_action_space.shape)))
    return time.perf_counter() - t, time.process_time() - cpu


def _physics(envs: list[Any], steps: int) -> None:
    """``steps`` control steps of each env's raw physics, ``mj_step`` only."""
    for _ in range(steps):
        for env in envs:
            mujoco.mj_step(env._model, env._data, nstep=env._n_substeps)


def vector_rounds(env_id: str, num_envs: int, steps: int, rounds: int, seed: int) -> dict:
    """Interleaved rounds: one single env, the vector env with its default threads, the vector env with one, two
    single envs in two processes at once, and the raw physics in one process, two processes and two threads."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    pool = context.Pool(2, initializer=_start_worker, initargs=(env_id, seed, barrier))
    single = gym.make(env_id)
    vec = gym.make_vec(env_id, num_envs=num_envs)
    serial = gym.make_vec(env_id, num_envs=num_envs, num_threads=1)
    rng = np.random.default_rng(seed)
    single.reset(seed=seed)
    vec.reset(seed=seed)
    serial.reset(seed=seed)
    out: dict[str, list[float]] = {"single_steps_per_s": [], "vector_steps_per_s": [], "vector_1thread_steps_per_s": []}
    out["vector_cpu_per_wall"] = []
    out["two_processes_steps_per_s"] = []
    for key in ("physics_steps_per_s", "physics_two_processes_steps_per_s", "physics_two_threads_steps_per_s"):
        out[key] = []
    raw = [gym.make(env_id).unwrapped for _ in range(2)]  # their own envs: raw physics skips the env's rules
    for i, env in enumerate(raw):
        env.reset(seed=seed + i)
    threads_pool = ThreadPoolExecutor(2)
    pool.map(_worker_steps, [5, 5])  # warm-up: both workers up, envs made
    for _ in range(rounds):
        out["single_steps_per_s"].append(_single_steps_per_s(single, rng, steps * num_envs))
        for key, env in (("vector_steps_per_s", vec), ("vector_1thread_steps_per_s", serial)):
            wall, cpu = _vector_seconds(env, rng, steps)
            out[key].append(steps * num_envs / wall)
            if env is vec:
                out["vector_cpu_per_wall"].append(cpu / wall)
        half = steps * num_envs // 2
        out["two_processes_steps_per_s"].append(2 * half / max(pool.map(_worker_steps, [half, half])))
        # The physics alone (mj_step, no Python around it): one process, two processes, two threads.
        t = time.perf_counter()
        _physics(raw, half)
        out["physics_steps_per_s"].append(2 * half / (time.perf_counter() - t))
        out["physics_two_processes_steps_per_s"].append(2 * half / max(pool.map(_worker_physics, [half, half])))
        t = time.perf_counter()
        for future in [threads_pool.submit(_physics, [env], half) for env in raw]:
            future.result()
        out["physics_two_threads_steps_per_s"].append(2 * half / (time.perf_counter() - t))
    pool.close()
    pool.join()
    threads_pool.shutdown()
    threads = vec.unwrapped.num_threads
    for env in (single, vec, serial, *raw):
        env.close()
    ratios = [v / s for v, s in zip(out["vector_steps_per_s"], out["single_steps_per_s"])]
    ratios_1 = [v / s for v, s in zip(out["vector_1thread_steps_per_s"], out["single_steps_per_s"])]
    ceiling = [p / s for p, s in zip(out["two_processes_steps_per_s"], out["single_steps_per_s"])]
    return {
        "env_id": env_id,
        "num_envs": num_envs,
        "threads": threads,
        "steps_per_round": steps,
        "rounds": rounds,
        **out,
        "ratio_vector_over_single": ratios,
        "ratio_vector_1thread_over_single": ratios_1,
        "median_ratio": statistics.median(ratios),
        "median_ratio_1thread": statistics.median(ratios_1),
        "ratio_two_processes_over_single": ceiling,
        "median_ratio_two_processes": statistics.median(ceiling),
        **{
            f"median_ratio_physics_{n}": statistics.median(
                p / s for p, s in zip(out[f"physics_{n}_steps_per_s"], out["physics_steps_per_s"])
            )
            for n in ("two_processes", "two_threads")
        },
    }


def evaluate_rounds(env_id: str, policy_spec: str, episodes: int, episode_steps: int, batch: int, workers: int,
                    rounds: int) -> dict:  # fmt: skip
    """Interleaved rounds of ``evaluate(..., workers=W)`` and ``evaluate(..., batch=B)``; records compared."""
    from r2s2r_envs.policies.runtime import load_policy

    policy = load_policy(policy_spec)
    kwargs = {"episode_steps": episode_steps}
    out: dict[str, list] = {"workers_s": [], "batch_s": [], "workers_batch_s": [], "records_identical": []}
    per_worker = max(1, batch // workers)
    for _ in range(rounds):
        t = time.perf_counter()
        a = evaluate(env_id, policy, episodes=episodes, env_kwargs=kwargs, workers=workers, progress=False)
        out["workers_s"].append(time.perf_counter() - t)
        t = time.perf_counter()
        b = evaluate(env_id, policy, episodes=episodes, env_kwargs=kwargs, batch=batch, progress=False)
        out["batch_s"].append(time.perf_counter() - t)
        t = time.perf_counter()
        c = evaluate(
            env_id, policy, episodes=episodes, env_kwargs=kwargs, workers=workers, batch=per_worker, progress=False
        )
        out["workers_batch_s"].append(time.perf_counter() - t)
        out["records_identical"].append(a.records == b.records == c.records)
    env_steps = sum(r.steps for r in a.records)
    floor_s = _floor_seconds(env_id, env_steps, workers)
    ratios = [w / b for w, b in zip(out["workers_s"], out["batch_s"])]
    composed = [w / c for w, c in zip(out["workers_s"], out["workers_batch_s"])]
    return {
        "env_id": env_id,
        "policy": policy_spec,
        "episodes": episodes,
        "episode_steps": episode_steps,
        "batch": batch,
        "workers": workers,
        "rounds": rounds,
        **out,
        "success_rate": a.summary["success_rate"],
        "ratio_workers_over_batch": ratios,
        "median_ratio": statistics.median(ratios),
        "batch_per_worker": per_worker,
        "ratio_workers_over_workers_batch": composed,
        "median_ratio_composed": statistics.median(composed),
        "env_steps": env_steps,
        "floor_s": floor_s,
        "ratio_workers_over_floor": statistics.median(out["workers_s"]) / floor_s,
    }


def _floor_seconds(env_id: str, env_steps: int, workers: int) -> float:
    """Seconds ``workers`` processes take to step ``env_steps`` env steps in all (random actions, no policy),
    started together at a barrier once their envs are made."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers)
    with context.Pool(workers, initializer=_start_worker, initargs=(env_id, 0, barrier)) as pool:
        pool.map(_worker_steps, [5] * workers)  # warm-up: every worker up, its env made
        shares = [env_steps // workers + (i < env_steps % workers) for i in range(workers)]
        return max(pool.map(_worker_steps, shares, chunksize=1))


def threads_curve(env_id: str, num_envs: int, threads: list[int], steps: int, rounds: int, seed: int) -> dict:
    """Interleaved rounds: one single env, then ``make_vec(num_envs)`` with each thread count of ``threads``."""
    single = gym.make(env_id)
    single.reset(seed=seed)
    vecs = {t: gym.make_vec(env_id, num_envs=num_envs, num_threads=t) for t in threads}
    for vec in vecs.values():
        vec.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out: dict[str, list[float]] = {"single_steps_per_s": [], **{f"threads_{t}_steps_per_s": [] for t in threads}}
    for _ in range(rounds):
        out["single_steps_per_s"].append(_single_steps_per_s(single, rng, steps * num_envs))
        for t, vec in vecs.items():
            out[f"threads_{t}_steps_per_s"].append(steps * num_envs / _vector_seconds(vec, rng, steps)[0])
    for env in (single, *vecs.values()):
        env.close()
    medians = {
        t: statistics.median(v / s for v, s in zip(out[f"threads_{t}_steps_per_s"], out["single_steps_per_s"]))
        for t in threads
    }
    return {
        "env_id": env_id,
        "num_envs": num_envs,
        "threads": threads,
        "steps_per_round": steps,
        "rounds": rounds,
        **out,
        "median_ratio_over_single": {str(t): r for t, r in medians.items()},
    }


def ppo_rounds(num_envs: int, total_steps: int, rounds: int, seed: int) -> dict:
    """Interleaved rounds of ``rl_dr.train`` with one env and with ``num_envs``, ``total_steps`` env steps each."""
    import importlib.util
    import tempfile

    path = Path(__file__).resolve().parents[1] / "baselines" / "rl_dr.py"
    spec = importlib.util.spec_from_file_location("rl_dr", path)
    rl_dr = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["rl_dr"] = rl_dr  # its dataclasses look their module up
    spec.loader.exec_module(rl_dr)  # type: ignore[union-attr]
    rollout = PPO_ROLLOUT
    out: dict[str, list[float]] = {"one_env_steps_per_s": [], "vector_steps_per_s": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for key, n in (("one_env_steps_per_s", 1), ("vector_steps_per_s", num_envs)):
                config = rl_dr.Config(
                    out=tmp, total_steps=total_steps, num_envs=n, n_steps=rollout // n, seed=seed, budget_minutes=1e6
                )
                out[key].append(rl_dr.train(config)["steps_per_s"])
    ratios = [v / o for v, o in zip(out["vector_steps_per_s"], out["one_env_steps_per_s"])]
    return {
        "num_envs": num_envs,
        "total_steps": total_steps,
        "rollout": rollout,
        "rounds": rounds,
        **out,
        "ratio_vector_over_one_env": ratios,
        "median_ratio": statistics.median(ratios),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PickSort-Real-v0", help="env id (default the lab)")
    parser.add_argument("--num-envs", type=int, default=8, help="make_vec num_envs (default 8)")
    parser.add_argument("--steps", type=int, default=40, help="vector steps per round (default 40)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the make_vec part (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-evaluate", action="store_true", help="only the make_vec part")
    parser.add_argument("--skip-vector", action="store_true", help="only the evaluate part")
    parser.add_argument("--policy", default="zoo:flow-real-only", help="policy of the evaluate part")
    parser.add_argument("--episodes", type=int, default=16, help="lab episodes of the evaluate part (default 16)")
    parser.add_argument("--episode-steps", type=int, default=500, help="time limit of those episodes (default 500)")
    parser.add_argument("--batch", type=int, default=16, help="evaluate batch (default 16)")
    parser.add_argument("--workers", type=int, default=2, help="the reference's workers (default 2)")
    parser.add_argument("--eval-rounds", type=int, default=1, help="interleaved rounds of the evaluate part")
    parser.add_argument(
        "--threads-curve", default=None, help="thread counts of the scaling curve, e.g. 1,2,4,8,16 (default: skip)"
    )
    parser.add_argument("--ppo-steps", type=int, default=0, help="env steps of each PPO training (default 0: skip)")
    parser.add_argument("--ppo-rounds", type=int, default=1, help="interleaved rounds of the ppo part (default 1)")
    parser.add_argument("--out", type=Path, default=None, help="JSON record")
    args = parser.parse_args(argv)

    counts: list[int] = []
    if args.threads_curve:
        try:
            counts = sorted({int(t) for t in args.threads_curve.split(",")})
        except ValueError:
            counts = [0]
        if counts[0] < 1:
            parser.error(f"--threads-curve must be comma-separated integers >= 1, got {args.threads_curve!r}")
    if args.ppo_steps > 0 and PPO_ROLLOUT % args.num_envs:
        parser.error(f"--num-envs must divide {PPO_ROLLOUT} (the PPO rollout) for --ppo-steps, got {args.num_envs}")

    load_before = os.getloadavg()
    report: dict = {"config": vars(args) | {"out": None if args.out is None else str(args.out)}}
    if not args.skip_vector:
        report["vector"] = _report_vector(args)
    if not args.skip_evaluate:
        report["evaluate"] = _report_evaluate(args)
    if counts:
        curve = threads_curve(args.env, args.num_envs, counts, args.steps, args.rounds, args.seed)
        ratios = ", ".join(f"{t}: {r:.2f}x" for t, r in curve["median_ratio_over_single"].items())
        print(f"make_vec({args.env}, num_envs={args.num_envs}) over one env, by physics threads: {ratios}")
        report["threads_curve"] = curve
    if args.ppo_steps > 0:
        ppo = ppo_rounds(args.num_envs, args.ppo_steps, args.ppo_rounds, args.seed)
        print(
            f"PPO (baselines/rl_dr.py), {args.ppo_steps} env steps: num_envs={args.num_envs} "
            f"{statistics.median(ppo['vector_steps_per_s']):.0f} env steps/s vs one env "
            f"{statistics.median(ppo['one_env_steps_per_s']):.0f}: ratio {ppo['median_ratio']:.2f}x"
        )
        report["ppo"] = ppo
    report["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mujoco": mujoco.__version__,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"record: {args.out}", file=sys.stderr)
    return 0


def _report_vector(args: argparse.Namespace) -> dict:
    vector = vector_rounds(args.env, args.num_envs, args.steps, args.rounds, args.seed)
    print(
        f"make_vec({args.env}, num_envs={args.num_envs}), {vector['threads']} physics threads, random actions: "
        f"{statistics.median(vector['vector_steps_per_s']):.0f} env steps/s vs single env "
        f"{statistics.median(vector['single_steps_per_s']):.0f}: ratio {vector['median_ratio']:.2f}x "
        f"(rounds {', '.join(f'{r:.2f}' for r in vector['ratio_vector_over_single'])}); one thread "
        f"{vector['median_ratio_1thread']:.2f}x; CPU/wall of the vector env "
        f"{statistics.median(vector['vector_cpu_per_wall']):.2f}; two single envs in two processes "
        f"{vector['median_ratio_two_processes']:.2f}x (this machine's ceiling for the workload); the physics alone "
        f"(mj_step) in two processes {vector['median_ratio_physics_two_processes']:.2f}x, in two threads "
        f"{vector['median_ratio_physics_two_threads']:.2f}x"
    )
    return vector


def _report_evaluate(args: argparse.Namespace) -> dict:
    ev = evaluate_rounds(
        args.env, args.policy, args.episodes, args.episode_steps, args.batch, args.workers, args.eval_rounds
    )
    print(
        f"evaluate({args.env}, {args.policy}, {args.episodes} episodes of <= {args.episode_steps} steps): "
        f"workers={args.workers} {statistics.median(ev['workers_s']):.1f} s, batch={args.batch} "
        f"{statistics.median(ev['batch_s']):.1f} s: ratio {ev['median_ratio']:.2f}x; workers={args.workers} with "
        f"batch={ev['batch_per_worker']} each {statistics.median(ev['workers_batch_s']):.1f} s: ratio "
        f"{ev['median_ratio_composed']:.2f}x; records identical: {all(ev['records_identical'])}; the episodes' "
        f"{ev['env_steps']} env steps alone in {args.workers} processes (the floor) {ev['floor_s']:.1f} s: at most "
        f"{ev['ratio_workers_over_floor']:.2f}x over workers={args.workers}"
    )
    return ev


if __name__ == "__main__":
    sys.exit(main())
