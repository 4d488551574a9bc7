"""Visual world grounding (issue 47, item 2): the visual protocols, the camera and look fit on a drawn lab nobody
tuned for and on lab v3 (spec-sheet look), the grounding file's appearance section, and clear errors for bad logs."""

from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import numpy as np
import pytest

from r2s2r_envs.grounding.calibration import IMAGE_SIZE, nominal_focal, project, visual_plans
from r2s2r_envs.grounding.logs import LogError, LogRun, read_logs, write_logs
from r2s2r_envs.grounding.result import Grounding, GroundingFileError, load_grounding, write_grounding
from r2s2r_envs.grounding.variants import WorldGroundedEnv
from r2s2r_envs.grounding.visual import check_visual_logs, fit_visual, log_visual
from r2s2r_envs.grounding.visual_gap import embed, gap
from r2s2r_envs.lab.draw import draw_appearance
from r2s2r_envs.world.appearance import SPEC_SHEET, Appearance

DRAWN = 11  # a drawn lab the fit was never developed on
# Tolerances of the quick visual log (docs/grounding.md#appearance).
FOCAL, TRANSLATION, ROTATION = 0.02, 0.012, 0.008
LIGHT_COLOUR, NOISE = 0.06, 0.004


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    logs = log_visual(f"draw3:{DRAWN}", tmp_path_factory.mktemp("visual") / "drawn", quick=True)
    return logs, fit_visual(logs), Appearance.from_dict(draw_appearance(DRAWN))


def test_the_fit_recovers_a_drawn_labs_cameras_light_and_noise(drawn):
    _, fit, truth = drawn
    for name in ("scene_camera", "wrist_camera"):
        got, true = getattr(fit.appearance, name), getattr(truth, name)
        assert abs(got.focal_error - true.focal_error) < FOCAL, name
        assert np.max(np.abs(np.subtract(got.translation_error, true.translation_error))) < TRANSLATION, name
        assert np.max(np.abs(np.subtract(got.rotation_error, true.rotation_error))) < ROTATION, name
        assert abs(got.noise - true.noise) < NOISE, name
    # Exposure is a gain like the light's intensity: only the cameras' ratio is identified (their geometric mean 1).
    look = fit.appearance
    ratio, true_ratio = (c.scene_camera.exposure / c.wrist_camera.exposure for c in (look, truth))
    assert abs(ratio / true_ratio - 1.0) < 0.1
    assert look.scene_camera.exposure * look.wrist_camera.exposure == pytest.approx(1.0, abs=0.01)
    record = fit.record()["cameras"]
    assert all(r["rms_px"] < 0.5 * r["rms_px_nominal"] for r in record.values())
    colour = np.asarray(fit.appearance.lighting.colour)
    assert np.max(np.abs(colour - truth.lighting.colour)) < LIGHT_COLOUR
    assert "exposure" in fit.not_identified and "lighting.direction" in fit.not_identified


def test_grounding_shrinks_the_visual_gap_on_held_out_frames(drawn):
    _, fit, _ = drawn
    for camera, row in fit.gap.items():
        assert row["grounded"] < 0.8 * row["nominal"], (camera, row)


def test_lab_v3_with_the_spec_sheet_look_fits_nominal(tmp_path):
    fit = fit_visual(log_visual("v3", tmp_path / "v3", quick=True))
    look = fit.appearance
    for name in ("scene_camera", "wrist_camera"):
        cam = getattr(look, name)
        assert abs(cam.focal_error) < FOCAL and np.max(np.abs(cam.rotation_error)) < ROTATION, name
        assert np.max(np.abs(cam.translation_error)) < TRANSLATION and cam.noise < 0.002, name
    assert np.max(np.abs(np.subtract(look.lighting.colour, 1.0))) < LIGHT_COLOUR


def test_a_grounding_file_with_an_appearance_renders_it(drawn, tmp_path):
    logs, fit, _ = drawn
    section = {"look": fit.appearance.to_dict(), "logs": dict(logs.file_sha256s), "fit": fit.record()}
    path = tmp_path / "g.json"
    write_grounding(dataclasses.replace(load_grounding("default"), appearance_section=section), path)
    grounding = load_grounding(path)
    assert grounding.appearance == fit.appearance and "visual log" in grounding.appearance_origin
    kwargs = {"obs_mode": "rgb", "image_size": 32}
    grounded, plain = WorldGroundedEnv(grounding=str(path), **kwargs), WorldGroundedEnv(**kwargs)
    try:
        a, _ = grounded.reset(seed=0)
        b, _ = plain.reset(seed=0)
        assert not np.array_equal(a["scene_image"], b["scene_image"])
        assert grounded.world_params == plain.world_params  # the look only: same physics
        assert "appearance" in grounded.provenance()["grounding"]
    finally:
        grounded.close()
        plain.close()


def test_a_grounding_file_without_appearance_reads_as_the_spec_sheet():
    for name in ("default", "v3"):
        grounding = load_grounding(name)
        assert grounding.appearance is None and "appearance" not in grounding.to_dict()
        assert grounding.appearance_origin.startswith("spec sheet")
    env = gym.make("PickSort-WorldGrounded-v0")
    try:
        base = env.unwrapped
        assert base._appearance() is SPEC_SHEET and base.appearance_origin.startswith("spec sheet")
        assert "appearance" not in base.provenance()["grounding"]  # named exactly as before
    finally:
        env.close()


def test_a_bad_appearance_section_is_refused_naming_the_field():
    data = load_grounding("default").to_dict()
    look = SPEC_SHEET.to_dict()
    look["scene_camera"]["focal_error"] = 0.5
    data["appearance"] = {"look": look, "logs": {}, "fit": {}}
    with pytest.raises(GroundingFileError, match="focal_error"):
        Grounding.from_dict(data)


def _fake_visual_log(tmp_path, size: int, images: bool = True):
    runs = []
    for plan in visual_plans(quick=True):
        frames = plan.steps + 1
        obs = {"arm_qpos": np.zeros((frames, 7), dtype=np.float32)}
        if images:
            obs["scene_image"] = obs["wrist_image"] = np.zeros((frames, size, size, 3), dtype=np.uint8)
        split = "heldout" if plan.name == "frames_2" else "fit"
        runs.append(
            LogRun(plan.name, plan.protocol, plan.settings, split, 0, "joint", plan.setup, {}, plan.actions,
                   np.arange(frames) * 0.05, obs)
        )  # fmt: skip
    return read_logs(write_logs(tmp_path, runs, lab_name="x", lab_config_sha256="0" * 64, seed=0).directory)


def test_a_visual_log_of_another_resolution_is_refused(tmp_path):
    with pytest.raises(LogError, match=rf"\(96, 96, 3\); expected \({IMAGE_SIZE}, {IMAGE_SIZE}, 3\)"):
        check_visual_logs(_fake_visual_log(tmp_path, 96))


def test_a_visual_log_without_images_is_refused(tmp_path):
    with pytest.raises(LogError, match="no scene_image images.*obs_mode='state\\+rgb'"):
        fit_visual(_fake_visual_log(tmp_path, IMAGE_SIZE, images=False))


def test_the_encoder_is_fixed_and_the_gap_of_a_set_to_itself_is_zero():
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (48, 48, 3), dtype=np.uint8) for _ in range(3)]
    assert np.array_equal(embed(images[0]), embed(images[0].copy()))
    assert gap(images, images) == 0.0 and gap(images, [255 - x for x in images]) > 0.1


def test_the_projection_matches_the_spec_sheet_camera():
    # A point on the scene camera's optical axis lands on the image centre; a focal error scales off-axis points.
    focal = nominal_focal("scene")
    uv = project(np.array([[0.0, 0.0, -1.0], [0.1, 0.0, -1.0]]), focal, np.zeros(7))
    assert np.allclose(uv[0], IMAGE_SIZE / 2)
    longer = project(np.array([[0.1, 0.0, -1.0]]), focal, np.array([0.05, 0, 0, 0, 0, 0, 0]))
    assert longer[0, 0] - IMAGE_SIZE / 2 == pytest.approx(1.05 * (uv[1, 0] - IMAGE_SIZE / 2))
    json.dumps(SPEC_SHEET.to_dict())


def test_sysid_refuses_a_visual_log_of_another_lab(tmp_path):
    from types import SimpleNamespace

    from r2s2r_envs.grounding.sysid import fit_appearance_section, run_sysid

    logs = _fake_visual_log(tmp_path / "visual", IMAGE_SIZE)
    with pytest.raises(ValueError, match="give a visual log of the same lab"):
        fit_appearance_section(logs.directory, SimpleNamespace(lab_name="other", lab_config_sha256="1" * 64))
    with pytest.raises(ValueError, match="--visual"):
        run_sysid(tmp_path / "g.json", logs=logs.directory, visual=True, tune_episodes=0)
