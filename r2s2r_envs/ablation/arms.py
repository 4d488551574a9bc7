"""The control arms (docs/ablation.md#control-arms): data variants that split a grounding axis's effect into its
parts, each a name a design lists (``AblationDesign.arms``, ``r2s2r ablation --arms``) and a set of cells the
runner trains and evaluates like the four variants' (every method and seed of the table, co-trained at the rule's
real_fraction of the variant whose data recipe the cell follows, evaluated in the lab).

* ``untuned-planner``: identified physics (WorldGrounded's env and grounding), the planner at its default settings;
  splits world (W - U) into physics (untuned-planner - U) and re-tune (W - untuned-planner);
* ``lab-sensing``: nominal physics seen through the grounding's sensing (sensor noise, calibration, the camera-based
  estimator), the planner at its defaults; splits physics into sensing and dynamics;
* ``slowed-planner``: nominal physics, the planner slowed to the pace of the design's lab demos; splits behavior
  (B - U) into pace (slowed-planner - U) and style (B - slowed-planner);
* ``generator-planner-pace``: nominal physics, the generator at the pace of the design's Ungrounded data (the
  planner's); splits behavior into the generator's pace and style at the planner's pace;
* ``success-matched``: each variant's data cut to the scenes every variant's demonstrator solved; each axis on the
  same scenes.

A design without arms has exactly the tasks (and keys) it had before arms existed: the arms' tasks
(:meth:`~r2s2r_envs.ablation.study.AblationDesign.tasks` builds them) come after all others and none of the others'
configurations changes. Everything an arm's data is made from is in its data task's configuration or dependencies: the
paced arms' target pace is read at run time from a dataset of the design (a dependency), the sensing from the
grounding the WorldGrounded data use (the shipped file's values, or with ``--lab`` the chain's sysid output). Nothing
is read from the lab but its training demos, and nothing from an evaluation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from r2s2r_envs.ablation.specs import VARIANTS, DesignError
from r2s2r_envs.mappings import check_keys

#: The cells of the success-matched arm, one per variant.
MATCHED_CELLS: dict[str, str] = {v: f"matched-{v}" for v in VARIANTS}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Arm:
    """One control arm.

    Attributes:
        name: its name (``--arms``).
        summary: what its data are, in a line.
        base: per cell it adds, the variant whose data recipe (env, seed, demos, noise) and real_fraction it follows.
        compares: the table's variants its effects read (they must be in the design's ``variants``).
        stages: the chain stages its data need with ``--lab`` (``"world"``: sysid, ``"behavior"``: the fit).
        reads: the variants whose data its data are made from (their data tasks run too).
    """

    name: str
    summary: str
    base: Mapping[str, str]
    compares: tuple[str, ...]
    stages: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()

    @property
    def cells(self) -> tuple[str, ...]:
        return tuple(self.base)


ARMS: dict[str, Arm] = {
    a.name: a
    for a in (
        Arm(
            name="untuned-planner",
            summary="identified physics, the planner at its default settings (not re-tuned there)",
            base={"untuned-planner": "WorldGrounded"},
            compares=("Ungrounded", "WorldGrounded"),
            stages=("world",),
        ),
        Arm(
            name="lab-sensing",
            summary="nominal physics seen through the identified sensing (noise, calibration, estimator), default "
            "planner",
            base={"lab-sensing": "Ungrounded"},
            compares=("Ungrounded", "WorldGrounded"),
            stages=("world",),
        ),
        Arm(
            name="slowed-planner",
            summary="nominal physics, the planner slowed to the pace of the design's lab demos",
            base={"slowed-planner": "Ungrounded"},
            compares=("Ungrounded", "BehaviorGrounded"),
        ),
        Arm(
            name="generator-planner-pace",
            summary="nominal physics, the generator at the pace of the design's Ungrounded data (the planner's)",
            base={"generator-planner-pace": "BehaviorGrounded"},
            compares=("Ungrounded", "BehaviorGrounded"),
            stages=("behavior",),
            reads=("Ungrounded",),
        ),
        Arm(
            name="success-matched",
            summary="each variant's data cut to the scenes (attempts of one base seed) every variant's demonstrator "
            "solved",
            base={cell: v for v, cell in MATCHED_CELLS.items()},
            compares=(),
            reads=VARIANTS,
        ),
    )
}
ARM_NAMES: tuple[str, ...] = tuple(ARMS)

_U, _W, _B, _F = VARIANTS
_M = MATCHED_CELLS
#: The decomposition rows: name -> (arms they need, weights over cells). A row is reported when the design has
#: its arms; the rows of one split add up (world W - U = physics + re-tune, and so on).
ARM_EFFECTS: dict[str, tuple[tuple[str, ...], dict[str, float]]] = {
    "world, nominal behavior (W - U)": (("untuned-planner",), {_W: 1.0, _U: -1.0}),
    "physics (untuned-planner - U)": (("untuned-planner",), {"untuned-planner": 1.0, _U: -1.0}),
    "re-tune (W - untuned-planner)": (("untuned-planner",), {_W: 1.0, "untuned-planner": -1.0}),
    "sensing (lab-sensing - U)": (("lab-sensing",), {"lab-sensing": 1.0, _U: -1.0}),
    "dynamics (untuned-planner - lab-sensing)": (
        ("untuned-planner", "lab-sensing"),
        {"untuned-planner": 1.0, "lab-sensing": -1.0},
    ),
    "behavior, nominal world (B - U)": (("slowed-planner",), {_B: 1.0, _U: -1.0}),
    "pace (slowed-planner - U)": (("slowed-planner",), {"slowed-planner": 1.0, _U: -1.0}),
    "style (B - slowed-planner)": (("slowed-planner",), {_B: 1.0, "slowed-planner": -1.0}),
    "generator's pace (B - generator-planner-pace)": (
        ("generator-planner-pace",),
        {_B: 1.0, "generator-planner-pace": -1.0},
    ),
    "style at the planner's pace (generator-planner-pace - U)": (
        ("generator-planner-pace",),
        {"generator-planner-pace": 1.0, _U: -1.0},
    ),
    "world, matched scenes": (("success-matched",), {_M[_W]: 0.5, _M[_F]: 0.5, _M[_U]: -0.5, _M[_B]: -0.5}),
    "behavior, matched scenes": (("success-matched",), {_M[_B]: 0.5, _M[_F]: 0.5, _M[_U]: -0.5, _M[_W]: -0.5}),
    "interaction, matched scenes": (("success-matched",), {_M[_U]: 1.0, _M[_F]: 1.0, _M[_W]: -1.0, _M[_B]: -1.0}),
    "W - U, matched scenes": (("success-matched",), {_M[_W]: 1.0, _M[_U]: -1.0}),
    "B - U, matched scenes": (("success-matched",), {_M[_B]: 1.0, _M[_U]: -1.0}),
}


def check_arms(arms: Sequence[str], variants: Sequence[str]) -> None:
    """Refuses an unknown arm, a repeated one, or one whose compared variants the design leaves out.

    Raises:
        DesignError: naming the arm and what is accepted.
    """
    check_keys(arms, ARM_NAMES, what="control arm", error=DesignError)
    if len(set(arms)) != len(arms):
        raise DesignError(f"control arms {list(arms)} name an arm twice")
    for name in arms:
        missing = [v for v in ARMS[name].compares if v not in variants]
        if missing:
            raise DesignError(
                f"control arm {name!r} is compared with {list(ARMS[name].compares)}: add {missing} to the variants"
            )


def arm_cells(arms: Sequence[str]) -> dict[str, str]:
    """``{cell: base variant}`` of the arms, in their order."""
    return {cell: base for name in arms for cell, base in ARMS[name].base.items()}


def arm_reads(arms: Sequence[str]) -> set[str]:
    """The variants whose data the arms' data are made from."""
    return {v for name in arms for v in ARMS[name].reads}


def arm_stages(arms: Sequence[str]) -> set[str]:
    """The axes whose chain stage the arms' data need with ``--lab``."""
    return {s for name in arms for s in ARMS[name].stages}


def effect_rows(arms: Sequence[str]) -> dict[str, dict[str, float]]:
    """The decomposition rows the design's arms give (:data:`ARM_EFFECTS`), as ``{name: weights}``."""
    return {name: weights for name, (needs, weights) in ARM_EFFECTS.items() if set(needs) <= set(arms)}
