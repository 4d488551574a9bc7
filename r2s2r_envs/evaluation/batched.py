"""Batched evaluation: the protocol's episodes run ``batch`` at a time in the native vector env (``envs.vector``).

``evaluate(..., batch=N)`` (and ``r2s2r evaluate --batch N``) comes here.  N envs step together (their physics in
parallel threads) and the policy answers for all of them at once through its optional ``act_batch``
(docs/protocol.md#batched-policies).  Episode ``i`` still resets its env with ``env_seed`` and the policy with
``policy_seed`` of ``episode_seeds(base_seed, i)``; a slot whose episode ends takes the next one, so the records are
those of the unbatched protocol, bit for bit (``tests/test_evaluate_batch.py``).

A policy without ``act_batch``/``reset_batch`` is called per env instead: one policy per slot, made by the factory
on that slot's env (or a copy of the policy given), which :func:`evaluate` says once.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.envs.vector import PickSortVectorEnv, make_vector_env

__all__ = ["batch_capable", "make_batch_env", "run_batched"]


def batch_capable(policy: Any) -> bool:
    """Whether ``policy`` serves a batch itself (callable ``reset_batch`` and ``act_batch``)."""
    return callable(getattr(policy, "act_batch", None)) and callable(getattr(policy, "reset_batch", None))


@dataclasses.dataclass
class _Slot:
    """The episode one row of the vector env is running."""

    index: int
    env_seed: int
    policy_seed: int
    info: dict[str, Any]
    total: float = 0.0
    steps: int = 0
    success_any_step: bool = False
    #: What the policy raised when reset for this episode (recorded as its failure at the first step).
    error: BaseException | None = None


class _PerEnvPolicies:
    """``reset_batch``/``act_batch`` over one ordinary policy per slot (the fallback for policies without them)."""

    def __init__(self, policies: list[Any]) -> None:
        self.policies = policies
        self.errors: dict[int, BaseException] = {}

    def reset_batch(self, seeds: Sequence[int | None], mask: Sequence[bool] | None = None) -> None:
        for i, (policy, seed, on) in enumerate(
            zip(self.policies, seeds, mask if mask is not None else [True] * len(seeds))
        ):
            if on:
                try:
                    policy.reset(seed)
                except Exception as e:  # noqa: BLE001 - the user's policy: its error is its episode's failure
                    self.errors[i] = e

    def act_rows(self, obs: dict[str, np.ndarray], rows: list[int]) -> dict[int, Any]:
        """Each row's action, or what its policy raised (reported by ``action_problem`` as a policy failure)."""
        out: dict[int, Any] = {}
        for i in rows:
            try:
                out[i] = self.policies[i].act({k: v[i] for k, v in obs.items()})
            except Exception as e:  # noqa: BLE001 - the user's policy: its error is its episode's failure
                out[i] = e
        return out


def make_batch_policy(policy: Any, vec: PickSortVectorEnv, resolve: Callable[[Any, Any], Any]) -> Any:
    """The batch policy for ``vec``: the policy itself when :func:`batch_capable`, else per-env policies (a factory
    called on each slot's env, or copies of the policy given)."""
    first = resolve(policy, vec.envs[0])
    if batch_capable(first):
        return first
    if first is policy:  # a policy object, not a factory: one copy per further slot
        rest = [resolve(copy.deepcopy(policy), env) for env in vec.envs[1:]]
    else:
        rest = [resolve(policy, env) for env in vec.envs[1:]]
    return _PerEnvPolicies([first, *rest])


def run_batched(
    vec: PickSortVectorEnv,
    policy: Any,
    episodes: Sequence[tuple[int, int, int]],
    *,
    resolve: Callable[[Any, Any], Any],
    action_problem: Callable[[Any, tuple[int, ...]], str | None],
    record: Callable[..., Any],
    failure: Callable[..., Any],
    done: Callable[[Any], None] | None = None,
) -> list[Any]:
    """Run ``episodes`` (``(index, env_seed, policy_seed)``) of ``policy``, ``vec.num_envs`` at a time.

    ``vec`` is a vector env in ``autoreset_mode="Disabled"`` with at most ``len(episodes)`` envs (the caller makes
    and closes it: :func:`make_batch_env`).  ``resolve``, ``action_problem``, ``record`` and ``failure`` are the
    protocol's (``evaluation.protocol``): how a policy is made for an env, what makes an action unusable, and the
    record of an episode that the env ended or that the policy failed.  ``done(record)`` is called as each episode
    ends.

    Returns:
        The records, in the order of ``episodes``.
    """
    if vec.autoreset_mode.value != "Disabled" or vec.num_envs > len(episodes):
        raise ValueError(
            f"run_batched needs a vector env in autoreset_mode 'Disabled' with at most {len(episodes)} envs, got "
            f"{vec.autoreset_mode.value!r} with {vec.num_envs}"
        )
    return _run(vec, policy, list(episodes), resolve, action_problem, record, failure, done)


def make_batch_env(
    env_id: str, env_kwargs: dict[str, Any], num_envs: int, num_threads: int | None = None
) -> PickSortVectorEnv:
    """The vector env :func:`run_batched` steps: ``num_envs`` envs of ``env_id``, autoreset disabled, the physics in
    ``num_threads`` threads (default: the vector env's, ``min(num_envs, cores)``)."""
    threads = None if num_threads is None else min(num_threads, num_envs)
    return make_vector_env(env_id, num_envs, autoreset_mode="Disabled", num_threads=threads, **env_kwargs)


def _run(vec, policy, queue, resolve, action_problem, record, failure, done) -> list[Any]:
    n = vec.num_envs
    shape = vec.single_action_space.shape
    limits = [env.episode_steps for env in vec.envs]
    batch_policy = make_batch_policy(policy, vec, resolve)
    per_env = isinstance(batch_policy, _PerEnvPolicies)
    order = {index: k for k, (index, _, _) in enumerate(queue)}
    records: list[Any] = [None] * len(queue)
    slots: list[_Slot | None] = [None] * n
    pending = list(queue)

    def start(rows: list[int], first: bool) -> dict[str, np.ndarray]:
        seeds: list[int | None] = [None] * n
        mask = np.zeros(n, dtype=np.bool_)
        policy_seeds: list[int | None] = [None] * n
        started: dict[int, _Slot] = {}
        for i in rows:
            index, env_seed, policy_seed = pending.pop(0)
            slots[i] = started[i] = _Slot(index, int(env_seed), int(policy_seed), {})
            seeds[i], policy_seeds[i], mask[i] = int(env_seed), int(policy_seed), True
        obs, _ = vec.reset(seed=seeds, options=None if first else {"reset_mask": mask})
        for i, slot in started.items():
            slot.info = vec.env_infos[i]
            slot.success_any_step = bool(slot.info.get("is_success", False))
        try:
            batch_policy.reset_batch(policy_seeds, None if first else mask.tolist())
        except Exception as e:  # noqa: BLE001 - the user's policy: every episode it was reset for fails with it
            for slot in started.values():
                slot.error = e
        for i, slot in started.items():
            slot.error = getattr(batch_policy, "errors", {}).pop(i, slot.error)
        return obs

    def finish(i: int, rec: Any) -> None:
        records[order[rec.index]] = rec
        slots[i] = None
        if done is not None:
            done(rec)

    obs = start(list(range(n)), first=True)
    while any(s is not None for s in slots):
        running = {i: s for i, s in enumerate(slots) if s is not None}
        active = list(running)
        for i, slot in running.items():
            if slot.steps >= limits[i]:
                raise RuntimeError(
                    f"the env did not end episode {slot.index} within its episode_steps={limits[i]} steps"
                )
        if per_env:
            proposed = batch_policy.act_rows(obs, active)
        else:
            try:
                out = batch_policy.act_batch(obs)
                proposed = {i: out[i] for i in active}
            except Exception as e:  # noqa: BLE001 - the user's policy: its error fails every episode it acted for
                proposed = dict.fromkeys(active, e)
        actions = np.zeros((n, *shape), dtype=np.float64)
        for i, slot in running.items():
            problem = action_problem(slot.error if slot.error is not None else proposed[i], shape)
            if problem is not None:
                error = f"{'reset' if slot.error is not None else f'step {slot.steps}'}: {problem}"
                args = (slot.index, slot.env_seed, slot.policy_seed, slot.steps, slot.total, slot.success_any_step)
                finish(i, failure(slot.info, error, *args))
                continue
            actions[i] = np.asarray(proposed[i], dtype=np.float64)  # float32 -> float64 is exact
        obs, rewards, terms, truncs, _ = vec.step(actions)
        ended = []
        for i in active:
            live = slots[i]
            if live is None:  # stopped as a policy failure: its env's step is discarded
                ended.append(i)
                continue
            live.info = vec.env_infos[i]
            live.total += float(rewards[i])
            live.steps += 1
            live.success_any_step = live.success_any_step or bool(live.info["is_success"])
            if terms[i] or truncs[i]:
                finish(i, record(live, bool(terms[i]), bool(truncs[i])))
                ended.append(i)
        if ended and pending:
            obs = start(ended[: len(pending)], first=False)
    return records
