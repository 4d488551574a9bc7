"""How a PickSort step is scored: each object's outcome, the step's reward terms and its ``info``.

:class:`ScoringMixin` is the judging half of :class:`~r2s2r_envs.envs.pick_sort.PickSortEnv`: the outcome rules
(``envs.outcomes``, made at reset on the episode's geometry) applied to every object each step, the first failure,
the shaped and sparse reward terms (``envs.config.RewardWeights``) and the ``info`` every step returns.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from r2s2r_envs.envs import outcomes as rules_mod
from r2s2r_envs.envs.config import RewardWeights
from r2s2r_envs.envs.outcomes import OutcomeRules, TaskGeometry
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.payloads import StepInfo


class ScoringMixin:
    """The outcomes, rewards and ``info`` of a :class:`~r2s2r_envs.envs.pick_sort.PickSortEnv` (its only user)."""

    # What the env provides: its settings (``__init__``), the view of the simulation state (``_bind_data``) and the
    # episode's geometry, judge and bookkeeping (``reset``, ``_finish_step``).
    num_objects: int
    dt: float
    rules: OutcomeRules
    reward_weights: RewardWeights
    scene: SceneView
    _qpos: np.ndarray
    _qvel: np.ndarray
    _tcp_xpos: np.ndarray
    _geom: TaskGeometry
    _judge: rules_mod.Judge
    _categories: list[int]
    _half_heights: list[float]
    _parked: frozenset[int]
    _outcomes: list[str]
    _outcome_steps: list[int]
    _lifted: list[bool]
    _failure_cause: str | None
    _steps: int
    _sort_step: int | None
    _unstable: bool

    def _update_outcomes_and_rewards(self) -> dict[str, float]:
        """Apply the outcome rules to every object; the step's weighted reward terms by their ``info`` key."""
        s, judge = self.scene, self._judge  # made at reset, on the episode's geometry
        if judge.rules is not self.rules:  # ``rules`` replaced since: they apply from this step on
            judge = self._judge = rules_mod.Judge(self._geom, self.rules)
        # Plain floats and one pass over the objects: a handful of objects per step, where numpy's per-call overhead
        # (and building per-object lists for each rule) would dominate.
        pos = self._qpos[s.object_pos_idx].reshape(-1, 3).tolist()
        vel = self._qvel[s.object_linvel_idx].reshape(-1, 3).tolist()
        tcp = self._tcp_xpos.tolist()
        outcomes, lifted, parked = self._outcomes, self._lifted, self._parked
        newly_sorted = newly_failed = 0
        # Shaping candidates among the objects still pending (parked slots never take part): the first one held,
        # and the one furthest downstream (least y, the first of equals).
        held = downstream = -1
        for i, ((x, y, z), (vx, vy, vz), half_height, category) in enumerate(
            zip(pos, vel, self._half_heights, self._categories)
        ):
            bottom = z - half_height
            speed = math.sqrt(vx * vx + vy * vy + vz * vz)
            outcome, lifted[i] = judge.outcome(x, y, z, speed, bottom, lifted[i], category)
            if outcomes[i] != "pending" or i in parked:
                continue
            if outcome is not None:
                self._set_outcome(i, outcome)
                if outcome == "sorted":
                    newly_sorted += 1
                else:
                    newly_failed += 1
                continue
            if held < 0 and judge.is_held(x, y, z, bottom, tcp):
                held = i
            if downstream < 0 or y < pos[downstream][1]:
                downstream = i
        if self._sort_step is None and outcomes.count("sorted") == self.num_objects:
            self._sort_step = self._steps

        # Shaping: progress on the object being worked on, the held one, else the next one downstream.
        raw_reach = raw_grasp = raw_transport = 0.0
        if held >= 0:
            raw_reach = raw_grasp = 1.0
            bx, by = self._geom.bin_center[self._categories[held], :2].tolist()
            raw_transport = 1.0 - math.tanh(5.0 * math.hypot(pos[held][0] - bx, pos[held][1] - by))
        elif downstream >= 0:
            raw_reach = 1.0 - math.tanh(10.0 * math.dist(pos[downstream], tcp))
        w = self.reward_weights
        return {
            "reward_reach": w.reach * raw_reach,
            "reward_grasp": w.grasp * raw_grasp,
            "reward_transport": w.transport * raw_transport,
            "reward_sort": w.sort * newly_sorted,
            "reward_failure": w.failure * newly_failed,
        }

    def _set_outcome(self, i: int, outcome: str) -> None:
        self._outcomes[i] = outcome
        self._outcome_steps[i] = self._steps
        self._failure_cause = rules_mod.first_failure(self._outcomes, self._outcome_steps)

    def _info(self, terms: dict[str, float]) -> dict[str, Any]:
        """The step's ``info`` (a ``payloads.StepInfo``, typed as Gymnasium's ``dict[str, Any]``); ``terms``: the
        weighted reward terms by their ``info`` key (``reward_<term>``)."""
        n_sorted = self._outcomes.count("sorted")
        info = StepInfo(
            is_success=n_sorted == self.num_objects,
            object_outcomes=list(self._outcomes),
            failure_cause=self._failure_cause,
            time_to_sort=None if self._sort_step is None else self._sort_step * self.dt,
            sort_accuracy=n_sorted / self.num_objects,
            unstable=self._unstable,
            elapsed_time=self._steps * self.dt,
            reward_reach=terms["reward_reach"],
            reward_grasp=terms["reward_grasp"],
            reward_transport=terms["reward_transport"],
            reward_sort=terms["reward_sort"],
            reward_failure=terms["reward_failure"],
        )
        return cast(dict[str, Any], info)
