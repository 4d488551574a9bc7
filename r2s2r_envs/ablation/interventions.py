"""The interventions (docs/ablation.md#interventions): the table's policies evaluated again in the lab under a
diagnostic condition (``envs.conditions.DIAGNOSTIC_CONDITIONS``), which takes part of the lab's gap away, to test
why a grounding axis helps or hurts: each name a design lists (``AblationDesign.interventions``, ``r2s2r ablation
--interventions``) adds one lab evaluation per policy of the table, reusing the trained policies.

* ``no-latency``: the loop without its delays (no control latency, perception delay, late commands);
* ``nominal-belt``: the nominal simulator's belt (its speed, no fluctuation);
* ``nominal-timing``: both at once, the test of the timing hypothesis: demos at a human pace grasp late, and under
  the lab's latency and belt a late grasp misses. Where an axis's lab effect under ``nominal-timing`` differs from
  its effect under ``nominal`` with an interval excluding zero, timing explains that part of it.

The policies (:meth:`~r2s2r_envs.ablation.study.AblationDesign.intervention_policies`): every co-trained policy of
the four-variant table (each variant, method and seed at the rule's real_fraction), the real-only ones and, when
the sweep has real_fraction 0, its sim-only ones. Each intervention's evaluation runs as many lab episodes as the
tables read under ``nominal`` (:func:`intervention_episodes`); without an ``eval_split`` on the legacy seeds, so the
very episodes of the nominal evaluation, only the condition differs (paired by episode); with one on that
condition's own seeds of the split.

A design without interventions has exactly the tasks (and keys) it had before they existed: their evaluation tasks
come after all others, and none of the others' configurations changes. A run directory that adds interventions
reuses every finished task (its manifest records the latest design; results are found by key).
"""

from __future__ import annotations

from collections.abc import Sequence

from r2s2r_envs.ablation.specs import DesignError
from r2s2r_envs.envs.conditions import DIAGNOSTIC_CONDITIONS, STANDARD_MIX
from r2s2r_envs.mappings import check_keys

#: The interventions a design may list: the diagnostic conditions, in registry order.
INTERVENTIONS: tuple[str, ...] = DIAGNOSTIC_CONDITIONS


def check_interventions(interventions: Sequence[str]) -> None:
    """Refuses an unknown intervention (a condition that is not diagnostic included) or a repeated one.

    Raises:
        DesignError: naming the intervention and the accepted ones.
    """
    if isinstance(interventions, str):
        raise DesignError(
            f"interventions must be a sequence of names from {list(INTERVENTIONS)}, got {interventions!r}"
        )
    check_keys(interventions, INTERVENTIONS, what="intervention", error=DesignError)
    if len(set(interventions)) != len(interventions):
        raise DesignError(f"interventions {list(interventions)} name an intervention twice")


def intervention_episodes(lab_episodes: int, eval_split: str | None) -> int:
    """Lab episodes of an intervention's evaluation: as many as the tables read under ``nominal`` (all
    ``lab_episodes`` on the legacy seeds; with a split, the nominal share of the standard mix scaled to them)."""
    if eval_split is None:
        return lab_episodes
    return lab_episodes * STANDARD_MIX["nominal"] // sum(STANDARD_MIX.values())


__all__ = ["INTERVENTIONS", "check_interventions", "intervention_episodes"]
