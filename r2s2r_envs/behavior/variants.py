"""``PickSort-BehaviorGrounded-v0``: nominal physics, demonstrations by the human-like generator.

Its physics equal ``PickSort-Ungrounded-v0``'s exactly (the nominal world, the same observations, reward and
episode rules); only the demonstrator that comes with it differs: the generator fitted to the lab's
demonstrations (``behavior.humanlike``, docs/behavior.md) instead of the scripted planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from r2s2r_envs.behavior.fit import DEFAULT_MODEL, BehaviorModelError, load_model, model_sha256, shipped_models
from r2s2r_envs.envs.file_arguments import WORLD_FILE, FileArgument, object_check
from r2s2r_envs.envs.pick_sort import PickSortEnv

#: ``provenance()["behavior"]["model"]`` of a model given as a JSON object (its ``model_sha256`` identifies it).
INLINE_MODEL = "inline"


#: ``behavior``: a shipped model name, a model file, or the model's JSON object (checked as the file is).
BEHAVIOR_FILE = FileArgument(
    kind="behavior model",
    shipped=shipped_models,
    check=object_check(
        lambda value, where: load_model(value), "a model written by r2s2r fit-behavior", BehaviorModelError
    ),
    inline="a behavior model's JSON object",
)


class BehaviorGroundedEnv(PickSortEnv):
    """PickSort with the human-like generator as its demonstrator; see ``PickSortEnv`` for spaces, reward and
    ``info`` (identical: this class changes no physics).

    Args:
        behavior: The generator's fitted model: a shipped model name (``"default"``: fitted to the default lab's
            canonical ``lab-50`` demonstrations, ``r2s2r_envs/behavior/models/default.json.gz``), a model file
            written by ``r2s2r fit-behavior``, or that file's JSON object (how datasets record it,
            docs/datasets.md#env-arguments). Checked here, so a missing or malformed model fails at
            ``gymnasium.make``.
        **kwargs: Any ``PickSortEnv`` argument (``demonstrator`` defaults to ``"humanlike"``).

    Raises:
        r2s2r_envs.behavior.fit.BehaviorModelError: the model is missing, unreadable or malformed.
    """

    _extra_arguments: tuple[str, ...] = ("behavior",)
    file_arguments: ClassVar[Mapping[str, FileArgument]] = {"world": WORLD_FILE, "behavior": BEHAVIOR_FILE}

    def __init__(
        self,
        *,
        behavior: str | Path | Mapping[str, Any] = DEFAULT_MODEL,
        demonstrator: str = "humanlike",
        **kwargs: Any,
    ) -> None:
        if isinstance(behavior, Mapping):
            model = load_model(dict(behavior))
            #: The model the generator runs: a name or path, or the checked model itself when given inline.
            self.behavior: str | dict[str, Any] = model
        elif isinstance(behavior, (str, Path)):
            model = load_model(behavior)
            self.behavior = str(behavior)
        else:
            raise TypeError(
                f"behavior must be a shipped model name, a model file path or a model's JSON object, got {behavior!r} "
                "(fit one with r2s2r fit-behavior --demos FILE --out MODEL.json)"
            )
        self._behavior_sha256 = model_sha256(model)
        super().__init__(demonstrator=demonstrator, **kwargs)

    def provenance(self) -> dict[str, Any]:
        out = super().provenance()
        name = INLINE_MODEL if isinstance(self.behavior, dict) else self.behavior
        out["behavior"] = {"model": name, "model_sha256": self._behavior_sha256}
        return out
