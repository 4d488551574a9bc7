"""The TypedDicts of ``r2s2r_envs.payloads`` against the payloads the code really builds."""

from __future__ import annotations

import types
import typing

import gymnasium as gym
import numpy as np
import pytest

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.envs.config import RewardWeights
from r2s2r_envs.evaluation.stats import summarize_episodes
from r2s2r_envs.payloads import EpisodeSummary, StepInfo

_TYPES = {bool: bool, int: int, float: (int, float), str: str, list: list, dict: dict, type(None): type(None)}


def _conforms(value, hint) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, h) for h in typing.get_args(hint))
    base = origin or hint
    if base is float and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[base])


def _check(payload: dict, typed: type) -> None:
    hints = typing.get_type_hints(typed)
    required, optional = typed.__required_keys__, typed.__optional_keys__
    assert required <= set(payload), f"{typed.__name__}: missing {sorted(required - set(payload))}"
    assert set(payload) <= required | optional, f"{typed.__name__}: undeclared {sorted(set(payload) - set(hints))}"
    for key, value in payload.items():
        assert _conforms(value, hints[key]), f"{typed.__name__}[{key!r}] = {value!r} is not {hints[key]}"


def test_step_info_is_what_reset_and_step_return_in_the_sim_and_the_lab():
    for env_id in ("PickSort-Ungrounded-v1", "PickSort-Real-v1"):
        env = gym.make(env_id, num_objects=1, episode_steps=20)
        _, info = env.reset(seed=0)
        _check(info, StepInfo)
        rng = np.random.default_rng(0)
        for _ in range(3):
            _, _, _, _, info = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
            _check(info, StepInfo)
        env.close()
    # Every reward term the env reports is declared, and nothing else named reward_*.
    declared = {k for k in StepInfo.__required_keys__ if k.startswith("reward_")}
    assert declared == {f"reward_{t}" for t in RewardWeights.term_names()}


def test_episode_summary_is_what_summarize_episodes_returns():
    episodes = [
        {"is_success": True, "sort_accuracy": 1.0, "failure_cause": None, "time_to_sort": 12.5},
        {"is_success": False, "sort_accuracy": 0.5, "failure_cause": "dropped", "time_to_sort": None},
    ]
    bare = summarize_episodes(episodes, ("dropped", "missed"))
    _check(dict(bare), EpisodeSummary)
    assert not set(bare) & EpisodeSummary.__optional_keys__
    full = summarize_episodes([{**e, "success_any_step": e["is_success"], "policy_error": None} for e in episodes])
    _check(dict(full), EpisodeSummary)
    assert set(full) == EpisodeSummary.__required_keys__ | EpisodeSummary.__optional_keys__


def test_the_checker_catches_a_wrong_type_and_an_undeclared_key():
    env = gym.make("PickSort-Ungrounded-v1", num_objects=1, episode_steps=5)
    _, info = env.reset(seed=0)
    with pytest.raises(AssertionError, match="sort_accuracy"):
        _check({**info, "sort_accuracy": "all"}, StepInfo)
    with pytest.raises(AssertionError, match="undeclared"):
        _check({**info, "extra": 1}, StepInfo)
