"""Per-object outcomes, episode success and failure causes, by placing objects where each rule applies."""

from __future__ import annotations

import numpy as np
import pytest

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
    lo, hi = env._hand_range[:, 0], env._hand_range[:, 1]
    a[6:] = 2.0 * (env.open_hand_qpos() - lo) / (hi - lo) - 1.0
    return a


def _place(env: PickSortEnv, i: int, pos: tuple[float, float, float]) -> None:
    """Teleport object i to ``pos`` at rest (then the physics takes over)."""
    qadr, dadr = env._obj_qadr[i], env._obj_dadr[i]
    env.data.qpos[qadr : qadr + 3] = pos
    env.data.qpos[qadr + 3 : qadr + 7] = (1.0, 0.0, 0.0, 0.0)
    env.data.qvel[dadr : dadr + 6] = 0.0


def _bin_drop_point(env: PickSortEnv, category: int) -> tuple[float, float, float]:
    center = env.data.site_xpos[env._bin_sites[category]]
    return float(center[0]), float(center[1]), 0.06


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
        _place(env, i, _bin_drop_point(env, int(env._categories[i])))
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
    cats = [int(c) for c in env._categories]
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
    adr = env._obj_qadr[0]
    z = float(env.data.qpos[adr + 2])
    _place(env, 0, (env._belt_center_x, -0.5, z))
    _, _, _, _, info = _run(env, steps=2)
    assert info["object_outcomes"][0] == "missed"
    assert info["failure_cause"] == "missed"


def test_lifted_object_that_lands_outside_a_bin_is_dropped(env):
    _place(env, 0, (env._belt_center_x, 0.2, 0.3))  # high above the belt: counts as lifted
    _run(env, steps=1)
    assert env._lifted[0]
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
