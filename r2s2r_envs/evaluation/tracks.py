"""Tracks: rows that compare on equal terms (docs/leaderboard.md#tracks).

A track fixes what a leaderboard row may be trained on and how it is evaluated:

- the **datasets**: which canonical lab demos and simulated sets (``r2s2r datasets make NAME``), each with the
  content hashes it accepts: one per known build of its recipe (``canonical.json``: the kinds of CPU and MuJoCo
  versions on which it was built; floating-point differences between them give other bytes);
- the **evaluation**: the mix of conditions (with their version), the seed split and the lab panel (or none);
- the **budget**: training samples seen (gradient steps x batch size), read from a training recipe of
  ``r2s2r_envs.policies.config.RECIPES``.

``r2s2r evaluate --track NAME`` (``evaluate(..., track=NAME)``) evaluates as the track says and records the
track in the result (its ``track`` section): the result is **on the track** when every dataset its policy's
metadata names (``method.datasets``: ``sha256``, ``name``) is a known build of one of the track's datasets, its
training samples fit the budget and its evaluation is the track's; otherwise it is recorded **off-track**, with
every reason.  The leaderboard checks the claim again from what the result carries (:func:`check_result`), ranks
the rows of one track and lists the others apart.

A track's definition is versioned: a change of its datasets, hashes, evaluation or budget makes a new version, and
the leaderboard never ranks two versions together.  A track never evaluates under a diagnostic condition
(``envs.conditions.DIAGNOSTIC_CONDITIONS``: an intervention, not a benchmark score): its definition, an evaluation
for it and a result's claim to it refuse one.

Example::

    from r2s2r_envs.evaluation.tracks import get_track

    track = get_track("state")
    print(track.budget_samples, [d.name for d in track.datasets], track.split)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from r2s2r_envs.envs.conditions import CONDITIONS, CONDITIONS_VERSION, STANDARD_MIX, check_not_diagnostic
from r2s2r_envs.evaluation.splits import STANDARD, plan_conditions
from r2s2r_envs.mappings import check_choice

if TYPE_CHECKING:
    from r2s2r_envs.evaluation.results import EvaluationResult

#: The track of ``r2s2r evaluate --track`` examples and the docs.
DEFAULT_TRACK = "state"


#: Each budget recipe's ``steps x batch_size`` when the tracks were defined (``policies.config.RECIPES``, which this
#: layer does not import; a changed recipe makes a new track version, not a moved budget).
RECIPE_SAMPLES: dict[str, int] = {"cpu": 20_000 * 256, "cpu-image": 20_000 * 64}


class UnknownTrackError(ValueError):
    """A track name this package does not define; the message lists the valid ones."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrackDataset:
    """One dataset of a track.

    Attributes:
        name: Its canonical name (``r2s2r_envs/datasets/canonical.json``).
        domain: ``"real"`` (lab demos) or ``"sim"``.
        builds: Every content hash the track accepts for it, each with the machine that built it: the known builds of
            the canonical recipe when the track was defined.
    """

    name: str
    domain: str
    builds: Mapping[str, str]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Track:
    """A named track (a key of :data:`TRACKS`).

    Attributes:
        name: The track's name.
        version: Bumped whenever anything below changes; results of two versions are never ranked together.
        description: One line.
        datasets: What a row may train on (any non-empty subset: a real-only row uses the lab demos alone).
        conditions: The evaluation's conditions and their episodes, in order.
        conditions_version: The version of the condition definitions (``envs.conditions.CONDITIONS_VERSION``).
        split: The seed split of the evaluation.
        panel: The lab panel the lab evaluation runs on, or None (one lab).
        budget_recipe: The training recipe (``policies.config.RECIPES``) whose ``steps x batch_size`` is the budget.
    """

    name: str
    version: int
    description: str
    datasets: tuple[TrackDataset, ...]
    conditions: Mapping[str, int]
    conditions_version: int
    split: str
    panel: str | None
    budget_recipe: str

    def __post_init__(self) -> None:
        check_not_diagnostic(self.conditions, f"track {self.name!r}")

    @property
    def budget_samples(self) -> int:
        """Training samples a row may see at most: the budget recipe's ``steps x batch_size``, pinned with the track
        (:data:`RECIPE_SAMPLES`; a test ties it to ``policies.config.RECIPES``)."""
        return RECIPE_SAMPLES[self.budget_recipe]

    def dataset_of(self, sha256: str) -> tuple[TrackDataset, str] | None:
        """The track dataset of which ``sha256`` is a known build, and that build's machine; None if none."""
        for dataset in self.datasets:
            if sha256 in dataset.builds:
                return dataset, dataset.builds[sha256]
        return None

    def to_dict(self) -> dict[str, Any]:
        """The definition as JSON data (``leaderboard.json`` carries the ranked track's)."""
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "datasets": [{"name": d.name, "domain": d.domain, "builds": dict(d.builds)} for d in self.datasets],
            "conditions": dict(self.conditions),
            "conditions_version": self.conditions_version,
            "split": self.split,
            "panel": self.panel,
            "budget": {"recipe": self.budget_recipe, "samples": self.budget_samples},
        }


# The known builds of the canonical datasets (canonical.json's ``sha256`` and ``other_builds`` on 2026-12-04):
# tests/test_tracks.py checks that they are still exactly the spec's. The machines built other bytes from one recipe;
# the track accepts each (which one a row used is recorded beside it).
_AMD = "2-core AMD EPYC (x86-64), Python 3.11, mujoco 4.0.0"
_AMD512 = "2-core AMD EPYC with AVX-512 (x86-64), Python 3.11, mujoco 4.0.0"
_INTEL = "2-core Intel Xeon (x86-64), Python 3.11, mujoco 4.0.1"
_INTEL512 = "2-core Intel Xeon with AVX-512 (x86-64), Python 3.11, mujoco 4.0.0"
_MUJOCO401 = "2-core AMD EPYC and 2-core Intel Xeon (x86-64), Python 3.11, mujoco 4.0.1"
_STATE_DATASETS = (
    TrackDataset(
        name="lab-50",
        domain="real",
        builds={
            "3150beed7ecc8e5ab838b946bdb0b1d407cba79fe19f565b2563feb30efc2363": _AMD,
            "5fd49973f7f1059abc16f266df836b42d0f73a7280336915012c42c8f433f09e": _AMD512,
            "48cafb01ad891b07dffc4abdf29283b32659cf6f7b78c24d9c913c63c867e381": _MUJOCO401,
        },
    ),
    TrackDataset(
        name="ungrounded-1000",
        domain="sim",
        builds={
            "ce3aa0fef8a4427d274068f74aa22407943a27a7b20d04f4b0e358afd015f77d": _AMD,
            "9c7828bddc7487ef76f520de21b089c04f536eec01a6def4ef19d2df9ed2edbf": _AMD512,
            "ec5c160c0392e5dd72593e9fc09339e971769ee2fb0725c0d4248996cb594ba6": _INTEL,
        },
    ),
    TrackDataset(
        name="worldgrounded-1000",
        domain="sim",
        builds={
            "79b94a4876e71a4c512b24e2477baea9c63d19bc8b06d62fca125a9d5bd1b9c3": _AMD,
            "2f15acd2f00d63d1ee4fb8405139b2de81e14f642e58af6175f6aac4d1044aad": _AMD512,
            "5ab960c4da6c1e04e765612494e945a74d3a3ef3cdf91448f74f950e3144235b": _MUJOCO401,
        },
    ),
    TrackDataset(
        name="behaviorgrounded-1000",
        domain="sim",
        builds={
            "2027ffbb302811add8a2c13df6f3ee9bbcc29811fa69474aa303404d0c69929f": _INTEL512,
            "5a7ac8d89504fc93b4d30713a6ada4c630b8d2e4be07d6815b7b3523fad34d8c": _INTEL,
        },
    ),
    TrackDataset(
        name="fullygrounded-1000",
        domain="sim",
        builds={
            "85b2e4a2d80610f9fbedd53ad1fc6393cf0b4599b7211f1f74dba0ab063ef288": _INTEL512,
            "92a807ba0ac46be8c4c1710d623a3efd75196dcdbd5b52798dc6ddd866ae1004": _INTEL,
        },
    ),
)

# The image track's datasets: the canonical sets with both cameras at 64 px (``*-rgb64``), of lab v3 and the -v1
# simulators. A build's bytes depend on the renderer as well; the lab and Ungrounded sets built so far (2026-12-07).
_MESA = "2-core AMD EPYC (x86-64), Python 3.11, mujoco 4.0.1, EGL on Mesa 22.3.6 llvmpipe"
_IMAGE_DATASETS = (
    TrackDataset(
        name="lab-v3-50-rgb64",
        domain="real",
        builds={"c0d32fed5ad5ad60c79de6ed4d21779882cdb778f215b60d9dcb6d504a70a4f7": _MESA},
    ),
    TrackDataset(
        name="ungrounded-v1-1000-rgb64",
        domain="sim",
        builds={"910b48574e3717ca05f0cb83ac3e07614072c199a0946e6cc37c90d2b26a6e8d": _MESA},
    ),
    *(
        TrackDataset(name=f"{variant}-v1-1000-rgb64", domain="sim", builds={})
        for variant in ("worldgrounded", "behaviorgrounded", "fullygrounded")
    ),
)
#: The image track's evaluation: the standard mix and the red light, which only cameras see.
IMAGE_CONDITIONS: dict[str, int] = {**STANDARD_MIX, "lighting": 25}

#: The named tracks.
TRACKS: dict[str, Track] = {
    "state": Track(
        name="state",
        version=1,
        description="state observations: the canonical lab-50 and the four *-1000 simulated sets (any subset), "
        "the standard mix on the test split, one lab, the cpu recipe's training samples",
        datasets=_STATE_DATASETS,
        conditions=dict(STANDARD_MIX),
        conditions_version=CONDITIONS_VERSION,
        split="test",
        panel=None,
        budget_recipe="cpu",
    ),
    "image": Track(
        name="image",
        version=1,
        description="the cameras (64 px) and the robot's own state: lab v3's lab-v3-50-rgb64 and the four "
        "*-v1-1000-rgb64 simulated sets (any subset), the standard mix and red light on the test split, one lab, "
        "the cpu-image recipe's training samples",
        datasets=_IMAGE_DATASETS,
        conditions=IMAGE_CONDITIONS,
        conditions_version=CONDITIONS_VERSION,
        split="test",
        panel=None,
        budget_recipe="cpu-image",
    ),
}


def get_track(name: object) -> Track:
    """The track called ``name``.

    Raises:
        UnknownTrackError: an unknown name (the message lists the valid ones).
    """
    return TRACKS[str(check_choice(name, sorted(TRACKS), what="track", error=UnknownTrackError))]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrackCheck:
    """Whether a result is on a track (the result's ``track`` section, :meth:`to_record`).

    Attributes:
        name, version: The track's.
        reasons: Why the result is off the track (empty: on it).
        training_samples: The samples its policy was trained on (None: not recorded).
        budget_samples: The track's budget.
        builds: Per track dataset the policy used: the machine of its known build.
    """

    name: str
    version: int
    reasons: tuple[str, ...]
    training_samples: int | None
    budget_samples: int | None
    builds: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def on_track(self) -> bool:
        """No reason to be off the track."""
        return not self.reasons

    def to_record(self) -> dict[str, Any]:
        """The result's ``track`` section."""
        return {
            "name": self.name,
            "version": self.version,
            "on_track": self.on_track,
            "reasons": list(self.reasons),
            "training_samples": self.training_samples,
            "budget_samples": self.budget_samples,
            "builds": dict(self.builds),
        }


def training_samples(method: Mapping[str, Any], config: Any = None) -> int | None:
    """The samples a policy saw in training, from what it records: ``method.training_samples`` (a method of your
    own says it), else ``steps x batch_size`` of its metadata, else of its training ``config`` (a mapping: a
    checkpoint's, ``TrainedPolicy.config``); None when none gives it."""

    def count(value: Any) -> int | None:
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    if (declared := count(method.get("training_samples"))) is not None:
        return declared
    for source in (method, config if isinstance(config, Mapping) else {}):
        steps, batch = count(source.get("steps")), count(source.get("batch_size"))
        if steps is not None and batch is not None:
            return steps * batch
    return None


def evaluation_arguments(
    track: Track,
    *,
    episodes: int | None = None,
    base_seed: int | None = None,
    conditions: str | Sequence[str] | Mapping[str, int] | None = None,
    split: str | None = None,
) -> tuple[dict[str, int], str]:
    """The ``conditions`` and ``split`` of an evaluation on ``track``; what the caller gave must agree.

    Raises:
        ValueError: ``episodes`` or ``base_seed`` given, a diagnostic condition, or another split or mix of
            conditions than the track's (the message names both).
    """
    if episodes is not None or base_seed is not None:
        given = "episodes" if episodes is not None else "base_seed"
        raise ValueError(
            f"track {track.name!r} fixes the evaluation ({_describe(track.conditions)} on the {track.split!r} "
            f"split); {given}={episodes if episodes is not None else base_seed!r} was given too: give one of them"
        )
    if split is not None and split != track.split:
        raise ValueError(
            f"track {track.name!r} evaluates on the {track.split!r} split; split {split!r} was given too: give one "
            "of them"
        )
    if conditions is not None and conditions != STANDARD:
        asked = {run.condition: run.episodes for run in plan_conditions(conditions, track.split)}
        check_not_diagnostic(asked, f"track {track.name!r} evaluates under {_describe(track.conditions)}")
        if list(asked.items()) != list(track.conditions.items()):
            raise ValueError(
                f"track {track.name!r} evaluates under {_describe(track.conditions)}; conditions {_describe(asked)} "
                "were given too: give one of them"
            )
    elif conditions == STANDARD and dict(track.conditions) != STANDARD_MIX:
        raise ValueError(f"track {track.name!r} evaluates under {_describe(track.conditions)}, not the standard mix")
    return dict(track.conditions), track.split


def _describe(conditions: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in conditions.items())


def check_track(
    track: Track,
    *,
    method: Mapping[str, Any],
    training_samples: int | None,
    split: str,
    conditions: Sequence[tuple[str, int]],
    conditions_version: int,
    panel: Mapping[str, Any] | None,
) -> TrackCheck:
    """Whether a result of this policy (``method``: the result's ``method`` section) and evaluation is on ``track``.

    Returns:
        The check, with every reason to be off the track (none: on it).
    """
    reasons: list[str] = []
    builds: dict[str, str] = {}
    datasets = list(method.get("datasets") or [])
    if not datasets:
        reasons.append(
            "the policy records no datasets (method.datasets, from its metadata): a track row names its training "
            "data by content hash"
        )
    names = [d.name for d in track.datasets]
    for entry in datasets:
        digest, name = str(entry.get("sha256")), entry.get("name")
        found = track.dataset_of(digest)
        if found is not None:
            builds[found[0].name] = found[1]
            continue
        label = f"dataset {name!r}" if name else "a dataset given by path"
        if name in names:
            known = ", ".join(f"{h[:8]} ({m})" for h, m in track.datasets[names.index(name)].builds.items())
            reasons.append(
                f"{label} has content hash {digest[:16]}..., not a known build of it (known: {known}): a build on "
                "another kind of machine ('unknown-build' in r2s2r datasets make); train on a known build, a file "
                "that r2s2r datasets verify FILE --expect SHA256 accepts with one of these hashes"
            )
        else:
            reasons.append(
                f"{label} (content hash {digest[:16]}...) is not one of track {track.name!r}'s datasets {names}"
            )
    budget = track.budget_samples
    if training_samples is None:
        reasons.append(
            "the training samples are not recorded (method.training_samples, or steps and batch_size of the "
            f"metadata or the checkpoint's config): the track's budget is {budget:,} samples"
        )
    elif training_samples > budget:
        reasons.append(
            f"trained on {training_samples:,} samples (steps x batch size), over the track's budget of {budget:,} "
            f"(the {track.budget_recipe} recipe)"
        )
    if split != track.split:
        reasons.append(f"evaluated on the {split!r} split; the track's is {track.split!r}")
    diagnostic = [name for name, _ in conditions if name in CONDITIONS and CONDITIONS[name].diagnostic]
    if diagnostic:
        reasons.append(
            f"evaluated under diagnostic condition(s) {diagnostic}: interventions that take part of the lab's gap "
            "away (docs/ablation.md#interventions), not a benchmark score"
        )
    if list(conditions) != list(track.conditions.items()):
        reasons.append(
            f"evaluated under {_describe(dict(conditions))}; the track's conditions are {_describe(track.conditions)}"
        )
    if conditions_version != track.conditions_version:
        reasons.append(
            f"conditions of version {conditions_version}; the track's are of version {track.conditions_version}"
        )
    panel_name = None if panel is None else panel.get("name")
    if panel_name != track.panel:
        where = "one lab" if track.panel is None else f"lab panel {track.panel!r}"
        got = "one lab" if panel_name is None else f"lab panel {panel_name!r}"
        reasons.append(f"evaluated on {got}; the track evaluates on {where}")
    return TrackCheck(
        name=track.name,
        version=track.version,
        reasons=tuple(reasons),
        training_samples=training_samples,
        budget_samples=budget,
        builds=builds,
    )


def check_result(result: EvaluationResult) -> TrackCheck | None:
    """The track a result names, checked again with this package's definition from what the result carries (its
    ``method`` section, the training samples its ``track`` section recorded, its evaluation); None when it names
    no track.  A track this package does not define, or another version of it, makes the result off-track."""
    recorded = result.track
    if recorded is None:
        return None
    name, version = recorded["name"], recorded["version"]
    samples = training_samples(result.method)
    if samples is None:
        samples = recorded.get("training_samples")
    if name not in TRACKS:
        why = f"names track {name!r} version {version}, which this package does not define (valid: {sorted(TRACKS)})"
        return TrackCheck(name=name, version=version, reasons=(why,), training_samples=samples, budget_samples=None)
    track = TRACKS[name]
    if version != track.version:
        why = (
            f"evaluated for track {name!r} version {version}; this package defines version {track.version} (results "
            "of two versions of a track do not compare: re-evaluate on this version)"
        )
        return TrackCheck(
            name=name, version=version, reasons=(why,), training_samples=samples, budget_samples=track.budget_samples
        )
    return check_track(
        track,
        method=result.method,
        training_samples=samples,
        split=result.split,
        conditions=[(c.condition, c.episodes) for c in result.conditions],
        conditions_version=result.conditions_version,
        panel=result.panel,
    )


__all__ = [
    "DEFAULT_TRACK",
    "TRACKS",
    "Track",
    "TrackCheck",
    "TrackDataset",
    "UnknownTrackError",
    "check_result",
    "check_track",
    "evaluation_arguments",
    "get_track",
    "training_samples",
]
