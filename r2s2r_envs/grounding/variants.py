"""The world-grounded variants: ``PickSort-WorldGrounded-v0``, PickSort with physics identified from lab logs, and
``PickSort-FullyGrounded-v0``, the same physics with the human-like generator as demonstrator.

Its one input is a grounding file written by ``r2s2r sysid`` (:mod:`r2s2r_envs.grounding.result`,
docs/grounding.md): ``gym.make("PickSort-WorldGrounded-v0")`` uses the file shipped for the default lab, and
``gym.make("PickSort-WorldGrounded-v0", grounding="my_lab.json")`` another lab's.  The file is read and checked
when the env is made, so a missing or malformed file fails at ``gym.make``, never later.

The demonstrator that comes with ``PickSort-WorldGrounded-v0`` is the scripted planner as tuned in the grounded
world (the file's ``demonstrator`` section, written by ``r2s2r sysid`` or ``r2s2r tune-planner
--update-grounding``; ``grounding.tuning``): ``make_demonstrator(env)`` and dataset generation use those settings.
A file without the section leaves the planner at its defaults.

The cameras see the look the file's ``appearance`` section identified (``r2s2r sysid --visual-logs``, through the
env's ``_appearance`` hook, as the lab shows its own); a file without one renders the spec sheet, as every simulator
does, and ``appearance_origin`` says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

from r2s2r_envs.behavior.variants import BEHAVIOR_FILE, BehaviorGroundedEnv
from r2s2r_envs.envs.file_arguments import FileArgument, object_check
from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.grounding.result import (
    DEFAULT_GROUNDING,
    GROUNDING_SCHEMA_VERSION,
    Grounding,
    load_grounding,
    shipped_groundings,
)
from r2s2r_envs.world.appearance import SPEC_SHEET, Appearance

#: ``grounding``: a shipped name, a grounding file, or the file's JSON object (checked as the file is).
GROUNDING_FILE = FileArgument(
    kind="grounding file",
    shipped=shipped_groundings,
    check=object_check(
        lambda value, where: Grounding.from_dict(dict(value), where=where),
        "a grounding file written by `r2s2r sysid`",
        TypeError,
    ),
    inline="a grounding file's JSON object",
)


class WorldGroundedEnv(PickSortEnv):
    """PickSort in a world identified from lab logs.  Same spaces, reward and ``info`` as ``PickSortEnv``.

    Args:
        grounding: A shipped grounding name (default ``"default"``: the default lab's), the path of a
            grounding file written by ``r2s2r sysid --out FILE``, or that file's JSON object (checked as the file
            is; how datasets record it, docs/datasets.md#env-arguments).
        **kwargs: Any ``PickSortEnv`` argument except ``world`` (the grounding decides the world).
            ``reset(options={"world": ...})`` and ``set_world`` still change the world per episode, e.g. for
            domain randomization around the grounding (:mod:`r2s2r_envs.grounding.randomization`).

    Raises:
        FileNotFoundError: ``grounding`` is neither a shipped name nor a file (the message lists the shipped ones).
        GroundingFileError: the file is malformed or of another schema version (a ``ValueError``).
        TypeError: a ``world`` argument, or an unknown one.
    """

    _extra_arguments: tuple[str, ...] = ("grounding",)
    file_arguments: ClassVar[Mapping[str, FileArgument]] = {"grounding": GROUNDING_FILE}

    def __init__(
        self,
        *,
        grounding: str | os.PathLike[str] | Mapping[str, Any] | Grounding = DEFAULT_GROUNDING,
        **kwargs: Any,
    ) -> None:
        if "world" in kwargs:
            raise TypeError(
                "PickSort-WorldGrounded-v0 takes no 'world' argument: its world comes from 'grounding' (a shipped "
                "grounding name or a grounding file written by `r2s2r sysid`); use PickSort-Ungrounded-v0 with "
                "world=... for a world of your own"
            )
        self.grounding = load_grounding(grounding)
        super().__init__(world=self.grounding.world, **kwargs)

    def _appearance(self) -> Appearance:
        """The grounding file's identified look, or the spec sheet when it has none (``appearance_origin``)."""
        look = self.grounding.appearance
        return SPEC_SHEET if look is None else look

    @property
    def appearance_origin(self) -> str:
        """Where the look the cameras render comes from (``Grounding.appearance_origin``)."""
        return self.grounding.appearance_origin

    @property
    def demonstrator_settings(self) -> dict[str, Any]:
        """The scripted planner's settings as tuned in this world (the grounding file's ``demonstrator`` section),
        when the env's demonstrator is the scripted planner; ``{}`` otherwise or when the file has none."""
        section = self.grounding.demonstrator
        if section is None or section["name"] != self.demonstrator:
            return {}
        return self.grounding.demonstrator_settings()

    def grounding_identity(self) -> dict[str, Any]:
        """Which grounding file this env runs: its name or path (``"inline"`` for a JSON object), the SHA-256 of its
        bytes (None inline: no file), the file's schema version (a version-1 file stays 1, though it is read as the
        current version) and the lab it was identified from (name and config hash)."""
        g = self.grounding
        return {
            "source": g.source,
            "sha256": g.file_sha256,
            "schema_version": g.file_schema_version or GROUNDING_SCHEMA_VERSION,
            "lab": dict(g.provenance.get("lab", {})),
            # Only with an identified look: a file without one is named exactly as before (spec-sheet renders).
            **({"appearance": g.appearance_origin} if g.appearance_section is not None else {}),
        }

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "grounding": self.grounding_identity()}


class FullyGroundedEnv(BehaviorGroundedEnv, WorldGroundedEnv):
    """PickSort grounded on both axes: physics identified from lab logs (``grounding``, as ``WorldGroundedEnv``)
    and the human-like generator fitted to the lab's demonstrations as its demonstrator (``behavior``, as
    ``BehaviorGroundedEnv``, docs/behavior.md).  Same spaces, reward and ``info`` as ``PickSortEnv``; its physics
    equal ``PickSort-WorldGrounded-v0``'s exactly, only the demonstrations differ.

    Args:
        grounding: A shipped grounding name (default ``"default"``), a grounding file (``r2s2r sysid``) or its JSON
            object.
        behavior: A shipped generator model name (default ``"default"``), a model file (``r2s2r fit-behavior``) or
            its JSON object.
        **kwargs: Any ``PickSortEnv`` argument except ``world`` (``demonstrator`` defaults to ``"humanlike"``).

    Both files are read and checked when the env is made; ``provenance()`` names both with their hashes.
    """

    _extra_arguments = ("behavior", "grounding")
    file_arguments: ClassVar[Mapping[str, FileArgument]] = {"grounding": GROUNDING_FILE, "behavior": BEHAVIOR_FILE}
