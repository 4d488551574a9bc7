"""The evaluation protocol (``r2s2r_envs.evaluation.protocol``): seeds, records, results files, workers.

Most tests run a tiny seeded random policy on ``PickSort-Ungrounded-v0`` with one object and a 40-step time
limit, so the whole file takes seconds.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from conftest import lab_file

from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.envs import FAILURE_CAUSES, OUTCOMES
from r2s2r_envs.envs.seeding import SEEDING_CONVENTION, episode_seeds
from r2s2r_envs.evaluation import protocol
from r2s2r_envs.evaluation.protocol import (
    EVALUATION_BASE_SEED,
    RESULT_SCHEMA_VERSION,
    EnvArgumentError,
    EpisodeRecord,
    EvaluationResult,
    Policy,
    ResultSchemaError,
    UnknownEnvError,
    evaluate,
    evaluation_seeds,
    validate_result,
)
from r2s2r_envs.evaluation.stats import summarize_episodes

SIM = "PickSort-Ungrounded-v0"
LAB = "PickSort-Real-v0"
FAST = {"num_objects": 1, "episode_steps": 40}


class RandomPolicy:
    """Seeded uniform actions; remembers the seeds it was reset with (module level: picklable for workers)."""

    name = "random"

    def __init__(self, scale: float = 0.5) -> None:
        self.scale = scale
        self.seeds: list[int | None] = []
        self.rng = np.random.default_rng(0)

    @property
    def settings(self) -> dict[str, float]:
        return {"scale": self.scale}

    def reset(self, seed: int | None) -> None:
        self.seeds.append(seed)
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        assert isinstance(obs, dict) and "eef_pos" in obs
        return self.rng.uniform(-self.scale, self.scale, size=22).astype(np.float32)


class Anonymous:
    """A policy without ``name`` or ``settings``."""

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(22, dtype=np.float32)


def random_policy_factory(env) -> RandomPolicy:
    return RandomPolicy(scale=0.3)


@pytest.fixture(scope="module")
def result() -> EvaluationResult:
    return evaluate(SIM, RandomPolicy(), episodes=3, env_kwargs=FAST, progress=False)


# ---------------------------------------------------------------------- seeds
def test_evaluation_seeds_are_pinned():
    # The fixed protocol's episodes: changing these silently would make old and new results incomparable.
    assert EVALUATION_BASE_SEED == 271828
    assert evaluation_seeds(3) == [(2235863025, 2535300845), (1070383154, 3942321633), (2782793102, 3119278881)]
    assert evaluation_seeds(5) == [episode_seeds(EVALUATION_BASE_SEED, i) for i in range(5)]
    assert evaluation_seeds(2, base_seed=0) == [episode_seeds(0, 0), episode_seeds(0, 1)]
    assert evaluation_seeds(0) == []
    with pytest.raises(ValueError, match="episodes"):
        evaluation_seeds(-1)


# ---------------------------------------------------------------------- running
def test_policy_protocol_is_satisfied_by_the_demonstrators(make_env):
    assert isinstance(make_demonstrator(make_env(SIM)), Policy)
    assert isinstance(RandomPolicy(), Policy) and isinstance(Anonymous(), Policy)
    assert not isinstance(object(), Policy)


def test_evaluate_runs_the_protocol():
    policy = RandomPolicy()
    res = evaluate(SIM, policy, episodes=3, base_seed=11, env_kwargs=FAST, progress=False)
    seeds = evaluation_seeds(3, base_seed=11)
    assert [r.index for r in res.records] == [0, 1, 2]
    assert [(r.env_seed, r.policy_seed) for r in res.records] == seeds
    assert policy.seeds == [s[1] for s in seeds]  # the policy was reset with each episode's policy seed
    for r in res.records:
        # Every episode ends with every object given an outcome, within the env's own time limit.
        assert 1 <= r.steps <= FAST["episode_steps"]
        assert len(r.object_outcomes) == 1 and r.object_outcomes[0] in OUTCOMES and "pending" not in r.object_outcomes
        assert r.terminated != r.truncated
        assert r.failure_cause in (None, *FAILURE_CAUSES)
        assert (r.time_to_sort is not None) == r.is_success
        assert r.success_any_step >= r.is_success
        if r.truncated and not r.unstable:
            assert r.steps == FAST["episode_steps"] and r.object_outcomes == ("timeout",)
    assert res.env_id == SIM and res.base_seed == 11 and res.episodes == 3
    assert res.env_kwargs == FAST
    assert res.seeding_convention == SEEDING_CONVENTION
    assert res.policy == {"name": "random", "class": f"{__name__}.RandomPolicy", "settings": {"scale": 0.5}}
    assert res.provenance["domain"] == "sim" and res.provenance["num_objects"] == 1
    assert set(res.versions) == {"r2s2r_envs", "mujoco", "gymnasium", "numpy", "python"}
    summary = res.summary
    assert summary == summarize_episodes([r.to_dict() for r in res.records], FAILURE_CAUSES)
    assert summary["episodes"] == 3
    assert sum(summary["failure_causes"].values()) == sum(not r.is_success for r in res.records)


def test_policy_without_name_or_settings_is_recorded_by_its_class():
    res = evaluate(SIM, Anonymous(), episodes=1, env_kwargs=FAST, progress=False)
    assert res.policy == {"name": None, "class": f"{__name__}.Anonymous", "settings": None}
    assert res.records[0].object_outcomes == ("timeout",)  # a hand that never moves sorts nothing


def test_factory_builds_the_envs_demonstrator():
    res = evaluate(
        SIM, make_demonstrator, episodes=2, env_kwargs={"num_objects": 1, "episode_steps": 200}, progress=False
    )
    assert res.policy["name"] == "scripted" and isinstance(res.policy["settings"], dict)
    assert res.summary["success_rate"] == 1.0  # one object and 10 s: the planner sorts it
    assert all(r.terminated and r.object_outcomes == ("sorted",) and r.time_to_sort > 0 for r in res.records)


def test_same_seeds_give_identical_records(result):
    again = evaluate(SIM, RandomPolicy(), episodes=3, env_kwargs=FAST, progress=False)
    assert again.records == result.records
    other = evaluate(SIM, RandomPolicy(), episodes=3, base_seed=1, env_kwargs=FAST, progress=False)
    assert [r.env_seed for r in other.records] != [r.env_seed for r in result.records]
    assert [r.episode_return for r in other.records] != [r.episode_return for r in result.records]


def test_workers_do_not_change_the_records(result):
    two = evaluate(SIM, RandomPolicy(), episodes=3, env_kwargs=FAST, progress=False, workers=2)
    assert two.records == result.records
    assert two.summary == result.summary
    one = evaluate(SIM, random_policy_factory, episodes=3, env_kwargs=FAST, progress=False)
    assert (
        evaluate(SIM, random_policy_factory, episodes=3, env_kwargs=FAST, progress=False, workers=2).records
        == one.records
    )


def test_unpicklable_policy_with_workers_is_a_clear_error():
    with pytest.raises(TypeError, match="worker processes"):
        evaluate(SIM, lambda env: RandomPolicy(), episodes=2, env_kwargs=FAST, progress=False, workers=2)


# ---------------------------------------------------------------------- refusals
@pytest.mark.parametrize("env_id", ["CartPole-v1", "PickSort-Nope-v0", 3])
def test_only_registered_picksort_ids_are_evaluated(env_id):
    with pytest.raises(UnknownEnvError, match="registered PickSort ids") as err:
        evaluate(env_id, RandomPolicy(), episodes=1, progress=False)
    for known in (SIM, LAB):
        assert known in str(err.value)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="episodes must be an integer >= 1"):
        evaluate(SIM, RandomPolicy(), episodes=0, progress=False)
    with pytest.raises(ValueError, match="workers"):
        evaluate(SIM, RandomPolicy(), episodes=1, workers=0, progress=False)
    with pytest.raises(ValueError, match="base_seed"):
        evaluate(SIM, RandomPolicy(), episodes=1, base_seed=-1, progress=False)
    with pytest.raises(TypeError, match="reset.*act"):
        evaluate(SIM, 42, episodes=1, progress=False)
    with pytest.raises(TypeError, match="not a Policy"):
        evaluate(SIM, lambda env: "not a policy", episodes=1, progress=False)
    with pytest.raises(EnvArgumentError, match="num_objects"):
        evaluate(SIM, RandomPolicy(), episodes=1, env_kwargs={"num_objects": 99}, progress=False)
    with pytest.raises(EnvArgumentError, match="lab"):  # the simulator has no lab
        evaluate(SIM, RandomPolicy(), episodes=1, env_kwargs={"lab": "default"}, progress=False)


# ---------------------------------------------------------------------- the lab
def _lab_name(provenance: dict) -> str:
    lab = provenance["lab"]
    return lab["name"] if isinstance(lab, dict) else lab


def test_lab_result_holds_its_name_never_its_physics(tmp_path):
    path = lab_file(tmp_path, "my_lab")
    res = evaluate(LAB, RandomPolicy(), episodes=1, env_kwargs={**FAST, "lab": path}, progress=False)
    assert res.provenance["domain"] == "real" and _lab_name(res.provenance) == "my_lab"
    assert "world_params" not in res.provenance and "world" not in res.provenance
    assert res.env_kwargs["lab"] == path  # a file path names the lab without its content
    inline = evaluate(
        LAB,
        RandomPolicy(),
        episodes=1,
        progress=False,
        env_kwargs={**FAST, "lab": {"world": {"control_latency": 0.043712345}}},
    )
    assert inline.env_kwargs["lab"] == protocol.LAB_WITHHELD
    assert "0.043712345" not in inline.to_json()  # digits no timing figure would share by chance
    EvaluationResult.from_json(inline.to_json())


def test_lab_and_sim_face_the_same_episodes():
    sim = evaluate(SIM, RandomPolicy(), episodes=2, env_kwargs=FAST, progress=False)
    lab = evaluate(LAB, RandomPolicy(), episodes=2, env_kwargs=FAST, progress=False)
    assert [(r.env_seed, r.policy_seed) for r in sim.records] == [(r.env_seed, r.policy_seed) for r in lab.records]


# ---------------------------------------------------------------------- result files
def test_json_round_trip(result):
    text = result.to_json(indent=2)
    data = json.loads(text)
    assert data["format"] == "r2s2r_envs.evaluation_result" and data["schema_version"] == RESULT_SCHEMA_VERSION == 3
    assert data["summary"] == result.summary and len(data["records"]) == 3
    assert set(data["records"][0]) == {f for f in EpisodeRecord.__dataclass_fields__}
    validate_result(data)
    back = EvaluationResult.from_json(text)
    assert back == result
    assert back.to_json(indent=2) == text
    assert EpisodeRecord.from_dict(result.records[1].to_dict()) == result.records[1]


def test_the_schema_file_ships_and_describes_the_result(result):
    schema = protocol.result_schema()
    assert schema["properties"]["schema_version"] == {"const": RESULT_SCHEMA_VERSION}
    assert set(schema["required"]) == set(result.to_dict())
    assert set(schema["$defs"]["record"]["required"]) == set(result.records[0].to_dict())
    assert set(schema["$defs"]["summary"]["required"]) == set(result.summary)


@pytest.mark.parametrize("version", [4, 0, "1", None])
def test_unknown_schema_versions_are_refused(result, version):
    data = result.to_dict()
    data["schema_version"] = version
    with pytest.raises(ResultSchemaError, match="schema_version") as err:
        EvaluationResult.from_dict(data)
    assert "reads schema_version 1" in str(err.value)


def _tampered(result: EvaluationResult, edit) -> dict:
    data = copy.deepcopy(result.to_dict())
    edit(data)
    return data


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.pop("format"), "not an r2s2r_envs evaluation result"),
        (lambda d: d.pop("records"), r"missing key\(s\) \['records'\]"),
        (lambda d: d.update(extra=1), r"result: unknown key\(s\) \['extra'\]; valid: \[.*'records'"),
        (lambda d: d["records"][1].update(steps="40"), r"result\.records\[1\]\.steps: expected integer"),
        (lambda d: d["records"][0].update(sort_accuracy=1.5), r"records\[0\]\.sort_accuracy: expected <= 1"),
        (lambda d: d["records"][0].update(is_success=1), r"records\[0\]\.is_success: expected boolean"),
        (lambda d: d["summary"].update(success_rate_ci95=[0.1]), "at least 2 items"),
        (lambda d: d["records"].reverse(), "episode order"),
        (lambda d: d["records"][2].update(env_seed=7), "seeding convention"),
        (lambda d: d.update(episodes=4), "episodes=4"),
        (lambda d: d["summary"].update(sort_accuracy=0.99), "does not match its records"),
        (lambda d: d["provenance"].update(domain="real", world_params={}), "physics"),
    ],
)
def test_invalid_results_are_refused_naming_the_field(result, edit, message):
    with pytest.raises(ResultSchemaError, match=message):
        EvaluationResult.from_dict(_tampered(result, edit))


def test_from_json_refuses_non_json():
    with pytest.raises(ResultSchemaError, match="must be JSON"):
        EvaluationResult.from_json("{not json")
    with pytest.raises(ResultSchemaError, match="not an r2s2r_envs evaluation result"):
        EvaluationResult.from_json("[1, 2]")
    with pytest.raises(ResultSchemaError, match="nested 100000 levels deep; at most 64"):
        EvaluationResult.from_json("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ResultSchemaError, match="NaN is not a JSON value"):
        EvaluationResult.from_json('{"wall_time_s": NaN}')


def test_an_images_only_condition_is_refused_for_a_state_policy_before_any_episode():
    from r2s2r_envs.envs.registration import EnvArgumentError

    class Counting(RandomPolicy):
        calls = 0

        def act(self, obs):
            Counting.calls += 1
            return super().act(obs)

    with pytest.raises(EnvArgumentError, match=r"cannot evaluate on .* condition 'lighting' .*has no images"):
        evaluate(SIM, Counting(), conditions=["nominal", "lighting"], env_kwargs=FAST, progress=False)
    assert Counting.calls == 0
