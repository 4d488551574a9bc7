"""Camera calibration from a cell's images: the visual logging protocols and the fit of each camera's focal length
and pose error (docs/lab_logs.md#visual-protocols, docs/grounding.md#appearance).

Two protocols make a *visual log* (``r2s2r log-lab --visual``), a log directory of the usual format
(``grounding.logs``) whose runs observe ``obs_mode="state+rgb"`` at :data:`IMAGE_SIZE` pixels:

* ``camera_calibration``: the calibration target is the cell's own parts, three of distinct colours (red cube, green
  ball, blue bar) placed by a person at measured spots on the stopped belt and on the table, with the arm held at a
  logged posture.  Each set-up is logged twice, with the parts and without them (``<run>_empty``, same posture):
  the difference of the two isolates the parts, whatever the light and the surfaces look like.  Some set-ups keep
  the arm retracted for the scene camera; the others point the wrist camera at the parts from several postures.
* ``appearance_frames``: the empty lit cell and parts placed at measured spots, arm at home, static frames: the
  colour and light statistics, the sensor's noise and blur, and the held-out frames of the visual-gap figure.

The fit (:func:`fit_cameras`) detects each part's pixel centroid in the lab's images and fits, per camera, the
``focal_error``, ``translation_error`` and ``rotation_error`` of ``world.appearance.CameraAppearance`` by least
squares against the centroids the simulator's forward kinematics (at the logged joint angles) and pinhole camera
predict.  The simulator renders the same set-ups at the spec sheet, and the difference between its detected and
projected centroids (a part is a solid, not a point) corrects the prediction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import mujoco
import numpy as np

from r2s2r_envs.grounding.excitation_plan import JointCommands, RunPlan, nominal_layout_height
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import build_model, scene_layout
from r2s2r_envs.world.params import nominal

#: Side of the square images a visual log holds, pixels (``image_size``).
IMAGE_SIZE = 160
#: The visual protocols and what each exposes (``world.appearance`` fields).
VISUAL_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "camera_calibration": ("focal_error", "translation_error", "rotation_error"),
    "appearance_frames": ("lighting", "colours", "noise", "blur"),
}
#: Commands per visual run (the arm holds its posture); frames ``FRAMES[0]`` to the last are averaged.
STEPS = 10
FRAMES = (2, STEPS + 1)
#: Each part's colour channel (its marker colour): red cube, green ball, blue bar.
MARKER_CHANNEL = {"cube": 0, "ball": 1, "bar": 2}
#: Half side of the window around a part's predicted centroid where it is looked for, in image widths.
WINDOW = 0.1
#: A detection counts when its area is within this factor of the simulator's (not hidden by the arm).
AREA_RATIO = (0.6, 1.6)
#: The arm retracted (joint 1 turned away, elbow bent): the scene camera sees the belt and table unhidden.
RETRACTED = (-1.3, -0.3, 0.0, -2.4, 0.0, 2.1, 0.8)
_SCENE_SPOTS = (  # (x, y) of the three parts per set-up, m: on the belt or the table, near and far
    ((0.50, -0.40), (0.55, 0.00), (0.30, 0.85)),
    ((0.70, -0.20), (0.60, 0.40), (0.30, 1.05)),
    ((0.88, 0.00), (0.50, 0.65), (0.58, -0.30)),
    ((0.80, 0.10), (0.52, 0.85), (0.62, -0.15)),
    ((0.72, 0.35), (0.48, -0.25), (0.35, 0.60)),
    ((0.53, 0.20), (0.85, -0.05), (0.30, 0.50)),
)
#: The wrist set-ups' base posture (rad): the hand above the belt, the wrist camera looking down at it.
WRIST_BASE = (0.0, -0.05, 0.0, -1.79, 0.0, 1.89, 0.12)
_WRIST_OFFSETS = (  # arm posture = WRIST_BASE + offset (rad): the wrist camera sees the belt from several poses
    (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    (0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3),
    (-0.3, 0.0, 0.0, 0.0, 0.0, 0.0, -0.3),
    (0.0, 0.2, 0.0, 0.1, 0.0, 0.0, 0.0),
    (0.0, -0.2, 0.0, -0.2, 0.0, 0.3, 0.0),
    (0.2, 0.1, 0.0, 0.2, 0.0, -0.2, 0.6),
    (-0.15, -0.1, 0.0, -0.1, 0.0, 0.2, -0.5),
    (0.1, 0.15, 0.0, 0.3, 0.0, -0.1, 0.9),
)
_APPEARANCE_SPOTS = (
    (),
    ((0.50, -0.20), (0.60, 0.05), (0.55, 0.30)),
    ((0.75, -0.05), (0.55, -0.30), (0.60, 0.40)),
    (),
    ((0.60, -0.10), (0.80, 0.20), (0.50, 0.15)),
    ((0.52, 0.35), (0.58, -0.35), (0.78, -0.15)),
)


# ---------------------------------------------------------------------- the camera model
@dataclasses.dataclass(frozen=True)
class CameraPose:
    """A camera's nominal pose in the world: centre (3,) and rotation (3, 3) whose columns are its x, y, z axes."""

    centre: np.ndarray
    rotation: np.ndarray


@lru_cache(maxsize=1)
def _kinematics() -> tuple[Any, Any]:
    model = build_model(nominal(), 3)
    return model, mujoco.MjData(model)


def nominal_pose(camera: str, arm_q: Sequence[float]) -> CameraPose:
    """Where the spec sheet puts ``camera`` (``constants.CAMERAS``) with the arm at ``arm_q`` (rad): the simulator's
    forward kinematics."""
    model, data = _kinematics()
    for name, q in zip(C.ARM_JOINTS, arm_q):
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = q
    mujoco.mj_kinematics(model, data)
    mujoco.mj_camlight(model, data)
    cam = model.camera(camera).id
    return CameraPose(data.cam_xpos[cam].copy(), data.cam_xmat[cam].reshape(3, 3).copy())


def nominal_focal(camera: str, size: int = IMAGE_SIZE) -> float:
    """The spec sheet's focal length of ``camera`` in pixels of a ``size`` image."""
    model, _ = _kinematics()
    return (size / 2.0) / math.tan(math.radians(float(model.camera(camera).fovy[0])) / 2.0)


def rotation_matrix(rotation_vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """The rotation (3, 3) of a rotation vector (rad)."""
    v = np.asarray(rotation_vector, dtype=float)
    angle = float(np.linalg.norm(v))
    if angle < 1e-12:
        return np.eye(3)
    k = v / angle
    cross = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(angle) * cross + (1.0 - math.cos(angle)) * cross @ cross


def project(
    points_in_nominal: np.ndarray, focal: float, params: Sequence[float] | np.ndarray, size: int = IMAGE_SIZE
) -> np.ndarray:
    """Pixel (u right, v down; pixel centres at +0.5) of points given in the nominal camera's frame, seen by the
    camera with ``params`` = (focal_error, translation_error (3), rotation_error (3)), as ``world.builder`` moves it:
    centre + R t, orientation R * R_error."""
    fe, t, r = params[0], np.asarray(params[1:4]), np.asarray(params[4:7])
    p = (np.asarray(points_in_nominal) - t) @ rotation_matrix(r)  # R_error^T (p - t), row-wise
    depth = -p[:, 2]
    f = focal * (1.0 + fe)
    return np.stack([size / 2.0 + f * p[:, 0] / depth, size / 2.0 - f * p[:, 1] / depth], axis=1)


def in_nominal_frame(pose: CameraPose, points: np.ndarray) -> np.ndarray:
    """World points (N, 3) in the nominal camera's frame."""
    return (np.asarray(points) - pose.centre) @ pose.rotation


# ---------------------------------------------------------------------- the protocols
def _part(category: str, spot: Sequence[float]) -> dict[str, Any]:
    x, y = spot
    on_belt = abs(x - scene_layout().belt_center_x) < scene_layout().belt_half_width - 0.02
    z = nominal_layout_height(category) - (0.0 if on_belt else scene_layout().belt_top)
    return {"category": category, "position": [x, y, round(z, 4)], "yaw": math.pi / 2 if category == "bar" else 0.0}


def _wrist_spots(arm_q: Sequence[float]) -> list[tuple[float, float]]:
    """Three belt or table spots the wrist camera at ``arm_q`` sees well inside its image, far apart."""
    pose = nominal_pose(C.WRIST_CAMERA, arm_q)
    focal = nominal_focal(C.WRIST_CAMERA)
    chosen: list[tuple[float, float]] = []
    pixels: list[np.ndarray] = []
    for y in np.arange(-0.45, 0.5, 0.05):
        for x in (0.5, 0.55, 0.6, 0.75, 0.8):
            z = 0.12 if x < 0.7 else 0.02
            p = in_nominal_frame(pose, np.array([[x, y, z]]))
            if -p[0, 2] < 0.15:
                continue
            uv = project(p, focal, np.zeros(7))[0]
            if not np.all((uv > 0.2 * IMAGE_SIZE) & (uv < 0.8 * IMAGE_SIZE)):
                continue
            if all(np.linalg.norm(uv - q) > 0.25 * IMAGE_SIZE for q in pixels):
                chosen.append((round(float(x), 3), round(float(y), 3)))
                pixels.append(uv)
    return chosen[:3]


def _plan(
    cmd: JointCommands, name: str, protocol: str, arm_q: Sequence[float], parts: list[dict[str, Any]], view: str
) -> RunPlan:
    # The fingers half closed (mid-range), out of the wrist camera's view.
    hand = np.tile((cmd.hand_lo + cmd.hand_hi) / 2.0, (STEPS, 1))
    arm = np.tile(np.asarray(arm_q, dtype=float), (STEPS, 1))
    return RunPlan(
        name=name,
        protocol=protocol,
        settings={"view": view, "frames": list(FRAMES), "image_size": IMAGE_SIZE, "parts_m": parts},
        control_mode="joint",
        setup={"belt": False, "objects": parts, "arm_qpos": [float(q) for q in arm_q]},
        steps=STEPS,
        actions=cmd.joint_actions(arm, hand),
    )


def plans_camera_calibration(quick: bool = False) -> list[RunPlan]:
    """The ``camera_calibration`` runs: each set-up with its three parts, then its ``_empty`` twin."""
    cmd = JointCommands()
    plans: list[RunPlan] = []
    scene = _SCENE_SPOTS[:4] if quick else _SCENE_SPOTS
    wrist = _WRIST_OFFSETS[:5] if quick else _WRIST_OFFSETS
    set_ups: list[tuple[str, tuple[float, ...], Sequence[tuple[float, float]]]] = [
        (f"calib_scene_{k}", RETRACTED, spots) for k, spots in enumerate(scene)
    ]
    for k, offset in enumerate(wrist):
        arm_q = tuple(round(h + o, 4) for h, o in zip(WRIST_BASE, offset))
        set_ups.append((f"calib_wrist_{k}", arm_q, _wrist_spots(arm_q)))
    for name, arm_q, spots in set_ups:
        parts = [_part(c, s) for c, s in zip(C.CATEGORIES, spots)]
        view = "scene" if name.startswith("calib_scene") else "wrist"
        plans.append(_plan(cmd, name, "camera_calibration", arm_q, parts, view))
        plans.append(_plan(cmd, f"{name}_empty", "camera_calibration", arm_q, [], view))
    return plans


def plans_appearance_frames(quick: bool = False) -> list[RunPlan]:
    """The ``appearance_frames`` runs: the empty lit cell and placed parts, the arm at ``WRIST_BASE``."""
    cmd = JointCommands()
    spots = _APPEARANCE_SPOTS[:3] if quick else _APPEARANCE_SPOTS
    return [
        _plan(
            cmd,
            f"frames_{k}",
            "appearance_frames",
            WRIST_BASE,
            [_part(c, s) for c, s in zip(C.CATEGORIES, spot)],
            "both",
        )
        for k, spot in enumerate(spots)
    ]


def visual_plans(quick: bool = False) -> list[RunPlan]:
    """Every visual run in logging order."""
    return plans_camera_calibration(quick) + plans_appearance_frames(quick)


def visual_split(plans: Sequence[RunPlan]) -> dict[str, str]:
    """Fixed split: calibration runs are all fitted (cameras do not generalise from a held-out third); every third
    appearance set-up (and its twin) is held out for the visual-gap figure."""
    split = {}
    frames = [p for p in plans if p.protocol == "appearance_frames"]
    for p in plans:
        split[p.name] = "fit"
    for i, p in enumerate(frames):
        split[p.name] = "heldout" if i % 3 == 2 else "fit"
    return split


# ---------------------------------------------------------------------- detection
def mean_frame(images: np.ndarray) -> np.ndarray:
    """The mean (H, W, 3) float image of a run's static frames (``FRAMES``)."""
    return np.asarray(images[FRAMES[0] : FRAMES[1]], dtype=np.float64).mean(axis=0)


def detect(
    with_parts: np.ndarray, empty: np.ndarray, category: str, centre: Sequence[float], window: float = WINDOW
) -> tuple[np.ndarray, float] | None:
    """Pixel centroid (u, v) and area (pixels) of the part of ``category`` near ``centre``: the pixels that changed
    between the empty frame and the frame with the parts, whose colour grew mostly in the part's channel (the
    light's colour and the surface under the part cancel in the ratio).  None if too few pixels are found."""
    size = with_parts.shape[1]
    half = window * size
    u0, v0 = centre
    lo_u, hi_u = max(0, int(u0 - half)), min(size, int(u0 + half) + 1)
    lo_v, hi_v = max(0, int(v0 - half)), min(with_parts.shape[0], int(v0 + half) + 1)
    if lo_u >= hi_u or lo_v >= hi_v:
        return None
    a = with_parts[lo_v:hi_v, lo_u:hi_u]
    b = empty[lo_v:hi_v, lo_u:hi_u]
    ratio = (a + 4.0) / (b + 4.0)
    c = MARKER_CHANNEL[category]
    others = np.delete(ratio, c, axis=2).max(axis=2)
    mask = (np.abs(a - b).sum(axis=2) > 24.0) & (ratio[..., c] > 1.4 * others)
    count = int(mask.sum())
    if count < 4:
        return None
    v, u = np.nonzero(mask)
    return np.array([u.mean() + lo_u + 0.5, v.mean() + lo_v + 0.5]), float(count)


@dataclasses.dataclass(frozen=True)
class Detection:
    """One part seen by one camera in one set-up: where (pixels), the part's position (world, m) in the nominal
    camera's frame at the logged joint angles, and how many pixels it covered."""

    run: str
    camera: str
    category: str
    pixel: np.ndarray
    point: np.ndarray
    area: float


def detections(runs: dict[str, Any], camera: str, shift: Callable[[str, str, str], np.ndarray] | None = None) -> list:
    """The parts each ``camera_calibration`` set-up of ``runs`` (name -> ``LogRun``) shows ``camera``, looked for
    around their spec-sheet projection (``shift``: a correction added to it, e.g. the simulator's offset)."""
    key = "scene_image" if camera == C.SCENE_CAMERA else "wrist_image"
    focal = nominal_focal(camera)
    found = []
    for name, run in runs.items():
        if run.protocol != "camera_calibration" or name.endswith("_empty"):
            continue
        empty = runs.get(f"{name}_empty")
        if empty is None:
            continue
        arm_q = np.asarray(run.obs["arm_qpos"][FRAMES[0] : FRAMES[1]], dtype=float).mean(axis=0)
        pose = nominal_pose(camera, arm_q)
        image, background = mean_frame(run.obs[key]), mean_frame(empty.obs[key])
        for part in run.setup.get("objects", []):
            point = in_nominal_frame(pose, np.array([part["position"]], dtype=float))
            if -point[0, 2] < 0.05:
                continue
            guess = project(point, focal, np.zeros(7), image.shape[1])[0]
            if shift is not None:
                guess = guess + shift(name, camera, part["category"])
            hit = detect(image, background, part["category"], guess)
            if hit is not None:
                found.append(Detection(name, camera, part["category"], hit[0], point[0], hit[1]))
    return found


# ---------------------------------------------------------------------- the fit
@dataclasses.dataclass(frozen=True)
class CameraFit:
    """A camera's fitted calibration error.

    Attributes:
        camera: ``constants.CAMERAS`` name.
        params: focal_error, translation_error (3, m), rotation_error (3, rad).
        std: Their standard errors (from the residuals and the Jacobian).
        rms_px: Root-mean-square reprojection error after the fit, pixels (``rms_px_nominal``: at the spec sheet).
        detections: How many part centroids were used.
    """

    camera: str
    params: np.ndarray
    std: np.ndarray
    rms_px: float
    rms_px_nominal: float
    detections: int

    def appearance_fields(self) -> dict[str, Any]:
        """The ``CameraAppearance`` fields it determines (clipped to their bounds)."""
        p = self.params
        return {
            "focal_error": float(np.clip(p[0], -0.1, 0.1)),
            "translation_error": [float(np.clip(v, -0.05, 0.05)) for v in p[1:4]],
            "rotation_error": [float(np.clip(v, -0.05, 0.05)) for v in p[4:7]],
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.appearance_fields(),
            "std": [round(float(s), 6) for s in self.std],
            "rms_px": round(self.rms_px, 4),
            "rms_px_nominal": round(self.rms_px_nominal, 4),
            "detections": self.detections,
        }


#: The spec sheet as a weak prior: each parameter's typical size (focal_error, m, rad) and what a deviation of that
#: size weighs, in pixels of reprojection error; it decides only what the centroids leave open (for the scene
#: camera, a longer focal length against a camera further back).
PRIOR = np.array([0.03, 0.02, 0.02, 0.02, 0.03, 0.03, 0.03])
PRIOR_PX = 0.2


class CalibrationError(ValueError):
    """A visual log the camera fit cannot use (too few parts seen)."""


def fit_camera(lab: list[Detection], sim: list[Detection], camera: str) -> CameraFit:
    """Least squares over (focal_error, translation_error, rotation_error) of ``camera``: the lab's centroids against
    the projection of each part plus the simulator's offset (its detected minus projected centroid, same set-up at
    the spec sheet).  A part missing in either, or whose area differs from the simulator's by more than
    ``AREA_RATIO`` (hidden by the arm), is left out."""
    from scipy.optimize import least_squares

    focal = nominal_focal(camera)
    offsets = {
        (d.run, d.category): d.pixel - project(d.point[None], focal, np.zeros(7))[0] for d in sim if d.camera == camera
    }
    areas = {(d.run, d.category): d.area for d in sim if d.camera == camera}
    used = [
        d
        for d in lab
        if d.camera == camera
        and (d.run, d.category) in offsets
        and AREA_RATIO[0] <= d.area / areas[(d.run, d.category)] <= AREA_RATIO[1]
    ]
    if len(used) < 5:
        raise CalibrationError(
            f"camera {camera!r}: only {len(used)} part centroid(s) usable in the camera_calibration runs; at least 5 "
            "are needed (log them again with `r2s2r log-lab --visual`)"
        )
    points = np.array([d.point for d in used])
    observed = np.array([d.pixel - offsets[(d.run, d.category)] for d in used])

    def reprojection(p: np.ndarray) -> np.ndarray:
        return (project(points, focal, p) - observed).ravel()

    def residuals(p: np.ndarray) -> np.ndarray:
        return np.concatenate([reprojection(p), PRIOR_PX * p / PRIOR])

    result = least_squares(residuals, np.zeros(7), x_scale=PRIOR / 10.0, method="lm")
    r = reprojection(result.x)
    dof = max(1, r.size - 7)
    sigma2 = float(r @ r) / dof
    try:
        cov = np.linalg.pinv(result.jac.T @ result.jac) * sigma2
        std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    except np.linalg.LinAlgError:
        std = np.full(7, np.inf)
    nominal_r = reprojection(np.zeros(7))
    return CameraFit(
        camera=camera,
        params=result.x,
        std=std,
        rms_px=float(np.sqrt(np.mean(r.reshape(-1, 2) ** 2) * 2)),
        rms_px_nominal=float(np.sqrt(np.mean(nominal_r.reshape(-1, 2) ** 2) * 2)),
        detections=len(used),
    )


__all__ = [
    "FRAMES",
    "IMAGE_SIZE",
    "STEPS",
    "VISUAL_PROTOCOLS",
    "CalibrationError",
    "CameraFit",
    "CameraPose",
    "Detection",
    "detect",
    "detections",
    "fit_camera",
    "mean_frame",
    "nominal_focal",
    "nominal_pose",
    "plans_appearance_frames",
    "plans_camera_calibration",
    "project",
    "visual_plans",
    "visual_split",
]
