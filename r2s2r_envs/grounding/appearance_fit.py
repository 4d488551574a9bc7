"""Appearance statistics from a cell's images: the light, the surfaces' colours and the cameras' sensor
(docs/grounding.md#appearance).

The lab's ``appearance_frames`` (``grounding.calibration``) are compared with the simulator's renders of the same
set-ups, through the cameras the calibration fitted:

* **regions**: two label renders per set-up (surfaces painted in pure codes) say which pixel shows the belt, the
  table, each bin and each part; the edges are left out.
* **light and colours**: per region and channel, the lab's pixels are fitted as a gain times the simulator's
  ambient part scaled by ``ambient / intensity`` plus its direct part (both rendered separately): one ratio for the
  whole cell, one gain per region and channel (a saturated pixel says only that the gain saturates it).  A gain is
  the surface's colour relative to the spec sheet times the light's colour times its intensity, which the images
  alone cannot split: the light's colour is the gain of the region no appearance recolours (the robot's paint and
  the belt's rails, a grey card the cell always has), with what the other gains share (grey world: parts and bins
  as specified, belt and table grey on average) weighing less, normalised to its brightest channel; its intensity
  the mean gain of the reference, parts and bins over that colour.  The lamp's direction is left at the spec
  sheet's.  Exposure is a gain on every pixel (in linear light), the same as a brighter light: only the cameras'
  ratio shows (their gains on the surfaces both see); their geometric mean is 1 and the fitted intensity and
  ambient carry the rest.
* **noise**: the temporal standard deviation of static frames (pixels neither black nor saturated), less the
  rounding's share.
* **blur**: the edge sharpness (mean gradient over that of a slightly blurred copy) near the parts and bins, in the
  lab's mean frames against the simulator's renders blurred by each candidate width (with the lab's residual noise
  added), interpolated.  Below about a third of a pixel it is not resolved (reads 0).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.grounding.calibration import FRAMES, IMAGE_SIZE
from r2s2r_envs.world.appearance import (
    _GAMMA,
    SPEC_SHEET,
    Appearance,
    CameraAppearance,
    Colours,
    Lighting,
    _gaussian_blur,
)
from r2s2r_envs.world.constants import CATEGORIES

IMAGE_KEYS = ("scene_image", "wrist_image")
#: Regions the light and colour fit reads: belt, table, then per category its bin and its part.
REGIONS: tuple[str, ...] = (
    "belt",
    "table",
    *(f"bin_{c}" for c in CATEGORIES),
    *(f"object_{c}" for c in CATEGORIES),
    "reference",
)
#: How much the reference weighs in the light's colour and intensity against each other region.
REFERENCE_WEIGHT = 8.0
#: The region no appearance recolours (the robot's paint, the belt's rails): a colour reference, like a grey card.
REFERENCE = "reference"
#: Candidate blur widths (image widths) the sharpness is interpolated on.
BLUR_GRID = (0.0, 0.002, 0.004, 0.006, 0.009, 0.013, 0.02)


class LookSim(PickSortEnv):
    """The nominal simulator seen as ``look`` (an ``Appearance``) looks: how grounding renders a candidate."""

    def __init__(self, *, look: Appearance = SPEC_SHEET, **kwargs: Any) -> None:
        self._look = look
        super().__init__(**kwargs)

    def _appearance(self) -> Appearance:
        return self._look


def render_runs(
    runs: Sequence[Any], look: Appearance, keys: Sequence[str] = IMAGE_KEYS
) -> dict[str, dict[str, np.ndarray]]:
    """The simulator's observations ``keys`` (images: (T+1, H, W, 3)) of the same set-ups and commands as ``runs``
    (``LogRun``s of a visual log), seen as ``look``."""
    from r2s2r_envs.grounding.excitation import execute
    from r2s2r_envs.grounding.excitation_plan import RunPlan

    out: dict[str, dict[str, np.ndarray]] = {}
    env = None
    try:
        for run in runs:
            if env is None:
                env = LookSim(look=look, **_sim_kwargs(run))
            plan = RunPlan(run.name, run.protocol, run.settings, run.control_mode, run.setup, run.steps, run.actions)
            record = execute(env, plan, run.seed)
            out[run.name] = {k: record["obs"][k] for k in keys}
    finally:
        if env is not None:
            env.close()
    return out


def match_postures(runs: Sequence[Any]) -> list[Any]:
    """``runs`` with their arm commands and start corrected so that the nominal simulator's arm holds the posture
    the lab measured (its static frames' mean ``arm_qpos``): the arms sag differently under their own gains, and
    the wrist camera's view follows the joint angles."""
    from r2s2r_envs.grounding.excitation_plan import JointCommands

    first = render_runs(runs, SPEC_SHEET, keys=("arm_qpos",))
    cmd = JointCommands()
    span = cmd.arm_hi - cmd.arm_lo
    out = []
    for run in runs:
        target = np.asarray(run.obs["arm_qpos"][FRAMES[0] : FRAMES[1]], dtype=float).mean(axis=0)
        got = np.asarray(first[run.name]["arm_qpos"][FRAMES[0] : FRAMES[1]], dtype=float).mean(axis=0)
        actions = np.array(run.actions, dtype=np.float32)
        actions[:, : len(target)] += (2.0 * (target - got) / span).astype(np.float32)
        start = np.clip(target, cmd.arm_lo, cmd.arm_hi)
        setup = {**run.setup, "arm_qpos": [float(q) for q in start]}
        out.append(dataclasses.replace(run, actions=np.clip(actions, -1.0, 1.0), setup=setup))
    return out


def _sim_kwargs(run: Any) -> dict[str, Any]:
    return {k: v for k, v in run.env_kwargs.items() if k != "sensors"}


# ---------------------------------------------------------------------- regions
def label_looks() -> tuple[Appearance, Appearance]:
    # First: belt red, table green, bins blue, parts black; second: bins and parts by category (red, green, blue).
    dark = Lighting(intensity=0.2, ambient=2.0)
    codes = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    first = Colours(belt=(1.0, 0.0, 0.0), table=(0.0, 1.0, 0.0), bins=(0.0, 0.0, 1.0) * 3, objects=(0.0,) * 9)
    second = Colours(belt=(0.0, 0.0, 0.0), table=(0.0, 0.0, 0.0), bins=codes, objects=codes)
    return Appearance(lighting=dark, colours=first), Appearance(lighting=dark, colours=second)


def _code(image: np.ndarray) -> np.ndarray:
    """Per pixel: 0-2 the pure channel it shows, -1 black, -2 anything else."""
    x = image.astype(np.float64)
    top = x.max(axis=2)
    channel = x.argmax(axis=2)
    second = np.sort(x, axis=2)[..., 1]
    code = np.where((top > 40.0) & (second < 0.25 * top), channel, -2)
    return np.where(top < 12.0, -1, code)


def region_masks(first: np.ndarray, second: np.ndarray) -> dict[str, np.ndarray]:
    """Boolean masks (H, W) of ``REGIONS`` from the two label renders, each eroded by one pixel."""
    a, b = _code(first), _code(second)
    masks = {
        "belt": (a == 0) & (b == -1),
        "table": (a == 1) & (b == -1),
    }
    for k, c in enumerate(CATEGORIES):
        masks[f"bin_{c}"] = (a == 2) & (b == k)
        masks[f"object_{c}"] = (a == -1) & (b == k)
    masks[REFERENCE] = (a == -2) & (b == -2) & (np.abs(first.astype(np.float64) - second).sum(axis=2) < 6.0)
    return {name: _erode(mask) for name, mask in masks.items()}


def edge_band(regions: dict[str, np.ndarray], width: int = 3) -> np.ndarray:
    """Pixels within ``width`` of a part or a bin (their edges, which lab and simulator both show)."""
    mask = np.zeros_like(next(iter(regions.values())))
    for name, region in regions.items():
        if name.startswith(("bin_", "object_")):
            mask |= region
    for _ in range(width):
        mask = _dilate(mask)
    return mask


def _dilate(mask: np.ndarray) -> np.ndarray:
    out = mask.copy()
    out[1:] |= mask[:-1]
    out[:-1] |= mask[1:]
    out[:, 1:] |= mask[:, :-1]
    out[:, :-1] |= mask[:, 1:]
    return out


def _erode(mask: np.ndarray) -> np.ndarray:
    out = mask.copy()
    out[1:] &= mask[:-1]
    out[:-1] &= mask[1:]
    out[:, 1:] &= mask[:, :-1]
    out[:, :-1] &= mask[:, 1:]
    return out


# ---------------------------------------------------------------------- light and colours
@dataclasses.dataclass(frozen=True)
class LightFit:
    """The light and colours fitted, each camera's exposure relative to the other's (their geometric mean 1: the
    common part is the light's intensity), and per region its pixels and gains."""

    lighting: dict[str, Any]
    colours: dict[str, Any]
    exposure: dict[str, float]
    ambient_ratio: float
    gains: dict[str, list[float]]
    pixels: dict[str, int]


def fit_light(
    lab: dict[str, dict[str, np.ndarray]],
    ambient_part: dict[str, dict[str, np.ndarray]],
    direct_part: dict[str, dict[str, np.ndarray]],
    masks: dict[str, dict[str, dict[str, np.ndarray]]],
) -> LightFit:
    """Fit the light and colours (module docstring) from the lab's mean frames and the simulator's ambient and direct
    parts (run -> key -> (H, W, 3) float), over the region masks (run -> key -> region -> mask)."""
    lab_px: dict[tuple[str, str], list[np.ndarray]] = {}
    amb_px: dict[tuple[str, str], list[np.ndarray]] = {}
    dir_px: dict[tuple[str, str], list[np.ndarray]] = {}
    for run, keys in masks.items():
        for key, regions in keys.items():
            for region, mask in regions.items():
                lab_px.setdefault((region, key), []).append(lab[run][key][mask])
                amb_px.setdefault((region, key), []).append(ambient_part[run][key][mask])
                dir_px.setdefault((region, key), []).append(direct_part[run][key][mask])
    cut = {rk: np.concatenate(v) for rk, v in lab_px.items()}
    seen = [rk for rk, v in cut.items() if len(v) >= 20]
    ya = {rk: cut[rk] for rk in seen}
    aa = {rk: np.concatenate(amb_px[rk]) for rk in seen}
    da = {rk: np.concatenate(dir_px[rk]) for rk in seen}
    keys_of = {r: [k for (q, k) in seen if q == r] for r in REGIONS}
    used = [r for r in REGIONS if keys_of[r]]
    y = {r: np.concatenate([ya[(r, k)] for k in keys_of[r]]) for r in used}
    a = {r: np.concatenate([aa[(r, k)] for k in keys_of[r]]) for r in used}
    d = {r: np.concatenate([da[(r, k)] for k in keys_of[r]]) for r in used}
    # Pixels no channel of which is clipped (lab or simulator) choose the ambient ratio.
    clear = {
        r: (y[r].max(axis=1) < _CLIP) & (y[r].min(axis=1) > 1.0) & ((a[r] + d[r]).max(axis=1) < _CLIP) for r in used
    }

    def gains(rho: float) -> tuple[dict[str, np.ndarray], float]:
        out, cost = {}, 0.0
        for r in used:
            m = clear[r]
            if m.sum() < 10:
                continue
            basis, target = rho * a[r][m] + d[r][m], y[r][m]
            g = (basis * target).sum(axis=0) / np.maximum((basis * basis).sum(axis=0), 1e-9)
            out[r] = g
            cost += float((((target - g * basis) ** 2).sum(axis=0) / max(1, len(target))).sum())
        return out, cost

    grid = np.linspace(0.2, 4.0, 39)
    costs = [gains(float(rho))[1] for rho in grid]
    k = int(np.argmin(costs))
    lo, hi = grid[max(0, k - 1)], grid[min(len(grid) - 1, k + 1)]
    fine = np.linspace(lo, hi, 21)
    rho = float(fine[int(np.argmin([gains(float(r))[1] for r in fine]))])
    # Per region and camera a gain; the cameras' ratio over the regions both see is their exposure's.
    per = {rk: _censored_gain(ya[rk], rho * aa[rk] + da[rk]) for rk in seen}
    saturated = {rk: (np.minimum(ya[rk], 255.0) >= _CLIP).mean(axis=0) for rk in seen}
    cameras = sorted({k for (_, k) in seen})
    factor = {k: 1.0 for k in cameras}
    both = [r for r in used if len(keys_of[r]) == len(cameras) > 1]
    if both:
        first, second = cameras[0], cameras[1]
        diffs = []
        for r in both:
            ok = (saturated[(r, first)] < 0.3) & (saturated[(r, second)] < 0.3)
            if ok.any():
                diffs.append(float(np.mean(np.log(per[(r, first)][ok] / per[(r, second)][ok]))))
        if diffs:
            half = float(np.median(diffs)) / 2.0
            factor = {first: math.exp(half), second: math.exp(-half)}
    # Pooled over the cameras, a channel mostly saturated in one camera trusts the other.
    g, sat = {}, {}
    for r in used:
        w = np.array([(saturated[(r, k)] < 0.3) + 1e-3 for k in keys_of[r]])
        logs_rk = np.array([np.log(per[(r, k)] / factor[k]) for k in keys_of[r]])
        g[r] = np.exp((w * logs_rk).sum(axis=0) / w.sum(axis=0))
        sat[r] = np.min([saturated[(r, k)] for k in keys_of[r]], axis=0)
    # The light's colour: the reference's gain where it is seen (its colours are specified and no appearance changes
    # them), else grey world: the parts and bins are their specified colours and the belt and table some grey on
    # average, so the light's colour is what their gains share (a surface's gain taken relative to a grey of its
    # brightness).  A channel mostly saturated in a region says nothing of it.
    spec_rgb = _spec_rgb()
    logs, weights = [], []
    for r in used:
        if r == REFERENCE:
            shared = g[r]
        else:
            shared = g[r] * (spec_rgb[r] / spec_rgb[r].mean() if r in ("belt", "table") else 1.0)
        logs.append(np.log(np.maximum(shared, 1e-6)))
        weights.append((sat[r] < 0.3).astype(float) * (REFERENCE_WEIGHT if r == REFERENCE else 1.0))
    w = np.array(weights)
    light = np.exp((np.array(logs) * w).sum(axis=0) / np.maximum(w.sum(axis=0), 1e-9))
    colour = light / light.max()
    parts = [r for r in used if r.startswith(("bin_", "object_")) or r == REFERENCE] or used
    weight = np.array([REFERENCE_WEIGHT if r == REFERENCE else 1.0 for r in parts])
    level = np.array([np.log(np.maximum(g[r] / colour, 1e-6)).mean() for r in parts])
    intensity = float(np.exp((weight * level).sum() / weight.sum()))
    intensity = float(np.clip(intensity, 0.2, 3.0))
    spec = Colours()
    fitted: dict[str, Any] = {}
    for surface in ("belt", "table"):
        base = np.asarray(getattr(spec, surface))
        fitted[surface] = _rgb(base * g[surface] / (colour * intensity) if surface in g else base)
    for parts_name in ("bins", "objects"):
        values = list(getattr(spec, parts_name))
        for k, c in enumerate(CATEGORIES):
            region = f"{parts_name[:-1] if parts_name == 'bins' else 'object'}_{c}"
            if region in g:
                base = np.asarray(values[3 * k : 3 * k + 3])
                values[3 * k : 3 * k + 3] = _rgb(base * g[region] / (colour * intensity))
        fitted[parts_name] = [float(v) for v in values]
    lighting = {
        "colour": _rgb(colour),
        "intensity": round(intensity, 4),
        "ambient": round(float(np.clip(rho * intensity, 0.0, 2.0)), 4),
    }
    return LightFit(
        lighting=lighting,
        colours=fitted,
        exposure={k: round(float(np.clip(f**_GAMMA, 0.25, 4.0)), 4) for k, f in factor.items()},
        ambient_ratio=rho,
        gains={r: [round(float(v), 4) for v in g[r]] for r in used},
        pixels={r: int(len(y[r])) if r in y else 0 for r in REGIONS},
    )


def _spec_rgb() -> dict[str, np.ndarray]:
    spec = Colours()
    out = {"belt": np.asarray(spec.belt), "table": np.asarray(spec.table)}
    for k, c in enumerate(CATEGORIES):
        out[f"bin_{c}"] = np.asarray(spec.bins[3 * k : 3 * k + 3])
        out[f"object_{c}"] = np.asarray(spec.objects[3 * k : 3 * k + 3])
    return out


_CLIP = 250.0  # a pixel value at or above this is taken as saturated


def _censored_gain(observed: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Per channel, the gain g for which min(clip, g * basis) best matches min(clip, observed): a saturated region
    says only that its gain is large enough to saturate."""
    out = np.empty(3)
    target = np.minimum(observed, _CLIP)
    for c in range(3):
        b, t = basis[:, c], target[:, c]
        clear = t < _CLIP
        start = float((b[clear] @ t[clear]) / max(float(b[clear] @ b[clear]), 1e-9)) if clear.sum() >= 5 else 1.0
        start = max(start, 1e-3)
        candidates = start * np.exp(np.linspace(-0.7, 1.4, 85))
        costs = [float(np.mean((np.minimum(_CLIP, gain * b) - t) ** 2)) for gain in candidates]
        out[c] = candidates[int(np.argmin(costs))]
    return out


def _rgb(values: Any) -> list[float]:
    return [round(float(v), 4) for v in np.clip(np.asarray(values, dtype=float), 0.0, 1.0)]


# ---------------------------------------------------------------------- patterns
#: A pattern's mean colour relative to its base colour (``world.builder``: a checkerboard of the colour and a 30 %
#: darker shade; dark speckles, half as bright, on 15 % of it).
PATTERN_MEAN = {"plain": 1.0, "checker": 0.85, "speckle": 0.925}
#: A pattern is chosen over plain when its error is below this share of plain's.
PATTERN_MARGIN = 0.85


def with_patterns(colours: Colours, patterns: dict[str, str], levels: dict[str, np.ndarray] | None = None) -> Colours:
    """``colours`` (the surfaces' mean colours) with belt and table patterns: each base colour scaled so that the
    pattern keeps the mean, and by its ``levels`` factor if given."""
    values: dict[str, Any] = {}
    for surface, pattern in patterns.items():
        base = np.asarray(getattr(colours, surface)) / PATTERN_MEAN[pattern]
        if levels is not None:
            base = base * np.asarray(levels[surface])
        values[surface] = tuple(float(v) for v in np.clip(base, 0.0, 1.0))
        values[f"{surface}_pattern"] = pattern
    return dataclasses.replace(colours, **values)


def choose_patterns(
    lab: dict[str, dict[str, np.ndarray]],
    renders: dict[str, dict[str, dict[str, np.ndarray]]],
    masks: dict[str, dict[str, dict[str, np.ndarray]]],
) -> tuple[dict[str, str], dict[str, np.ndarray], dict[str, dict[str, float]]]:
    """Per surface (belt, table), the pattern (``renders``: pattern -> run -> key -> mean frame, every surface in
    that pattern) whose render, at its best level per channel, is nearest the lab's mean frames over the surface's
    unsaturated pixels; that level (a factor per channel on the surface's colour); each pattern's mean squared
    error."""
    chosen: dict[str, str] = {}
    levels: dict[str, np.ndarray] = {}
    errors: dict[str, dict[str, float]] = {}
    for surface in ("belt", "table"):
        errors[surface], scales = {}, {}
        for pattern, frames in renders.items():
            ys, xs, total = [], [], 0
            for run, keys in masks.items():
                for key, regions in keys.items():
                    m = regions[surface]
                    y, x = lab[run][key][m], frames[run][key][m]
                    ok = (y.max(axis=1) < _CLIP) & (x.max(axis=1) < _CLIP)
                    total += len(y)
                    ys.append(y[ok])
                    xs.append(x[ok])
            y, x = np.concatenate(ys), np.concatenate(xs)
            scale = (x * y).sum(axis=0) / np.maximum((x * x).sum(axis=0), 1e-9) if len(y) else np.ones(3)
            scales[pattern] = scale
            errors[surface][pattern] = round(float(((y - scale * x) ** 2).mean()) if len(y) else 0.0, 3)
        best = min(errors[surface], key=lambda p: errors[surface][p])
        # A surface mostly saturated shows neither its pattern nor its level: plain, at the gain fit's colour.  A
        # pattern must beat plain clearly.
        if len(y) < 0.5 * total or errors[surface][best] > PATTERN_MARGIN * errors[surface]["plain"]:
            best = "plain"
            scales[best] = np.ones(3) if len(y) < 0.5 * total else scales[best]
        chosen[surface] = best
        levels[surface] = scales[best]
    return chosen, levels, errors


# ---------------------------------------------------------------------- the sensor
def estimate_noise(images: Sequence[np.ndarray]) -> float:
    """White-noise level (full scale) from runs' static frames (each (T+1, H, W, 3) uint8; ``FRAMES`` are read):
    the median over pixels of their temporal variance, less the rounding's 1/12, pixels near black or saturation
    left out."""
    variances = []
    for frames in images:
        x = np.asarray(frames[FRAMES[0] : FRAMES[1]], dtype=np.float64)
        mean = x.mean(axis=0)
        ok = (mean > 20.0) & (mean < 235.0)
        variances.append(x.var(axis=0, ddof=1)[ok])
    v = float(np.median(np.concatenate(variances))) if variances else 0.0
    # The median of a chi-square with n-1 degrees of freedom over n-1 is below 1: correct for it.
    n = FRAMES[1] - FRAMES[0]
    v /= 1.0 - 2.0 / (9.0 * (n - 1))
    return float(np.clip(math.sqrt(max(0.0, v - 1.0 / 12.0)) / 255.0, 0.0, 0.1))


def sharpness(image: np.ndarray, mask: np.ndarray | None = None) -> float:
    """Mean gradient magnitude of ``image`` over that of a copy blurred by one pixel, over ``mask`` (default all
    pixels): larger when sharper, and unchanged by a gain on the image."""
    grey = np.asarray(image, dtype=np.float64).mean(axis=2)
    m = np.ones(grey.shape, dtype=bool) if mask is None else mask

    def grad(x: np.ndarray) -> float:
        gy, gx = np.abs(np.diff(x, axis=0)), np.abs(np.diff(x, axis=1))
        return float(gy[m[1:] & m[:-1]].sum() + gx[m[:, 1:] & m[:, :-1]].sum())

    soft = _gaussian_blur(grey[..., None].astype(np.float32), 1.0)[..., 0]
    return grad(grey) / max(grad(soft), 1e-9)


def estimate_blur(
    lab: Sequence[np.ndarray],
    sim: Sequence[np.ndarray],
    noise: float,
    masks: Sequence[np.ndarray | None] | None = None,
    seed: int = 0,
) -> float:
    """Blur (image widths) that makes the simulator's renders ``sim`` (mean frames of the same set-ups, through the
    fitted cameras) as sharp as the lab's mean frames ``lab`` over ``masks`` (the edges both show: around the parts
    and bins, not the surfaces' patterns); the lab's residual noise (``noise`` over the square root of the frames
    averaged) is added to the renders first."""
    masks = [None] * len(lab) if masks is None else masks
    rng = np.random.default_rng(seed)
    residual = noise * 255.0 / math.sqrt(FRAMES[1] - FRAMES[0])
    target = float(np.mean([sharpness(x, m) for x, m in zip(lab, masks)]))
    curve = []
    for width in BLUR_GRID:
        values = []
        for x, m in zip(sim, masks):
            y = np.asarray(x, dtype=np.float32)
            if width > 0:
                y = _gaussian_blur(y, width * y.shape[1])
            y = y + rng.standard_normal(y.shape).astype(np.float32) * np.float32(residual)
            values.append(sharpness(y, m))
        curve.append(float(np.mean(values)))
    # Sharpness falls as the blur grows: interpolate the target on the decreasing curve.
    xs, ys = np.array(BLUR_GRID), np.array(curve)
    if target >= ys[0]:
        return 0.0
    if target <= ys[-1]:
        return float(xs[-1])
    order = np.argsort(ys)
    return float(np.interp(target, ys[order], xs[order]))


def camera_appearance(fields: dict[str, Any], noise: float, blur: float, exposure: float = 1.0) -> CameraAppearance:
    """A camera's appearance from its calibration fields and sensor estimates."""
    return CameraAppearance(
        exposure=float(np.clip(exposure, 0.25, 4.0)),
        focal_error=fields["focal_error"],
        translation_error=tuple(fields["translation_error"]),
        rotation_error=tuple(fields["rotation_error"]),
        blur=float(np.clip(blur, 0.0, 0.02)),
        noise=float(np.clip(noise, 0.0, 0.1)),
    )


__all__ = [
    "BLUR_GRID",
    "IMAGE_SIZE",
    "REGIONS",
    "LightFit",
    "LookSim",
    "camera_appearance",
    "choose_patterns",
    "edge_band",
    "estimate_blur",
    "estimate_noise",
    "fit_light",
    "label_looks",
    "match_postures",
    "region_masks",
    "render_runs",
    "sharpness",
    "with_patterns",
]
