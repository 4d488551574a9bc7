"""``PickSort-BehaviorGrounded-v0``: nominal physics, demonstrations by the human-like generator.

Its physics equal ``PickSort-Ungrounded-v0``'s exactly (the nominal world, the same observations, reward and
episode rules); only the demonstrator that comes with it differs: the generator fitted to the lab's
demonstrations (``behavior.humanlike``, docs/behavior.md) instead of the scripted planner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from r2s2r_envs.behavior.fit import DEFAULT_MODEL, load_model, model_sha256
from r2s2r_envs.envs.pick_sort import PickSortEnv


class BehaviorGroundedEnv(PickSortEnv):
    """PickSort with the human-like generator as its demonstrator; see ``PickSortEnv`` for spaces, reward and
    ``info`` (identical: this class changes no physics).

    Args:
        behavior: The generator's fitted model: a shipped model name (``"default"``: fitted to the default lab's
            canonical ``lab-50`` demonstrations, ``r2s2r_envs/behavior/models/default.json``) or a model file
            written by ``r2s2r fit-behavior``. Checked here, so a missing or malformed model fails at
            ``gymnasium.make``.
        **kwargs: Any ``PickSortEnv`` argument (``demonstrator`` defaults to ``"humanlike"``).

    Raises:
        r2s2r_envs.behavior.fit.BehaviorModelError: the model is missing, unreadable or malformed.
    """

    _extra_arguments = ("behavior",)

    def __init__(self, *, behavior: str | Path = DEFAULT_MODEL, demonstrator: str = "humanlike", **kwargs: Any) -> None:
        if not isinstance(behavior, (str, Path)):
            raise TypeError(
                f"behavior must be a shipped model name or a model file path, got {behavior!r} "
                "(fit one with r2s2r fit-behavior --demos FILE --out MODEL.json)"
            )
        self._behavior_sha256 = model_sha256(load_model(behavior))
        self.behavior = str(behavior)
        super().__init__(demonstrator=demonstrator, **kwargs)

    def provenance(self) -> dict[str, Any]:
        out = super().provenance()
        out["behavior"] = {"model": self.behavior, "model_sha256": self._behavior_sha256}
        return out
