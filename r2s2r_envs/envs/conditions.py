"""Named evaluation conditions: ``nominal`` and shifts that the lab's demonstrations do not cover.

A condition is a documented change of the world, applied the same way to the lab and to every simulated variant
(``PickSortEnv(condition=...)``; the lab's hidden world is changed inside the env, nothing of it is revealed), so a
simulator's ranking of policies can be compared with the lab's per condition (docs/protocol.md#conditions).  Each
is a frozen dataclass with its own ``apply_world`` (the change of a ``WorldParams``), ``object_shape`` (per
category and geom axis, applied by the builder through ``MjSpec``: no new assets), ``apply_appearance`` (the
change of how the cell looks, ``world.appearance``: images only) and ``apply_effects`` (the change of what a lab's
control loop adds to the world's timing, ``LoopEffects``: the lab only); the episode randomization is the same under
every condition.  ``CONDITIONS`` is the registry; ``CONDITIONS_VERSION`` changes whenever a definition does, and
results made under another version do not compare.  A new condition outside the standard mix changes no definition
and no standard result, so it leaves the version as it is.

The **diagnostic** conditions (``Condition.diagnostic``: ``no-latency``, ``nominal-belt``, ``nominal-timing``) are
not shifts a policy should withstand but interventions that test why a policy fails: they take part of the lab's
gap away (its loop delays, its belt).  They are outside the standard mix and never a benchmark score: a track and
a leaderboard refuse them (the grounding ablation's interventions run them, docs/ablation.md#interventions).

Example::

    import gymnasium as gym
    import r2s2r_envs

    env = gym.make("PickSort-Real-v0", condition="fast-belt")   # the lab with its belt 1.3x as fast
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import ClassVar

from r2s2r_envs.mappings import check_choice
from r2s2r_envs.world.appearance import Appearance
from r2s2r_envs.world.builder import ObjectShape
from r2s2r_envs.world.constants import CATEGORIES
from r2s2r_envs.world.params import WorldParams, nominal

#: Version of the condition definitions below: bumped when any of them changes (a result records it; the
#: leaderboard refuses to rank results of two versions together).
CONDITIONS_VERSION = 1

#: The objects' own shape: a geom size multiplier of 1 per category (order ``CATEGORIES``) and axis (box
#: half-extents x, y, z; a sphere uses the first entry, its radius).
IDENTITY_SHAPE: ObjectShape = ((1.0, 1.0, 1.0),) * len(CATEGORIES)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoopEffects:
    """What a lab's control loop adds to the world's timing, beyond what a ``WorldParams`` field expresses (all zero
    in a simulator): the part of a lab's hidden config that a condition may change (``Condition.apply_effects``).
    The lab makes one from its config inside the env and never hands it out.

    Attributes:
        late_command_probability: Chance that a command reaches the robot one control period late, per control
            period (the lab's ``effects.late_command_probability``).
        delay_jitter: Standard deviation of the object estimate's per-frame delay variation, s (the lab's
            ``perception.delay_jitter``).
    """

    late_command_probability: float = 0.0
    delay_jitter: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Condition:
    """An evaluation condition: a named, documented change of the world.

    Attributes:
        name: The condition's name (``condition=`` of the env, ``--conditions`` of ``r2s2r evaluate``).
        shifted: Whether it lies outside what the lab's demonstrations cover (counted in the "all shifted" figure).
        standard: Whether it is part of the standard mix (``STANDARD_MIX``).
        images_only: Whether it changes only what the cameras see (an env without images refuses it: there it
            would be ``nominal`` under another name).
        diagnostic: Whether it is an intervention that takes part of the lab's gap away, to test why a policy
            fails, rather than a shift (outside the standard mix, not shifted; a track or a leaderboard refuses it:
            not a benchmark score).
        episodes: Its episodes in the standard mix (docs/protocol.md#conditions), or when named alone.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    shifted: ClassVar[bool] = True
    standard: ClassVar[bool] = True
    images_only: ClassVar[bool] = False
    diagnostic: ClassVar[bool] = False
    episodes: int

    @property
    def object_shape(self) -> ObjectShape:
        """Geom size multiplier per category and axis (``IDENTITY_SHAPE``: the world's own objects)."""
        return IDENTITY_SHAPE

    def apply_world(self, world: WorldParams) -> WorldParams:
        """The world under this condition (``world`` itself when nothing of it changes)."""
        return world

    def apply_appearance(self, appearance: Appearance) -> Appearance:
        """How the cell looks under this condition (``appearance`` itself when nothing of it changes)."""
        return appearance

    def apply_effects(self, effects: LoopEffects) -> LoopEffects:
        """What a lab's control loop adds to the world's timing under this condition (``effects`` itself when
        nothing of it changes).  A simulator has none; the lab applies it to its hidden config inside the env."""
        return effects


@dataclasses.dataclass(frozen=True, kw_only=True)
class Nominal(Condition):
    """The world as it is: what the lab's demonstrations and every simulated variant cover."""

    name: ClassVar[str] = "nominal"
    description: ClassVar[str] = "the world as it is"
    shifted: ClassVar[bool] = False
    episodes: int = 50


@dataclasses.dataclass(frozen=True, kw_only=True)
class FastBelt(Condition):
    """The belt runs ``belt_speed_factor`` times as fast as the world's own (its fluctuation scales with it).

    Attributes:
        belt_speed_factor: Multiplier of ``WorldParams.belt_speed``, dimensionless.
            Ref: a conveyor's surface speed is proportional to its drive's frequency (an induction motor's speed
            follows its supply frequency), so a speed change is a drive-frequency change: 1.3 is a 50 Hz drive run
            at 65 Hz.  Chosen as the smallest round factor whose mean speed lies beyond every speed the lab's
            demonstrations saw: the default lab's belt runs at 0.092 m/s with a 6 % fluctuation, within about
            +-18 % (3 standard deviations), so at most ~0.109 m/s; 1.3x gives 0.120 m/s there (the fastest drawn lab's
            speed, ``lab.draw.WORLD_DRAW``) and 0.104 m/s in the nominal simulator, inside what picking conveyors
            run at (0.05-0.3 m/s, ``world.params.FIELD_BOUNDS``).
    """

    name: ClassVar[str] = "fast-belt"
    description: ClassVar[str] = "the belt 1.3x as fast as the world's own"
    episodes: int = 25
    belt_speed_factor: float = 1.3

    def apply_world(self, world: WorldParams) -> WorldParams:
        return dataclasses.replace(world, belt_speed=world.belt_speed * self.belt_speed_factor)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NovelObjects(Condition):
    """Objects of other proportions, sizes and masses, in the same three sorting categories (and colours).

    Attributes:
        cube_shape: Half-extent multipliers (x, y, z) of the cube: a flat block, 65 x 65 x 40 mm nominal.
        ball_scale: Radius multiplier of the ball: 75 mm across nominal.
        bar_shape: Half-extent multipliers (x, y, z) of the bar: longer and thinner, 143 x 30 x 30 mm nominal.
        object_mass_factor: Multiplier of the world's ``object_mass`` of every category, dimensionless.

    Ref: outside the training range on every axis: the lab's demonstrations see one size (``object_size_scale``
    0.97, drawn labs 0.95-1.05, the same proportions everywhere) and masses within about +-30 % of the lab's (a 10 %
    piece-to-piece variation; drawn labs 0.7-1.4x nominal); these are 1.25-1.3x larger or 0.75-0.8x thinner along
    an axis and 1.8x as heavy (0.43 kg for the lab's bar), within the arm's payload (3 kg) and the hand's span.
    """

    name: ClassVar[str] = "novel-objects"
    description: ClassVar[str] = "objects of other proportions and sizes, 1.8x as heavy, same categories"
    episodes: int = 25
    cube_shape: tuple[float, float, float] = (1.3, 1.3, 0.8)
    ball_scale: float = 1.25
    bar_shape: tuple[float, float, float] = (1.3, 0.75, 0.75)
    object_mass_factor: float = 1.8

    @property
    def object_shape(self) -> ObjectShape:
        shapes = {"cube": self.cube_shape, "ball": (self.ball_scale,) * 3, "bar": self.bar_shape}
        return tuple(shapes[c] for c in CATEGORIES)

    def apply_world(self, world: WorldParams) -> WorldParams:
        cube, ball, bar = (m * self.object_mass_factor for m in world.object_mass)
        return dataclasses.replace(world, object_mass=(cube, ball, bar))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RedLight(Condition):
    """Red light: every light of the cell (the lamp, the head light, the ambient) tinted red, its colour multiplied
    by ``light_colour`` (the spec sheet's white in a simulator, the lab's own light in the lab).  Images only: the
    state observations and the physics are those of ``nominal``.  Not in the standard mix (a state policy sees no
    change, so an env without images refuses it); run it by name (``--conditions lighting``).

    Attributes:
        light_colour: Multiplier of ``Appearance.lighting.colour`` per channel (R, G, B), dimensionless.
            Ref: the study's red-light shift; a red filter or red warning lamps pass most of the red and about a
            third of green and blue, so the objects' own colours (red cube, green ball, blue bar) and the bins' no
            longer read as they do under white light.
    """

    name: ClassVar[str] = "lighting"
    description: ClassVar[str] = "red light: the cell's lights tinted red (images only)"
    standard: ClassVar[bool] = False
    images_only: ClassVar[bool] = True
    episodes: int = 25
    light_colour: tuple[float, float, float] = (1.0, 0.35, 0.3)

    def apply_appearance(self, appearance: Appearance) -> Appearance:
        light = appearance.lighting
        r, g, b = (c * f for c, f in zip(light.colour, self.light_colour))
        return dataclasses.replace(appearance, lighting=dataclasses.replace(light, colour=(r, g, b)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Diagnostic(Condition):
    """A diagnostic condition: an intervention on the world that tests an explanation, never a benchmark score
    (outside the standard mix, not shifted; tracks and leaderboards refuse it), 50 episodes as ``nominal``."""

    shifted: ClassVar[bool] = False
    standard: ClassVar[bool] = False
    diagnostic: ClassVar[bool] = True
    episodes: int = 50


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoLatency(Diagnostic):
    """Diagnostic: the control loop without its delays.  The world's ``control_latency`` (command to execution) and
    ``perception_delay`` (the object estimates' age) are 0; in a lab its late commands and the estimate's delay
    jitter are off too (``LoopEffects``), so that no delay is left.  Everything else (physics, belt, sensor noise,
    calibration) is the world's own.

    Ref: the grounding ablation's timing hypothesis (docs/ablation.md#interventions): demos at a human pace grasp
    late, and under the lab's loop latency a late grasp closes behind a moving object.  Without the delays a
    policy's grasps land when it commands them: what remains of a variant's lab deficit is not the latency's.

    Attributes:
        control_latency: The world's ``control_latency`` under this condition, s.
        perception_delay: The world's ``perception_delay`` under this condition, s.
        late_command_probability: A lab's ``late_command_probability`` under this condition.
        delay_jitter: A lab's estimate delay jitter under this condition, s.
    """

    name: ClassVar[str] = "no-latency"
    description: ClassVar[str] = "diagnostic: no loop delays (latency, perception delay and jitter, late commands)"
    control_latency: float = 0.0
    perception_delay: float = 0.0
    late_command_probability: float = 0.0
    delay_jitter: float = 0.0

    def apply_world(self, world: WorldParams) -> WorldParams:
        return dataclasses.replace(world, control_latency=self.control_latency, perception_delay=self.perception_delay)

    def apply_effects(self, effects: LoopEffects) -> LoopEffects:
        return LoopEffects(late_command_probability=self.late_command_probability, delay_jitter=self.delay_jitter)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NominalBelt(Diagnostic):
    """Diagnostic: the belt of the nominal simulator (``world.params.nominal()``): its speed, no fluctuation, and its
    fluctuation time; everything else is the world's own.

    Ref: the grounding ablation's timing hypothesis (docs/ablation.md#interventions): the lab's belt runs faster
    than the nominal one and wanders (the default lab: 0.092 m/s, 6 % fluctuation), so a grasp that comes late
    misses by more there.  On the nominal belt what remains of a variant's lab deficit is not the belt's.

    Attributes:
        belt_speed: The world's ``belt_speed`` under this condition, m/s (nominal: 0.08).
        belt_speed_fluctuation: The world's ``belt_speed_fluctuation``, dimensionless (nominal: 0, a steady belt).
        belt_fluctuation_time: The world's ``belt_fluctuation_time``, s (nominal: 1.0; moot without fluctuation).
    """

    name: ClassVar[str] = "nominal-belt"
    description: ClassVar[str] = "diagnostic: the nominal simulator's belt (speed, no fluctuation)"
    belt_speed: float = dataclasses.field(default_factory=lambda: nominal().belt_speed)
    belt_speed_fluctuation: float = dataclasses.field(default_factory=lambda: nominal().belt_speed_fluctuation)
    belt_fluctuation_time: float = dataclasses.field(default_factory=lambda: nominal().belt_fluctuation_time)

    def apply_world(self, world: WorldParams) -> WorldParams:
        return dataclasses.replace(
            world,
            belt_speed=self.belt_speed,
            belt_speed_fluctuation=self.belt_speed_fluctuation,
            belt_fluctuation_time=self.belt_fluctuation_time,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class NominalTiming(NoLatency, NominalBelt):
    """Diagnostic: ``no-latency`` and ``nominal-belt`` at once, the timing of the nominal simulator: no loop delays
    and its belt.

    Ref: the grounding ablation's test of the timing hypothesis (docs/ablation.md#interventions): where an axis's lab
    effect under this condition differs from its effect under ``nominal``, timing explains that part of it.
    """

    name: ClassVar[str] = "nominal-timing"
    description: ClassVar[str] = "diagnostic: no-latency and nominal-belt at once (the nominal simulator's timing)"

    def apply_world(self, world: WorldParams) -> WorldParams:
        return NominalBelt.apply_world(self, NoLatency.apply_world(self, world))


#: Every condition by name, the standard mix's first, in its order; the diagnostic ones last.
CONDITIONS: dict[str, Condition] = {
    c.name: c for c in (Nominal(), FastBelt(), NovelObjects(), RedLight(), NoLatency(), NominalBelt(), NominalTiming())
}
#: The conditions a default evaluation runs, with their episode counts: about half nominal, half shifted.
STANDARD_MIX: dict[str, int] = {name: c.episodes for name, c in CONDITIONS.items() if c.standard}
#: The diagnostic conditions (``Condition.diagnostic``), in registry order: never a benchmark score.
DIAGNOSTIC_CONDITIONS: tuple[str, ...] = tuple(name for name, c in CONDITIONS.items() if c.diagnostic)


def check_images(condition: Condition, obs_mode: str) -> None:
    """Refuses an images-only ``condition`` for ``obs_mode`` ``"state"`` (it would be ``nominal`` under another name).

    Raises:
        ValueError: the message names the condition and the observation modes that have images.
    """
    if condition.images_only and obs_mode == "state":
        raise ValueError(
            f"condition {condition.name!r} changes only what the cameras see, and obs_mode='state' has no images (it "
            "would be 'nominal' under another name): choose obs_mode 'rgb' or 'state+rgb', or another condition"
        )


def check_not_diagnostic(names: Iterable[str], what: str) -> None:
    """Refuses diagnostic conditions where a benchmark score is made (a track, a leaderboard).

    Raises:
        ValueError: the message names the diagnostic conditions among ``names``, ``what`` refused them, and why.
    """
    found = [name for name in names if name in CONDITIONS and CONDITIONS[name].diagnostic]
    if found:
        raise ValueError(
            f"{what}: condition(s) {found} are diagnostic (interventions that take part of the lab's gap away, "
            "docs/ablation.md#interventions), not a benchmark score; evaluate under the benchmark's conditions "
            f"{[n for n, c in CONDITIONS.items() if not c.diagnostic]}"
        )


def get_condition(name: object) -> Condition:
    """The registered condition called ``name``.

    Raises:
        ValueError: an unknown name (the message lists the valid ones).
    """
    return CONDITIONS[str(check_choice(name, CONDITIONS, what="condition"))]


def apply_condition(condition: str | Condition, world: WorldParams) -> WorldParams:
    """``world`` under ``condition`` (a name or a ``Condition``): what ``PickSortEnv(condition=...)`` simulates.  The
    objects' proportions (``object_shape``) are the builder's part, not the world's.

    Raises:
        ValueError: an unknown condition name (the message lists the valid ones).
    """
    return (condition if isinstance(condition, Condition) else get_condition(condition)).apply_world(world)


def condition_record(name: str) -> dict[str, object]:
    """What a file says about a condition: its name, version, whether it is shifted, and its definition."""
    condition = get_condition(name)
    fields = {f.name: getattr(condition, f.name) for f in dataclasses.fields(condition) if f.name != "episodes"}
    return {
        "name": condition.name,
        "version": CONDITIONS_VERSION,
        "shifted": condition.shifted,
        "description": condition.description,
        "definition": {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()},
    }


__all__ = [
    "CONDITIONS",
    "CONDITIONS_VERSION",
    "DIAGNOSTIC_CONDITIONS",
    "IDENTITY_SHAPE",
    "STANDARD_MIX",
    "Condition",
    "FastBelt",
    "LoopEffects",
    "NoLatency",
    "Nominal",
    "NominalBelt",
    "NominalTiming",
    "NovelObjects",
    "RedLight",
    "apply_condition",
    "check_not_diagnostic",
    "condition_record",
    "get_condition",
]
