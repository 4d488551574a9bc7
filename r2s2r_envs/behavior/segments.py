"""Reading demonstrations as a sequence of grasps: the events and segments both the metrics and the fit use.

A demonstration file holds, per step, the commands sent (``actions``) and the observations (``eef_pos``,
``object_pos``, ...), as a real cell records them. This module finds in them, for every grasp of an object on
the belt (docs/behavior.md#segmentation):

* ``arrival``: the object's perceived position crosses y = ``ARRIVAL_Y`` (0.3 m: it enters the workspace),
* ``rest_start`` / ``reach_start``: the hand's last pause before closing (TCP speed below ``REST_SPEED``, 0.03 m/s,
  for at least 0.25 s); a hand that never pauses starts its reach where its previous grasp ended,
* ``close``: per digit, the start of the uninterrupted rise of its mean flexion command that ends in the grasp; the
  grasp's onset is the earliest digit's,
* ``lift``: the TCP's lowest point between the closure onset and the object's rise (``LIFT_HEIGHT``, 3 cm above
  where it rode),
* ``release``: the fingers open again after the lift (mean flexion command back below half-way),
* which object it was, its category and whether it ended up sorted.

Only what a real cell records is used: commands and sensor readings (no simulator state), so the same code reads
lab and simulated datasets alike.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.signal import butter, filtfilt, savgol_filter

from r2s2r_envs.datasets import open_dataset
from r2s2r_envs.envs.config import ControlConfig
from r2s2r_envs.envs.hand import JOINT_INDEX
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import scene_layout

if TYPE_CHECKING:
    from r2s2r_envs.datasets.reader import VerifyMode

#: Control period of the demonstrations, s (PickSort's 20 Hz command rate).
DT = 1.0 / ControlConfig().control_hz
#: Belt coordinate (y, m) at which an object counts as arrived in the workspace (docs/behavior.md#segmentation).
ARRIVAL_Y = 0.3
#: TCP speed below which the hand counts as resting, m/s.
REST_SPEED = 0.03
#: Shortest pause of the hand that counts as a rest before a reach, control steps (0.25 s).
MIN_REST = 5
#: Height an object must rise above where it rode the belt to count as lifted, m.
LIFT_HEIGHT = 0.03
#: How far before an object's rise the fingers' closure onset is looked for, control steps (1.5 s).
CLOSURE_WINDOW = 30
#: Smallest change of a digit's mean flexion command, in [-1, 1] units, that counts as closing.
MIN_CLOSURE = 0.05
#: Observation keys the segmentation reads.
OBS_KEYS = ("eef_pos", "eef_quat", "object_pos", "object_quat", "object_category")
#: The estimator's visibility key, read where a dataset has it (``fill_hidden``).
VISIBILITY_KEY = "object_visible"
#: How near the hand (m) an unseen object must be when the fingers close to count as the one they close on.
HELD_DISTANCE = 0.1
#: Visible steps before an object is lost from sight whose motion it is taken to ride on with, control steps (1 s:
#: a camera's noise averages out over a line fitted to them, a belt's pace does not change within it).
GLIMPSES = 20
#: Finger flexion joints of each digit (the rotation/abduction joints are left out), in ``HAND_JOINTS`` order.
DIGITS = ("if", "mf", "rf", "th")
_FLEXION = {
    "if": ("mcp", "pip", "dip"),
    "mf": ("mcp", "pip", "dip"),
    "rf": ("mcp", "pip", "dip"),
    "th": ("mcp", "ipl"),
}
DIGIT_JOINTS: dict[str, list[int]] = {d: [JOINT_INDEX[f"{d}_{j}"] for j in _FLEXION[d]] for d in DIGITS}
#: Index of the first finger command in a task-space action.
FINGER_ACTION_START = 6


class BehaviorDataError(ValueError):
    """A demonstration file cannot be used for behavior comparison or fitting; the message says why."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Grasp:
    """One grasp of one object, as step indices into its demonstration (see the module docstring).

    Attributes:
        obj: object slot index.
        category: object category name.
        sorted: whether the object ended up in its bin.
        digit_onsets: step at which each digit that moves starts to close (``close`` is the earliest).
        arrival, rest_start, reach_start, close, lift, release: step indices (``release`` is ``None`` if the
            fingers never opened again; ``arrival`` may be 0 for an object already in the workspace).
        retreat_end: step at which the hand's motion after the release ends (the next grasp's rest start, or the
            episode's end).
    """

    obj: int
    category: str
    sorted: bool
    arrival: int
    rest_start: int
    reach_start: int
    close: int
    digit_onsets: dict[str, int]
    lift: int
    release: int | None
    retreat_end: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoTrace:
    """The signals of one demonstration the behavior code reads, plus its grasps.

    Attributes:
        demo_id: the demo's id in its file.
        success: the episode's outcome.
        eef: (T, 3) TCP position, m; ``eef_quat`` (T, 4).
        eef_smooth: (T, 3) TCP position smoothed (Savitzky-Golay, 7 steps), m; ``eef_vel`` its derivative, m/s.
        eef_lowpass: (T, 3) TCP position through ``lowpass`` (3 Hz), m: where the hand was, the sensor's noise
            removed (the generator's waypoints and the jerk trait read it).
        objects: (T, N, 3) perceived object centres smoothed (Savitzky-Golay, 9 steps), m; ``object_quat``
            (T, N, 4).
        categories: category name per object slot.
        fingers: (T, 16) finger commands in [-1, 1] (the commands sent, not the measured joints).
        closure: (T, 4) mean flexion command per digit (order ``DIGITS``).
        grasps: grasps in time order.
    """

    demo_id: int
    success: bool
    eef: np.ndarray
    eef_quat: np.ndarray
    eef_smooth: np.ndarray
    eef_vel: np.ndarray
    eef_lowpass: np.ndarray
    objects: np.ndarray
    object_quat: np.ndarray
    categories: tuple[str, ...]
    fingers: np.ndarray
    closure: np.ndarray
    grasps: tuple[Grasp, ...]

    @property
    def speed(self) -> np.ndarray:
        """(T,) TCP speed, m/s."""
        return np.linalg.norm(self.eef_vel, axis=1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoSet:
    """Demonstrations read from one file with what identifies it.

    Attributes:
        path: the file.
        env_id, domain: the env that made it and ``"real"`` or ``"sim"``.
        content_hash: the file's content hash.
        world: the provenance's world record (for a lab: its name and config hash only).
        traces: one ``DemoTrace`` per demo.
    """

    path: Path
    env_id: str
    domain: str
    content_hash: str
    world: dict[str, Any]
    traces: tuple[DemoTrace, ...]

    @property
    def grasps(self) -> list[tuple[DemoTrace, Grasp]]:
        """Every grasp of every demo, with its demo."""
        return [(t, g) for t in self.traces for g in t.grasps]


def load_demos(path: str | Path, *, verify: VerifyMode = "quick") -> DemoSet:
    """Reads a PickSort demonstration file and segments every demo into grasps.

    Args:
        path: a dataset written by ``r2s2r generate`` (state observations, task-space actions).
        verify: the reader's verification mode (``"quick"`` checks every hash but the arrays'; a damaged array
            still fails its HDF5 checksum when read).

    Raises:
        FileNotFoundError, r2s2r_envs.datasets.DatasetError: the file is missing, not a dataset, damaged or empty.
        BehaviorDataError: a dataset of another task, without the state observations, or with joint-space actions.
    """
    path = Path(path)
    with open_dataset(path, verify=verify) as f:
        env_id = f.env_id
        if not env_id.startswith("PickSort-"):
            raise BehaviorDataError(
                f"{path} holds demonstrations of {env_id!r}, another task; behavior fitting and comparison read "
                "PickSort datasets (PickSort-* ids)"
            )
        missing = [k for k in OBS_KEYS if k not in f.obs_keys]
        if missing:
            raise BehaviorDataError(
                f"{path} lacks the observation key(s) {missing}; behavior code needs {list(OBS_KEYS)} (generate with "
                "--obs-mode state or state+rgb and without --obs-keys)"
            )
        if f.action_dim != FINGER_ACTION_START + len(C.HAND_JOINTS):
            raise BehaviorDataError(
                f"{path} has {f.action_dim}-dimensional actions; behavior code reads task-space demonstrations "
                f"({FINGER_ACTION_START + len(C.HAND_JOINTS)} dims, control_mode='task')"
            )
        traces = []
        for demo_id in f.demo_ids:
            obs = {k: f.read(demo_id, f"obs/{k}") for k in OBS_KEYS}
            if VISIBILITY_KEY in f.obs_keys:  # an estimator's data: where it saw each object
                obs[VISIBILITY_KEY] = f.read(demo_id, f"obs/{VISIBILITY_KEY}")
            attrs = f.demo_attrs(demo_id)
            traces.append(trace_from_arrays(demo_id, obs, f.read(demo_id, "actions"), attrs))
        world = f.provenance.get("world", {})
        return DemoSet(
            path=path,
            env_id=env_id,
            domain=f.domain,
            content_hash=f.content_hash,
            world=world if isinstance(world, dict) else {},
            traces=tuple(traces),
        )


def trace_from_arrays(
    demo_id: int, obs: dict[str, np.ndarray], actions: np.ndarray, attrs: dict[str, Any]
) -> DemoTrace:
    """Builds a ``DemoTrace`` from one demo's arrays (``obs`` with the ``OBS_KEYS``, ``actions`` (T, 22))."""
    eef = np.asarray(obs["eef_pos"], dtype=float)
    n_steps = len(actions)
    eef = eef[:n_steps]
    objects = np.asarray(obs["object_pos"], dtype=float)[:n_steps].reshape(n_steps, -1, 3)
    n_obj = objects.shape[1]
    one_hot = np.asarray(obs["object_category"], dtype=float)[0].reshape(n_obj, len(C.CATEGORIES))
    categories = tuple(C.CATEGORIES[int(k)] for k in one_hot.argmax(axis=1))
    fingers = np.asarray(actions, dtype=float)[:, FINGER_ACTION_START:]
    closure = np.stack([fingers[:, DIGIT_JOINTS[d]].mean(axis=1) for d in DIGITS], axis=1)
    if VISIBILITY_KEY in obs:
        visible = np.asarray(obs[VISIBILITY_KEY], dtype=float)[:n_steps].reshape(n_steps, n_obj) > 0.5
        objects = fill_hidden(objects, visible, eef, closure.mean(axis=1))
    window = min(7, n_steps - (1 - n_steps % 2))
    if window >= 5:
        # Perceived object positions are noisy (a camera's): smoothed like the TCP before anything is relative to them.
        objects = savgol_filter(objects, min(9, window + 2 if window + 2 <= n_steps else window), 2, axis=0)
        eef_smooth = savgol_filter(eef, window, 2, axis=0)
        eef_vel = savgol_filter(eef, window, 2, deriv=1, delta=DT, axis=0)
    else:
        eef_smooth = eef.copy()
        eef_vel = np.gradient(eef, DT, axis=0) if n_steps > 1 else np.zeros_like(eef)
    outcomes = list(attrs.get("object_outcomes") or [])
    trace = DemoTrace(
        demo_id=int(demo_id),
        success=bool(attrs.get("success", False)),
        eef=eef,
        eef_quat=np.asarray(obs["eef_quat"], dtype=float)[:n_steps],
        eef_smooth=eef_smooth,
        eef_lowpass=lowpass(eef),
        eef_vel=eef_vel,
        objects=objects,
        object_quat=np.asarray(obs["object_quat"], dtype=float)[:n_steps].reshape(n_steps, n_obj, 4),
        categories=categories,
        fingers=fingers,
        closure=closure,
        grasps=(),
    )
    grasps = find_grasps(trace, outcomes)
    return dataclasses.replace(trace, grasps=tuple(grasps))


def fill_hidden(objects: np.ndarray, visible: np.ndarray, eef: np.ndarray, closure: np.ndarray) -> np.ndarray:
    """Object positions where the estimator held its last estimate of an unseen object (``visible`` false), as a
    person watching would place them: riding on along the belt's plane at the pace of a line fitted to its last
    ``GLIMPSES`` visible steps (its height kept at their mean: an object on a belt does not sink or rise), until
    the fingers close on it (the mean flexion command past half its range, the object within ``HELD_DISTANCE`` of
    the hand), then carried with the hand at the offset it had there.  A camera loses what the hand holds, so
    without this no lift would be seen.  Visible steps, and objects never seen, are left as they are.

    Args:
        objects: (T, N, 3) perceived positions; visible: (T, N) bool; eef: (T, 3); closure: (T,) mean flexion.
    """
    filled = objects.copy()
    low, high = float(closure.min()), float(closure.max())
    closed = closure > low + 0.5 * (high - low) if high - low > MIN_CLOSURE else np.zeros(len(closure), dtype=bool)
    for i in range(objects.shape[1]):
        t = 1
        while t < len(objects):
            if visible[t, i] or not visible[t - 1, i]:
                t += 1
                continue
            start, carry = t - 1, None
            origin, pace = _ride(objects[:, i], visible[:, i], start)
            while t < len(objects) and not visible[t, i]:
                if carry is None:
                    filled[t, i] = origin + pace * DT * (t - start)
                    if closed[t] and np.linalg.norm(filled[t, i] - eef[t]) < HELD_DISTANCE:
                        carry = filled[t, i] - eef[t]
                else:
                    filled[t, i] = eef[t] + carry
                t += 1
    return filled


def _ride(track: np.ndarray, visible: np.ndarray, last: int) -> tuple[np.ndarray, np.ndarray]:
    """Where an object last seen at step ``last`` was then and its velocity, from a least-squares line through its
    last ``GLIMPSES`` visible positions (``track`` (T, 3)); the vertical velocity is zero."""
    first = max(0, last - GLIMPSES + 1)
    seen = np.flatnonzero(visible[first : last + 1]) + first
    points = track[seen]
    origin = points.mean(axis=0)
    pace = np.zeros(3)
    if len(seen) > 1 and seen[-1] > seen[0]:
        t = (seen - seen.mean()) * DT
        slope = (t[:, None] * (points[:, :2] - points[:, :2].mean(axis=0))).sum(axis=0) / (t**2).sum()
        pace[:2] = slope
        origin[:2] = origin[:2] + slope * (last - seen.mean()) * DT
    return origin, pace


def find_grasps(trace: DemoTrace, outcomes: list[str]) -> list[Grasp]:
    """The grasps of one demonstration, in time order (see the module docstring)."""
    layout = scene_layout()
    objects, n_steps = trace.objects, len(trace.fingers)
    overall = trace.closure.mean(axis=1)
    lifts: list[tuple[int, int]] = []
    for i in range(objects.shape[1]):
        z0 = objects[0, i, 2]
        on_belt = objects[:, i, 2] < layout.belt_top + 0.08
        up = (objects[:, i, 2] > z0 + LIFT_HEIGHT) & (np.linalg.norm(objects[:, i] - trace.eef, axis=1) < 0.12)
        # A lift starts where the object rises from belt level near the hand; re-grasps give several.
        t = 1
        while t < n_steps:
            if up[t] and on_belt[t - 1] and not up[t - 1]:
                lifts.append((t, i))
                while t < n_steps and up[t]:
                    t += 1
            t += 1
    lifts.sort()
    grasps: list[Grasp] = []
    prev_end = 0
    for t_lift, i in lifts:
        if t_lift <= prev_end:
            continue
        onsets = digit_onsets(trace.closure, max(prev_end, t_lift - CLOSURE_WINDOW), t_lift)
        if not onsets:
            continue
        close = min(onsets.values())
        closed = float(overall[t_lift : min(n_steps, t_lift + 5)].max())
        open_level = float(overall[close])
        span = closed - open_level
        # Lift start: the TCP's lowest point between the closure onset and the object's rise.
        z = trace.eef_smooth[close : t_lift + 1, 2]
        lift = close + int(np.argmin(z)) if len(z) else t_lift
        lift = max(lift, close + 1)
        opened: np.ndarray | list[int] = (
            np.flatnonzero(overall[t_lift:] < open_level + 0.5 * span) if span > 1e-3 else []
        )
        release = t_lift + int(opened[0]) if len(opened) else None
        # Reach start: the end of the hand's last pause (at least MIN_REST steps slow) before the closure onset;
        # the slow last steps of the reach itself are not a pause.
        slow = np.linalg.norm(trace.eef_vel[prev_end : max(prev_end, close - 3)], axis=1) < REST_SPEED
        reach_start = rest_start = prev_end
        run_end = len(slow)
        while run_end > 0:
            if slow[run_end - 1]:
                run_start = run_end - 1
                while run_start > 0 and slow[run_start - 1]:
                    run_start -= 1
                if run_end - run_start >= MIN_REST:
                    reach_start, rest_start = prev_end + run_end, prev_end + run_start
                    break
                run_end = run_start
            else:
                run_end -= 1
        reach_start = min(reach_start, close - 1) if close > prev_end else reach_start
        arrived = np.flatnonzero(objects[:, i, 1] < ARRIVAL_Y)
        arrival = int(arrived[0]) if len(arrived) else n_steps
        grasps.append(
            Grasp(
                obj=i,
                category=trace.categories[i],
                sorted=i < len(outcomes) and outcomes[i] == "sorted",
                arrival=arrival,
                rest_start=rest_start,
                reach_start=max(reach_start, 0),
                close=close,
                digit_onsets=onsets,
                lift=lift,
                release=release,
                retreat_end=n_steps,
            )
        )
        prev_end = release if release is not None else n_steps
    # The motion after a release ends where the next grasp's pause (or reach) begins.
    for k in range(len(grasps) - 1):
        grasps[k] = dataclasses.replace(grasps[k], retreat_end=max(grasps[k + 1].rest_start, grasps[k].release or 0))
    return grasps


def digit_onsets(closure: np.ndarray, start: int, lift: int) -> dict[str, int]:
    """Step at which each digit starts its final closing motion before ``lift``: from where the digit's flexion
    command first peaks in ``[start, lift + 3]``, back along its uninterrupted rise (an earlier preshaping of the
    open hand, separated from the closure by a pause, is not part of it). Digits whose rise is smaller than
    ``MIN_CLOSURE`` are left out."""
    out: dict[str, int] = {}
    end = min(len(closure) - 1, lift + 3)
    for k, d in enumerate(DIGITS):
        seg = closure[start : end + 1, k]
        top = int(np.argmax(seg))
        j = top
        while j > 0 and seg[j - 1] < seg[j] - 1e-4:
            j -= 1
        if seg[top] - seg[j] >= MIN_CLOSURE:
            out[d] = start + j
    return out


#: Cut-off of ``lowpass``, Hz: a reach's own motion lies below it, most of a TCP sensor's white noise above.
LOWPASS_HZ = 3.0


def lowpass(path: np.ndarray, cutoff_hz: float = LOWPASS_HZ) -> np.ndarray:
    """``path`` (T, D) sampled at ``DT`` through a zero-phase 2nd-order Butterworth low-pass (unchanged when too
    short to filter)."""
    b, a = butter(2, cutoff_hz / (0.5 / DT))
    if len(path) <= 3 * max(len(a), len(b)):
        return np.asarray(path, dtype=float)
    return filtfilt(b, a, path, axis=0)
