"""The look of a PickSort cell: what its cameras see, as opposed to its physics (docs/lab.md#appearance).

``Appearance`` holds the two cameras' calibration and sensor (focal-length and pose error against the spec sheet,
blur, noise, exposure), the lighting, the colours of belt, table, bins and objects, and a few static distractors out
of the workspace.  Its defaults are the spec sheet: what ``assets/pick_sort_scene.xml`` renders, which every simulator
renders.  A lab has its own (``LabConfig.appearance``); an evaluation condition may change it (``envs.conditions``:
``lighting``).  The builder writes the scene part into the model through ``MjSpec`` (``world.builder``); the
cameras' sensor part is applied to each rendered image (:func:`sensor_image`).  Nothing here touches physics or the
state observations.

Every number is declared with its unit and bound (``world.params.param``) and checked when an ``Appearance`` is made,
naming the field (``appearance.scene_camera.blur``) and its range.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from r2s2r_envs.mappings import check_keys
from r2s2r_envs.world.constants import CATEGORIES, SCENE_CAMERA, WRIST_CAMERA
from r2s2r_envs.world.params import Bound, check_fields, field_metadata, param

_RGB = Bound(length=3, maximum=1.0)
_PER_CATEGORY_RGB = Bound(length=3 * len(CATEGORIES), maximum=1.0)
_POSE_ERROR = Bound(length=3, minimum=-0.05, maximum=0.05)
#: Surface patterns a belt or table can have: one colour, a checkerboard of it and a 30 % darker shade, or dark
#: speckles on it (rubber grain, a scratched top).
PATTERNS: tuple[str, ...] = ("plain", "checker", "speckle")
#: Shapes of a distractor (``ClutterItem.shape``).
CLUTTER_SHAPES: tuple[str, ...] = ("box", "cylinder", "sphere")
#: A distractor stays out of the workspace: its centre at least this far from the robot's base horizontally, m (the
#: Panda reaches 0.855 m), ...
CLUTTER_MIN_DISTANCE = 0.9
#: ... and its footprint clear of the belt's strip, x within these bounds, m (belt and rails).
BELT_STRIP_X = (0.43, 0.67)
#: At most this many distractors.
MAX_CLUTTER = 6


@dataclasses.dataclass(frozen=True, kw_only=True)
class CameraAppearance:
    """One rendered camera as the cell really has it: calibration against the spec sheet, and its sensor.

    Attributes:
        focal_error: Real / spec-sheet focal length, minus 1, dimensionless (within +-0.1; the field of view narrows
            as it grows).  Ref: a lens used at its nominal data is off by 1-5 % of focal length; an intrinsic
            calibration is good to a fraction of a percent.
        translation_error: Where the camera really is minus where the spec sheet puts it, in the camera's own
            frame (x right, y up, z backwards), m (each within +-0.05).  Ref: hand-eye calibration is good to a
            few mm; a camera mounted to a drawing is 1-2 cm off.
        rotation_error: Its real orientation relative to the spec sheet's, a rotation vector in the camera's
            frame, rad (each within +-0.05).  Ref: calibrated, a fraction of a degree (0.005-0.01 rad); aimed by
            eye, 1-2 degrees.
        blur: Standard deviation of an isotropic Gaussian blur, in image widths (0-0.02; 0.002 is 1.3 px of a
            640 px image).  Ref: defocus and motion blur of an industrial camera at a 5-10 ms exposure, 1-2 px.
        noise: Standard deviation of white sensor noise, in full scale (0-0.1; 0.01 is 2.55 of 255).  Ref: an
            industrial CMOS camera at moderate gain, 0.5-2 % (35-45 dB SNR).
        exposure: Exposure relative to the spec sheet's, dimensionless (0.25-4; 2 is one stop brighter), applied
            to linear light.  Ref: a fixed exposure set for another light level, or auto-exposure, within +-1 stop.
    """

    focal_error: float = param(0.0, "dimensionless", Bound(minimum=-0.1, maximum=0.1))
    translation_error: tuple[float, float, float] = param((0.0, 0.0, 0.0), "m", _POSE_ERROR)
    rotation_error: tuple[float, float, float] = param((0.0, 0.0, 0.0), "rad", _POSE_ERROR)
    blur: float = param(0.0, "image widths", Bound(maximum=0.02))
    noise: float = param(0.0, "full scale", Bound(maximum=0.1))
    exposure: float = param(1.0, "dimensionless", Bound(minimum=0.25, maximum=4.0))

    @property
    def sensor_effects(self) -> bool:
        """Whether its images get blur, noise or another exposure (:func:`sensor_image`)."""
        return self.blur > 0.0 or self.noise > 0.0 or self.exposure != 1.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lighting:
    """The cell's light, relative to the spec sheet's (a white directional lamp straight above, and the renderer's
    head light, which fills in from the camera).

    Attributes:
        direction: Direction the lamp shines in, world frame (any length, normalised when applied; each entry within
            +-1, z at most -0.2: from above).  Ref: ceiling fixtures beside a cell light it 10-45 degrees off
            vertical.
        colour: Colour of every light, relative RGB (each 0-1; 1, 1, 1: the spec sheet's white, about 6500 K).
            Ref: lab LEDs are 3000-6500 K: about (1, 0.69, 0.43) at 3000 K and (1, 0.82, 0.64) at 4000 K.
        intensity: Multiplier of the direct light (the lamp's and the head light's diffuse and specular),
            dimensionless (0.2-3).  Ref: workplace lighting is 300-1000 lux; the spec sheet assumes about 500.
        ambient: Multiplier of the ambient light, dimensionless (0-2).  Ref: walls and ceilings give back 20-60 %.
    """

    direction: tuple[float, float, float] = param(
        (0.0, 0.0, -1.0), "unit vector", Bound(length=3, minimum=-1.0, maximum=1.0)
    )
    colour: tuple[float, float, float] = param((1.0, 1.0, 1.0), "relative RGB", _RGB)
    intensity: float = param(1.0, "dimensionless", Bound(minimum=0.2, maximum=3.0))
    ambient: float = param(1.0, "dimensionless", Bound(maximum=2.0))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Colours:
    """Colours (RGB, each 0-1, as the renderer takes them) and patterns of the cell's surfaces.  The defaults are the
    spec sheet's (``assets/``).  Ref: parts of one colour specification differ visibly between batches and makers
    (a colour difference of 2-5 units); belts come black, grey, green or blue.

    Attributes:
        belt: The belt's colour.
        table: The colour of the floor plane the cell stands on (its table).
        bins: Each bin's colour, 3 values per category (order ``CATEGORIES``: cube, ball, bar).
        objects: Each category's object colour, 3 values per category.
        belt_pattern: The belt's pattern (``PATTERNS``); it stands still (the belt's surface moves, its geom
            does not).
        table_pattern: The table's pattern.
    """

    belt: tuple[float, float, float] = param((0.12, 0.12, 0.13), "RGB", _RGB)
    table: tuple[float, float, float] = param((0.55, 0.57, 0.6), "RGB", _RGB)
    bins: tuple[float, ...] = param((0.75, 0.2, 0.2, 0.2, 0.6, 0.25, 0.2, 0.35, 0.8), "RGB", _PER_CATEGORY_RGB)
    objects: tuple[float, ...] = param((0.85, 0.15, 0.15, 0.15, 0.7, 0.2, 0.15, 0.3, 0.9), "RGB", _PER_CATEGORY_RGB)
    belt_pattern: str = param("plain", choices=PATTERNS)
    table_pattern: str = param("plain", choices=PATTERNS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClutterItem:
    """A static distractor out of the workspace: a box, cylinder or sphere that nothing touches (a toolbox, a
    cable drum, a bottle beside the cell).

    Attributes:
        shape: One of ``CLUTTER_SHAPES``.
        position: Its centre, world frame, m (x and y within +-2, the floor's extent; z 0-1.5); at least
            ``CLUTTER_MIN_DISTANCE`` from the robot's base horizontally, its footprint clear of the belt.
        size: Half-extents (box), radius and half-height (cylinder: the first two), radius (sphere: the first), m
            (each 0.01-0.3).
        colour: RGB, each 0-1.
    """

    shape: str = param("box", choices=CLUTTER_SHAPES)
    position: tuple[float, float, float] = param((-0.6, 0.9, 0.1), "m", Bound(length=3, minimum=-2.0, maximum=2.0))
    size: tuple[float, float, float] = param((0.1, 0.1, 0.1), "m", Bound(length=3, minimum=0.01, maximum=0.3))
    colour: tuple[float, float, float] = param((0.5, 0.5, 0.5), "RGB", _RGB)


_SECTIONS: dict[str, type] = {
    "scene_camera": CameraAppearance,
    "wrist_camera": CameraAppearance,
    "lighting": Lighting,
    "colours": Colours,
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Appearance:
    """The look of a cell (the defaults: the spec sheet, what the simulators render).

    Attributes:
        scene_camera: The fixed scene camera (``scene_image``, ``render()``).
        wrist_camera: The camera on the hand (``wrist_image``).
        lighting: The light.
        colours: The surfaces' colours and patterns.
        clutter: Up to ``MAX_CLUTTER`` static distractors (default none).
    """

    scene_camera: CameraAppearance = CameraAppearance()
    wrist_camera: CameraAppearance = CameraAppearance()
    lighting: Lighting = Lighting()
    colours: Colours = Colours()
    clutter: tuple[ClutterItem, ...] = ()

    def __post_init__(self) -> None:
        for name, cls in _SECTIONS.items():
            section = getattr(self, name)
            if not isinstance(section, cls):
                raise TypeError(f"appearance.{name} must be a {cls.__name__}, got {section!r}")
            _check(section, f"appearance.{name}")
        z = self.lighting.direction[2]
        if z > -0.2:
            raise ValueError(f"appearance.lighting.direction must point down (z <= -0.2, from above), got z={z!r}")
        clutter = self.clutter
        if not isinstance(clutter, (list, tuple)) or len(clutter) > MAX_CLUTTER:
            raise TypeError(f"appearance.clutter must be a list of at most {MAX_CLUTTER} items, got {clutter!r}")
        for i, item in enumerate(clutter):
            if not isinstance(item, ClutterItem):
                raise TypeError(f"appearance.clutter[{i}] must be a ClutterItem, got {item!r}")
            _check(item, f"appearance.clutter[{i}]")
            _check_out_of_workspace(item, f"appearance.clutter[{i}]")
        object.__setattr__(self, "clutter", tuple(clutter))

    def camera(self, name: str) -> CameraAppearance:
        """The appearance of camera ``name`` (``constants.CAMERAS``)."""
        return {SCENE_CAMERA: self.scene_camera, WRIST_CAMERA: self.wrist_camera}[name]

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON form (every section, lists for tuples)."""
        out: dict[str, Any] = {name: _plain(dataclasses.asdict(getattr(self, name))) for name in _SECTIONS}
        out["clutter"] = [_plain(dataclasses.asdict(item)) for item in self.clutter]
        return out

    @classmethod
    def from_dict(cls, raw: Any, base: Appearance | None = None, where: str = "appearance") -> Appearance:
        """An appearance from its JSON form, each section (and each of its fields) optional: what is missing comes
        from ``base`` (default: the spec sheet).  ``clutter``, when given, replaces ``base``'s.

        Raises:
            KeyError: an unknown section or field (the message lists the valid ones).
            TypeError / ValueError: a value of the wrong type or out of range (the message names the field and its
                range).
        """
        base = cls() if base is None else base
        valid = [*_SECTIONS, "clutter"]
        if not isinstance(raw, Mapping):
            raise TypeError(f"{where} must be a mapping with keys {valid}, got {raw!r}")
        check_keys(raw, valid, what="key", where=where)
        values: dict[str, Any] = {}
        for name, section in raw.items():
            if name == "clutter":
                if not isinstance(section, (list, tuple)):
                    raise TypeError(f"{where}.clutter must be a list of items {_names(ClutterItem)}, got {section!r}")
                values[name] = tuple(
                    _section(ClutterItem(), item, f"{where}.clutter[{i}]") for i, item in enumerate(section)
                )
            else:
                values[name] = _section(getattr(base, name), section, f"{where}.{name}")
        return dataclasses.replace(base, **values)


def _names(cls: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _section(base: Any, raw: Any, where: str) -> Any:
    valid = _names(base)
    if not isinstance(raw, Mapping):
        raise TypeError(f"{where} must be a mapping with keys {valid}, got {raw!r}")
    check_keys(raw, valid, what="key", where=where)
    section = dataclasses.replace(base, **{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
    _check(section, where)
    return section


def _check(section: Any, owner: str) -> None:
    check_fields(section, owner)
    for name, choices in field_metadata(type(section), "choices").items():
        value = getattr(section, name)
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"{owner}.{name} must be one of {list(choices)}, got {value!r}")


def _check_out_of_workspace(item: ClutterItem, owner: str) -> None:
    x, y, z = item.position
    if z < 0.0 or z > 1.5:
        raise ValueError(f"{owner}.position must have z within [0, 1.5] m (above the floor), got {item.position!r}")
    if math.hypot(x, y) < CLUTTER_MIN_DISTANCE:
        raise ValueError(
            f"{owner}.position must be at least {CLUTTER_MIN_DISTANCE} m from the robot's base horizontally (out of "
            f"the workspace), got {item.position!r} ({math.hypot(x, y):.3f} m)"
        )
    reach = item.size[0]  # half-extent along x (box), radius (cylinder, sphere)
    low, high = BELT_STRIP_X
    if x + reach > low and x - reach < high:
        raise ValueError(
            f"{owner}: its footprint (x {x - reach:.3f} to {x + reach:.3f} m) must stay clear of the belt's strip "
            f"x within [{low}, {high}] m"
        )


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


#: The spec sheet's look: what the simulators render.
SPEC_SHEET = Appearance()


# ---------------------------------------------------------------------- the cameras' sensor
_GAMMA = 2.2  # the images' encoding, close enough to sRGB for an exposure change


def sensor_image(image: np.ndarray, camera: CameraAppearance, rng: np.random.Generator) -> np.ndarray:
    """What a camera's sensor makes of a rendered image: blurred (optics and motion), exposed (in linear light), with
    white noise (``rng``), rounded and clipped to 8 bits.

    Args:
        image: A rendered (H, W, 3) uint8 image.
        camera: The camera's ``blur``, ``noise`` and ``exposure``.
        rng: Where the noise comes from.
    """
    x = image.astype(np.float32)
    if camera.blur > 0.0:
        x = _gaussian_blur(x, camera.blur * image.shape[1])
    if camera.exposure != 1.0:
        linear = (x / 255.0) ** _GAMMA * camera.exposure
        x = 255.0 * np.clip(linear, 0.0, 1.0) ** (1.0 / _GAMMA)
    if camera.noise > 0.0:
        x = x + rng.standard_normal(x.shape, dtype=np.float32) * np.float32(camera.noise * 255.0)
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def _gaussian_blur(x: np.ndarray, sigma: float) -> np.ndarray:
    # Separable, edges repeated; a kernel of +-3 sigma (at least one pixel each side).
    radius = max(1, int(math.ceil(3.0 * sigma)))
    t = np.arange(-radius, radius + 1, dtype=np.float32)
    kernel = np.exp(-0.5 * (t / max(sigma, 1e-6)) ** 2)
    kernel /= kernel.sum()
    for axis in (0, 1):
        pad = [(0, 0)] * x.ndim
        pad[axis] = (radius, radius)
        padded = np.pad(x, pad, mode="edge")
        n = x.shape[axis]
        x = sum(w * np.take(padded, np.arange(k, k + n), axis=axis) for k, w in enumerate(kernel))
    return x


__all__ = [
    "CLUTTER_SHAPES",
    "PATTERNS",
    "SPEC_SHEET",
    "Appearance",
    "CameraAppearance",
    "ClutterItem",
    "Colours",
    "Lighting",
    "sensor_image",
]
