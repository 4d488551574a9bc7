"""DAgger with a programmatic expert: roll the policy out in a simulator, label its states, aggregate, retrain.

Behavior cloning learns the demonstrator's states only; the states a learned policy drifts into, and the recovery
from them, are never labelled.  DAgger (Ross et al., 2011) closes that loop.  Each round:

1. the current policy drives ``episodes`` episodes in a *simulated* env (the lab is refused: it is the test set,
   and its operator cannot label states); with probability ``beta`` an episode is driven by the expert instead;
2. the expert labels every visited state: the reactive planner (:class:`~r2s2r_envs.behavior.ReactivePlanner`),
   which decides from the current observation alone, so its label fits the state whatever led there (a
   stateful planner fed the policy's observations answers from its own phase and made policies worse every
   round); in an env whose demonstrator is the scripted planner it gets that env's settings (the grounded
   world's tuned planner);
3. the rollouts are written as a dataset (schema 3: ``actions`` what the policy executed, ``action_labels`` the
   expert's), added to the policy's simulated datasets, and the policy is trained again from scratch with its
   own training config on the aggregate (``demos="all"``: failed rollouts are labelled as well as successful
   ones);
4. the new policy is evaluated in the same env on held-out simulated episodes (never the protocol's), which is
   what ``dagger_log.json`` reports per round.

Layout of ``out``: ``round-1/rollouts.hdf5``, ``round-1/policy/`` (a checkpoint like ``r2s2r train``'s),
``round-1/eval.json`` (an evaluation result), ... and ``dagger_log.json``.  A round whose files exist is not
redone, so an interrupted run resumes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np

from r2s2r_envs.behavior.reactive import ReactivePlanner
from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED, EvaluationResult, evaluate, resolve_policy
from r2s2r_envs.policies.checkpoint import read_checkpoint
from r2s2r_envs.policies.config import ConfigError, TrainConfig

#: Base seed of the first round's rollouts (round r uses ``DAGGER_BASE_SEED + r - 1``); the held-out evaluations
#: use ``DAGGER_EVAL_SEED``. Neither is a canonical dataset's seed nor the protocol's.
DAGGER_BASE_SEED = 300_000
DAGGER_EVAL_SEED = 400_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class DaggerConfig:
    """A DAgger run (see the module docstring).

    Attributes:
        policy: the round-0 policy: a checkpoint directory written by ``r2s2r train`` or ``zoo:NAME``; it must have
            trained on simulated data (``real_fraction < 1``), whose datasets the rounds add to.
        env_id: the simulated env the policy is rolled out in (a ``PickSort-*`` sim variant; not the lab).
        env_kwargs: its ``gym.make`` arguments (e.g. ``num_objects``, ``episode_steps``), JSON-able.
        out: output directory (resumed if it holds earlier rounds of the same run).
        rounds: rounds of roll-out, labelling and retraining.
        episodes: rollouts per round.
        beta: probability that a rollout is driven by the expert instead of the policy (labels are the expert's
            either way).
        steps: training steps per round (default: the policy's own training config's).
        eval_episodes: held-out simulated episodes each round's policy is evaluated on (0: none).
        workers: processes for the rollouts and evaluations.
        seed: base seed of the rollouts (round r uses ``seed + r - 1``).
        progress: progress bars on stderr.
    """

    policy: str
    env_id: str
    out: str
    env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    rounds: int = 1
    episodes: int = 200
    beta: float = 0.0
    steps: int | None = None
    eval_episodes: int = 100
    workers: int = 1
    seed: int = DAGGER_BASE_SEED
    progress: bool = True

    def check(self) -> None:
        """Checks what can be checked without loading anything.

        Raises:
            ConfigError: naming the field, the value and what is accepted.
        """
        for name in ("rounds", "episodes", "workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.eval_episodes, bool) or not isinstance(self.eval_episodes, int) or self.eval_episodes < 0:
            raise ConfigError(f"eval_episodes must be an integer >= 0, got {self.eval_episodes!r}")
        if self.steps is not None and (
            isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1
        ):
            raise ConfigError(f"steps must be an integer >= 1 (or unset: the policy's own), got {self.steps!r}")
        beta = self.beta
        if (
            isinstance(beta, bool)
            or not isinstance(beta, (int, float))
            or not math.isfinite(beta)
            or not 0 <= beta <= 1
        ):
            raise ConfigError(f"beta must be a number in [0, 1] (the share of expert-driven rollouts), got {beta!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not self.out:
            raise ConfigError("out (the output directory) is required")


class DaggerActor:
    """A policy at the wheel, the reactive planner labelling: the demonstrator of a DAgger round's rollouts.

    ``act(obs)`` returns the expert's label for the state and steps the policy; ``executed_action()`` returns what
    is executed (the policy's action, or the expert's in an expert-driven episode).
    """

    name = "dagger"

    def __init__(self, env: gym.Env, *, checkpoint: str, beta: float = 0.0, **expert_settings: Any) -> None:
        from r2s2r_envs.policies.runtime import load_policy

        base = env.unwrapped
        if str(getattr(base, "domain", "sim")) == "real":
            raise ConfigError("DAgger rolls policies out in a simulator; the lab is the test set and cannot label")
        if getattr(base, "demonstrator", None) == "scripted":
            expert_settings = {**dict(getattr(base, "demonstrator_settings", None) or {}), **expert_settings}
        self.expert = ReactivePlanner(env, **expert_settings)
        self.policy = resolve_policy(load_policy(checkpoint), env)  # told the env's domain, as in evaluations
        self.checkpoint = str(checkpoint)
        self.weights_sha256 = read_checkpoint(checkpoint).get("weights_sha256")
        self.beta = float(beta)
        self._expert_drives = False
        self._action: np.ndarray | None = None

    @property
    def settings(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "weights_sha256": self.weights_sha256,
            "beta": self.beta,
            "expert": {"name": self.expert.name, **self.expert.settings},
        }

    def reset(self, seed: int | None = None) -> None:
        self.expert.reset(seed)
        self.policy.reset(seed)
        rng = np.random.default_rng(seed)
        self._expert_drives = bool(rng.random() < self.beta)

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        label = np.asarray(self.expert.act(obs), dtype=np.float32)
        driven = np.asarray(self.policy.act(obs), dtype=np.float32)  # every step: the policy keeps its own chunks
        self._action = label if self._expert_drives else driven
        return label

    def executed_action(self) -> np.ndarray:
        if self._action is None:
            raise RuntimeError("executed_action() before act()")
        return self._action


@dataclasses.dataclass(frozen=True)
class DaggerActorFactory:
    """``f(env) -> DaggerActor`` for a checkpoint (picklable, for the generation workers)."""

    checkpoint: str
    beta: float = 0.0

    def __call__(self, env: gym.Env) -> DaggerActor:
        return DaggerActor(env, checkpoint=self.checkpoint, beta=self.beta)


def _base_config(policy: str) -> TrainConfig:
    return TrainConfig.from_dict(read_checkpoint(policy)["config"])


def _round_config(base: TrainConfig, rollouts: list[Path], out: Path, steps: int | None) -> TrainConfig:
    changes: dict[str, Any] = {
        "sim": (*base.sim, *(str(p) for p in rollouts)),
        "demos": "all",
        "out": str(out),
        "overwrite": True,
        "progress": False,
    }
    if steps is not None:
        changes["steps"] = steps
    return dataclasses.replace(base, **changes)


def dagger(config: DaggerConfig) -> dict[str, Any]:
    """Runs (or resumes) a DAgger run; returns the log also written to ``out/dagger_log.json``.

    Raises:
        ConfigError: a bad setting, a lab env, or a policy that never trained on simulated data.
        CheckpointError: ``policy`` is not a readable checkpoint.
    """
    from r2s2r_envs.datasets.generate import generate
    from r2s2r_envs.policies.train import train

    config.check()
    if config.seed <= EVALUATION_BASE_SEED < config.seed + config.rounds:
        raise ConfigError(f"seed {config.seed} would roll out on the protocol's base seed {EVALUATION_BASE_SEED}")
    from r2s2r_envs.policies.runtime import load_policy

    try:
        probe = gym.make(config.env_id, **config.env_kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env_kwargs {config.env_kwargs} do not fit {config.env_id}: {exc}") from None
    try:
        if str(getattr(probe.unwrapped, "domain", "sim")) == "real":
            raise ConfigError(
                f"{config.env_id} is the lab: DAgger rolls out in a simulated variant (the lab is the test set)"
            )
        _check_observations(load_policy(config.policy), probe, config)
    finally:
        probe.close()
    base = _base_config(config.policy)
    if base.real_fraction >= 1.0 or not base.sim:
        raise ConfigError(
            f"{config.policy} trained on real data only; DAgger adds simulated rollouts to a policy's simulated "
            "datasets: start from a sim-only or co-trained policy"
        )
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "dagger_log.json"
    log: dict[str, Any] = {"config": dataclasses.asdict(config), "base_config": base.to_dict(), "rounds": []}
    current: str | Path = config.policy
    rollouts: list[Path] = []
    if config.eval_episodes:
        log["round_0_eval"] = _evaluate_once(out / "round-0" / "eval.json", config, current)
    for r in range(1, config.rounds + 1):
        here = out / f"round-{r}"
        t = time.perf_counter()
        data = here / "rollouts.hdf5"
        made = generate(
            config.env_id,
            config.episodes,
            data,
            workers=config.workers,
            seed=config.seed + r - 1,
            env_kwargs=config.env_kwargs,
            demonstrator=DaggerActorFactory(str(current), config.beta),
            progress=config.progress,
        )
        if not made.complete:
            raise RuntimeError(f"round {r}: the rollouts stopped after {made.num_demos} of {config.episodes}")
        rollout_s = time.perf_counter() - t
        rollouts.append(data)
        ckpt = here / "policy"
        t = time.perf_counter()
        if not (ckpt / "config.json").is_file():
            train(_round_config(base, rollouts, ckpt, config.steps))
        train_s = time.perf_counter() - t
        entry: dict[str, Any] = {
            "round": r,
            "rollouts": str(data),
            "rollout_success_rate": made.successes / max(made.num_demos, 1),
            "policy": str(ckpt),
            "rollout_s": round(rollout_s, 1),
            "train_s": round(train_s, 1),
        }
        if config.eval_episodes:
            entry["eval"] = _evaluate_once(here / "eval.json", config, ckpt)
        log["rounds"].append(entry)
        tmp = log_path.with_suffix(".tmp")  # after every round: an interrupted run keeps its finished rounds' log
        tmp.write_text(json.dumps(log, indent=1) + "\n")
        tmp.replace(log_path)
        current = ckpt
    return log


def _check_observations(policy: Any, env: gym.Env, config: DaggerConfig) -> None:
    """Refuses an env whose observations differ from the ones the policy trained on (another object count, say)
    before any rollout."""
    shapes = getattr(getattr(policy, "pipeline", None), "obs_shapes", {})
    space = cast(gym.spaces.Dict, env.observation_space)  # the PickSort envs observe a Dict
    for key, expected in shapes.items():
        got = space[key].shape if key in space.spaces else None
        if got != tuple(expected):
            what = "lacks it" if got is None else f"gives {got}"
            raise ConfigError(
                f"{config.policy} observes {key!r} of shape {tuple(expected)}, but {config.env_id} with env_kwargs "
                f"{config.env_kwargs} {what}: roll out in an env like the policy's training data"
            )


def _evaluate_once(path: Path, config: DaggerConfig, policy: str | Path) -> dict[str, Any]:
    """Evaluates ``policy`` on the held-out simulated episodes, unless ``path`` holds that result already."""
    from r2s2r_envs.policies.runtime import load_policy

    if path.is_file():
        result = EvaluationResult.from_json(path.read_text())
    else:
        result = evaluate(
            config.env_id,
            load_policy(policy),
            episodes=config.eval_episodes,
            base_seed=DAGGER_EVAL_SEED,
            env_kwargs=config.env_kwargs,
            workers=config.workers,
            progress=False,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(result.to_json(indent=1) + "\n")
    s = result.summary
    return {"success_rate": s["success_rate"], "sort_accuracy": s["sort_accuracy"], "result": str(path)}
