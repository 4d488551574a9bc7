"""Lab panels: a policy evaluated on several labs, so that a figure is not one lab's quirk (docs/protocol.md#lab-panel).

A panel is a named, versioned list of labs of ``PickSort-Real-v0``, each named as ``lab=`` takes it (a shipped name or
``"draw:SEED"``, a lab drawn from documented ranges, docs/lab.md#drawn-labs).  ``standard`` is the default lab and
the drawn labs of seeds 0, 1, 2 and 3: the first four seeds, fixed before any policy was evaluated on a drawn lab.
:func:`evaluate_panel` runs the same conditions and split on every lab of a panel and gives one result per lab;
each result records the panel (``EvaluationResult.panel``: name, version, which lab it is, and every lab's
identity, name and config hash) so that the leaderboard can refuse two panels or two versions in one ranking.
A panel multiplies the evaluation's cost by its number of labs: ``conditions=`` / ``episodes=`` shrink it.

:func:`panel_mean` (mean over the labs with a t-interval over labs) and :func:`lab_agreement` (Kendall tau
between labs) are what the leaderboard shows for a panel.

Example::

    from r2s2r_envs.behavior import make_demonstrator
    from r2s2r_envs.evaluation.panels import evaluate_panel

    results = evaluate_panel(make_demonstrator, "standard", split="dev", conditions={"nominal": 10})
    for lab, result in results.items():
        print(lab, result.summary["success_rate"])
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from r2s2r_envs.evaluation.protocol import EvaluationResult, PolicyOrFactory, evaluate, make_env

#: The env whose physics come from a lab: the only env a panel runs on.
LAB_ENV_ID = "PickSort-Real-v0"
#: Version of the panel definitions: bumped whenever a panel's labs change, or a lab it names changes (the default
#: lab, or the ranges drawn labs come from); results of two versions never share a ranking.
PANEL_VERSION = 1
#: The panel of ``r2s2r evaluate --panel`` without a name.
DEFAULT_PANEL = "standard"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Panel:
    """A named list of labs.

    Attributes:
        name: The panel's name (a key of :data:`PANELS`).
        labs: Each lab as ``lab=`` of ``PickSort-Real-v0`` takes it: a shipped name or ``"draw:SEED"``.
        version: :data:`PANEL_VERSION` when the panel was defined as it is.
        description: One line: what the labs are and how they were chosen.
    """

    name: str
    labs: tuple[str, ...]
    version: int = PANEL_VERSION
    description: str = ""


#: The named panels.
PANELS: dict[str, Panel] = {
    "standard": Panel(
        name="standard",
        labs=("default", "draw:0", "draw:1", "draw:2", "draw:3"),
        description="the default lab and the drawn labs of seeds 0-3 (the first four seeds, fixed before any "
        "policy was evaluated on a drawn lab)",
    ),
}


class PanelError(ValueError):
    """A panel that cannot be run: an unknown name, a simulated env, a lab given beside the panel."""


def get_panel(name: str) -> Panel:
    """The panel named ``name``.

    Raises:
        PanelError: an unknown name; the message lists the panels.
    """
    if name not in PANELS:
        raise PanelError(f"unknown lab panel {name!r}; panels: {sorted(PANELS)}")
    return PANELS[name]


def lab_identity(lab: str) -> dict[str, str]:
    """A lab's identity (``name`` and ``config_sha256``) as the lab env's ``provenance()`` discloses it."""
    env = make_env(LAB_ENV_ID, {"lab": lab})
    try:
        return dict(env.unwrapped.provenance()["lab"])  # type: ignore[attr-defined]
    finally:
        env.close()


def panel_record(panel: Panel, lab: str, identities: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """The ``panel`` section of the result of ``lab`` (one of the panel's labs): the panel's name and version, the
    lab, and each lab's identity in the panel's order."""
    return {
        "name": panel.name,
        "version": panel.version,
        "lab": lab,
        "labs": [{"lab": spec, **identities[spec]} for spec in panel.labs],
    }


def check_panel_call(env_id: str, env_kwargs: Mapping[str, Any] | None, video: Any = None) -> None:
    """Refuse what a panel run cannot take, before any work.

    Raises:
        PanelError: a simulated ``env_id``, a ``lab`` in ``env_kwargs`` (the panel names the labs), or a ``video``.
    """
    if env_id != LAB_ENV_ID:
        raise PanelError(
            f"a lab panel runs on the labs of {LAB_ENV_ID}; {env_id} is a simulator (give the panel alone)"
        )
    if env_kwargs and "lab" in env_kwargs:
        raise PanelError(
            f"a lab panel names its own labs; lab={env_kwargs['lab']!r} was given too: give either a panel or a lab"
        )
    if video is not None:
        raise PanelError("a lab panel runs several labs; film one lab with a separate evaluation (no video here)")


def evaluate_panel(
    policy: PolicyOrFactory,
    panel: str = DEFAULT_PANEL,
    *,
    env_id: str = LAB_ENV_ID,
    env_kwargs: Mapping[str, Any] | None = None,
    on_result: Callable[[str, EvaluationResult], None] | None = None,
    **evaluate_kwargs: Any,
) -> dict[str, EvaluationResult]:
    """Evaluate a policy on every lab of a panel, with the same conditions and split on each.

    Args:
        policy: As :func:`~r2s2r_envs.evaluation.protocol.evaluate` takes it.
        panel: A name in :data:`PANELS`.
        env_id: Must be ``PickSort-Real-v0`` (an argument only so that another is refused with a clear message).
        env_kwargs: Arguments of ``gym.make`` for every lab (not ``lab``).
        on_result: Called with each lab and its result as soon as it is made (``r2s2r evaluate --panel`` writes it
            then, so that a run stopped at the fourth lab keeps the first three).
        **evaluate_kwargs: Passed to ``evaluate`` (``episodes``, ``conditions``, ``split``, ``workers``, ``batch``,
            ...; not ``video``).

    Returns:
        Each lab of the panel (its ``lab=`` name) and its result, in the panel's order; every result's ``panel``
        section names the panel, its version, the lab and every lab's identity.

    Raises:
        PanelError: an unknown panel, a simulated ``env_id``, ``lab`` in ``env_kwargs`` or a ``video``.
        RuntimeError: a lab whose result discloses another identity than the lab had before the run (a bug).
        Anything ``evaluate`` raises.
    """
    found = get_panel(panel)
    check_panel_call(env_id, env_kwargs, evaluate_kwargs.get("video"))
    identities = {spec: lab_identity(spec) for spec in found.labs}  # every lab loads before the first one runs
    out: dict[str, EvaluationResult] = {}
    for spec in found.labs:
        result = evaluate(env_id, policy, env_kwargs={**(env_kwargs or {}), "lab": spec}, **evaluate_kwargs)
        if result.provenance.get("lab") != identities[spec]:
            raise RuntimeError(f"lab {spec!r} changed during the panel run: {result.provenance.get('lab')}")
        out[spec] = dataclasses.replace(result, panel=panel_record(found, spec, identities))
        if on_result is not None:
            on_result(spec, out[spec])
    return out


# ---------------------------------------------------------------------- figures
def panel_mean(values: Sequence[float], *, confidence: float = 0.95) -> tuple[float, tuple[float, float]]:
    """The mean of per-lab success rates and its t-interval over the labs (``n - 1`` degrees of freedom, clipped to
    [0, 1]): the labs are the sample, each lab's episode and seed noise lie inside its figure.

    Raises:
        ValueError: fewer than two values.
    """
    from scipy import stats  # scipy.stats takes about 0.6 s to import: only when a figure is asked for

    v = [float(x) for x in values]
    if len(v) < 2:
        raise ValueError(f"a panel mean needs at least two labs, got {len(v)}")
    mean = sum(v) / len(v)
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, len(v) - 1)) * sd / math.sqrt(len(v))
    return mean, (max(0.0, mean - half), min(1.0, mean + half))


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's tau-b of two lists of the same rows' figures (``scipy.stats.kendalltau``); None when it is
    undefined (fewer than two rows, or a list of one value)."""
    if len(a) != len(b):
        raise ValueError(f"the two labs must list the same rows: got {len(a)} and {len(b)} figures")
    if len(a) < 2:
        return None
    from scipy import stats  # as in panel_mean

    tau = float(stats.kendalltau(a, b).statistic)
    return None if math.isnan(tau) else tau


def lab_agreement(
    by_lab: Mapping[str, Sequence[float]],
) -> tuple[tuple[tuple[str, str, float | None], ...], float | None]:
    """How alike the labs rank the rows: Kendall tau of every pair of labs (``by_lab``: each lab's figures of the
    same rows, in one order), and the mean of the defined ones (None when none is)."""
    pairs = tuple((a, b, kendall_tau(by_lab[a], by_lab[b])) for a, b in itertools.combinations(by_lab, 2))
    defined = [t for _, _, t in pairs if t is not None]
    return pairs, (sum(defined) / len(defined) if defined else None)


__all__ = [
    "DEFAULT_PANEL",
    "LAB_ENV_ID",
    "PANELS",
    "PANEL_VERSION",
    "Panel",
    "PanelError",
    "check_panel_call",
    "evaluate_panel",
    "get_panel",
    "kendall_tau",
    "lab_agreement",
    "lab_identity",
    "panel_mean",
    "panel_record",
]
