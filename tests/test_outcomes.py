"""Per-object outcomes, episode success and failure causes: the pure rules (envs.outcomes) on hand-made poses, and
the env applying them, by placing objects where each rule applies."""

from __future__ import annotations

import numpy as np
import pytest

from r2s2r_envs.envs import outcomes as rules
from r2s2r_envs.envs.controller import finger_command
from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.world import constants as C


@pytest.fixture
def env():
    e = PickSortEnv(num_objects=3)
    e.reset(seed=0)
    yield e
    e.close()


def _hold_action(env: PickSortEnv) -> np.ndarray:
    a = np.zeros(env.action_space.shape, dtype=np.float32)
    a[6:] = finger_command(env.scene, env.open_hand_qpos())
    return a


def _place(env: PickSortEnv, i: int, pos: tuple[float, float, float]) -> None:
    """Teleport object i to ``pos`` at rest (then the physics takes over)."""
    env.scene.set_object_pose(env.data, i, pos)


def _bin_drop_point(env: PickSortEnv, category: int) -> tuple[float, float, float]:
    center = env.scene.bin_center(env.data, category)
    return float(center[0]), float(center[1]), 0.06


def _categories(env: PickSortEnv) -> list[int]:
    return [C.CATEGORIES.index(c) for c in env.object_categories]


def _run(env: PickSortEnv, steps: int = 40):
    a = _hold_action(env)
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(a)
        if terminated or truncated:
            break
    return obs, reward, terminated, truncated, info


def test_all_objects_in_their_bins_is_success(env):
    sorted_events = 0.0
    for i in range(3):
        _place(env, i, _bin_drop_point(env, int(_categories(env)[i])))
    a = _hold_action(env)
    for _ in range(40):
        _, _, terminated, truncated, info = env.step(a)
        sorted_events += info["reward_sort"]
        if terminated or truncated:
            break
    assert terminated and not truncated
    assert info["object_outcomes"] == ["sorted"] * 3
    assert info["is_success"] is True
    assert info["failure_cause"] is None
    assert info["sort_accuracy"] == 1.0
    assert info["time_to_sort"] is not None and 0.0 < info["time_to_sort"] <= info["elapsed_time"]
    # The sort term is an event: weight * one per object, once.
    assert sorted_events == pytest.approx(3 * env.reward_weights.sort)


def test_wrong_bin_and_fell_off_belt(env):
    cats = [int(c) for c in _categories(env)]
    wrong = (cats[1] + 1) % len(C.CATEGORIES)
    _place(env, 0, _bin_drop_point(env, cats[0]))
    _place(env, 1, _bin_drop_point(env, wrong))
    _place(env, 2, (0.95, 0.0, 0.03))  # on the floor, beyond the belt, in no bin: never lifted
    _, _, terminated, _, info = _run(env)
    assert terminated
    assert info["object_outcomes"][0] == "sorted"
    assert info["object_outcomes"][1] == "wrong_bin"
    assert info["object_outcomes"][2] == "fell_off_belt"
    assert info["is_success"] is False
    assert info["failure_cause"] in ("wrong_bin", "fell_off_belt")
    assert info["sort_accuracy"] == pytest.approx(1 / 3)


def test_object_past_the_reach_limit_is_missed(env):
    z = float(env.scene.object_pos(env.data)[0, 2])
    _place(env, 0, (env.scene.belt_center_x, -0.5, z))
    _, _, _, _, info = _run(env, steps=2)
    assert info["object_outcomes"][0] == "missed"
    assert info["failure_cause"] == "missed"


def test_lifted_object_that_lands_outside_a_bin_is_dropped(env):
    _place(env, 0, (env.scene.belt_center_x, 0.2, 0.3))  # high above the belt: counts as lifted
    _run(env, steps=1)
    _place(env, 0, (0.95, 0.0, 0.03))
    _, _, _, _, info = _run(env, steps=2)
    assert info["object_outcomes"][0] == "dropped"


def test_stacked_objects_in_a_bin_count(env):
    """Two objects of one category dropped into their bin: the second lands on the first and still counts."""
    env2 = PickSortEnv(num_objects=2, randomization={"category_weights": (1.0, 0.0, 0.0)})
    env2.reset(seed=0)
    x, y, _ = _bin_drop_point(env2, 0)
    _place(env2, 0, (x, y, 0.04))
    _place(env2, 1, (x, y, 0.12))
    _, _, terminated, _, info = _run(env2)
    env2.close()
    assert terminated and info["object_outcomes"] == ["sorted", "sorted"]


# ---------------------------------------------------------------------- the pure rules, no simulation
GEOMETRY = rules.TaskGeometry(
    belt_top=0.1,
    bin_center=np.array([[0.25, -0.22, 0.07], [0.25, 0.0, 0.07], [0.25, 0.22, 0.07]]),
    bin_half_size=np.full((3, 3), [0.09, 0.09, 0.06]),
)
RULES = rules.OutcomeRules()


def _classify(pos, speed=0.0, bottom=None, lifted=False, category=0):
    pos = np.atleast_2d(np.asarray(pos, dtype=float))
    n = len(pos)
    bottom = pos[:, 2] - 0.025 if bottom is None else np.full(n, bottom)
    return rules.classify(pos, np.full(n, speed), bottom, np.full(n, lifted), np.full(n, category), GEOMETRY, RULES)


@pytest.mark.parametrize(
    "pos, speed, lifted, category, expected",
    [
        ((0.25, -0.22, 0.04), 0.0, True, 0, "sorted"),
        ((0.25, -0.22, 0.04), 0.0, True, 1, "wrong_bin"),
        ((0.25, -0.22, 0.04), 0.2, True, 0, None),  # still moving in the bin: may bounce out
        ((0.25, -0.22, 0.125), 0.0, True, 0, "sorted"),  # stacked on another object, below the region's top
        ((0.25, -0.22, 0.14), 0.0, True, 0, None),  # above the bin region: in the air
        ((0.95, 0.0, 0.03), 0.0, False, 0, "fell_off_belt"),
        ((0.95, 0.0, 0.03), 0.0, True, 0, "dropped"),
        ((0.55, -0.5, 0.125), 0.05, False, 0, "missed"),
        ((0.55, -0.5, 0.125), 0.05, True, 0, "dropped"),
        ((0.55, -0.5, 0.3), 0.05, True, 0, None),  # carried past the line high above the belt: still in hand
        ((0.55, 0.3, 0.125), 0.08, False, 0, None),  # riding the belt
    ],
)
def test_rules_on_hand_made_poses(pos, speed, lifted, category, expected):
    decided, _ = _classify(pos, speed=speed, lifted=lifted, category=category)
    assert decided == [expected]


def test_lifting_counts_at_once():
    # An object lifted above the belt and then past the line is "dropped" even if it was lifted this very step.
    decided, lifted = _classify((0.55, -0.5, 0.19), bottom=0.16)
    assert lifted[0] and decided == ["dropped"]


def test_bin_index_and_held():
    pos = np.array([[0.25, 0.0, 0.05], [0.25, 0.45, 0.05], [0.25, 0.22, 0.05]])
    np.testing.assert_array_equal(rules.bin_index(pos, GEOMETRY), [1, -1, 2])
    tcp = np.array([0.55, 0.0, 0.25])
    objects = np.array([[0.55, 0.0, 0.21], [0.55, 0.0, 0.125], [0.7, 0.0, 0.21]])
    held = rules.held(objects, objects[:, 2] - 0.025, tcp, GEOMETRY, RULES)
    np.testing.assert_array_equal(held, [True, False, False])


def test_first_failure_is_the_earliest():
    assert rules.first_failure(["sorted", "missed", "dropped"], [5, 9, 7]) == "dropped"
    assert rules.first_failure(["sorted", "pending"], [5, -1]) is None
    assert rules.first_failure(["timeout", "missed"], [9, 9]) == "timeout"  # ties: object order
