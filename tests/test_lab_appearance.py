"""A lab's appearance (r2s2r_envs.world.appearance, docs/lab.md#appearance): how its cameras see it.

The simulators and every lab without an ``appearance`` section render as before (same images, same hashes); a lab
with one renders its own cameras, light, colours and clutter and passes its images through its cameras' sensor, and
never changes a state observation; the ``lighting`` condition tints the light red alike in the lab and every
simulator; drawn labs of version 3 draw an appearance within the documented ranges; bad fields are refused naming
the field and its range."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.envs.conditions import CONDITIONS_VERSION, STANDARD_MIX, RedLight, condition_record, get_condition
from r2s2r_envs.lab import draw_lab, load_lab
from r2s2r_envs.lab.draw import APPEARANCE_DRAW_V3
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.appearance import SPEC_SHEET, Appearance, CameraAppearance, Colours, sensor_image
from r2s2r_envs.world.builder import CLUTTER_BODY, asset_path, build_model
from r2s2r_envs.world.params import WorldParams

LAB, SIM = "PickSort-Real-v0", "PickSort-Ungrounded-v0"
SMALL = {"obs_mode": "state+rgb", "image_size": 64, "num_objects": 2, "episode_steps": 10}
STATE_KEYS = ("arm_qpos", "arm_qvel", "hand_qpos", "hand_qvel", "eef_pos", "eef_quat", "object_pos", "object_vel")
V3_SHA256 = "1de97ca22719a95ee84518ec7147c1339a4431d045bfbeadc84598455fda96e7"
DEFAULT_SHA256 = "39c2a8dc53cfcf020a75f9120d5b5ac5bfaf07094c3776c1179e0206a6f15ad7"
FULL = {
    "scene_camera": {"focal_error": 0.03, "translation_error": [0.01, 0, 0], "rotation_error": [0, 0.01, 0]},
    "wrist_camera": {"blur": 0.005, "noise": 0.01, "exposure": 1.2},
    "lighting": {"direction": [0.3, 0.1, -1.0], "colour": [1.0, 0.82, 0.64], "intensity": 1.2, "ambient": 0.8},
    "colours": {"belt": [0.15, 0.35, 0.2], "belt_pattern": "speckle", "table_pattern": "checker"},
    "clutter": [{"shape": "box", "position": [-0.2, 1.3, 0.1], "size": [0.1, 0.1, 0.1], "colour": [0.9, 0.7, 0.1]}],
}


def lab_with(appearance: dict, base: str = "v3") -> dict:
    return {**load_lab(base).to_dict(), "appearance": appearance}


def rollout(env_id: str, steps: int = 3, seed: int = 3, **kwargs) -> list[dict[str, np.ndarray]]:
    env = gym.make(env_id, **{**SMALL, **kwargs})
    try:
        obs, _ = env.reset(seed=seed)
        frames = [obs]
        rng = np.random.default_rng(0)
        for _ in range(steps):
            frames.append(env.step(rng.uniform(-1, 1, env.action_space.shape))[0])
        return frames
    finally:
        env.close()


def redness(image: np.ndarray) -> float:
    mean = image.reshape(-1, 3).mean(axis=0)
    return float(mean[0] / (mean[1] + mean[2]))


def high_frequency(image: np.ndarray) -> float:
    grey = image.astype(float).mean(axis=2)
    return float(np.mean(np.diff(grey, axis=0) ** 2) + np.mean(np.diff(grey, axis=1) ** 2))


# ---------------------------------------------------------------------- what stays as it was
def test_shipped_and_drawn_labs_keep_their_config_and_hash():
    assert load_lab("v3").sha256() == V3_SHA256 and load_lab("default").sha256() == DEFAULT_SHA256
    for lab in ("default", "v3", "draw:4", "draw2:4"):
        config = load_lab(lab)
        assert config.appearance == SPEC_SHEET and "appearance" not in config.to_dict()
    # An empty or spec-sheet section is the lab without one.
    assert load_lab(lab_with({})).sha256() == V3_SHA256
    assert load_lab(lab_with(SPEC_SHEET.to_dict())).sha256() == V3_SHA256


def test_the_spec_sheet_is_what_the_assets_render():
    plain, spec = build_model(WorldParams(), 1), build_model(WorldParams(), 1, appearance=Appearance())
    for field in ("cam_pos", "cam_quat", "cam_fovy", "light_dir", "light_diffuse", "light_specular", "geom_rgba"):
        assert np.array_equal(getattr(plain, field), getattr(spec, field)), field
    assert np.array_equal(plain.vis.headlight.ambient, spec.vis.headlight.ambient)
    colours = Colours()
    assert np.allclose(plain.geom(C.BELT_GEOM).rgba[:3], colours.belt)
    assert np.allclose(plain.geom(C.FLOOR_GEOM).rgba[:3], colours.table)
    for k, c in enumerate(C.CATEGORIES):
        assert np.allclose(plain.geom(f"{C.object_prefix(0)}{c}").rgba[:3], colours.objects[3 * k : 3 * k + 3])
        assert np.allclose(
            plain.geom_rgba[plain.body_geomadr[plain.body(C.BIN_SITES[c]).id], :3], colours.bins[3 * k : 3 * k + 3]
        )
    assert "objects.xml" in asset_path("objects.xml")


@pytest.mark.parametrize("env_id", [SIM, "PickSort-FullyGrounded-v1"])
def test_simulators_render_the_spec_sheet_unchanged(env_id):
    # The env's image equals a render of a model built without any appearance, in the same state.
    env = gym.make(env_id, **SMALL)
    try:
        obs, _ = env.reset(seed=2)
        base = env.unwrapped
        assert base._scene_appearance() is None and base._camera_sensors == {}
        plain = build_model(base.world_params, base.num_objects)
        data = mujoco.MjData(plain)
        data.qpos[:] = base.data.qpos
        data.qvel[:] = base.data.qvel
        plain.geom_rgba[:] = base.model.geom_rgba  # the episode's object colours (one category shown per slot)
        mujoco.mj_forward(plain, data)
        with mujoco.Renderer(plain, 64, 64) as renderer:
            for camera, key in ((C.SCENE_CAMERA, "scene_image"), (C.WRIST_CAMERA, "wrist_image")):
                renderer.update_scene(data, camera=camera)
                assert np.array_equal(renderer.render(), obs[key]), key
    finally:
        env.close()


def test_an_appearance_changes_the_images_never_the_state():
    plain, seen = rollout(LAB, lab="v3"), rollout(LAB, lab=lab_with(FULL))
    for a, b in zip(plain, seen):
        for key in STATE_KEYS:
            assert np.array_equal(a[key], b[key]), key
        assert not np.array_equal(a["scene_image"], b["scene_image"])
        assert not np.array_equal(a["wrist_image"], b["wrist_image"])


def test_the_clutter_collides_with_nothing_and_moves_no_id():
    plain = build_model(WorldParams(), 2)
    cluttered = build_model(WorldParams(), 2, appearance=Appearance.from_dict({"clutter": FULL["clutter"] * 2}))
    assert (cluttered.nbody, cluttered.ngeom) == (plain.nbody + 1, plain.ngeom + 2)
    assert [plain.body(i).name for i in range(plain.nbody)] == [cluttered.body(i).name for i in range(plain.nbody)]
    assert [plain.geom(i).name for i in range(plain.ngeom)] == [cluttered.geom(i).name for i in range(plain.ngeom)]
    clutter = np.flatnonzero(cluttered.geom_bodyid == cluttered.body(CLUTTER_BODY).id)
    assert (
        len(clutter) == 2
        and not cluttered.geom_contype[clutter].any()
        and not cluttered.geom_conaffinity[clutter].any()
    )
    assert cluttered.nq == plain.nq and cluttered.nv == plain.nv


# ---------------------------------------------------------------------- cameras, light, sensor
def test_a_red_light_renders_a_redder_image():
    plain = rollout(LAB, steps=0, lab="v3")[0]
    red = rollout(LAB, steps=0, lab=lab_with({"lighting": {"colour": [1.0, 0.5, 0.4]}}))[0]
    for key in ("scene_image", "wrist_image"):
        assert redness(red[key]) > 1.3 * redness(plain[key]), key


def test_a_camera_pose_error_shifts_the_image():
    # Moving the scene camera 4 cm to its right moves the scene to the left in its image, by about
    # f * 0.04 m / depth: f = 64 / tan(29 deg) = 115 px at 128 px, depth about 1.1 m: about 4 px.
    def image(appearance: dict) -> np.ndarray:
        return rollout(LAB, steps=0, lab=lab_with(appearance), image_size=128)[0]["scene_image"].astype(float)

    plain, moved = image({}), image({"scene_camera": {"translation_error": [0.04, 0.0, 0.0]}})
    assert not np.array_equal(plain, moved)
    errors = {dx: np.abs(moved[:, 16:112] - plain[:, 16 + dx : 112 + dx]).mean() for dx in range(-10, 11)}
    best = min(errors, key=errors.__getitem__)
    assert 2 <= best <= 7 and errors[best] < 0.5 * errors[0]  # what was at column c + dx is now at c


def test_a_focal_length_error_narrows_the_field_of_view():
    look = Appearance.from_dict({"scene_camera": {"focal_error": 0.05}, "wrist_camera": {"focal_error": -0.05}})
    model = build_model(WorldParams(), 1, appearance=look)
    for camera, error, spec in ((C.SCENE_CAMERA, 0.05, 58.0), (C.WRIST_CAMERA, -0.05, 80.0)):
        expected = 2 * math.degrees(math.atan(math.tan(math.radians(spec / 2)) / (1 + error)))
        assert model.camera(camera).fovy[0] == pytest.approx(expected)


def test_blur_lowers_the_high_frequency_energy():
    plain = rollout(LAB, steps=0, lab="v3")[0]["scene_image"]
    blurred = rollout(LAB, steps=0, lab=lab_with({"scene_camera": {"blur": 0.01}}))[0]["scene_image"]
    assert high_frequency(blurred) < 0.5 * high_frequency(plain)
    assert abs(blurred.mean() - plain.mean()) < 2.0  # a blur moves light, it does not add or remove it


def test_exposure_brightens_in_linear_light():
    image = np.full((8, 8, 3), 100, dtype=np.uint8)
    brighter = sensor_image(image, CameraAppearance(exposure=2.0), np.random.default_rng(0))
    assert int(brighter[0, 0, 0]) == round(255 * (2 * (100 / 255) ** 2.2) ** (1 / 2.2))  # 137: one stop


def test_noise_is_seeded_reproducible_and_of_the_stated_size():
    appearance = lab_with({"scene_camera": {"noise": 0.02}, "wrist_camera": {"noise": 0.02}})
    plain = rollout(LAB, lab="v3")
    first, again = rollout(LAB, lab=appearance), rollout(LAB, lab=appearance)
    other_seed = rollout(LAB, lab=appearance, seed=4)
    for a, b in zip(first, again):
        assert np.array_equal(a["scene_image"], b["scene_image"]) and np.array_equal(a["wrist_image"], b["wrist_image"])
    assert not np.array_equal(first[0]["scene_image"], other_seed[0]["scene_image"])
    noise = [f["scene_image"].astype(float) - p["scene_image"] for f, p in zip(first, plain)]
    assert 0.8 * 0.02 * 255 < np.std(noise) < 1.1 * 0.02 * 255  # 5.1 of 255 (less where clipped)
    assert not np.allclose(noise[0], noise[1])  # a new draw every step


# ---------------------------------------------------------------------- the lighting condition
def test_the_lighting_condition_tints_every_env_red_and_changes_no_state():
    condition = get_condition("lighting")
    assert isinstance(condition, RedLight) and condition.shifted and "lighting" not in STANDARD_MIX
    assert condition_record("lighting")["definition"] == {"light_colour": [1.0, 0.35, 0.3]}
    assert condition_record("lighting")["version"] == CONDITIONS_VERSION == 1
    warm = Appearance.from_dict({"lighting": {"colour": [1.0, 0.8, 0.6]}})
    assert condition.apply_appearance(warm).lighting.colour == pytest.approx((1.0, 0.28, 0.18))  # the same rule
    for env_id, lab in ((SIM, {}), (LAB, {"lab": "v3"}), (LAB, {"lab": lab_with(FULL)})):
        nominal = rollout(env_id, steps=1, **lab)
        red = rollout(env_id, steps=1, condition="lighting", **lab)
        for a, b in zip(nominal, red):
            assert all(np.array_equal(a[k], b[k]) for k in STATE_KEYS)
            assert redness(b["scene_image"]) > 1.5 * redness(a["scene_image"])


def test_an_env_without_images_refuses_the_lighting_condition():
    for env_id, lab in ((SIM, {}), (LAB, {"lab": "v3"})):
        with pytest.raises(ValueError, match=r"condition 'lighting' changes only what the cameras see.*'state\+rgb'"):
            gym.make(env_id, **{**SMALL, "obs_mode": "state"}, condition="lighting", **lab)
    # With images it is a condition like another; the image-free shifts stay open to state envs.
    assert rollout(SIM, steps=0, condition="lighting", obs_mode="rgb")[0]["scene_image"].shape == (64, 64, 3)
    gym.make(SIM, **{**SMALL, "obs_mode": "state"}, condition="fast-belt").close()


# ---------------------------------------------------------------------- drawn labs
def test_drawn_appearances_lie_within_their_ranges_and_repeat():
    t = APPEARANCE_DRAW_V3
    for seed in range(12):
        config = draw_lab(seed, version=3)
        assert config == draw_lab(seed, version=3) and config["name"] == f"drawn3-{seed}"
        rest = {k: v for k, v in config.items() if k not in ("name", "appearance")}
        assert rest == {k: v for k, v in draw_lab(seed, version=2).items() if k != "name"}  # draw2:SEED, as seen
        look = load_lab(config).appearance
        for camera in (look.scene_camera, look.wrist_camera):
            assert abs(camera.focal_error) <= t["focal_error"]
            assert max(map(abs, camera.translation_error)) <= t["translation_error"]
            assert max(map(abs, camera.rotation_error)) <= t["rotation_error"]
            for key in ("blur", "noise", "exposure"):
                assert t[key][0] <= getattr(camera, key) <= t[key][1], key
        light = look.lighting
        assert math.acos(-light.direction[2]) <= t["light_tilt"][1] + 1e-9
        assert t["intensity"][0] <= light.intensity <= t["intensity"][1]
        assert light.colour[0] == 1.0 and 0.69 * 0.99 <= light.colour[1] <= 1.0 and light.colour[2] >= 1 - 0.6 * 0.57
        assert t["clutter"][0] <= len(look.clutter) <= t["clutter"][1]
        for item in look.clutter:
            assert t["clutter_radius"][0] <= math.hypot(*item.position[:2]) <= t["clutter_radius"][1]
        spec = np.asarray(Colours().objects)
        assert np.all(np.asarray(look.colours.objects) <= np.minimum(1.0, spec * t["part_tint"][1]) + 1e-12)
    assert draw_lab(1, version=3)["appearance"] != draw_lab(2, version=3)["appearance"]


def test_draw3_seed_names_a_lab_that_renders():
    obs = rollout(LAB, steps=1, lab="draw3:5")
    assert obs[0]["scene_image"].shape == (64, 64, 3)
    env = gym.make(LAB, lab="draw3:5")
    assert env.unwrapped.provenance()["lab"]["name"] == "drawn3-5"


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("appearance", "error", "message"),
    [
        ({"camera": {}}, KeyError, r"unknown key\(s\) \['camera'\]; valid: \['scene_camera', 'wrist_camera'"),
        ({"scene_camera": {"blurr": 1}}, KeyError, r"lab appearance.scene_camera: unknown key\(s\) \['blurr'\]"),
        ({"scene_camera": {"blur": 0.5}}, ValueError, r"appearance.scene_camera.blur must be a number.*<= 0.02"),
        ({"wrist_camera": {"focal_error": 0.2}}, ValueError, r"wrist_camera.focal_error .*>= -0.1 and <= 0.1"),
        ({"wrist_camera": {"translation_error": [0.1, 0, 0]}}, ValueError, r"translation_error .*<= 0.05"),
        ({"scene_camera": {"exposure": 0}}, ValueError, r"scene_camera.exposure .*>= 0.25 and <= 4"),
        ({"scene_camera": {"noise": "high"}}, TypeError, r"scene_camera.noise must be a number"),
        ({"lighting": {"colour": [1.0, 1.2, 1.0]}}, ValueError, r"lighting.colour must be a sequence of 3 .*<= 1"),
        ({"lighting": {"colour": [1.0, 1.0]}}, ValueError, r"lighting.colour must be a sequence of 3 numbers"),
        ({"lighting": {"direction": [0, 0, 1]}}, ValueError, r"lighting.direction must point down \(z <= -0.2"),
        ({"lighting": {"intensity": 5}}, ValueError, r"lighting.intensity .*>= 0.2 and <= 3"),
        ({"colours": {"bins": [0.5] * 3}}, ValueError, r"colours.bins must be a sequence of 9 numbers"),
        ({"colours": {"belt_pattern": "stripes"}}, ValueError, r"belt_pattern must be one of \['plain', 'checker'"),
        ({"clutter": {"shape": "box"}}, TypeError, r"clutter must be a list"),
        ({"clutter": [{"shape": "cone"}]}, ValueError, r"clutter\[0\].shape must be one of \['box', 'cylinder'"),
        ({"clutter": [{"position": [0.3, 0.2, 0.1]}]}, ValueError, r"at least 0.9 m from the robot's base"),
        ({"clutter": [{"position": [0.55, 1.5, 0.1]}]}, ValueError, r"clear of the belt's strip x within \[0.43"),
        ({"clutter": [{"size": [0.5, 0.1, 0.1]}]}, ValueError, r"clutter\[0\].size .*>= 0.01 and <= 0.3"),
        ({"clutter": [{}] * 7}, TypeError, r"clutter must be a list of at most 6 items"),
    ],
)
def test_bad_appearance_fields_are_refused_naming_the_field_and_range(appearance, error, message):
    with pytest.raises(error, match=message):
        load_lab({"appearance": appearance})
    with pytest.raises(error, match=message):  # before any env is built
        gym.make(LAB, lab={"appearance": appearance})


def test_a_bad_field_in_a_lab_file_names_the_file(tmp_path):
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(lab_with({"scene_camera": {"noise": 0.5}})))
    with pytest.raises(ValueError, match=rf"lab file {path}: .*scene_camera.noise .*<= 0.1"):
        load_lab(str(path))


def test_a_partial_appearance_applies_over_the_lab_and_round_trips():
    lab = load_lab({"appearance": {"lighting": {"intensity": 1.2}}})
    assert lab.appearance.lighting.intensity == 1.2 and lab.appearance.scene_camera == CameraAppearance()
    again = load_lab({"appearance": {"colours": {"table": [0.5, 0.5, 0.5]}}})
    assert again.appearance.lighting.intensity == 1.0
    full = load_lab(lab_with(FULL))
    assert load_lab(json.loads(json.dumps(full.to_dict()))).sha256() == full.sha256() != V3_SHA256


def test_a_vector_env_sees_what_single_envs_see():
    # The sensor noise is drawn per (episode, step, camera), so env i of a vector env renders as a single env.
    lab = lab_with({"scene_camera": {"noise": 0.02, "blur": 0.004}, "lighting": {"colour": [1.0, 0.8, 0.6]}})
    kwargs = {"lab": lab, "obs_mode": "rgb", "image_size": 32, "num_objects": 1}
    envs = gym.make_vec(LAB, num_envs=2, **kwargs)
    try:
        batch, _ = envs.reset(seed=7)
        batch = envs.step(np.zeros((2, 22)))[0]
    finally:
        envs.close()
    for i in range(2):
        env = gym.make(LAB, **kwargs)
        env.reset(seed=7 + i)  # env i of the vector env is reset with seed 7 + i
        obs = env.step(np.zeros(22))[0]
        env.close()
        assert np.array_equal(obs["scene_image"], batch["scene_image"][i])
    assert not np.array_equal(batch["scene_image"][0], batch["scene_image"][1])
