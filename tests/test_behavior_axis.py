"""The measures of ``experiments/behavior_axis.py`` on data whose answer is known
(docs/ablation.md#measured)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
behavior_axis = pytest.importorskip("behavior_axis")


def _demos(n_demos: int, steps: int, rng: np.random.Generator, act) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    states = rng.uniform(-1, 1, size=(n_demos * steps, 3))
    return states, act(states), np.repeat(np.arange(n_demos), steps)


def test_knn_error_is_near_zero_for_a_function_of_the_state_and_near_one_for_noise():
    rng = np.random.default_rng(0)
    smooth = _demos(50, 40, rng, lambda s: np.stack([np.sin(2 * s[:, 0]), s[:, 1] * s[:, 2]], axis=1))
    fit, held = behavior_axis.split_held_out(smooth)
    assert behavior_axis.knn_error(*held, *fit) < 0.05

    noise = _demos(50, 40, rng, lambda s: rng.normal(size=(len(s), 2)))
    fit, held = behavior_axis.split_held_out(noise)
    assert 0.9 < behavior_axis.knn_error(*held, *fit) < 1.4  # k = 5 neighbours' mean: 1 + 1/5 in expectation


def test_knn_error_across_sets_tells_agreeing_from_opposite_demonstrators():
    rng = np.random.default_rng(1)
    act = lambda s: s[:, :2].copy()  # noqa: E731
    lab = _demos(20, 40, rng, act)
    same = _demos(100, 40, rng, act)
    opposite = _demos(100, 40, rng, lambda s: -s[:, :2])
    assert behavior_axis.knn_error(lab[0], lab[1], same[0], same[1]) < 0.05
    assert behavior_axis.knn_error(lab[0], lab[1], opposite[0], opposite[1]) > 3.0  # worse than the mean action


def test_split_holds_out_the_last_fifth_of_the_demos():
    states = np.zeros((100, 1))
    index = np.repeat(np.arange(10), 10)
    (fit_s, _), (held_s, _) = behavior_axis.split_held_out((states, states, index))
    assert len(held_s) == 20 and len(fit_s) == 80


def test_another_operators_goal_is_the_fully_grounded_success_less_ten_points():
    rows = {
        "generator in PickSort-FullyGrounded-v0": {"success": 0.64},
        "generator in PickSort-Real-v0": {"success": 0.9, "arrival_to_grasp": 3.3},
        "teleoperator in PickSort-Real-v0": {"success": 0.9, "arrival_to_grasp": 3.3},
    }
    (name, goal), *rest = behavior_axis.goals(rows, other_operator=True).items()
    assert not rest and ">= 65%" in name and goal == {"value": 0.64, "met": False}
    rows["generator in PickSort-FullyGrounded-v0"]["success"] = 0.66
    assert behavior_axis.goals(rows, other_operator=True)[name]["met"]
    assert len(behavior_axis.goals(rows)) == 3  # the default operator's goals, lab ones included


def test_the_generator_in_the_lab_with_another_model_never_resumes_anothers_file(tmp_path):
    # The lab row's file name and its recorded factory carry the model's hash: a run with another model into the
    # same --out makes another file (or is refused on resume), never measures the first model's episodes again.
    import pickle

    from r2s2r_envs.behavior.fit import DEFAULT_MODEL, load_model, save_model
    from r2s2r_envs.datasets.generate import demonstrator_record

    first = tmp_path / "first.json"
    model = load_model(DEFAULT_MODEL)
    save_model(model, first)
    other = {**model, "provenance": {**model["provenance"], "demos": {**model["provenance"]["demos"], "file": "x"}}}
    second = tmp_path / "second.json"
    save_model(other, second)
    a, b = behavior_axis.HumanlikeInLab(str(first)), behavior_axis.HumanlikeInLab(str(second))
    assert a.__name__ != b.__name__ and a.__name__.startswith("humanlike_in_lab-")
    assert demonstrator_record(a) != demonstrator_record(b)
    assert pickle.loads(pickle.dumps(a)).__name__ == a.__name__
