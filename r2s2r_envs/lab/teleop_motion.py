"""How the teleoperator moves (``lab.teleop``): minimum-jerk reaches timed by Fitts' law that intercept a moving
object with the lead the cell's lag needs, corrective sub-movements, a human grasp digit by digit, and the rig's
commands with lag-compensated feedback."""

from __future__ import annotations

import math

import mujoco
import numpy as np

from r2s2r_envs.envs import hand
from r2s2r_envs.envs.controller import finger_command_for_range
from r2s2r_envs.lab.teleop_perception import Perception

_DIGITS = ("if", "mf", "rf", "th")
# ---------------------------------------------------------------------- digits (nominal hand, envs.hand)
_THUMB_JOINTS = ("cmc", "axl", "mcp", "ipl")
_FINGER_JOINTS = ("rot", "mcp", "pip", "dip")
_DIGIT_JOINTS = {
    d: np.array([hand.JOINT_INDEX[f"{d}_{j}"] for j in (_THUMB_JOINTS if d == "th" else _FINGER_JOINTS)])
    for d in _DIGITS
}
# Extra flexion of the distal joints of each digit in a wrap grasp, rad.
_CURL = {"if": 0.15, "mf": 0.15, "rf": 0.15, "th": 0.0}
_CURL_JOINTS = {d: _DIGIT_JOINTS[d][3:] if d == "th" else _DIGIT_JOINTS[d][2:] for d in _DIGITS}


class Motion(Perception):
    """The operator's movements: reach, intercept, grasp, carry and release, and the rig's commands."""

    @property
    def _path(self) -> np.ndarray:
        """The intended TCP position (from the first ``act`` on)."""
        if self._x is None:
            raise RuntimeError("the teleoperator has not acted yet: its intended path starts at the first act()")
        return self._x

    # ------------------------------------------------------------------ movements
    def _begin(self, phase: str, distance: float = 0.0) -> None:
        self._phase, self._timer = phase, 0.0
        if phase == "lift":
            self._duration = self._movement_time(abs(distance), self.habits.carry_peak_speed)

    def _reaction(self) -> float:
        """A reaction time, s: log-normal around the style's mean (humans are right-skewed)."""
        s = self.style
        spread = 0.25 * s.variability
        z = self._rng.standard_normal() if spread > 0 else 0.0
        return s.reaction_time * self._alertness * float(np.exp(spread * z - 0.5 * spread**2))

    def _movement_time(self, distance: float, peak_speed: float) -> float:
        """Duration of a movement over ``distance`` m: Fitts' law, no faster than the peak speed allows, s."""
        h = self.habits
        fitts = h.fitts_a + h.fitts_b * math.log2(max(2.0 * distance / h.target_width, 1.0))
        minimum_jerk = 1.875 * distance / (peak_speed * self.style.speed)
        return max(fitts / self.style.speed, minimum_jerk) * self._tempo

    def _approach_offset(self, grasp_dz: float) -> np.ndarray:
        """Where a reach ends relative to the object: above it, or above the belt upstream of it."""
        h = self.habits
        if self.style.approach == "follow":
            return np.array([0.0, h.follow_behind, h.hover_height])
        return np.array([0.0, 0.0, h.hover_height])

    def _start_reach(self, tcp: np.ndarray, p: np.ndarray, v: np.ndarray, grasp_dz: float) -> None:
        h, s = self.habits, self.style
        rel = self._approach_offset(grasp_dz)
        distance = float(np.linalg.norm(p + rel - tcp))
        self._duration = self._movement_time(distance, h.peak_speed)
        self._rel = rel
        # Aim error of a fast reach: undershoot along the movement and scatter, growing with the distance.
        direction = (p + rel - tcp) / max(distance, 1e-6)
        if s.variability > 0.0:
            error = -0.04 * s.variability * distance * direction * self._rng.uniform(0.3, 1.0)
            error[:2] += 0.012 * s.variability * self._rng.standard_normal(2)
        else:
            error = -0.03 * distance * direction
        self._aim_error = error
        self._begin("reach")

    def _intercept(
        self, tcp: np.ndarray, p: np.ndarray, v: np.ndarray, lead: float, grasp_dz: float
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Goal, goal velocity and time left of the movement that brings the hand to the object."""
        h, s = self.habits, self.style
        phase = self._phase
        tau = max(self._duration - self._timer, 0.0)
        # Where the object will be when the hand gets there, plus the lead the cell's lag needs.
        goal = p + v * (tau + lead) + self._rel
        if phase == "reach":
            goal = goal + self._aim_error
        if tau > 0.0:
            return goal, v, tau
        # The movement is over: look where the hand is (once the lag has passed) and decide what comes next.
        if self._timer < self.calibration.lag_steps * self.dt:
            return goal, v, 0.0
        aim = p + v * lead + self._rel
        error = p + self._rel - tcp  # the hand trails the intended path by the lag, so it should be on the object
        if phase == "reach":
            self._corrections = 0
        off_aim = np.hypot(error[0], error[1]) > h.correction_tolerance
        if phase in ("reach", "correct", "hesitate") and off_aim and self._corrections < h.max_corrections:
            self._corrections += 1
            self._duration = 0.25 / s.speed * self._tempo
            self._begin("correct")
            return aim, v, self._duration
        if phase in ("reach", "correct") and self._rng.random() < h.hesitation_probability * s.variability:
            self._duration = self._rng.uniform(0.15, 0.4)
            self._begin("hesitate")
            return aim, v, self._duration
        if phase in ("reach", "correct", "hesitate"):
            if s.approach == "follow" and self._rel[1] > 0.0:  # close in along the belt, coming down behind it
                self._rel = np.array([0.0, 0.0, grasp_dz + h.follow_height])
                self._duration = h.follow_time / s.speed * self._tempo
                self._begin("approach")
            else:
                self._rel = np.array([0.0, 0.0, grasp_dz])
                self._duration = h.descend_time / s.speed * self._tempo
                self._begin("descend")
            return p + v * (self._duration + lead) + self._rel, v, self._duration
        if phase == "approach":
            self._rel = np.array([0.0, 0.0, grasp_dz])
            self._duration = 0.6 * h.descend_time / s.speed * self._tempo
            self._begin("descend")
            return p + v * (self._duration + lead) + self._rel, v, self._duration
        # descend finished: close the hand, riding along with the belt
        off = np.hypot(error[0], error[1]) > h.descend_tolerance or abs(error[2]) > h.descend_tolerance
        if off and self._timer < self._duration + 0.4:  # not there yet: keep tracking a moment longer
            return aim, v, 0.0
        self._anchor, self._anchor_v = self._path.copy(), v.copy()
        self._begin("close")
        self._schedule_closing(0.0)
        self._regrasp_pending = bool(self._rng.random() < h.regrasp_probability * s.variability)
        return self._anchor, v, 0.0

    def _advance(self, goal: np.ndarray, goal_v: np.ndarray, tau: float) -> None:
        """One control step along the minimum-jerk (quintic) path from the current intended state to ``goal``,
        arriving with velocity ``goal_v`` and zero acceleration after ``tau`` s (re-planned every step)."""
        dt = self.dt
        x0, v0, a0 = self._path, self._v, self._a
        if tau <= dt:
            x, v, a = goal + goal_v * dt if tau <= 0.0 else goal, goal_v.copy(), np.zeros(3)
            if tau <= 0.0:
                x = x0 + goal_v * dt + 0.5 * (goal - x0)  # hold on the (moving) goal
        else:
            d = goal - x0
            t2, t3 = tau * tau, tau * tau * tau
            c3 = (20.0 * d - (8.0 * goal_v + 12.0 * v0) * tau - 3.0 * a0 * t2) / (2.0 * t3)
            c4 = (-30.0 * d + (14.0 * goal_v + 16.0 * v0) * tau + 3.0 * a0 * t2) / (2.0 * t3 * tau)
            c5 = (12.0 * d - 6.0 * (goal_v + v0) * tau - a0 * t2) / (2.0 * t3 * t2)
            s = dt
            x = x0 + s * (v0 + s * (0.5 * a0 + s * (c3 + s * (c4 + s * c5))))
            v = v0 + s * (a0 + s * (3.0 * c3 + s * (4.0 * c4 + s * 5.0 * c5)))
            a = a0 + s * (6.0 * c3 + s * (12.0 * c4 + s * 20.0 * c5))
        self._history.append(x0)
        if len(self._history) > 8:
            del self._history[0]
        self._x, self._v, self._a = x, v, a

    # ------------------------------------------------------------------ grasp
    def _schedule_closing(self, start: float) -> None:
        """Onset of each digit's squeeze (index, middle, ring, thumb), s after the digits reach the object."""
        h, s = self.habits, self.style
        if s.grasp == "wrap":
            jitter = 1.0 + 0.2 * s.variability * self._rng.uniform(-1.0, 1.0, 4)
            onsets = start + h.stagger * np.array([0.0, 1.0, 2.0, 1.5]) * jitter
        else:
            onsets = np.full(4, start)
        self._onsets = onsets
        self._close_end = float(onsets.max() + h.close_time)

    def _closing(self, cat: str, t: float) -> np.ndarray:
        """Finger command while closing: each digit from open to touching (first half) to squeezing (second)."""
        open_q, touch_q, closed_q = self._postures[cat]
        h = self.habits
        half = 0.5 * h.close_time
        # Every digit reaches the object together (a digit arriving alone would shove it out of the hand) ...
        q = open_q + (touch_q - open_q) * min(t / half, 1.0)
        if t <= half:
            return self._finger_command(q)
        # ... then the digits squeeze in turn (a wrap) or together (a pinch), the fingers curling in a wrap.
        for k, digit in enumerate(_DIGITS):
            squeeze = min(max((t - half - self._onsets[k]) / half, 0.0), 1.0)
            if squeeze > 0.0:
                idx = _DIGIT_JOINTS[digit]
                q[idx] += (closed_q[idx] - touch_q[idx]) * squeeze
                if self.style.grasp == "wrap":
                    q[_CURL_JOINTS[digit]] += _CURL[digit] * squeeze
        return self._finger_command(q)

    def _holding(self, tcp: np.ndarray, meas: np.ndarray, i: int) -> bool:
        """Whether the hand still has object ``i``: the object is seen near it, or the hand hides it."""
        return not self._seen[i] or float(np.linalg.norm(meas[i] - tcp)) < self.habits.lost_distance

    def _fail_grasp(self, i: int) -> None:
        """The object did not come up with the hand: open, and try again while it is within reach."""
        self._attempts[i] = self._attempts.get(i, 0) + 1
        self._fingers = self._open
        if self._attempts[i] > self.habits.max_regrasps:
            self._done.add(i)
            self._target = None
            self._begin("idle")
            return
        self._begin("react")
        self._delay = 0.5 * self._reaction()

    def _begin_carry(self, cat: str) -> None:
        goal = self._release_point(cat)
        self._grasps += 1
        self._carried_unseen = not self._seen[self._target] if self._target is not None else False
        self._begin("carry")
        self._duration = self._movement_time(float(np.linalg.norm(goal - self._x)), self.habits.carry_peak_speed)

    def _release_point(self, cat: str) -> np.ndarray:
        h = self.habits
        c = self.layout.bin_centers[cat]
        return np.array([c[0], c[1], h.drop_height if self.style.release == "drop" else c[2] + h.place_height])

    def _ready_point(self) -> np.ndarray:
        return np.array([self.layout.belt_center_x - 0.05, 0.15, self.layout.belt_top + 0.2])

    def _finger_command(self, q: np.ndarray) -> np.ndarray:
        """Finger commands for joint angles ``q`` on the rig's nominal joint limits, as the rig sends them."""
        return finger_command_for_range(self.layout.hand_joint_range, q).astype(np.float32)

    # ------------------------------------------------------------------ the rig
    def _command(self, tcp: np.ndarray, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Action: the intended displacement plus a correction of the hand's error against where it was meant to
        be ``lag_steps`` ago (what the operator sees now)."""
        ctl, h = self.control, self.habits
        hist = self._history
        lag = self.calibration.lag_steps
        seen = hist[-lag] if 0 < lag <= len(hist) else self._x
        step = (self._x - hist[-1]) + h.feedback_gain * (seen - tcp)
        action = np.empty(6 + hand.N_FINGER, dtype=np.float32)
        action[:3] = np.clip(step / ctl.max_linear_step, -1.0, 1.0)
        cur = obs["eef_quat"].astype(float)
        yaw = hand.hand_yaw(cur) if self._yaw is None else self._yaw
        local, mat = np.empty(3), np.empty(9)
        mujoco.mju_subQuat(local, hand.down_quat(yaw), cur)
        mujoco.mju_quat2Mat(mat, cur)
        action[3:6] = np.clip(h.rotation_gain * (mat.reshape(3, 3) @ local) / ctl.max_angular_step, -1.0, 1.0)
        action[6:] = self._fingers
        return action
