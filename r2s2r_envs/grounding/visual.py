"""Visual world grounding: log a cell's calibration images, fit its cameras and look, and measure the visual gap
(docs/grounding.md#appearance; issue 47, item 2).

``log_visual(lab, out)`` (``r2s2r log-lab --visual``) runs the visual protocols of ``grounding.calibration`` on
``PickSort-Real-v0`` through its public interface only (operator set-up, joint commands, ``obs_mode="state+rgb"``
observations) and writes a visual log.  ``fit_visual(logs)`` reads only that log: it fits the cameras
(``calibration.fit_camera``), the light, colours and sensor (``appearance_fit``), and reports the visual-gap figure
(``visual_gap``) of the held-out frames before (the spec sheet) and after grounding.  ``r2s2r sysid --visual-logs
DIR`` stores the result as the grounding file's ``appearance`` section and its figure in ``validation``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from r2s2r_envs.grounding.appearance_fit import (
    IMAGE_KEYS,
    camera_appearance,
    choose_patterns,
    edge_band,
    estimate_blur,
    estimate_noise,
    fit_light,
    label_looks,
    match_postures,
    region_masks,
    render_runs,
    with_patterns,
)
from r2s2r_envs.grounding.calibration import (
    FRAMES,
    IMAGE_SIZE,
    STEPS,
    VISUAL_PROTOCOLS,
    CalibrationError,
    detections,
    fit_camera,
    mean_frame,
    visual_plans,
    visual_split,
)
from r2s2r_envs.grounding.logs import LogError, LogRun, LogSet, read_logs, write_logs
from r2s2r_envs.grounding.visual_gap import gap
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.appearance import PATTERNS, SPEC_SHEET, Appearance, Colours, Lighting

LAB_ID = "PickSort-Real-v0"
_CAMERA_KEY = {C.SCENE_CAMERA: "scene_image", C.WRIST_CAMERA: "wrist_image"}
_SECTION = {C.SCENE_CAMERA: "scene_camera", C.WRIST_CAMERA: "wrist_camera"}


def visual_env_kwargs() -> dict[str, Any]:
    """The env arguments (besides the lab) every visual run is logged with."""
    return {
        "control_mode": "joint",
        "num_objects": 3,
        "episode_steps": STEPS + 1,
        "obs_mode": "state+rgb",
        "image_size": IMAGE_SIZE,
    }


def log_visual(
    lab: str | Path,
    out: str | Path,
    *,
    seed: int = 0,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
    make_env: Callable[[dict[str, Any]], gym.Env] | None = None,
) -> LogSet:
    """Run the visual protocols on the lab (or on envs made by ``make_env(kwargs)``) and write a visual log.

    Args:
        lab: A shipped lab name, ``draw3:SEED`` or a lab JSON file.
        out: Output directory (a log directory, ``grounding.logs``).
        seed: Base seed (run ``i`` resets with ``excitation.run_seed(seed, i)``).
        quick: Fewer set-ups (tests, quick looks).
        progress: Called with one line per run.
        make_env: Env factory (default ``gym.make(LAB_ID, lab=lab, **kwargs)``).
    """
    from r2s2r_envs.grounding.excitation import execute, log_run, run_seed

    plans = visual_plans(quick)
    split = visual_split(plans)
    kwargs = visual_env_kwargs()
    env = make_env(kwargs) if make_env is not None else gym.make(LAB_ID, lab=str(lab), **kwargs)
    runs = []
    try:
        identity = dict(env.unwrapped.provenance().get("lab") or {})  # type: ignore[attr-defined]
        if not identity:
            world = env.unwrapped.provenance()["world_sha256"]  # type: ignore[attr-defined]
            identity = {"name": f"sim:{world[:12]}", "config_sha256": ""}
        for i, plan in enumerate(plans):
            start = time.perf_counter()
            s = run_seed(seed, i)
            runs.append(log_run(plan, split[plan.name], s, kwargs, execute(env, plan, s)))
            if progress is not None:
                progress(
                    f"{plan.name:24s} {plan.protocol:18s} {split[plan.name]:8s} {time.perf_counter() - start:5.2f} s"
                )
    finally:
        env.close()
    return write_logs(out, runs, lab_name=identity["name"], lab_config_sha256=identity["config_sha256"], seed=seed)


# ---------------------------------------------------------------------- checks
def check_visual_logs(logs: LogSet) -> None:
    """Refuse a visual log the fit cannot use, naming what was expected and what was given.

    Raises:
        LogError: a run of another protocol, no calibration or appearance runs, a set-up without its ``_empty``
            twin, a missing image key, images of another size or too few frames.
    """
    problems = []
    names = {r.name for r in logs.runs}
    for run in logs.runs:
        where = f"run {run.name!r}"
        if run.protocol not in VISUAL_PROTOCOLS:
            problems.append(f"{where}: protocol {run.protocol!r} is not a visual protocol {list(VISUAL_PROTOCOLS)}")
            continue
        for key in IMAGE_KEYS:
            if key not in run.obs:
                problems.append(
                    f"{where}: no {key} images; a visual run observes obs_mode='state+rgb' (keys {list(IMAGE_KEYS)}), "
                    f"it has {sorted(run.obs)}"
                )
                continue
            shape = tuple(run.obs[key].shape)
            expected = (IMAGE_SIZE, IMAGE_SIZE, 3)
            if shape[1:] != expected:
                problems.append(f"{where}: {key} images are {shape[1:]}; expected {expected} (image_size {IMAGE_SIZE})")
            if shape[0] < FRAMES[1]:
                problems.append(f"{where}: {key} has {shape[0]} frames; at least {FRAMES[1]} are needed")
        if "arm_qpos" not in run.obs:
            problems.append(f"{where}: no arm_qpos (the measured joint angles the cameras are predicted from)")
        if (
            run.protocol == "camera_calibration"
            and not run.name.endswith("_empty")
            and f"{run.name}_empty" not in names
        ):
            problems.append(f"{where}: its empty twin {run.name}_empty (same posture, no parts) is missing")
    for protocol in VISUAL_PROTOCOLS:
        if not any(r.protocol == protocol for r in logs.runs):
            problems.append(f"no {protocol} runs; log them with `r2s2r log-lab --visual`")
    if not any(r.protocol == "appearance_frames" and r.split == "heldout" for r in logs.runs):
        problems.append("no held-out appearance_frames run (the visual-gap figure is measured on them)")
    if problems:
        where = f" in {logs.directory}" if logs.directory is not None else ""
        listed = "\n".join(f"  - {p}" for p in problems[:12])
        raise LogError(f"{len(problems)} problem(s) in the visual log{where}:\n{listed}")


# ---------------------------------------------------------------------- the fit
@dataclasses.dataclass(frozen=True)
class VisualFit:
    """What ``fit_visual`` found.

    Attributes:
        appearance: The identified appearance (cameras, sensor, light, colours; clutter and the lamp's direction at
            the spec sheet).
        cameras: Per camera its ``CameraFit`` record (values, standard errors, reprojection error before and after).
        light: The light fit's record (ambient ratio, gains and pixels per region).
        gap: The visual-gap figure on the held-out frames per camera: ``nominal`` (spec sheet), ``grounded`` and
            ``reduction_percent``.
        not_identified: Appearance fields left at the spec sheet, each with the reason.
        wall_time_s: Seconds the fit took.
    """

    appearance: Appearance
    cameras: dict[str, dict[str, Any]]
    light: dict[str, Any]
    gap: dict[str, dict[str, float]]
    not_identified: dict[str, str]
    wall_time_s: float

    def validation(self) -> dict[str, Any]:
        """The grounding file's ``validation.visual_gap`` entry."""
        return {
            "encoder": "r2s2r_envs.grounding.visual_gap (seeded random convolutions and colour histograms)",
            "cameras": self.gap,
            "reprojection_px": {
                _SECTION[c]: {"nominal": r["rms_px_nominal"], "grounded": r["rms_px"]} for c, r in self.cameras.items()
            },
        }

    def record(self) -> dict[str, Any]:
        """The grounding file's ``appearance.fit`` record."""
        return {
            "cameras": {_SECTION[c]: r for c, r in self.cameras.items()},
            "light": self.light,
            "not_identified": dict(self.not_identified),
            "wall_time_s": round(self.wall_time_s, 3),
        }


NOT_IDENTIFIED = {
    "lighting.direction": "the frames do not separate the lamp's tilt from the surfaces' shading: spec sheet",
    "exposure": "a gain on every pixel, like a brighter light: only the cameras' ratio (geometric mean 1)",
    "clutter": "distractors out of the workspace are not fitted: none",
}


def _with_sim_obs(run: LogRun, obs: dict[str, np.ndarray]) -> LogRun:
    return dataclasses.replace(run, obs=obs)


def fit_visual(logs: LogSet | str | Path, *, progress: Callable[[str], None] | None = None) -> VisualFit:
    """Fit the appearance from a visual log (``log_visual``) and measure the visual gap on its held-out frames.

    Raises:
        LogError: the log is not a usable visual log (``check_visual_logs``).
        CalibrationError: too few parts seen to fit a camera.
    """
    say = progress or (lambda line: None)
    start = time.perf_counter()
    log_set = logs if isinstance(logs, LogSet) else read_logs(logs)
    check_visual_logs(log_set)
    calib = [r for r in log_set.runs if r.protocol == "camera_calibration"]
    # The simulator renders the appearance set-ups with its arm where the lab's was measured.
    frames = match_postures([r for r in log_set.fit if r.protocol == "appearance_frames"])
    heldout = match_postures([r for r in log_set.heldout if r.protocol == "appearance_frames"])

    say(f"cameras: {len(calib)} calibration runs, rendered at the spec sheet")
    sim_obs = render_runs(calib, SPEC_SHEET, keys=(*IMAGE_KEYS, "arm_qpos"))
    lab_runs = {r.name: r for r in calib}
    sim_runs = {r.name: _with_sim_obs(r, sim_obs[r.name]) for r in calib}
    cameras, records = {}, {}
    for camera in C.CAMERAS:
        fit = fit_camera(detections(lab_runs, camera), detections(sim_runs, camera), camera)
        cameras[camera] = fit.appearance_fields()
        records[camera] = fit.to_dict()
    seen = dataclasses.replace(
        SPEC_SHEET,
        scene_camera=camera_appearance(cameras[C.SCENE_CAMERA], 0.0, 0.0),
        wrist_camera=camera_appearance(cameras[C.WRIST_CAMERA], 0.0, 0.0),
    )

    say(f"light and colours: {len(frames)} appearance runs")
    labels = [
        render_runs(frames, dataclasses.replace(look, scene_camera=seen.scene_camera, wrist_camera=seen.wrist_camera))
        for look in label_looks()
    ]
    direct = _means(render_runs(frames, dataclasses.replace(seen, lighting=Lighting(ambient=0.0))))
    both = _means(render_runs(frames, seen))
    ambient = {r: {k: both[r][k] - direct[r][k] for k in IMAGE_KEYS} for r in both}
    masks = {
        r.name: {k: region_masks(labels[0][r.name][k][FRAMES[0]], labels[1][r.name][k][FRAMES[0]]) for k in IMAGE_KEYS}
        for r in frames
    }
    lab_means = {r.name: {k: mean_frame(r.obs[k]) for k in IMAGE_KEYS} for r in frames}
    light = fit_light(lab_means, ambient, direct, masks)
    lit = dataclasses.replace(
        seen,
        lighting=Lighting(
            **{
                **dataclasses.asdict(Lighting()),
                **light.lighting,
                "direction": Lighting().direction,
                "colour": tuple(light.lighting["colour"]),
            }
        ),
        colours=_colours(light.colours),
    )

    say("patterns: the belt's and the table's, from renders in each")
    exposed = dataclasses.replace(
        lit,
        scene_camera=dataclasses.replace(lit.scene_camera, exposure=light.exposure.get("scene_image", 1.0)),
        wrist_camera=dataclasses.replace(lit.wrist_camera, exposure=light.exposure.get("wrist_image", 1.0)),
    )
    renders = {
        pattern: _means(
            render_runs(
                frames,
                dataclasses.replace(exposed, colours=with_patterns(lit.colours, {"belt": pattern, "table": pattern})),
            )
        )
        for pattern in PATTERNS
    }
    patterns, levels, pattern_errors = choose_patterns(lab_means, renders, masks)
    lit = dataclasses.replace(lit, colours=with_patterns(lit.colours, patterns, levels))

    say("sensor: noise from static frames, blur from edge sharpness")
    rendered = renders["plain"]
    sensors = {}
    for camera in C.CAMERAS:
        key = _CAMERA_KEY[camera]
        noise = estimate_noise([r.obs[key] for r in frames])
        bands = [edge_band(masks[r.name][key]) for r in frames]
        blur = estimate_blur(
            [lab_means[r.name][key] for r in frames], [rendered[r.name][key] for r in frames], noise, bands
        )
        sensors[camera] = camera_appearance(cameras[camera], noise, blur, light.exposure.get(key, 1.0))
        records[camera].update({"noise": round(noise, 5), "blur": round(blur, 5), "exposure": sensors[camera].exposure})
    appearance = dataclasses.replace(lit, scene_camera=sensors[C.SCENE_CAMERA], wrist_camera=sensors[C.WRIST_CAMERA])

    # On the fitting frames only: the look is kept when it brings the images closer to the lab's than the cameras
    # alone with the spec sheet's light, colours and sensor (a lab that looks as specified keeps the spec sheet).
    grounded_fit = _means(render_runs(frames, appearance))
    choice = {
        name: float(
            np.mean(
                [gap([lab_means[r.name][k] for r in frames], [means[r.name][k] for r in frames]) for k in IMAGE_KEYS]
            )
        )
        for name, means in (("fitted look", grounded_fit), ("spec-sheet look", both))
    }
    not_identified = dict(NOT_IDENTIFIED)
    if choice["spec-sheet look"] <= choice["fitted look"]:
        appearance = seen
        not_identified["lighting, colours, sensor"] = (
            "the fitted ones bring the fitting frames no closer to the lab's than the spec sheet's: spec sheet"
        )

    say(f"visual gap: {len(heldout)} held-out appearance runs")
    figure = visual_gap_figure(heldout, appearance)
    light_record = {
        "patterns": patterns,
        "pattern_mse": pattern_errors,
        "fit_frames_gap": {k: round(v, 5) for k, v in choice.items()},
        "ambient_ratio": round(light.ambient_ratio, 4),
        "gains": light.gains,
        "pixels": light.pixels,
    }
    return VisualFit(
        appearance=appearance,
        cameras=records,
        light=light_record,
        gap=figure,
        not_identified=not_identified,
        wall_time_s=time.perf_counter() - start,
    )


def _colours(fitted: dict[str, Any]) -> Colours:
    values: dict[str, Any] = {k: tuple(v) for k, v in fitted.items()}
    return dataclasses.replace(Colours(), **values)


def _means(images: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
    return {run: {k: mean_frame(v) for k, v in keys.items() if k in IMAGE_KEYS} for run, keys in images.items()}


def visual_gap_figure(runs: list[LogRun], appearance: Appearance) -> dict[str, dict[str, float]]:
    """The visual-gap figure per camera between the lab's frames of ``runs`` and the simulator's renders of the same
    set-ups, at the spec sheet (``nominal``) and as ``appearance`` (``grounded``)."""
    nominal = render_runs(runs, SPEC_SHEET)
    grounded = render_runs(runs, appearance)
    out = {}
    for camera, key in _CAMERA_KEY.items():
        lab = [f for r in runs for f in r.obs[key][FRAMES[0] : FRAMES[1]]]
        before = gap(lab, [f for r in runs for f in nominal[r.name][key][FRAMES[0] : FRAMES[1]]])
        after = gap(lab, [f for r in runs for f in grounded[r.name][key][FRAMES[0] : FRAMES[1]]])
        out[_SECTION[camera]] = {
            "nominal": round(before, 5),
            "grounded": round(after, 5),
            "reduction_percent": round(100.0 * (1.0 - after / before), 2) if before > 0 else 0.0,
        }
    return out


__all__ = [
    "NOT_IDENTIFIED",
    "CalibrationError",
    "VisualFit",
    "check_visual_logs",
    "fit_visual",
    "log_visual",
    "visual_env_kwargs",
    "visual_gap_figure",
]
