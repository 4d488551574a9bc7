"""The grasp section of a dataset's data card (``r2s2r_envs.datasets.card``): grasp timing against the belt, and
grasp types.

Every demo is segmented into grasps as the behavior metrics do (``behavior.segments``: arrival, closure onset, lift,
from the commands and observations a real cell records).  Per object of an episode its last grasp counts (the one
that held it; earlier ones are re-grasps), and gives:

* ``arrival_to_closure_s``: the object entering the workspace (y < ``segments.ARRIVAL_Y``) to the closure onset
  (``metrics.grasp_traits``' ``arrival_to_grasp``);
* ``closure_to_lift_s``: closure onset to the lift;
* ``margin_s``: at the lift, how long the object would still have ridden the belt before leaving the
  demonstrators' reach (y = ``world.constants.REACH_LIMIT_Y``): its distance to that line at the closure onset
  over its pace along the belt in the second before (a least-squares line), minus the closure-to-lift time; none
  for an object not riding (slower than ``MIN_PACE``);
* the grasp type, where the commands tell it: ``"wrap"`` when the fingers' distal joints (pip, dip) curl around the
  object while it is grasped (their mean flexion command rises by at least ``WRAP_CURL``), ``"pinch"`` when the
  fingers stay straight (docs/lab.md#operator: the scripted planner pinches; the lab's operator wraps or pinches
  as its config says); and the spread of the digits' closure onsets (``closure_spread``).

The section is registered by ``r2s2r_envs.behavior`` (``datasets.card.register_card_section``); a dataset the
segmentation cannot read (another task, no state observations, joint-space actions) gets ``available: false`` and
the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from r2s2r_envs.behavior.metrics import grasp_traits
from r2s2r_envs.behavior.segments import DT, GLIMPSES, BehaviorDataError, DemoTrace, Grasp, load_demos
from r2s2r_envs.datasets.card import summary
from r2s2r_envs.envs.hand import JOINT_INDEX
from r2s2r_envs.world.constants import REACH_LIMIT_Y

if TYPE_CHECKING:
    from r2s2r_envs.datasets.reader import DatasetFile

#: Rise of the mean flexion command of the fingers' distal joints (command units in [-1, 1]) that makes a grasp a
#: wrap: the lab's wrap curls them by 0.15 rad, about 0.13 command units; a pinch leaves them still.
WRAP_CURL = 0.05
#: Joints whose curl tells a wrap from a pinch: the pip and dip joints of index, middle and ring finger.
CURL_JOINTS: tuple[int, ...] = tuple(JOINT_INDEX[f"{d}_{j}"] for d in ("if", "mf", "rf") for j in ("pip", "dip"))
#: Slowest pace along the belt, m/s, at which an object counts as riding it (a margin is computed).
MIN_PACE = 0.005
#: Steps after the lift within which the curl is read.
_CURL_AFTER_LIFT = 5
GRASP_TYPES: tuple[str, ...] = ("pinch", "wrap")


def grasp_section(f: DatasetFile) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The grasp section of ``f``'s card and its per-episode rows (``arrival_to_closure_s``, ``margin_s`` and
    ``grasp_types``, one entry per object in slot order)."""
    if f.num_demos == 0:
        return {"available": False, "reason": "no demos"}, []
    try:
        demos = load_demos(f.path, verify="none")  # ``f`` is open and checked
    except BehaviorDataError as exc:  # the reason without the file's name: a card depends on the content only
        return {"available": False, "reason": "the file " + str(exc).removeprefix(f"{f.path} ")}, []
    grasps = regrasps = 0
    per_object: dict[int, list[dict[str, Any]]] = {}
    every: list[dict[str, Any]] = []
    rows = []
    for trace in demos.traces:
        n_objects = trace.objects.shape[1]
        last: dict[int, Grasp] = {}
        for g in trace.grasps:
            last[g.obj] = g
        grasps += len(trace.grasps)
        regrasps += len(trace.grasps) - len(last)
        timing = {i: grasp_timing(trace, g) for i, g in last.items()}
        for i, t in timing.items():
            per_object.setdefault(i, []).append(t)
            every.append(t)
        rows.append(
            {
                key: [timing[i][key] if i in timing else None for i in range(n_objects)]
                for key in ("arrival_to_closure_s", "margin_s", "grasp_type")
            }
        )
    types = {name: sum(t["grasp_type"] == name for t in every) for name in GRASP_TYPES}
    section = {
        "available": True,
        "episodes": len(demos.traces),
        "grasps": grasps,
        "regrasps": regrasps,
        "types": types,
        "arrival_to_closure_s": summary(t["arrival_to_closure_s"] for t in every),
        "closure_to_lift_s": summary(t["closure_to_lift_s"] for t in every),
        "margin_s": summary(t["margin_s"] for t in every),
        "closure_spread_s": summary(t["closure_spread_s"] for t in every),
        "objects": [
            {
                "object": i + 1,
                "grasped": len(per_object.get(i, [])),
                "arrival_to_closure_s": summary(t["arrival_to_closure_s"] for t in per_object.get(i, [])),
                "margin_s": summary(t["margin_s"] for t in per_object.get(i, [])),
            }
            for i in range(max((t.objects.shape[1] for t in demos.traces), default=0))
        ],
    }
    episode_rows = [
        {
            "arrival_to_closure_s": r["arrival_to_closure_s"],
            "margin_s": r["margin_s"],
            "grasp_types": r["grasp_type"],
        }
        for r in rows
    ]
    return section, episode_rows


def grasp_timing(trace: DemoTrace, g: Grasp) -> dict[str, Any]:
    """One grasp's figures (see the module docstring); ``None`` where one is undefined."""
    traits = grasp_traits(trace, g)
    closure_to_lift = (g.lift - g.close) * DT
    return {
        "arrival_to_closure_s": _value(traits["arrival_to_grasp"]),
        "closure_to_lift_s": closure_to_lift,
        "closure_spread_s": _value(traits["closure_spread"]),
        "margin_s": _margin(trace, g, closure_to_lift),
        "grasp_type": grasp_type(trace, g),
    }


def grasp_type(trace: DemoTrace, g: Grasp) -> str:
    """``"wrap"`` or ``"pinch"`` (see ``WRAP_CURL``)."""
    end = min(len(trace.fingers), g.lift + _CURL_AFTER_LIFT + 1)
    curl = trace.fingers[g.close : end, list(CURL_JOINTS)].mean(axis=1)
    return "wrap" if len(curl) and float(curl.max() - curl[0]) >= WRAP_CURL else "pinch"


def _margin(trace: DemoTrace, g: Grasp, closure_to_lift: float) -> float | None:
    first = max(0, g.close - GLIMPSES)
    y = trace.objects[first : g.close + 1, g.obj, 1]
    if len(y) < 3:
        return None
    t = np.arange(len(y)) * DT
    pace = -float(np.polyfit(t, y, 1)[0])  # along the belt (towards -y), m/s
    if pace < MIN_PACE:
        return None
    return (float(y[-1]) - REACH_LIMIT_Y) / pace - closure_to_lift


def _value(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)
