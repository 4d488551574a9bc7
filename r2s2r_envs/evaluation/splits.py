"""Seed splits and condition plans: which episodes an evaluation runs (docs/protocol.md#dev-and-test-splits).

Every condition (``r2s2r_envs.envs.conditions``) has its own base seed per split:

- ``dev``: public seeds for every choice a method developer makes (hyper-parameters, checkpoints, the number of
  seeds, early stopping, anything);
- ``test``: the seeds of reported figures, touched by no earlier result;
- ``legacy``: base seed 271828 for every condition, the seeds of every result made before these splits existed,
  kept so that old results reproduce (the project tuned on them: not for new figures).

The dev and test base seeds are derived, not chosen: the first four bytes (big-endian) of
``sha256("r2s2r_envs/protocol/<split>/<condition>")``, shifted right by one bit (``condition_base_seed``).  A result
made with a base seed of the caller's has the split ``custom``.

Example::

    from r2s2r_envs.evaluation.splits import plan_conditions

    plan = plan_conditions(None, "test")   # the standard mix: nominal 50, fast-belt 25, novel-objects 25
"""

from __future__ import annotations

import dataclasses
import hashlib
import numbers
from collections.abc import Mapping, Sequence

from r2s2r_envs.envs.conditions import CONDITIONS, STANDARD_MIX, get_condition
from r2s2r_envs.mappings import check_choice

#: The named seed splits.
SPLITS: tuple[str, ...] = ("dev", "test", "legacy")
#: The split of an evaluation at a base seed of the caller's (``evaluate(..., base_seed=S)``).
CUSTOM_SPLIT = "custom"
#: Every split a result may record.
RESULT_SPLITS: tuple[str, ...] = (*SPLITS, CUSTOM_SPLIT)
#: The split of reported figures, and the default of an evaluation by conditions.
DEFAULT_SPLIT = "test"
#: The base seed of every evaluation before the splits (``EVALUATION_BASE_SEED``): the ``legacy`` split's.
LEGACY_BASE_SEED = 271828
#: ``conditions=`` value for the standard mix.
STANDARD = "standard"


@dataclasses.dataclass(frozen=True)
class ConditionRun:
    """One condition's share of an evaluation: episode ``i`` of it uses ``episode_seeds(base_seed, i)``; ``shifted``:
    outside what the lab's demonstrations cover."""

    condition: str
    base_seed: int
    episodes: int
    shifted: bool = False


def check_split(split: object) -> str:
    """``split`` if it is a named split.

    Raises:
        ValueError: another value (the message lists the splits).
    """
    return str(check_choice(split, SPLITS, what="split"))


def condition_base_seed(split: str, condition: str) -> int:
    """The base seed of ``condition``'s episodes in ``split`` (see the module docstring).

    Raises:
        ValueError: an unknown split or condition (the message lists the valid ones).
    """
    check_split(split)
    get_condition(condition)
    if split == "legacy":
        return LEGACY_BASE_SEED
    digest = hashlib.sha256(f"r2s2r_envs/protocol/{split}/{condition}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def plan_conditions(
    conditions: str | Sequence[str] | Mapping[str, int] | None, split: str, episodes: int | None = None
) -> tuple[ConditionRun, ...]:
    """The runs of an evaluation by conditions.

    Args:
        conditions: ``None`` or ``"standard"``: the standard mix (``STANDARD_MIX``); a condition name or a sequence
            of names, each with its standard episode count; a mapping of names to episode counts.
        split: A named split (``SPLITS``).
        episodes: Episodes of every condition instead of its own count (a mapping's counts included).

    Raises:
        ValueError: an unknown condition or split, a condition named twice, or an episode count that is not an
            integer >= 1 (the message names what is valid).
    """
    check_split(split)
    if conditions is None or conditions == STANDARD:
        counts: dict[str, int] = dict(STANDARD_MIX)
    elif isinstance(conditions, str):
        counts = {get_condition(conditions).name: get_condition(conditions).episodes}
    elif isinstance(conditions, Mapping):
        counts = {get_condition(name).name: _count(n, f"conditions[{name!r}]") for name, n in conditions.items()}
    else:
        names = list(conditions)
        if not names:
            raise ValueError(f"conditions is empty; name at least one of {list(CONDITIONS)} (or {STANDARD!r})")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"condition(s) {twice} named twice; each condition runs once")
        counts = {get_condition(name).name: get_condition(name).episodes for name in names}
    if episodes is not None:
        n = _count(episodes, "episodes")
        counts = dict.fromkeys(counts, n)
    return tuple(
        ConditionRun(name, condition_base_seed(split, name), n, CONDITIONS[name].shifted) for name, n in counts.items()
    )


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be an integer >= 1 (episodes), got {value!r}")
    return int(value)


__all__ = [
    "CUSTOM_SPLIT",
    "DEFAULT_SPLIT",
    "LEGACY_BASE_SEED",
    "RESULT_SPLITS",
    "SPLITS",
    "STANDARD",
    "ConditionRun",
    "check_split",
    "condition_base_seed",
    "plan_conditions",
]
