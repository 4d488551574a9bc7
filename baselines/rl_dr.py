"""RL with domain randomization: PPO in simulation, a new world drawn at every reset, evaluated zero-shot in the lab.

The "randomize instead of identify" baseline (docs/leaderboard.md#baselines).  PPO (stable-baselines3) learns from
state observations in ``PickSort-Ungrounded-v0`` while every reset draws a world from ranges kept as data (a
``WorldRandomization`` JSON: ``baselines/configs/dr_around_nominal.json`` by default, or a grounding file's 95%
intervals with ``--grounding``), passed to the env as ``reset(options={"world": ...})``.  Curriculum: one object
per episode by default (``--num-objects``).  After ``--budget-minutes`` of training the policy is evaluated with
the evaluation protocol, zero-shot, in the lab (``PickSort-Real-v0``) and in the nominal simulator, with the same
task settings; both results go to ``OUT/results/`` for ``r2s2r leaderboard``.

Everything goes through the public API: the lab is only ``gym.make("PickSort-Real-v0", lab=...)``.

Example::

    nice -n 10 python baselines/rl_dr.py --budget-minutes 30 --out runs/rl_dr
    r2s2r leaderboard runs/rl_dr/results --out runs/leaderboard

Writes ``OUT/config.json`` (resolved settings), ``OUT/randomization.json`` (the ranges used), ``OUT/model.zip``
(the PPO model), ``OUT/obs_normalization.npz``, ``OUT/train_log.json`` (steps, episodes, training success,
time) and ``OUT/results/rl_dr_{lab,sim}.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

import r2s2r_envs  # noqa: F401  (registers the envs)
from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.grounding.randomization import RandomizedWorld, RandomizedWorlds, WorldRandomization

SIM_ID = "PickSort-Ungrounded-v0"
LAB_ID = "PickSort-Real-v0"
METHOD = "rl-dr-ppo"
DEFAULT_RANDOMIZATION = Path(__file__).resolve().parent / "configs" / "dr_around_nominal.json"
#: Observation normalization as stable-baselines3's VecNormalize does it (and its defaults).
OBS_CLIP, OBS_EPS = 10.0, 1e-8


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Resolved settings of a run (written to ``OUT/config.json``).

    Attributes:
        out: Output folder.
        budget_minutes: Wall-clock training budget, min (evaluation comes after it).
        total_steps: Cap on environment steps (None: the budget alone stops training).
        randomization: WorldRandomization JSON file (ignored with ``grounding``).
        grounding: Grounding name or file: randomize over its 95% intervals around the identified world.
        num_objects: Objects per episode (curriculum: 1).
        episode_steps: Time limit of an episode, control steps (20 Hz).
        seed: Training seed (PPO, env resets, world draws).
        n_steps: PPO rollout length per update, steps.
        batch_size: PPO minibatch size.
        learning_rate: PPO learning rate.
        eval_episodes: Episodes of the protocol in the lab and in the simulator.
        eval_workers: Worker processes of the evaluation.
        lab: The lab of ``PickSort-Real-v0`` (shipped name or file).
        num_envs: Training envs stepped together (``gym.make_vec``: their physics in threads), each drawing its
            own world at every reset; 1: one env (``DummyVecEnv``), as the committed record ran.
    """

    out: str
    budget_minutes: float = 60.0
    total_steps: int | None = None
    randomization: str = str(DEFAULT_RANDOMIZATION)
    grounding: str | None = None
    num_objects: int = 1
    episode_steps: int = 200
    seed: int = 0
    n_steps: int = 1024
    batch_size: int = 256
    learning_rate: float = 3e-4
    eval_episodes: int = 100
    eval_workers: int = 1
    lab: str = "default"
    num_envs: int = 1


# ---------------------------------------------------------------------- observations
def obs_keys(space: gym.spaces.Dict) -> list[str]:
    """The low-dimensional keys of a PickSort observation, in a fixed (sorted) order."""
    return sorted(k for k, s in space.spaces.items() if len(s.shape) == 1)


def flatten(obs: dict[str, np.ndarray], keys: list[str]) -> np.ndarray:
    """The observation as one float32 vector: ``keys`` concatenated."""
    return np.concatenate([np.asarray(obs[k], dtype=np.float32).ravel() for k in keys])


class FlatObservation(gym.ObservationWrapper):
    """PickSort's dict observation as one vector (what an MLP policy takes)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.keys = obs_keys(env.observation_space)
        size = sum(env.observation_space[k].shape[0] for k in self.keys)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)

    def observation(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return flatten(observation, self.keys)


def make_randomization(config: Config) -> WorldRandomization:
    """The ranges: a grounding's intervals, else the randomization file."""
    if config.grounding is not None:
        return WorldRandomization.from_grounding(config.grounding)
    return WorldRandomization.from_json(Path(config.randomization).read_text())


def make_training_env(config: Config, randomization: WorldRandomization) -> gym.Env:
    from stable_baselines3.common.monitor import Monitor

    env = gym.make(SIM_ID, num_objects=config.num_objects, episode_steps=config.episode_steps)
    env = RandomizedWorld(env, randomization)  # a fresh world at every reset, via options={"world": ...}
    return Monitor(FlatObservation(env), info_keywords=("is_success",))


def make_training_venv(config: Config, randomization: WorldRandomization) -> Any:
    """The training envs as a stable-baselines3 ``VecEnv`` (episode statistics and ``is_success`` in ``info``):
    with ``num_envs`` 1 a ``DummyVecEnv`` of one env, else the native vector env (physics in threads), every env
    drawing its own world at each reset.  Env ``i`` runs what env ``i`` of a ``DummyVecEnv`` of ``num_envs`` single
    envs would (tested)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    if config.num_envs == 1:
        return DummyVecEnv([lambda: make_training_env(config, randomization)])
    vec = gym.make_vec(
        SIM_ID,
        num_envs=config.num_envs,
        autoreset_mode="SameStep",  # stable-baselines3's convention: the reset observation, the final one in info
        num_objects=config.num_objects,
        episode_steps=config.episode_steps,
    )
    return VecMonitor(NativeVecEnv(RandomizedWorlds(vec, randomization)), info_keywords=("is_success",))


class NativeVecEnv(VecEnv):
    """A Gymnasium vector env in ``SameStep`` autoreset mode as a stable-baselines3 ``VecEnv``, with flat
    observations: what a ``DummyVecEnv`` of ``FlatObservation`` envs returns (``terminal_observation`` and
    ``TimeLimit.truncated`` in the ``info`` of an env that ended, its reset observation in the batch)."""

    def __init__(self, vec: gym.vector.VectorEnv) -> None:
        self.vec = vec
        self.keys = obs_keys(vec.single_observation_space)
        size = sum(vec.single_observation_space[k].shape[0] for k in self.keys)
        space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        super().__init__(vec.num_envs, space, vec.single_action_space)
        self._actions: np.ndarray | None = None

    def _flat(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(obs[k], dtype=np.float32) for k in self.keys], axis=1)

    def reset(self) -> np.ndarray:
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        obs, info = self.vec.reset(seed=seeds)
        self.reset_infos = _rows(info, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return self._flat(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> Any:
        obs, rewards, terminations, truncations, info = self.vec.step(self._actions)
        dones = terminations | truncations
        infos = _rows(info, self.num_envs)
        if dones.any():  # SameStep: the ended envs' final observation and info, their reset ones in the batch
            final = _rows(info["final_info"], self.num_envs)
            for i in np.flatnonzero(dones).tolist():
                self.reset_infos[i], infos[i] = infos[i], final[i]
                last = info["final_obs"][i]
                infos[i]["terminal_observation"] = self._flat({k: last[k][None] for k in self.keys})[0]
        for i, row in enumerate(infos):
            row["TimeLimit.truncated"] = bool(truncations[i] and not terminations[i])
        return self._flat(obs), rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self.vec.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self.vec.unwrapped.envs[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        for i in self._get_indices(indices):
            setattr(self.vec.unwrapped.envs[i], attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        envs = self.vec.unwrapped.envs
        return [getattr(envs[i], method_name)(*args, **kwargs) for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]


def _rows(info: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """A vector env's batched ``info`` as one dict per env (the keys its ``_key`` mask marks)."""
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in info.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = info.get(f"_{key}")
        for i in range(n):
            if mask is None or mask[i]:
                item = value[i]
                rows[i][key] = item.item() if isinstance(item, np.generic) else item
    return rows


# ---------------------------------------------------------------------- the trained policy
class RLDRPolicy:
    """The trained PPO policy as an evaluation-protocol policy (``reset(seed)``, ``act(obs)``).

    Also a factory ``f(env) -> Policy`` (it returns itself), so worker processes each load it from ``run_dir``.

    Args:
        run_dir: A folder this script wrote (``model.zip``, ``obs_normalization.npz``, ``config.json``).
    """

    name = METHOD

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = str(run_dir)
        self._ppo: Any = None
        config = json.loads((Path(run_dir) / "config.json").read_text())
        self.metadata = config["metadata"]
        self.settings = {"run_dir": self.run_dir, "env_steps": config.get("env_steps")}

    def __call__(self, env: gym.Env) -> RLDRPolicy:
        return self

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_ppo": None}  # workers load the model themselves

    def _load(self) -> None:
        import torch
        from stable_baselines3 import PPO

        torch.set_num_threads(1)
        self._ppo = PPO.load(Path(self.run_dir) / "model.zip", device="cpu")
        stats = np.load(Path(self.run_dir) / "obs_normalization.npz")
        self._mean, self._std = stats["mean"], np.sqrt(stats["var"] + OBS_EPS)
        self._keys = [str(k) for k in stats["keys"]]

    def reset(self, seed: int | None) -> None:
        if self._ppo is None:
            self._load()

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        x = np.clip((flatten(obs, self._keys) - self._mean) / self._std, -OBS_CLIP, OBS_CLIP)
        action, _ = self._ppo.predict(x.astype(np.float32), deterministic=True)
        return action


# ---------------------------------------------------------------------- training
def train(config: Config) -> dict[str, Any]:
    """Train PPO with domain randomization until the budget (or ``total_steps``) is spent; save the model."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)  # the machine is shared; one core per process
    randomization = make_randomization(config)
    out = Path(config.out)
    (out / "randomization.json").write_text(randomization.to_json(indent=2) + "\n")
    venv = VecNormalize(make_training_venv(config, randomization), gamma=0.99)
    venv.seed(config.seed)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        n_epochs=5,
        gamma=0.99,
        policy_kwargs={"net_arch": [256, 256]},
        seed=config.seed,
        device="cpu",
        verbose=0,
    )
    log: dict[str, Any] = {"checkpoints": []}
    deadline = time.monotonic() + 60.0 * config.budget_minutes
    start = time.perf_counter()

    class Budget(BaseCallback):
        """Stops training at the deadline; logs training success per rollout."""

        def __init__(self) -> None:
            super().__init__()
            self.successes: list[float] = []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.successes.append(float(info.get("is_success", False)))
            return time.monotonic() < deadline

        def _on_rollout_end(self) -> None:
            recent = self.successes[-50:]
            log["checkpoints"].append(
                {
                    "env_steps": int(self.num_timesteps),
                    "episodes": len(self.successes),
                    "train_success_last_50": float(np.mean(recent)) if recent else None,
                    "time_s": time.perf_counter() - start,
                }
            )
            print(f"[rl_dr] {log['checkpoints'][-1]}", file=sys.stderr, flush=True)

    callback = Budget()
    model.learn(total_timesteps=config.total_steps or 10**9, callback=callback)
    model.save(out / "model.zip")
    keys = obs_keys(gym.make(SIM_ID, num_objects=config.num_objects).observation_space)
    np.savez(out / "obs_normalization.npz", mean=venv.obs_rms.mean, var=venv.obs_rms.var, keys=np.array(keys))
    log.update(
        env_steps=int(model.num_timesteps),
        episodes=len(callback.successes),
        train_success_overall=float(np.mean(callback.successes)) if callback.successes else None,
        training_time_s=time.perf_counter() - start,
        steps_per_s=model.num_timesteps / max(time.perf_counter() - start, 1e-9),
    )
    (out / "train_log.json").write_text(json.dumps(log, indent=2) + "\n")
    venv.close()
    return log


def metadata(config: Config, log: dict[str, Any]) -> dict[str, Any]:
    """The evaluation result's method section: sim only (real_fraction 0), no demos."""
    return {
        "method": METHOD,
        "policy_class": "stable_baselines3.PPO MlpPolicy [256, 256] (flat state observations)",
        "real_fraction": 0.0,
        # Named like the variants of the sim datasets (the env id's variant): the centre world of the randomization.
        "variant": "WorldGrounded" if config.grounding else "Ungrounded",
        "datasets": [],
        "training_seed": config.seed,
        "n_real_demos": 0,
        "n_sim_demos": 0,
        "env_steps": log["env_steps"],
        "training_time_s": round(log["training_time_s"], 1),
        "randomization": config.grounding or Path(config.randomization).name,
    }


def run(config: Config) -> dict[str, Any]:
    """Train, then evaluate zero-shot in the lab and in the nominal simulator; returns the summaries."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    log = train(config)
    resolved = {**dataclasses.asdict(config), "metadata": metadata(config, log), "env_steps": log["env_steps"]}
    (out / "config.json").write_text(json.dumps(resolved, indent=2) + "\n")
    task = {"num_objects": config.num_objects, "episode_steps": config.episode_steps}
    summaries = {}
    for name, env_id, kwargs in (("lab", LAB_ID, {**task, "lab": config.lab}), ("sim", SIM_ID, task)):
        result = evaluate(
            env_id, RLDRPolicy(out), episodes=config.eval_episodes, env_kwargs=kwargs, workers=config.eval_workers
        )
        path = out / "results" / f"rl_dr_{name}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(result.to_json(indent=2) + "\n")
        summaries[name] = result.summary
        s = result.summary
        low, high = s["success_rate_ci95"]
        print(
            f"[rl_dr] {env_id}: success {s['success_rate']:.3f} (95% CI {low:.3f}-{high:.3f}), sort accuracy "
            f"{s['sort_accuracy']:.3f}, failures { ({k: v for k, v in s['failure_causes'].items() if v}) }",
            file=sys.stderr,
        )
    return {"train": log, "eval": summaries}


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--budget-minutes", type=float, default=60.0, help="training wall-clock budget, min (default 60)")
    p.add_argument("--total-steps", type=int, default=None, help="cap on env steps (default: budget only)")
    p.add_argument("--randomization", default=str(DEFAULT_RANDOMIZATION), help="WorldRandomization JSON file")
    p.add_argument("--grounding", default=None, help="randomize over a grounding's intervals (name or file)")
    p.add_argument("--num-objects", type=int, default=1, help="objects per episode (curriculum; default 1)")
    p.add_argument("--episode-steps", type=int, default=200, help="episode time limit, steps (default 200 = 10 s)")
    p.add_argument("--seed", type=int, default=0, help="training seed")
    p.add_argument("--n-steps", type=int, default=1024, help="PPO rollout length (default 1024)")
    p.add_argument("--batch-size", type=int, default=256, help="PPO minibatch (default 256)")
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--eval-episodes", type=int, default=100, help="protocol episodes per env (default 100)")
    p.add_argument("--eval-workers", type=int, default=1, help="evaluation worker processes")
    p.add_argument("--lab", default="default", help="lab of PickSort-Real-v0 (name or file)")
    p.add_argument(
        "--num-envs", type=int, default=1, help="training envs stepped together, each its own world (default 1)"
    )
    a = p.parse_args(argv)
    if a.budget_minutes <= 0 or (a.total_steps is not None and a.total_steps < 1):
        p.error("--budget-minutes must be > 0 and --total-steps >= 1")
    if a.num_envs < 1:
        p.error(f"--num-envs must be an integer >= 1 (training envs stepped together), got {a.num_envs}")
    return Config(
        out=a.out,
        budget_minutes=a.budget_minutes,
        total_steps=a.total_steps,
        randomization=a.randomization,
        grounding=a.grounding,
        num_objects=a.num_objects,
        episode_steps=a.episode_steps,
        seed=a.seed,
        n_steps=a.n_steps,
        batch_size=a.batch_size,
        learning_rate=a.learning_rate,
        eval_episodes=a.eval_episodes,
        eval_workers=a.eval_workers,
        lab=a.lab,
        num_envs=a.num_envs,
    )


if __name__ == "__main__":  # workers are spawned and import this module
    run(parse_args())
