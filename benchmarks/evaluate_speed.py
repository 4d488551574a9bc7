"""Speed of the evaluation protocol with an MLP policy: is 100 lab episodes in parallel workers under 5 minutes?

Evaluates a small torch MLP policy (2 x 256 hidden units on the flattened state observation, random weights from
a fixed seed: the cost of a behaviour-cloning MLP, not its skill) on ``PickSort-Real-v0`` with the fixed protocol
(default settings: 3 objects, 500-step time limit), and, as the reference measured in the same run, the same
episodes with a policy that returns zeros (the env's cost alone).  Prints wall time, episodes/s, env steps/s and
the MLP/reference ratio; writes the figures as JSON with ``--out``.

Random weights make the arm move, so episodes mostly run to the time limit: close to the worst case.

Example::

    python benchmarks/evaluate_speed.py --episodes 100 --workers 2 --out runs/evaluate_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import numpy as np  # noqa: E402

import r2s2r_envs  # noqa: E402, F401  (registers the envs)
from r2s2r_envs.evaluation.protocol import evaluate  # noqa: E402

ENV_ID = "PickSort-Real-v0"


class MLPPolicy:
    """A 2 x 256 tanh MLP from the flattened state observation to the 22 task-space actions (torch, 1 thread)."""

    name = "random-mlp"

    def __init__(self, seed: int = 0, hidden: int = 256) -> None:
        self.seed, self.hidden = seed, hidden
        self.settings = {"seed": seed, "hidden": hidden}
        self._net = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_net": None}  # each worker builds its own

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        x = np.concatenate([np.asarray(obs[k], np.float32).ravel() for k in sorted(obs)])
        if self._net is None:
            torch.set_num_threads(1)
            torch.manual_seed(self.seed)
            self._net = torch.nn.Sequential(
                torch.nn.Linear(x.size, self.hidden),
                torch.nn.Tanh(),
                torch.nn.Linear(self.hidden, self.hidden),
                torch.nn.Tanh(),
                torch.nn.Linear(self.hidden, 22),
                torch.nn.Tanh(),
            ).eval()
        with torch.inference_mode():
            return self._net(torch.from_numpy(x)).numpy()


class ZeroPolicy:
    """The reference: no computation, the arm holds still."""

    name = "zeros"

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(22, dtype=np.float32)


def measure(policy, episodes: int, workers: int) -> dict:
    start = time.perf_counter()
    result = evaluate(ENV_ID, policy, episodes=episodes, workers=workers, progress=False)
    wall = time.perf_counter() - start
    steps = sum(r.steps for r in result.records)
    return {
        "policy": policy.name,
        "episodes": episodes,
        "workers": workers,
        "wall_time_s": wall,
        "episodes_per_s": episodes / wall,
        "env_steps": steps,
        "env_steps_per_s": steps / wall,
        "success_rate": result.summary["success_rate"],
        "policy_failures": result.summary["policy_failures"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100, help="episodes per policy (default 100)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args(argv)
    rows = [measure(MLPPolicy(), args.episodes, args.workers), measure(ZeroPolicy(), args.episodes, args.workers)]
    for r in rows:
        print(
            f"{r['policy']:>10s}: {r['episodes']} episodes, {r['workers']} workers: {r['wall_time_s']:.1f} s "
            f"({r['episodes_per_s']:.2f} episodes/s, {r['env_steps_per_s']:.0f} env steps/s, "
            f"{r['env_steps']} steps)"
        )
    ratio = rows[0]["wall_time_s"] / rows[1]["wall_time_s"]
    print(f"MLP / zeros wall time: {ratio:.2f}; 5-minute goal for 100 MLP episodes: ", end="")
    print(f"{'met' if rows[0]['wall_time_s'] * 100 / args.episodes <= 300 else 'NOT met'}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "env_id": ENV_ID,
            "rows": rows,
            "mlp_over_zeros": ratio,
            "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg(),
            "python": platform.python_version(),
            "argv": sys.argv,
        }
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":  # workers are spawned and import this module
    sys.exit(main())
