"""``PickSort-Real-v0``: the lab, a stand-in for the real robot cell.

Its physics come from a lab config (``config.LabConfig``) that differs from the nominal model the way a real cell
does, and it adds what the simulator does not model: noisy and biased measurements, belt speed jitter and a
mis-tuned low-level arm controller (control latency is a world parameter both can have).  Grounding code treats
it as a black box: it steps it and reads its logs; ``provenance()`` names the lab but never its parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.lab.config import LabConfig, load_lab


class LabEnv(PickSortEnv):
    """PickSort in the lab.  Same spaces, reward and ``info`` as ``PickSortEnv``; see its docstring.

    Args:
        lab: A shipped lab name, a path to a lab JSON file, or a (partial) dict applied over the default lab.
        **kwargs: Any ``PickSortEnv`` argument except ``world`` (the lab decides its physics).
    """

    domain = "real"
    _extra_arguments = ["lab"]

    def __init__(self, *, lab: str | Path | Mapping[str, Any] | LabConfig | None = None, **kwargs: Any) -> None:
        if "world" in kwargs:
            raise TypeError("PickSort-Real-v0 takes no 'world' argument: the lab's physics come from 'lab' "
                            "(a shipped lab name, a JSON file or a dict)")
        self._lab = load_lab(lab)
        super().__init__(world=self._lab.world, **kwargs)
        self._belt_factor = 1.0
        self._arm_command_gain = np.asarray(self._lab.effects.arm_command_gain, dtype=float)

    @property
    def lab_name(self) -> str:
        """The lab's name (its parameters stay hidden)."""
        return self._lab.name

    # ------------------------------------------------------------------ hooks
    def _on_reset(self) -> None:
        self._belt_factor = 1.0
        super()._on_reset()

    def _on_control_step(self) -> None:
        fx = self._lab.effects
        if fx.belt_speed_jitter > 0:
            # Ornstein-Uhlenbeck relative speed fluctuation, exact discretisation over one control period.
            a = np.exp(-self.dt / fx.belt_jitter_time)
            noise = self.np_random.normal() * fx.belt_speed_jitter * np.sqrt(1.0 - a * a)
            self._belt_factor = 1.0 + a * (self._belt_factor - 1.0) + noise
        self.model.geom_surfacevel[self._belt_geom, 1] = -self.world_params.belt_speed * self._belt_factor

    def _command_gain(self) -> np.ndarray:
        return self._arm_command_gain

    def _observe(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        fx, rng = self._lab.effects, self.np_random
        out = dict(obs)

        def noisy(key: str, std: float, bias: np.ndarray | float = 0.0) -> None:
            if key in out and (std > 0 or np.any(bias)):
                out[key] = (out[key] + bias + std * rng.standard_normal(out[key].shape)).astype(np.float32)

        noisy("arm_qpos", fx.joint_pos_noise)
        noisy("hand_qpos", fx.joint_pos_noise)
        noisy("arm_qvel", fx.joint_vel_noise)
        noisy("hand_qvel", fx.joint_vel_noise)
        noisy("eef_pos", fx.eef_pos_noise)
        if "object_pos" in out:
            bias = np.tile(np.asarray(fx.object_pos_bias), self.num_objects)
            noisy("object_pos", fx.object_pos_noise, bias)
            vel = out["object_vel"].reshape(self.num_objects, 6).copy()
            vel[:, :3] += fx.object_vel_noise * rng.standard_normal((self.num_objects, 3))
            out["object_vel"] = vel.reshape(-1).astype(np.float32)
        return out

    def provenance(self) -> dict[str, Any]:
        prov = super().provenance()
        # The lab's physics are what grounding must recover: never write them into datasets or results.
        del prov["world_params"]
        prov["lab"] = self._lab.name
        return prov
