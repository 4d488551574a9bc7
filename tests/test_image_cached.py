"""The ``cpu-image-cached`` recipe: the shipped frozen ``sim-pose`` encoder loads, is pinned and gives deterministic
features; training caches its features, never changes its weights, saves a checkpoint that loads and acts on live
camera frames (ADDA included); what cannot work is refused naming what was expected.

Tiny data: synthetic files with PickSort's keys and 64 px cameras (``r2s2r_envs.datasets.toy``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT, TINY_TRAIN

from r2s2r_envs.datasets.toy import ToyPickSortEnv, write_synthetic_dataset
from r2s2r_envs.policies import load_policy, vision
from r2s2r_envs.policies.cached import extract
from r2s2r_envs.policies.config import (
    CAMERA_KEYS,
    FROZEN_ENCODERS,
    RECIPES,
    ConfigError,
    TrainConfig,
    check_config,
    recipe_values,
)
from r2s2r_envs.policies.models import PolicyModel
from r2s2r_envs.policies.pipeline import PipelineError
from r2s2r_envs.policies.train import train

SIM_POSE = FROZEN_ENCODERS["sim-pose"]
IMAGE_SIZE = SIM_POSE.image_size
#: The repository has little room: the shipped encoder stays below this.
WEIGHTS_LIMIT_BYTES = 200_000


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cached-data")
    paths = {"real": root / "real.hdf5", "sim": root / "sim.hdf5", "state": root / "state.hdf5"}
    write_synthetic_dataset(paths["real"], [10, 12], domain="real", seed=1, image_size=IMAGE_SIZE)
    write_synthetic_dataset(paths["sim"], [12, 9, 11], domain="sim", seed=2, image_size=IMAGE_SIZE)
    write_synthetic_dataset(paths["state"], [12, 9], domain="sim", seed=3)  # no cameras
    return paths


def cached_config(data: dict[str, Path], out: Path, method: str = "flow", **kw: object) -> TrainConfig:
    settings = {**TINY_TRAIN, "steps": 4, "batch_size": 8, "demos": "all", "progress": False, **kw}
    sim = str(settings.pop("sim", "sim"))
    return TrainConfig(
        method=method,
        recipe="cpu-image-cached",
        real=(str(data["real"]),),
        sim=(str(data[sim]),),
        real_fraction=float(settings.pop("real_fraction", 0.5)),  # type: ignore[arg-type]
        out=str(out),
        **settings,  # type: ignore[arg-type]
    )


def camera_weights(model: PolicyModel) -> dict[str, dict[str, torch.Tensor]]:
    return {k: {n: v.clone() for n, v in c.state_dict().items()} for k, c in model.encoder.cameras.items()}


# -- the shipped encoder -------------------------------------------------------------------------------------------


def test_the_shipped_encoder_is_pinned_small_and_recorded() -> None:
    path = vision.frozen_file(SIM_POSE)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SIM_POSE.sha256
    assert path.stat().st_size < WEIGHTS_LIMIT_BYTES
    record = json.loads((REPO_ROOT / SIM_POSE.record).read_text())
    assert record["weights"]["sha256"] == SIM_POSE.sha256 and record["data"]["lab_images_used"] == 0
    assert record["data"]["domain"] == "sim"
    for group in record["validation"]["shipped_int8"]["groups"].values():  # it learned where the objects are
        assert group["rmse"] < group["baseline_rmse"]


def test_the_frozen_encoder_loads_and_gives_deterministic_features() -> None:
    frames = torch.rand(3, 2, IMAGE_SIZE, IMAGE_SIZE, 3, generator=torch.Generator().manual_seed(0))
    for camera in SIM_POSE.cameras:
        torch.manual_seed(0)
        first = vision.image_encoder("sim-pose", camera=camera)
        torch.manual_seed(1)  # another initialization: the shipped weights replace it
        second = vision.image_encoder("sim-pose", camera=camera)
        assert isinstance(first, vision.FrozenCamera) and not any(p.requires_grad for p in first.parameters())
        features = first(frames)
        assert features.shape == (3, 2 * SIM_POSE.out_dim) and torch.isfinite(features).all()
        torch.testing.assert_close(second(frames), features, rtol=0, atol=0)
        torch.testing.assert_close(first(frames), features, rtol=0, atol=0)
        first.train()
        assert not first.training  # stays in eval mode
    scene, wrist = (vision.image_encoder("sim-pose", camera=c) for c in CAMERA_KEYS)
    assert not torch.equal(scene(frames), wrist(frames))  # each camera has its own head
    with pytest.raises(ValueError, match=r"has heads for the cameras \['scene_image', 'wrist_image'\]"):
        vision.image_encoder("sim-pose", camera="side_image")


def test_extracted_features_are_the_live_ones(images: dict[str, Path]) -> None:
    cameras = {k: vision.image_encoder("sim-pose", camera=k) for k in CAMERA_KEYS}
    cached = extract(images["sim"], [1, 0], cameras, frame_stack=2)
    assert cached.starts == {1: 0, 0: 9} and cached.tables["scene_image"].shape == (9 + 12, SIM_POSE.out_dim)
    from r2s2r_envs.datasets.reader import open_dataset

    with open_dataset(images["sim"], verify="none") as f:
        frames = f.read(0, "obs/wrist_image")
    live = cameras["wrist_image"](torch.from_numpy(frames[:2].astype(np.float32) / 255.0)[None])
    stacked = cached.stacked(np.array([0]), np.array([1]))["wrist_image"]  # step 1 of demo 0: frames 0 and 1
    np.testing.assert_allclose(stacked, live.numpy(), rtol=1e-4, atol=1e-4)
    first = cached.stacked(np.array([0]), np.array([0]))["wrist_image"]  # the first frame repeated before the start
    np.testing.assert_array_equal(first[:, : SIM_POSE.out_dim], first[:, SIM_POSE.out_dim :])


# -- the recipe ----------------------------------------------------------------------------------------------------


def test_the_recipe_is_cpu_image_with_the_frozen_encoder() -> None:
    cached, image = RECIPES["cpu-image-cached"], RECIPES["cpu-image"]
    assert {k for k in cached if cached[k] != image.get(k)} == {"image_encoder", "image_shift"}
    assert (cached["image_encoder"], cached["image_shift"]) == ("sim-pose", 0)
    assert (image["image_encoder"], image["image_shift"]) == ("conv-gn", 4)  # cpu-image is as it was
    assert recipe_values("cpu-image-cached")["steps"] * recipe_values("cpu-image-cached")["batch_size"] == 20_000 * 64


def test_the_frozen_encoder_asks_for_no_shift_known_cameras_and_a_reference_method() -> None:
    base = dict(method="flow", sim=("s",), real_fraction=0.0, out="o", recipe="cpu-image-cached")
    check_config(TrainConfig(**base))
    with pytest.raises(ConfigError, match="features are computed once per frame and cached.*set image_shift=0"):
        check_config(TrainConfig(**base, image_shift=4))
    with pytest.raises(ConfigError, match=r"has heads for the cameras \['scene_image', 'wrist_image'\] only"):
        check_config(TrainConfig(**base, image_keys=("side_image",)))
    with pytest.raises(ConfigError, match="reads the cameras of image_keys, which is empty"):
        check_config(TrainConfig(**base, image_keys=()))
    with pytest.raises(ConfigError, match="are for the reference methods"):
        check_config(TrainConfig(**{**base, "method": "byo_bc:DomainWeightedBC"}))


# -- training ------------------------------------------------------------------------------------------------------


def test_a_cached_training_saves_a_policy_that_acts_on_live_frames(images: dict[str, Path], tmp_path: Path) -> None:
    config = cached_config(images, tmp_path / "flow")
    out = train(config).out
    log = json.loads((out / "train_log.json").read_text())
    assert log["frozen_encoder"]["sha256"] == SIM_POSE.sha256
    assert log["frozen_encoder"]["frames_encoded"] == 10 + 12 + 12 + 9 + 11  # every frame, held-out demos included
    assert len(log["validation"]) > 0  # the held-out sim demo's loss, on its cached features
    policy = load_policy(out)
    assert policy.pipeline.image_keys == list(CAMERA_KEYS)
    assert (policy.obs_mode, policy.image_size) == ("rgb", IMAGE_SIZE)
    model = policy.model
    assert isinstance(model, PolicyModel) and model.hparams["image_encoder"] == "sim-pose"
    # Training never changed the frozen weights: the checkpoint holds the shipped ones, bit for bit.
    for camera, state in camera_weights(model).items():
        shipped = vision.frozen_state(SIM_POSE, camera)
        assert state.keys() == shipped.keys()
        for name, value in state.items():
            assert torch.equal(value, shipped[name]), (camera, name)
    obs, _ = ToyPickSortEnv(obs_mode="state+rgb", image_size=IMAGE_SIZE).reset(seed=0)
    actions = []
    for _ in range(2):  # the same seed gives the same actions
        policy.reset(5)
        actions.append(np.stack([policy.act(obs) for _ in range(3)]))
    assert actions[0].shape == (3, 22) and np.all(np.isfinite(actions[0]))
    np.testing.assert_array_equal(actions[0], actions[1])
    # The same run again gives the same weights (every draw seeded).
    again = torch.load(train(cached_config(images, tmp_path / "again")).out / "policy.pt", weights_only=True)
    first = torch.load(out / "policy.pt", weights_only=True)
    assert all(torch.equal(again[k], first[k]) for k in first)


def test_the_frozen_weights_get_no_gradient_and_adda_aligns_the_projection(
    images: dict[str, Path], tmp_path: Path
) -> None:
    out = train(cached_config(images, tmp_path / "adda", method="flow-cfg-adda", steps=6)).out
    log = json.loads((out / "train_log.json").read_text())
    assert "domain" in log["history"] and all(np.isfinite(log["history"]["domain"]))
    policy = load_policy(out)
    model = policy.model
    assert isinstance(model, PolicyModel) and model.discriminator is not None
    model.train()
    inputs = {
        "state": torch.zeros(4, model.hparams["state_dim"]),
        **{f"image/{k}": torch.rand(4, 2, IMAGE_SIZE, IMAGE_SIZE, 3) for k in CAMERA_KEYS},
    }
    target, weight = torch.zeros(4, model.chunk_dim), torch.ones(4, model.chunk_dim)
    losses = model.losses(
        inputs, target, weight, torch.tensor([0, 1, 0, 1]), torch.Generator().manual_seed(0), reversal_scale=1.0
    )
    losses["loss"].backward()
    assert all(p.grad is None for p in model.encoder.cameras.parameters())  # the frozen encoder learns nothing
    assert all(p.grad is not None for p in model.encoder.mlp.parameters())  # the projection ADDA aligns does
    obs, _ = ToyPickSortEnv(obs_mode="state+rgb", image_size=IMAGE_SIZE).reset(seed=1)
    policy.reset(0)
    assert policy.act(obs).shape == (22,)


def test_what_cannot_work_is_refused_naming_what_was_expected(images: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no camera 'scene_image'.*reads \['scene_image', 'wrist_image'\] at 64"):
        train(cached_config(images, tmp_path / "no-cameras", sim="state", real_fraction=0.0))
    small = tmp_path / "small.hdf5"
    write_synthetic_dataset(small, [8, 9], domain="sim", seed=4, image_size=16)
    with pytest.raises(ConfigError, match=r"frames of shape \(16, 16, 3\).*trained on \(64, 64, 3\)"):
        train(cached_config({**images, "small": small}, tmp_path / "small", sim="small", real_fraction=0.0))
    policy = load_policy(train(cached_config(images, tmp_path / "bc", method="bc")).out)
    state_obs, _ = ToyPickSortEnv(obs_mode="state").reset(seed=0)  # a state-only env: no cameras
    policy.reset(0)
    with pytest.raises(PipelineError, match=r"lacks key\(s\) \['scene_image', 'wrist_image'\]"):
        policy.act(state_obs)
