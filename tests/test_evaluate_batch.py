"""Batched evaluation (``evaluate(..., batch=N)``, ``r2s2r evaluate --batch N``) and batched policies (``act_batch``).

The records must be those of the unbatched protocol, bit for bit: same seeds per episode, same steps, returns and
outcomes.  Episodes are short so the file runs in well under a minute.
"""

from __future__ import annotations

import copy
import json
import warnings

import gymnasium as gym
import numpy as np
import pytest

from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.cli import main
from r2s2r_envs.evaluation.batched import batch_capable
from r2s2r_envs.evaluation.protocol import POLICY_FAILURE, evaluate
from r2s2r_envs.policies.runtime import load_policy

SIM = "PickSort-Ungrounded-v0"
LAB = "PickSort-Real-v0"
SHORT = {"num_objects": 1, "episode_steps": 40}


class NaNSometimes:
    """Holds still, and emits NaN at step 5 of episodes whose seed is odd (a policy failure in some slots)."""

    def reset(self, seed: int | None) -> None:
        self.t, self.bad = 0, (seed or 0) % 2 == 1

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        self.t += 1
        return np.full(22, np.nan if self.bad and self.t == 6 else 0.1, dtype=np.float32)


class BatchZero:
    """A batch-capable policy: holds still in every row."""

    def __init__(self) -> None:
        self.rows = 0

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(22, dtype=np.float32)

    def reset_batch(self, seeds, mask=None) -> None:
        self.rows = len(seeds)

    def act_batch(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros((len(obs["arm_qpos"]), 22), dtype=np.float32)


def _records(result):
    return [r.to_dict() for r in result.records]


@pytest.fixture(scope="module")
def flow_policy():
    return load_policy("zoo:flow-real-only")


def test_batched_records_equal_unbatched_for_a_demonstrator_in_the_lab():
    kwargs = {"num_objects": 1, "episode_steps": 120}
    one = evaluate(LAB, make_demonstrator, episodes=5, env_kwargs=kwargs, progress=False)
    with pytest.warns(UserWarning, match="no act_batch"):
        batched = evaluate(LAB, make_demonstrator, episodes=5, env_kwargs=kwargs, progress=False, batch=3)
    assert _records(batched) == _records(one)
    assert {r.object_outcomes for r in one.records} - {("timeout",)}, "some episode should end otherwise"


def test_batched_records_equal_unbatched_for_a_trained_policy(flow_policy):
    one = evaluate(LAB, flow_policy, episodes=5, env_kwargs={"episode_steps": 40}, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a batch-capable policy: nothing to say
        warnings.filterwarnings(
            "ignore", message=".*is out of date", category=DeprecationWarning
        )  # Gymnasium's, on -v0
        batched = evaluate(LAB, flow_policy, episodes=5, env_kwargs={"episode_steps": 40}, progress=False, batch=4)
    assert _records(batched) == _records(one)
    assert batched.summary == one.summary
    # The physics threads change nothing: one thread (a process given one core) steps the same episodes.
    one_thread = evaluate(LAB, flow_policy, episodes=5, env_kwargs={"episode_steps": 40}, progress=False, batch=4,
                          threads=1)  # fmt: skip
    assert _records(one_thread) == _records(one)


def test_policy_failures_in_some_slots_give_the_same_records():
    one = evaluate(SIM, NaNSometimes(), episodes=6, env_kwargs=SHORT, progress=False)
    with pytest.warns(UserWarning):
        batched = evaluate(SIM, NaNSometimes(), episodes=6, env_kwargs=SHORT, progress=False, batch=4)
    assert _records(batched) == _records(one)
    assert any(r.failure_cause == POLICY_FAILURE for r in one.records)
    assert any(r.failure_cause != POLICY_FAILURE for r in one.records)


def test_a_policy_without_act_batch_is_said_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate(SIM, NaNSometimes(), episodes=4, env_kwargs=SHORT, progress=False, batch=2)
    said = [w for w in caught if "act_batch" in str(w.message)]
    assert len(said) == 1
    assert "calls the policy once per env" in str(said[0].message)


def test_a_batch_capable_policy_is_used_as_one():
    policy = BatchZero()
    assert batch_capable(policy) and not batch_capable(NaNSometimes())
    one = evaluate(SIM, BatchZero(), episodes=3, env_kwargs=SHORT, progress=False)
    batched = evaluate(SIM, policy, episodes=3, env_kwargs=SHORT, progress=False, batch=3)
    assert _records(batched) == _records(one)


class Raising(NaNSometimes):
    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        raise ValueError("the policy's own error")


class RaisingBatch(BatchZero):
    def act_batch(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        raise ValueError("the policy's own error")


class ResetRaising(NaNSometimes):
    def reset(self, seed: int | None) -> None:
        raise RuntimeError("no weights")


@pytest.mark.parametrize(
    "policy, message",
    [
        (Raising(), "step 0: the policy raised ValueError: the policy's own error"),
        (RaisingBatch(), "step 0: the policy raised ValueError: the policy's own error"),
        (ResetRaising(), "reset: the policy raised RuntimeError: no weights"),
    ],
)
def test_an_error_of_the_policy_is_its_failure_not_the_envs(policy, message):
    """Every episode the policy raised for is a recorded policy failure; the evaluation goes on (issue 50)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "a policy without act_batch" (said once)
        result = evaluate(SIM, policy, episodes=3, env_kwargs=SHORT, progress=False, batch=2)
    assert [r.policy_error for r in result.records] == [message] * 3
    assert all(r.failure_cause == POLICY_FAILURE for r in result.records)
    assert result.summary["policy_failures"] == 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch": 0}, r"batch must be an integer >= 1, got 0"),
        ({"batch": 5}, r"batch=5 is larger than the 4 episodes asked: batch must be in \[1, 4\]"),
        ({"batch": 2.0}, r"batch must be an integer >= 1"),
        ({"batch": 2, "threads": 0}, r"threads must be an integer >= 1, got 0"),
    ],
)
def test_bad_batches_are_refused_naming_what_is_accepted(kwargs, message):
    with pytest.raises(ValueError, match=message):
        evaluate(SIM, NaNSometimes(), episodes=4, env_kwargs=SHORT, progress=False, **kwargs)


@pytest.mark.slow  # worker processes are spawned: ~15 s
def test_workers_and_batches_compose():
    one = evaluate(SIM, NaNSometimes(), episodes=6, env_kwargs=SHORT, progress=False)
    with pytest.warns(UserWarning):
        both = evaluate(SIM, NaNSometimes(), episodes=6, env_kwargs=SHORT, progress=False, batch=2, workers=2)
    assert _records(both) == _records(one)


def test_cli_batch(capsys):
    argv = ["evaluate", "--policy", "test_evaluate_batch:NaNSometimes", "--env", SIM, "--episodes", "4"]
    argv += ["--num-objects", "1", "--episode-steps", "40", "--no-progress", "--json"]
    assert main(argv) == 0
    unbatched = json.loads(capsys.readouterr().out)
    with pytest.warns(UserWarning):
        assert main([*argv, "--batch", "3"]) == 0
    batched = json.loads(capsys.readouterr().out)
    assert batched["records"] == unbatched["records"]
    assert main([*argv, "--batch", "5"]) == 2
    assert "batch=5 is larger than the 4 episodes asked" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*argv, "--batch", "0"])


# ---------------------------------------------------------------------- the trained policy's act_batch
@pytest.mark.parametrize("temporal_ensemble", [None, 0.1])
def test_act_batch_rows_are_bit_identical_to_act(flow_policy, temporal_ensemble):
    policy = load_policy("zoo:flow-real-only", temporal_ensemble=temporal_ensemble)
    vec = gym.make_vec(LAB, num_envs=3)
    obs, _ = vec.reset(seed=0)
    seeds = [7, 8, 9]
    policy.reset_batch(seeds)
    singles = [copy.deepcopy(policy) for _ in seeds]
    for single, seed in zip(singles, seeds):
        single.reset(seed)
    for t in range(10):
        if t == 5:  # a new episode in row 1 only
            policy.reset_batch([None, 21, None], [False, True, False])
            singles[1].reset(21)
        actions = policy.act_batch(obs)
        expected = np.stack([s.act({k: v[i] for k, v in obs.items()}) for i, s in enumerate(singles)])
        assert actions.dtype == np.float32 and np.array_equal(actions, expected), f"step {t}"
        obs, *_ = vec.step(actions)
    vec.close()


def test_act_batch_before_reset_batch_is_refused(flow_policy):
    policy = load_policy("zoo:flow-real-only")
    obs, _ = gym.make_vec(LAB, num_envs=2).reset(seed=0)
    with pytest.raises(RuntimeError, match="act_batch got 2 rows but reset_batch started 0"):
        policy.act_batch(obs)
