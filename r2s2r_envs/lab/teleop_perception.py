"""How the teleoperator watches the objects (``lab.teleop``): which ones the cell's estimator sees, each one's
category by the colour seen most often, and an alpha-beta track of each, corrected by the learned camera offset,
that rides on with the belt while the object is hidden."""

from __future__ import annotations

import numpy as np

from r2s2r_envs.lab.teleop_state import OperatorState
from r2s2r_envs.world import constants as C


class Perception(OperatorState):
    """The operator's view of the objects (the tracks it aims at and the target it may choose)."""

    @property
    def _tracks(self) -> tuple[np.ndarray, np.ndarray]:
        """The filtered positions and velocities of the objects (from the first ``act`` on)."""
        if self._est is None or self._vel is None:
            raise RuntimeError("the teleoperator has not watched the objects yet: it starts at the first act()")
        return self._est, self._vel

    # ------------------------------------------------------------------ watching the objects
    def _visibility(self, obs: dict[str, np.ndarray], meas: np.ndarray) -> np.ndarray:
        """Which objects the cell's estimator sees this step: its ``object_visible`` key where the env reports it;
        else an estimate that repeats the last one exactly is one the estimator holds (a seen object's noisy
        estimate never repeats)."""
        if "object_visible" in obs:
            seen = np.asarray(obs["object_visible"]) > 0.5
        elif self._last_meas is None:
            seen = np.ones(len(meas), dtype=bool)
        else:
            seen = np.any(meas != self._last_meas, axis=1)
        self._last_meas = meas.copy()
        return seen

    def _categories(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Each object's category: the colour most often seen on it so far this episode (an estimator that
        confuses a colour now and then does not fool a person watching the object)."""
        seen = obs["object_category"].reshape(-1, len(C.CATEGORIES)) * self._seen[:, None]
        self._category_votes = seen if self._category_votes is None else self._category_votes + seen
        return self._category_votes.argmax(axis=1)

    def _in_hand(self, i: int) -> bool:
        """Whether object ``i`` is the one the hand closes on or carries."""
        return i == self._target and self._phase in ("close", "adjust", "lift", "carry", "release")

    def _watch(self, meas: np.ndarray, tcp: np.ndarray) -> None:
        """Alpha-beta filter on the perceived positions (corrected by the learned camera offset).  An object the
        estimator does not see coasts on its track, or, once the hand closes on it, goes where the hand goes."""
        h = self.habits
        meas = meas.copy()
        meas[:, :2] -= self.calibration.perception_offset
        if self._est is None or self._vel is None:  # the first sighting (both start together)
            self._est, self._vel = meas, np.zeros_like(meas)
            return
        pred = self._est + self._vel * self.dt
        r = meas - pred
        jumped = np.abs(r).max(axis=1) > 0.05  # picked up or knocked: start that object's track again
        est = pred + h.filter_alpha * r
        vel = self._vel + (h.filter_beta / self.dt) * r
        est[jumped], vel[jumped] = meas[jumped], 0.0
        # A person expects a hidden object to ride on with the belt, at the pace seen on the objects it carries.
        riding = [k for k in range(len(est)) if self._seen[k] and self._on_belt(est[k]) and not self._in_hand(k)]
        if riding:
            pace = float(np.mean(vel[riding, 1]))
            self._belt_pace = pace if self._belt_pace is None else self._belt_pace + 0.05 * (pace - self._belt_pace)
        hidden = ~self._seen
        if hidden.any():
            previous, previous_vel = self._tracks
            for k in np.flatnonzero(hidden):
                if self._in_hand(int(k)):
                    est[k], vel[k] = tcp - (0.0, 0.0, self.habits.grasp_offset), 0.0
                    continue
                on_belt = self._on_belt(previous[k])
                belt = np.array([0.0, self._belt_pace or 0.0, 0.0]) if on_belt else previous_vel[k]
                start = previous[k]
                if on_belt and self._glimpses.get(int(k)):
                    # Just lost from sight: where it rides now, from the last glimpses carried on with the belt.
                    start = np.mean([p + belt * (self._t - 1 - t) * self.dt for t, p in self._glimpses[int(k)]], axis=0)
                    self._glimpses[int(k)] = []
                est[k], vel[k] = start + belt * self.dt, belt
        for k in np.flatnonzero(self._seen):
            glimpses = self._glimpses.setdefault(int(k), [])
            glimpses.append((self._t, meas[k].copy()))
            del glimpses[: -self.habits.glimpses]
        self._est, self._vel = est, vel

    def _on_belt(self, p: np.ndarray) -> bool:
        lay = self.layout
        return abs(p[0] - lay.belt_center_x) < lay.belt_half_width and lay.belt_top < p[2] < lay.belt_top + 0.08

    def _attemptable(self, i: int) -> bool:
        p = self._tracks[0][i]
        return i not in self._done and self._on_belt(p) and p[1] > self.habits.reach_limit_y
