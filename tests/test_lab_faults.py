"""Interface faults of the lab (docs/lab.md#interface-faults), sealed lab files and the course's lab names.

Each fault is checked against the same lab without it: same seed, same commands, so the fault is the only
difference and must act exactly as documented (a permutation, a unit, a scale, a channel order) and nowhere else.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from r2s2r_envs.cli import UsageError, check_lab
from r2s2r_envs.lab.config import InterfaceFaults, available_labs, load_lab, seal_lab

REAL = "PickSort-Real-v0"
#: The default lab's config hash: recorded in the shipped grounding and behavior model and in lab datasets.
DEFAULT_LAB_SHA256 = "39c2a8dc53cfcf020a75f9120d5b5ac5bfaf07094c3776c1179e0206a6f15ad7"
ORDER = [0, 3, 2, 1, 4, 5, 6]  # joints 1 and 3 swapped
COURSE_LABS = [
    "course-tour",
    "course-interface",
    "course-latency",
    "course-heavy",
    "course-calibration",
    "course-world",
    "course-cotrain",
    "course-operator",
    "course-ranking",
]


def _pair(interface: dict, **kwargs) -> tuple[gym.Env, gym.Env]:
    """The default lab with ``interface`` faults and without, under one name (everything else equal)."""
    faulty = gym.make(REAL, lab={"name": "x", "interface": interface}, **kwargs)
    clean = gym.make(REAL, lab={"name": "x"}, **kwargs)
    return faulty, clean


# ---------------------------------------------------------------------- config
def test_default_lab_has_no_faults_and_keeps_its_hash():
    lab = load_lab()
    assert lab.interface == InterfaceFaults() and not lab.interface.faulty
    assert "interface" not in lab.to_dict()
    assert lab.sha256() == DEFAULT_LAB_SHA256


def test_faults_enter_the_dict_and_the_hash_and_round_trip():
    lab = load_lab({"interface": {"arm_joint_units": "deg"}})
    raw = lab.to_dict()
    assert raw["interface"]["arm_joint_units"] == "deg" and raw["interface"]["arm_joint_order"] == list(range(7))
    assert lab.sha256() != load_lab().sha256()
    assert load_lab(json.loads(json.dumps(raw))) == lab


@pytest.mark.parametrize(
    "interface, error, match",
    [
        ({"arm_joint_order": [0, 1, 2]}, ValueError, "permutation"),
        ({"arm_joint_order": [0, 0, 2, 3, 4, 5, 6]}, ValueError, "permutation"),
        ({"arm_joint_order": [0, 1, 2, 3, 4, 5, 7]}, ValueError, "permutation"),
        ({"arm_joint_order": [0.0, 1, 2, 3, 4, 5, 6]}, ValueError, "permutation"),
        ({"arm_joint_units": "grad"}, ValueError, r"arm_joint_units must be one of \['rad', 'deg'\]"),
        ({"camera_channels": "RGB"}, ValueError, r"\['rgb', 'bgr'\]"),
        ({"task_action_scale": 0.0}, ValueError, "task_action_scale"),
        ({"task_action_scale": 5.0}, ValueError, "task_action_scale"),
        ({"task_action_scale": "2"}, TypeError, "task_action_scale"),
        ({"joint_order": [0, 1, 2, 3, 4, 5, 6]}, KeyError, "arm_joint_order"),
    ],
)
def test_invalid_interface_faults_are_refused(interface, error, match):
    with pytest.raises(error, match=match):
        load_lab({"interface": interface})


def test_interface_must_be_a_mapping():
    with pytest.raises(TypeError, match="lab interface"):
        load_lab({"interface": ["deg"]})


# ---------------------------------------------------------------------- behaviour
def test_joint_order_permutes_readings_not_the_task_space_controller():
    faulty, clean = _pair({"arm_joint_order": ORDER}, sensors=("arm_torque",))
    obs_f, _ = faulty.reset(seed=4)
    obs_c, _ = clean.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(6):
        for key in ("arm_qpos", "arm_qvel", "arm_torque"):
            np.testing.assert_array_equal(obs_f[key], obs_c[key][ORDER])
        # Task-space commands act on the true joints: the same physics.
        np.testing.assert_array_equal(obs_f["eef_pos"], obs_c["eef_pos"])
        np.testing.assert_array_equal(obs_f["hand_qpos"], obs_c["hand_qpos"])
        a = rng.uniform(-1, 1, 22).astype(np.float32)
        obs_f, *_ = faulty.step(a)
        obs_c, *_ = clean.step(a)
    assert not np.array_equal(obs_f["arm_qpos"], obs_c["arm_qpos"])  # the swap shows


def test_joint_order_permutes_joint_mode_commands():
    faulty, clean = _pair({"arm_joint_order": ORDER}, control_mode="joint")
    faulty.reset(seed=1)
    clean.reset(seed=1)
    rng = np.random.default_rng(1)
    for _ in range(5):
        a = rng.uniform(-0.5, 0.5, 23).astype(np.float32)
        true = a.copy()
        true[ORDER] = a[:7]  # command i drives joint ORDER[i]
        obs_f, *_ = faulty.step(a)
        obs_c, *_ = clean.step(true)
        np.testing.assert_array_equal(obs_f["eef_pos"], obs_c["eef_pos"])
        np.testing.assert_array_equal(obs_f["arm_qpos"], obs_c["arm_qpos"][ORDER])


def test_degrees_apply_to_joint_angles_and_velocities_only():
    faulty, clean = _pair({"arm_joint_units": "deg"}, sensors=("arm_torque",))
    obs_f, _ = faulty.reset(seed=2)
    obs_c, _ = clean.reset(seed=2)
    a = np.full(22, 0.3, dtype=np.float32)
    for _ in range(3):
        obs_f, *_ = faulty.step(a)
        obs_c, *_ = clean.step(a)
    np.testing.assert_allclose(obs_f["arm_qpos"], np.rad2deg(obs_c["arm_qpos"]), rtol=1e-6)
    np.testing.assert_allclose(obs_f["arm_qvel"], np.rad2deg(obs_c["arm_qvel"]), rtol=1e-6)
    assert obs_f["arm_qpos"].dtype == np.float32
    for key in ("arm_torque", "hand_qpos", "eef_pos"):  # N*m, finger joints and positions are unchanged
        np.testing.assert_array_equal(obs_f[key], obs_c[key])


def test_task_action_scale_multiplies_the_task_space_step():
    faulty, clean = _pair({"task_action_scale": 2.0})
    faulty.reset(seed=3)
    clean.reset(seed=3)
    rng = np.random.default_rng(3)
    for _ in range(5):
        a = rng.uniform(-0.5, 0.5, 22).astype(np.float32)
        doubled = a.copy()
        doubled[:6] *= 2.0  # fingers (6-21) are not scaled
        obs_f, *_ = faulty.step(a)
        obs_c, *_ = clean.step(doubled)
        np.testing.assert_allclose(obs_f["eef_pos"], obs_c["eef_pos"], atol=1e-6)
        np.testing.assert_allclose(obs_f["hand_qpos"], obs_c["hand_qpos"], atol=1e-6)


def test_bgr_camera_swaps_image_channels():
    faulty, clean = _pair({"camera_channels": "bgr"}, obs_mode="rgb", image_size=32)
    obs_f, _ = faulty.reset(seed=0)
    obs_c, _ = clean.reset(seed=0)
    for key in ("scene_image", "wrist_image"):
        assert obs_f[key].shape == (32, 32, 3) and obs_f[key].flags.c_contiguous
        np.testing.assert_array_equal(obs_f[key], obs_c[key][..., ::-1])
        assert not np.array_equal(obs_f[key], obs_c[key])  # the scene is not grey
        assert faulty.observation_space[key].contains(obs_f[key])


def test_setup_arm_posture_goes_through_the_interface():
    faulty, clean = _pair({"arm_joint_order": ORDER, "arm_joint_units": "deg"})
    true_q = np.array([0.1, -0.5, 0.05, -2.2, 0.0, 1.9, 0.7])
    given = np.rad2deg(true_q[ORDER])  # the interface's order and units
    obs_f, _ = faulty.reset(seed=0, options={"setup": {"arm_qpos": given.tolist()}})
    obs_c, _ = clean.reset(seed=0, options={"setup": {"arm_qpos": true_q.tolist()}})
    np.testing.assert_allclose(obs_f["eef_pos"], obs_c["eef_pos"], atol=1e-6)
    np.testing.assert_allclose(obs_f["arm_qpos"], np.rad2deg(obs_c["arm_qpos"][ORDER]), rtol=1e-5)
    with pytest.raises(ValueError, match="arm_qpos"):
        faulty.reset(seed=0, options={"setup": {"arm_qpos": [0.0] * 6}})


# ---------------------------------------------------------------------- sealed files and course labs
def test_sealed_lab_file_loads_like_the_plain_one(tmp_path):
    lab = load_lab({"name": "sealed-one", "world": {"control_latency": 0.07}, "interface": {"arm_joint_units": "deg"}})
    sealed = seal_lab(lab)
    assert set(sealed) == {"sealed_lab"} and "0.07" not in sealed["sealed_lab"]
    path = tmp_path / "sealed.json"
    path.write_text(json.dumps(sealed))
    assert load_lab(path) == lab
    assert load_lab(str(path)).sha256() == lab.sha256()


@pytest.mark.parametrize(
    "content, match",
    [
        ({"sealed_lab": "not base64 !!"}, "corrupt"),
        ({"sealed_lab": "aGVsbG8="}, "corrupt"),  # base64, but not zlib
        ({"sealed_lab": 3}, "exactly"),
        ({"sealed_lab": "eJyrrgUAAXUA+Q==", "name": "x"}, "exactly"),
    ],
)
def test_broken_sealed_files_are_refused(tmp_path, content, match):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match=match):
        load_lab(path)


def test_course_labs_are_shipped_and_resolve_by_name():
    names = available_labs()
    assert set(COURSE_LABS) <= set(names) and "default" in names
    for name in COURSE_LABS:
        lab = load_lab(name)
        assert lab.name == name
        check_lab(REAL, name)  # what every --lab option accepts
    with pytest.raises(FileNotFoundError, match="course-latency"):
        load_lab("course-nope")
    with pytest.raises(UsageError, match="course-latency"):
        check_lab(REAL, "course-nope")


def test_course_lab_files_are_sealed():
    from importlib import resources

    folder = resources.files("r2s2r_envs").joinpath("course", "labs")
    files = sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))
    assert files == sorted(f"{n}.json" for n in COURSE_LABS)
    for name in files:
        assert set(json.loads(folder.joinpath(name).read_text())) == {"sealed_lab"}


def test_only_course_interface_has_an_interface_fault():
    faulty = [n for n in COURSE_LABS if load_lab(n).interface.faulty]
    assert faulty == ["course-interface"]
