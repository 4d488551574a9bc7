"""Visuomotor policies: the image recipes train every method on tiny 64 px data, save, load and act on an env's
observation; the camera encoders, the random-shift augmentation (training only, seeded), the proprioception-only
input, ADDA on image-dependent features, uint8 frames in memory, and the first policies' checkpoints unchanged.

Tiny data: synthetic files with PickSort's keys and 64 px cameras (``r2s2r_envs.datasets.toy``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import TINY_TRAIN

import r2s2r_envs  # noqa: F401 - registers the envs
from r2s2r_envs.datasets import TrajectoryDataset
from r2s2r_envs.datasets.toy import ToyPickSortEnv, write_synthetic_dataset
from r2s2r_envs.policies import config as config_module
from r2s2r_envs.policies import load_policy, vision
from r2s2r_envs.policies.config import CAMERA_KEYS, RECIPES, STATE_INPUTS, ConfigError, TrainConfig, check_config
from r2s2r_envs.policies.features import PROPRIO_KEYS, FeatureError, make_features
from r2s2r_envs.policies.models import CameraEncoder, PolicyModel
from r2s2r_envs.policies.runtime import build_model
from r2s2r_envs.policies.train import build_pipeline, load_datasets, prepare, train
from r2s2r_envs.policies.zoo import zoo_index

IMAGE_SIZE = 64
OBJECT_KEYS = ("object_pos", "object_quat", "object_vel", "object_category", "object_visible")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("image-data")
    paths = {"real": root / "real.hdf5", "sim": root / "sim.hdf5"}
    write_synthetic_dataset(paths["real"], [10, 12], domain="real", seed=1, image_size=IMAGE_SIZE)
    write_synthetic_dataset(paths["sim"], [12, 9, 11], domain="sim", seed=2, image_size=IMAGE_SIZE)
    return paths


def image_config(data: dict[str, Path], out: Path, method: str, **kw: object) -> TrainConfig:
    settings = {**TINY_TRAIN, "steps": 3, "batch_size": 8, "demos": "all", "progress": False, **kw}
    return TrainConfig(
        method=method,
        recipe=str(settings.pop("recipe", "cpu-image")),
        real=(str(data["real"]),),
        sim=(str(data["sim"]),),
        real_fraction=0.5,
        out=str(out),
        **settings,
    )


def weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "policy.pt", weights_only=True)


# -- the recipes -------------------------------------------------------------------------------------------------


def test_image_recipes_read_both_cameras_and_the_proprioception() -> None:
    for name, encoder in (("cpu-image", "conv-gn"), ("gpu-image", "resnet18-gn")):
        recipe = RECIPES[name]
        assert recipe["image_keys"] == CAMERA_KEYS and recipe["features"] == "proprio"
        assert (recipe["encoder"], recipe["image_encoder"], recipe["image_shift"]) == ("cnn", encoder, 4)
        check_config(
            TrainConfig(method="flow-cfg-adda", real=("r",), sim=("s",), real_fraction=0.2, out="o", recipe=name)
        )
    for name in ("v1", "cpu", "gpu"):  # the state recipes are as they were (their values key stored results)
        assert not set(RECIPES[name]) & set(STATE_INPUTS)
        config = TrainConfig(method="flow", sim=("s",), real_fraction=0.0, out="o", recipe=name)
        assert (config.encoder, config.image_keys, config.image_encoder, config.image_shift) == ("mlp", (), "conv4", 0)


@pytest.mark.parametrize("method", ["bc", "flow", "flow-cfg-adda"])
def test_each_method_trains_on_cameras_loads_and_acts(images: dict[str, Path], tmp_path: Path, method: str) -> None:
    out = train(image_config(images, tmp_path / method, method)).out
    policy = load_policy(out)
    assert policy.pipeline.image_keys == list(CAMERA_KEYS) and policy.pipeline.obs_keys == list(PROPRIO_KEYS)
    assert (policy.obs_mode, policy.image_size) == ("rgb", IMAGE_SIZE)
    model = policy.model
    assert isinstance(model, PolicyModel)
    assert all(isinstance(c, vision.ConvGN) for c in model.encoder.cameras.values())
    assert (model.discriminator is not None) == (method == "flow-cfg-adda")
    obs, _ = ToyPickSortEnv(obs_mode="state+rgb", image_size=IMAGE_SIZE).reset(seed=0)
    actions = []
    for _ in range(2):  # the same seed gives the same actions
        policy.reset(5)
        actions.append(np.stack([policy.act(obs) for _ in range(3)]))
    assert actions[0].shape == (3, 22) and np.all(np.isfinite(actions[0]))
    np.testing.assert_array_equal(actions[0], actions[1])


def test_batched_actions_are_the_single_actions(images: dict[str, Path], tmp_path: Path) -> None:
    policy = load_policy(train(image_config(images, tmp_path / "bc", "bc")).out)
    obs = [ToyPickSortEnv(obs_mode="state+rgb", image_size=IMAGE_SIZE).reset(seed=k)[0] for k in range(3)]
    single = []
    for k, o in enumerate(obs):
        policy.reset(10 + k)
        single.append(policy.act(o))
    policy.reset_batch([10, 11, 12])
    batch = policy.act_batch({key: np.stack([o[key] for o in obs]) for key in obs[0]})
    np.testing.assert_array_equal(batch, np.stack(single))  # bit for bit, as for state policies


def test_an_image_policy_acts_on_picksort_camera_observations(images: dict[str, Path], tmp_path: Path) -> None:
    policy = load_policy(train(image_config(images, tmp_path / "flow", "flow")).out)
    env = gym.make("PickSort-Ungrounded-v1", obs_mode=policy.obs_mode, image_size=policy.image_size)
    try:
        obs, _ = env.reset(seed=0)
        assert not any(k in obs for k in OBJECT_KEYS)  # the cameras and the robot's own sensing only
        policy.reset(0)
        action = policy.act(obs)
        assert action.shape == env.action_space.shape and np.all(np.isfinite(action))
    finally:
        env.close()


def test_training_is_deterministic_under_the_seed(images: dict[str, Path], tmp_path: Path) -> None:
    runs = [
        train(image_config(images, tmp_path / f"s{k}", "flow-cfg-adda", seed=seed)).out
        for k, seed in enumerate((3, 3, 4))
    ]
    first, again, other = (weights(out) for out in runs)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)


def test_gpu_image_recipe_trains_a_resnet18_with_groupnorm(images: dict[str, Path], tmp_path: Path) -> None:
    config = image_config(images, tmp_path / "gpu", "flow-cfg-adda", recipe="gpu-image", steps=2, val_fraction=0.0)
    policy = load_policy(train(config).out)
    model = policy.model
    assert isinstance(model, PolicyModel)
    cameras = list(model.encoder.cameras.values())
    assert len(cameras) == 2 and all(isinstance(c, vision.ResNet18GN) for c in cameras)
    obs, _ = ToyPickSortEnv(obs_mode="state+rgb", image_size=IMAGE_SIZE).reset(seed=0)
    policy.reset(0)
    assert policy.act(obs).shape == (22,)


# -- the encoders --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", vision.IMAGE_ENCODERS)
def test_each_encoder_maps_frames_to_features(name: str) -> None:
    torch.manual_seed(0)
    encoder = vision.image_encoder(name)
    frames = torch.rand(3, 2, IMAGE_SIZE, IMAGE_SIZE, 3)
    features = encoder(frames)
    assert features.shape == (3, 2 * encoder.out_dim) and torch.isfinite(features).all()
    # Each frame is encoded alone: a sample's features do not depend on the rest of the batch.
    torch.testing.assert_close(encoder(frames[1:2]), features[1:2], rtol=1e-5, atol=1e-5)
    norms = [m for m in encoder.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert not norms  # batch statistics would differ between training batches and one observation


def test_the_resnet_is_resnet18_sized_and_groupnormed() -> None:
    resnet = vision.ResNet18GN()
    params = sum(p.numel() for p in resnet.parameters())
    assert 11.0e6 < params < 11.3e6  # ResNet-18 without its classifier: 11.2 M
    assert sum(isinstance(m, torch.nn.GroupNorm) for m in resnet.modules()) == 20
    assert sum(isinstance(m, vision.BasicBlock) for m in resnet.modules()) == 8


def test_the_encoder_choice_is_validated(images: dict[str, Path], tmp_path: Path) -> None:
    assert config_module.IMAGE_ENCODERS == vision.IMAGE_ENCODERS
    base = dict(method="flow", sim=("s",), real_fraction=0.0, out="o", recipe="cpu-image")
    with pytest.raises(
        ConfigError, match=r"image_encoder must be one of \['conv4', 'conv-gn', 'resnet18-gn', 'sim-pose'\]"
    ):
        check_config(TrainConfig(**base, image_encoder="vit"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown image encoder 'vit'; choose one of \['conv4'"):
        vision.image_encoder("vit")
    with pytest.raises(ConfigError, match="image_shift must be an integer >= 0"):
        check_config(TrainConfig(**base, image_shift=-1))
    with pytest.raises(ConfigError, match="are for camera frames: train with encoder='cnn'"):
        check_config(TrainConfig(**base, encoder="mlp"))
    with pytest.raises(ConfigError, match="features='task' reads state observations"):
        check_config(TrainConfig(**base, features="task"))
    with pytest.raises(ConfigError, match=r"image_shift 32 must be below half the cameras' side \(64 px\)"):
        train(image_config(images, tmp_path / "big-shift", "bc", image_shift=32))
    with pytest.raises(ConfigError, match=r"image_keys \['arm_qpos'\] are not camera images"):
        train(image_config(images, tmp_path / "not-a-camera", "bc", image_keys=("arm_qpos",)))
    with pytest.raises(ConfigError, match="unknown camera key"):
        train(image_config(images, tmp_path / "no-camera", "bc", image_keys=("top_image",)))


# -- augmentation ----------------------------------------------------------------------------------------------------


def test_random_shift_moves_each_sample_by_one_seeded_offset() -> None:
    frames = torch.randint(0, 256, (5, 2, 16, 16, 3), dtype=torch.uint8)
    shifted = vision.random_shift(frames, 3, torch.Generator().manual_seed(0))
    again = vision.random_shift(frames, 3, torch.Generator().manual_seed(0))
    assert shifted.dtype == torch.uint8 and shifted.shape == frames.shape and torch.equal(shifted, again)
    assert vision.random_shift(frames, 0, torch.Generator()) is frames
    idx = torch.arange(16)
    moved = 0
    for b in range(5):  # one offset per sample, the same for its frames, the border repeated
        matches = [
            (dy, dx)
            for dy in range(-3, 4)
            for dx in range(-3, 4)
            if torch.equal(shifted[b], frames[b][:, (idx + dy).clamp(0, 15)][:, :, (idx + dx).clamp(0, 15)])
        ]
        assert len(matches) == 1
        moved += matches[0] != (0, 0)
    assert moved >= 3


def test_augmentation_is_on_in_training_and_off_at_inference(
    images: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import r2s2r_envs.policies.train as train_module

    calls: list[int] = []

    def counting(frames: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
        calls.append(pad)
        return vision.random_shift(frames, pad, generator)

    monkeypatch.setattr(train_module, "random_shift", counting)
    shifted = train(image_config(images, tmp_path / "shift", "flow")).out
    assert calls == [4] * (3 * 2)  # every step, each camera
    calls.clear()
    plain = train(image_config(images, tmp_path / "plain", "flow", image_shift=0)).out
    assert not calls and not all(torch.equal(a, b) for a, b in zip(weights(shifted).values(), weights(plain).values()))
    # At inference the frames are used as they are: the action is the network's on the unshifted frames.
    policy = load_policy(shifted)
    obs, _ = ToyPickSortEnv(obs_mode="state+rgb", image_size=IMAGE_SIZE).reset(seed=1)
    policy.reset(7)
    action = policy.act(obs)
    keys = [*policy.pipeline.obs_keys, *policy.pipeline.image_keys]
    stacked = {k: np.stack([obs[k]] * policy.pipeline.frame_stack)[None] for k in keys}  # an episode's first step
    inputs = {k: torch.from_numpy(v) for k, v in policy.pipeline.encode_obs(stacked).items()}
    model = policy.model
    assert isinstance(model, PolicyModel) and not calls
    flat = model.predict(inputs, torch.Generator().manual_seed(7), flow_steps=policy.flow_steps, cfg_scale=1.0)
    np.testing.assert_array_equal(action, policy.pipeline.decode_actions(flat.numpy())[0, 0])


# -- inputs ----------------------------------------------------------------------------------------------------------


def test_the_proprio_pipeline_excludes_object_state(images: dict[str, Path], tmp_path: Path) -> None:
    config = image_config(images, tmp_path / "p", "flow")
    refs, _ = prepare(config)
    datasets = load_datasets(config, refs)
    assert datasets[0].obs_keys == [*PROPRIO_KEYS, *CAMERA_KEYS]
    pipeline = build_pipeline(config, datasets)
    assert pipeline.obs_keys == list(PROPRIO_KEYS) and not set(pipeline.obs_keys) & set(OBJECT_KEYS)
    assert pipeline.state_dim == config.frame_stack * (7 + 7 + 16 + 16 + 3 + 4)
    obs = datasets[0].get_batch(np.arange(3))["obs"]
    scaled, raw = pipeline.encode_obs(obs), pipeline.encode_obs(obs, scale_images=False)  # raw: for a GPU
    for key in CAMERA_KEYS:
        assert raw[f"image/{key}"].dtype == np.uint8 and scaled[f"image/{key}"].dtype == np.float32
        np.testing.assert_array_equal(raw[f"image/{key}"], obs[key])
        np.testing.assert_allclose(scaled[f"image/{key}"], obs[key] / 255.0, rtol=1e-6)
    with pytest.raises(FeatureError, match=r"\['object_pos'\] are not \(object state is privileged"):
        make_features("proprio", ["arm_qpos", "object_pos"], {"arm_qpos": (7,), "object_pos": (9,)})
    with pytest.raises(ConfigError, match="object_pos"):
        train(dataclasses.replace(config, obs_keys=("arm_qpos", "object_pos"), out=str(tmp_path / "q")))
    subset = dataclasses.replace(config, obs_keys=("arm_qpos", "hand_qpos"), out=str(tmp_path / "subset"))
    assert load_policy(train(subset).out).pipeline.obs_keys == ["arm_qpos", "hand_qpos"]


def test_proprio_keys_are_what_picksort_gives_with_cameras_only() -> None:
    env = gym.make("PickSort-Ungrounded-v1", obs_mode="rgb", image_size=16)
    try:
        keys = set(env.observation_space.keys())  # type: ignore[attr-defined]
    finally:
        env.close()
    assert keys == {*PROPRIO_KEYS, *CAMERA_KEYS}


def test_camera_frames_stay_uint8_in_memory(images: dict[str, Path]) -> None:
    data = TrajectoryDataset(images["sim"], obs_keys=["arm_qpos", "scene_image"], frame_stack=2, action_chunk=4)
    frames = data.num_transitions * IMAGE_SIZE * IMAGE_SIZE * 3
    assert data.nbytes == frames + data.num_transitions * (7 + 22) * 4  # uint8 frames, float32 joints and actions
    batch = data.get_batch(np.arange(4))
    assert batch["obs"]["scene_image"].dtype == np.uint8
    assert batch["obs"]["scene_image"].shape == (4, 2, IMAGE_SIZE, IMAGE_SIZE, 3)


def test_adda_discriminator_sees_features_that_depend_on_the_images() -> None:
    torch.manual_seed(0)
    kw = dict(state_dim=6, chunk_dim=4, generative=False, cfg=False, adda=True, image_keys=["scene_image"])
    model = PolicyModel(**kw, frame_stack=1, hidden_dim=16, layers=2, feature_dim=8, image_encoder="conv-gn")
    inputs = {"state": torch.randn(6, 6), "image/scene_image": torch.rand(6, 1, 16, 16, 3)}
    features = model.encoder(inputs)
    other = model.encoder({**inputs, "image/scene_image": torch.rand(6, 1, 16, 16, 3)})
    assert not torch.allclose(features, other)
    domain = torch.tensor([0, 1, 0, 1, 0, 1])
    camera = model.encoder.cameras["scene_image"]
    grads = {}
    for scale in (0.0, 1.0):  # the domain loss alone reaches the CNN through the reversal, scaled by it
        model.zero_grad()
        losses = model.losses(
            inputs, torch.zeros(6, 4), torch.zeros(6, 4), domain, torch.Generator(), reversal_scale=scale
        )
        losses["domain"].backward()
        grads[scale] = torch.cat([p.grad.flatten() for p in camera.parameters() if p.grad is not None])
    assert float(grads[0.0].abs().max()) == 0.0 and float(grads[1.0].abs().max()) > 0.0


# -- old checkpoints -------------------------------------------------------------------------------------------------


class _FirstCameraEncoder(torch.nn.Module):
    """The first image policies' camera encoder as it was written before the encoders had a module of their own."""

    def __init__(self) -> None:
        super().__init__()
        act = torch.nn.SiLU
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 5, stride=2, padding=2),
            act(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1),
            act(),
            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1),
            act(),
            torch.nn.Conv2d(64, 64, 3, stride=2, padding=1),
            act(),
            torch.nn.AdaptiveAvgPool2d(1),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b, f = images.shape[:2]
        x = images.reshape(b * f, *images.shape[2:]).permute(0, 3, 1, 2)
        return self.net(x).reshape(b, f * 64)


def test_a_model_section_without_an_encoder_builds_the_first_image_policies_cnn() -> None:
    section = dict(state_dim=4, chunk_dim=4, generative=True, cfg=True, adda=True, image_keys=["scene_image"])
    model = build_model({**section, "frame_stack": 2, "hidden_dim": 16, "layers": 2, "feature_dim": 8})
    camera = model.encoder.cameras["scene_image"]
    assert isinstance(camera, CameraEncoder)
    first = _FirstCameraEncoder()
    first.load_state_dict(camera.state_dict())  # the same parameter names and shapes
    frames = torch.rand(3, 2, 32, 32, 3)
    torch.testing.assert_close(camera(frames), first(frames), rtol=0, atol=0)


def test_state_policies_name_no_camera_encoder(images: dict[str, Path], tmp_path: Path) -> None:
    policy = load_policy(train(image_config(images, tmp_path / "s", "flow", recipe="cpu")).out)
    assert isinstance(policy.model, PolicyModel) and not policy.model.encoder.cameras
    assert "image_encoder" not in policy.model.hparams and (policy.obs_mode, policy.image_size) == ("state", None)
    for name in sorted(zoo_index()) if _zoo_installed() else ():
        zoo_policy = load_policy(f"zoo:{name}")
        assert zoo_policy.obs_mode == "state" and not zoo_policy.pipeline.image_keys


def _zoo_installed() -> bool:
    try:
        import r2s2r_envs_zoo  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def test_evaluate_makes_envs_with_the_cameras_an_image_policy_reads(images: dict[str, Path], tmp_path: Path) -> None:
    from r2s2r_envs.evaluation import evaluate
    from r2s2r_envs.evaluation.policy import PolicyError

    policy = load_policy(train(image_config(images, tmp_path / "flow", "flow")).out)
    short = {"num_objects": 1, "episode_steps": 5}
    result = evaluate("PickSort-Ungrounded-v1", policy, episodes=2, env_kwargs=short, progress=False)
    assert result.env_kwargs["obs_mode"] == "rgb" and result.env_kwargs["image_size"] == IMAGE_SIZE
    assert all(r.policy_error is None for r in result.records)  # it acted on camera observations throughout
    with pytest.raises(PolicyError, match=r"reads cameras \(obs_mode 'rgb'\).*obs_mode 'state', which has none"):
        evaluate("PickSort-Ungrounded-v1", policy, episodes=1, env_kwargs={**short, "obs_mode": "state"})
    with pytest.raises(PolicyError, match=r"reads 64 px camera frames; the env arguments set image_size 32"):
        evaluate("PickSort-Ungrounded-v1", policy, episodes=1, env_kwargs={**short, "image_size": 32})
