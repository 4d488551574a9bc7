"""``PickSort-Real-v0``: the lab, a stand-in for the real robot cell.

Its world (physics, sensing, timing) comes from a lab config (``config.LabConfig``) that differs from the
nominal model the way a real cell does, and it adds what no simulator parameter can express
(``config.UnmodeledEffects``): a mis-tuned low-level arm controller and objects that differ from piece to piece.
The sensing model and the belt fluctuation run through the same code as in the simulator.

The lab is a black box to grounding code (docs/concepts.md#the-lab): it steps the env and reads its logs.  So
``LabEnv`` refuses what a real cell could not give: its world parameters, its MuJoCo model and data, and
simulator states (``world_params``, ``model``, ``data``, ``get_state``, ``set_state``, ``set_world`` raise
``LabBoundaryError``), and ``provenance()`` names the lab (name and config hash) but never its parameters.

Its cameras see it as its ``appearance`` says (``world.appearance``: calibration, sensor, light, colours, clutter);
a lab without one renders as the simulators do.

A lab may also carry faults in its robot interface (``config.InterfaceFaults``, docs/lab.md#interface-faults):
permuted arm joints, joint readings in degrees, a scaled task-space step, BGR images.  They act only at the
boundary (the action going in, the observation coming out); a lab without them runs the code it ran before.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import numpy as np

from r2s2r_envs.envs.conditions import LoopEffects, get_condition
from r2s2r_envs.envs.file_arguments import FileArgument
from r2s2r_envs.envs.perception import PerceptionCamera
from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.lab.config import InterfaceFaults, LabConfig, available_labs, load_lab
from r2s2r_envs.world.appearance import Appearance
from r2s2r_envs.world.params import Bound, check_number

#: ``lab``: a shipped lab name, a lab file or a dict.  Never recorded by value: a lab config is the lab's hidden
#: parameters (a dataset names the lab by name and config hash; an inline lab is withheld from every file).
LAB_FILE = FileArgument(kind="lab config", shipped=available_labs, check=None, inline="a dict of lab config fields")

# Child of an episode's root seed sequence that seeds the lab's own effects (late commands); 0-4 are the env's.
_EFFECTS_STREAM = 5
# Readings indexed by arm joint, which the interface's joint order applies to.
_ARM_JOINT_KEYS = ("arm_qpos", "arm_qvel", "arm_torque")
_IMAGE_KEYS = ("scene_image", "wrist_image")


class LabBoundaryError(RuntimeError):
    """Something only a simulator has was asked of the lab (its parameters, its simulation state)."""


class LabEnv(PickSortEnv):
    """PickSort in the lab.  Same spaces, reward and ``info`` as ``PickSortEnv``; see its docstring.

    Args:
        lab: A shipped lab name, a path to a lab JSON file, or a (partial) dict applied over the default lab.
        **kwargs: Any ``PickSortEnv`` argument except ``world`` (the lab decides its world).
    """

    domain = "real"
    _extra_arguments = ("lab",)
    file_arguments: ClassVar[Mapping[str, FileArgument]] = {"lab": LAB_FILE}

    def __init__(self, *, lab: str | Path | Mapping[str, Any] | LabConfig | None = None, **kwargs: Any) -> None:
        if "world" in kwargs:
            raise TypeError(
                "PickSort-Real-v0 takes no 'world' argument: the lab's world comes from 'lab' "
                "(a shipped lab name, a JSON file or a dict)"
            )
        self._lab = load_lab(lab)
        self._arm_command_gain = np.asarray(self._lab.effects.arm_command_gain, dtype=float)
        # The condition's change of the loop's own effects (PickSortEnv applies its change of the world); resolved
        # here because the estimator, built with the world, needs the jitter.  A bad name: the env's ValueError.
        loop = get_condition(kwargs.get("condition", "nominal")).apply_effects(
            LoopEffects(
                late_command_probability=self._lab.effects.late_command_probability,
                delay_jitter=self._lab.perception.delay_jitter,
            )
        )
        self._late_probability = loop.late_command_probability
        self._delay_jitter = loop.delay_jitter
        self._backlash = self._lab.effects.finger_backlash
        self._late: np.ndarray | None = None  # a command that came late, executed with the next one
        self._held: np.ndarray | None = None  # the last command the robot executed
        self._finger_executed: np.ndarray | None = None  # finger targets after the backlash
        self._effects_rng = np.random.default_rng(0)
        self._interface: InterfaceFaults | None = self._lab.interface if self._lab.interface.faulty else None
        if self._interface is not None:
            self._joint_order = np.asarray(self._interface.arm_joint_order)
            self._permuted = bool(np.any(self._joint_order != np.arange(len(self._joint_order))))
            self._degrees = self._interface.arm_joint_units == "deg"
            self._bgr = self._interface.camera_channels == "bgr"
        super().__init__(world=self._lab.world, **kwargs)

    @property
    def lab_name(self) -> str:
        """The lab's name (its parameters stay hidden)."""
        return self._lab.name

    def lab_identity(self) -> dict[str, str]:
        """The lab's name and config hash: all that files may say about it."""
        return self._lab.identity()

    # ------------------------------------------------------------------ the boundary
    def _refuse(self, what: str) -> NoReturn:
        raise LabBoundaryError(
            f"the lab is a black box: its {what} is hidden, as a real robot cell's would be. Step the env, read its "
            "observations and datasets, or use a simulated id (PickSort-Ungrounded-v0) for simulator access"
        )

    @property
    def world_params(self) -> NoReturn:  # type: ignore[override]
        self._refuse("world (physics, sensing, timing)")

    @property
    def model(self) -> NoReturn:  # type: ignore[override]
        self._refuse("MuJoCo model")

    @property
    def data(self) -> NoReturn:  # type: ignore[override]
        self._refuse("simulation state (MjData)")

    def simulator_objects(self) -> None:
        """Never the true state: a demonstrator in the lab acts on what its cameras give."""
        return None

    def get_state(self) -> NoReturn:
        self._refuse("simulator state")

    def set_state(self, state: np.ndarray) -> NoReturn:
        self._refuse("simulator state")

    def set_world(self, world: Any) -> NoReturn:
        raise LabBoundaryError("the lab's world is fixed by its config: make PickSort-Real-v0 with another 'lab'")

    # ------------------------------------------------------------------ unmodeled effects
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        out = super().reset(seed=seed, options=options)
        seq = np.random.SeedSequence(self._episode_entropy, spawn_key=(_EFFECTS_STREAM,))
        self._effects_rng = np.random.default_rng(seq)
        self._late = self._held = None
        s = self.scene
        self._finger_executed = self._ctrl[s.hand_u].copy() if self._backlash > 0.0 else None
        return out

    def _resolve(self) -> None:
        super()._resolve()
        contact = self._lab.contact
        geoms = self.scene.object_geoms.reshape(-1)
        if contact.object_timeconst > 0.0:
            self._model.geom_solref[geoms, 0] = contact.object_timeconst
        if contact.rolling_friction > 0.0:
            self._model.geom_condim[geoms] = 6
            self._model.geom_friction[geoms, 2] = contact.rolling_friction

    def _perception_cameras(self) -> tuple[PerceptionCamera, ...] | None:
        cameras = self._lab.perception.cameras
        if not cameras:
            return None
        return tuple(
            PerceptionCamera(
                position=c.position, rotation_error=c.rotation_error, translation_error=c.translation_error
            )
            for c in cameras
        )

    def _perception_jitter(self) -> float:
        return self._delay_jitter

    def _appearance(self) -> Appearance:
        return self._lab.appearance

    def _command_gain(self) -> np.ndarray:
        return self._arm_command_gain

    def _late_command(self, a: np.ndarray) -> np.ndarray:
        """The command the robot executes this period, when commands can come late (``late_command_probability``):
        a late one leaves the last command in force (no new task-space step) and joins the next."""
        if self._late is not None:
            if self.control_mode == "task":
                a = a.copy()
                a[:6] += self._late[:6]  # the late step, and this one
            self._late = None
        if self._effects_rng.random() < self._late_probability:
            self._late = a
            held = self._held if self._held is not None else a
            hold = held.copy()
            if self.control_mode == "task":
                hold[:6] = 0.0  # no new step: the controller keeps its target
            return hold
        self._held = a
        return a

    def _apply_backlash(self) -> None:
        """Finger targets through a dead band of ``finger_backlash`` rad: each moves only once the command leaves
        the band around it."""
        s, b = self.scene, self._backlash
        executed = self._finger_executed
        command = self._ctrl[s.hand_u]
        if executed is None:
            executed = command.copy()
        executed = np.clip(executed, command - b, command + b)
        self._finger_executed = executed
        self._ctrl[s.hand_u] = executed

    def _object_physics(self, i: int, category: int) -> tuple[float, float]:
        fx = self._lab.effects
        # Two draws per object every episode (even at zero variation), so the physics stream's later draws do
        # not depend on the variation settings.
        z = self._physics_rng.standard_normal(2)
        mass_scale = max(1.0 + fx.object_mass_variation * z[0], 0.5)
        friction_scale = max(1.0 + fx.object_friction_variation * z[1], 0.5)
        return float(mass_scale), float(friction_scale)

    # ------------------------------------------------------------------ interface faults
    def _apply_action(self, a: np.ndarray) -> None:
        fault = self._interface
        if fault is not None:
            a = a.copy()
            if self.control_mode == "task":
                a[:6] *= fault.task_action_scale  # the controller takes steps beyond +-1 as they come
            elif self._permuted:
                a[self._joint_order] = a[: len(self._joint_order)].copy()  # command i drives joint order[i]
        if self._late_probability > 0.0:
            a = self._late_command(a)
        super()._apply_action(a)
        if self._backlash > 0.0:
            self._apply_backlash()

    def _get_obs(self) -> dict[str, np.ndarray]:
        obs = super()._get_obs()
        if self._interface is None:
            return obs
        for key in _ARM_JOINT_KEYS:
            if key not in obs:
                continue
            if self._permuted:
                obs[key] = obs[key][self._joint_order]  # reading i is joint order[i]
            if self._degrees and key != "arm_torque":
                obs[key] = np.rad2deg(obs[key]).astype(np.float32)
        if self._bgr:
            for key in _IMAGE_KEYS:
                if key in obs:
                    obs[key] = np.ascontiguousarray(obs[key][..., ::-1])
        return obs

    def _check_setup(self, setup: Any) -> dict[str, Any]:
        # The operator set-up's arm posture goes through the interface too: its joint order and units.
        if self._interface is not None and isinstance(setup, Mapping) and "arm_qpos" in setup:
            given = check_number(
                "setup", "arm_qpos", setup["arm_qpos"], Bound(length=len(self._joint_order), minimum=None)
            )
            q = np.deg2rad(given) if self._degrees else np.asarray(given, dtype=float)
            true = np.empty_like(q)
            true[self._joint_order] = q
            setup = {**setup, "arm_qpos": true.tolist()}
        return super()._check_setup(setup)

    def provenance(self) -> dict[str, Any]:
        # The lab's world is what grounding must recover: never write it into datasets or results.
        return {"domain": self.domain, "lab": self._lab.identity(), **self._settings()}
