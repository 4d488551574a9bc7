"""Baseline policies and ``r2s2r train``: every method trains on tiny data, checkpoints load and act, the pipeline
is the same in training and inference, CFG and gradient reversal do what they say, training is deterministic, and
bad inputs fail before training with clear messages.

Tiny data: synthetic files with PickSort's keys (``r2s2r_envs.datasets.toy.write_synthetic_dataset``) and, in the
slow test, a few real PickSort episodes made with ``generate``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch  # the torch extra, installed by `make`: these tests fail rather than skip without it
from conftest import BLOCK_TORCH

from r2s2r_envs.datasets import TrajectoryDataset, open_dataset
from r2s2r_envs.datasets.toy import ToyPickSortEnv, write_synthetic_dataset
from r2s2r_envs.policies import CheckpointError, load_policy, read_checkpoint
from r2s2r_envs.policies.checkpoint import CONFIG_FILE, METADATA_KEYS, WEIGHTS_FILE
from r2s2r_envs.policies.config import METHODS, ConfigError, TrainConfig, check_config
from r2s2r_envs.policies.data import DataSelectionError
from r2s2r_envs.policies.models import NO_LABEL, REAL, PolicyModel, gradient_reversal
from r2s2r_envs.policies.pipeline import FrameStacker, PipelineError
from r2s2r_envs.policies.train import build_pipeline, load_datasets, prepare, split_demos, train
from r2s2r_envs.policies.zoo import zoo_root
from r2s2r_envs.safe_json import CONTENT_HASH_FIELD, with_content_hash


def rehashed_config(document: dict) -> dict:
    """An edited ``config.json`` re-hashed: these tests check what lies behind its content hash (a mismatch is
    refused first, tests/test_content_hash.py)."""
    return with_content_hash(document) if CONTENT_HASH_FIELD in document else document


TINY = dict(steps=4, batch_size=16, hidden_dim=32, layers=2, feature_dim=16, action_chunk=4, execute_steps=2)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("policy-data")
    paths = {"real": root / "real.hdf5", "sim": root / "sim.hdf5", "sim2": root / "sim-2obj.hdf5"}
    write_synthetic_dataset(paths["real"], [12, 9, 15, 10], domain="real", seed=1)
    write_synthetic_dataset(paths["sim"], [14, 8, 11, 13, 10, 9], domain="sim", seed=2)
    write_synthetic_dataset(paths["sim2"], [8, 9], domain="sim", seed=3, num_objects=2)
    return paths


def _config(data: dict[str, Path], out: Path, method: str = "flow-cfg-adda", **kw: object) -> TrainConfig:
    settings = {**TINY, "progress": False, **kw}
    return TrainConfig(
        method=method,
        real=(str(data["real"]),),
        sim=(str(data["sim"]),),
        real_fraction=settings.pop("real_fraction", 0.3),
        out=str(out),
        **settings,
    )


# -- every method -------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_each_method_trains_and_its_checkpoint_acts(data: dict[str, Path], tmp_path: Path, method: str) -> None:
    result = train(_config(data, tmp_path / method, method))
    for name in ("config.json", "policy.pt", "loss.png", "train_log.json"):
        assert (result.out / name).is_file(), name
    policy = load_policy(result.out)
    assert set(METADATA_KEYS) <= set(policy.metadata)
    assert policy.metadata["method"] == method and policy.metadata["real_fraction"] == 0.3
    assert policy.metadata["n_real_demos"] == 3 and policy.metadata["n_sim_demos"] == 5  # successes only
    assert {d["domain"] for d in policy.metadata["datasets"]} == {"real", "sim"}
    with open_dataset(data["real"]) as f:
        assert policy.metadata["datasets"][0]["sha256"] == f.content_hash
    log = json.loads((result.out / "train_log.json").read_text())
    assert len(log["history"]["loss"]) == 4 and log["train_time_s"] > 0
    assert ("domain" in log["history"]) == ("adda" in method)
    env = ToyPickSortEnv()
    obs, _ = env.reset(seed=0)
    policy.reset(0)
    for _ in range(5):
        action = policy.act(obs)
        assert action.shape == env.action_space.shape and action.dtype == np.float32
        assert np.all(np.isfinite(action))
        obs, *_ = env.step(action)


def test_sim_only_and_real_only_runs_need_one_dataset(data: dict[str, Path], tmp_path: Path) -> None:
    sim_only = TrainConfig(method="bc", sim=(str(data["sim"]),), real_fraction=0.0, out=str(tmp_path / "s"), **TINY)
    meta = train(sim_only).metadata
    assert meta["n_real_demos"] == 0 and meta["variant"] is None  # the toy env id carries no grounding variant
    real = (str(data["real"]),)
    real_only = TrainConfig(method="flow", real=real, real_fraction=1.0, out=str(tmp_path / "r"), **TINY)
    meta = train(real_only).metadata
    assert meta["n_sim_demos"] == 0 and meta["real_fraction"] == 1.0
    # A dataset of the unused domain is ignored (and not recorded as trained on).
    sim = (str(data["sim"]),)
    both = TrainConfig(method="bc", real=real, sim=sim, real_fraction=0.0, out=str(tmp_path / "b"), **TINY)
    assert [d["domain"] for d in train(both).metadata["datasets"]] == ["sim"]


def test_cnn_encoder_on_camera_images(tmp_path: Path) -> None:
    real, sim = tmp_path / "real-img.hdf5", tmp_path / "sim-img.hdf5"
    write_synthetic_dataset(real, [6, 7], domain="real", seed=1, image_size=16)
    write_synthetic_dataset(sim, [5, 8], domain="sim", seed=2, image_size=16)
    keys = ("arm_qpos", "eef_pos", "scene_image")
    common = dict(real=(str(real),), sim=(str(sim),), real_fraction=0.5, obs_keys=keys, features="raw", **TINY)
    with pytest.raises(ConfigError, match="camera images.*--encoder cnn"):
        train(TrainConfig(method="bc", out=str(tmp_path / "no"), **common))
    out = train(TrainConfig(method="flow-cfg", out=str(tmp_path / "cnn"), encoder="cnn", **common)).out
    policy = load_policy(out)
    assert policy.pipeline.image_keys == ["scene_image"] and policy.pipeline.obs_keys == ["arm_qpos", "eef_pos"]
    obs, _ = ToyPickSortEnv(obs_mode="state+rgb", image_size=16).reset(seed=0)
    policy.reset(0)
    action = policy.act(obs)
    assert action.shape == (22,) and np.all(np.isfinite(action))


def test_all_demos_option_trains_on_failures_too(data: dict[str, Path], tmp_path: Path) -> None:
    meta = train(_config(data, tmp_path / "all", "bc", demos="all")).metadata
    assert meta["n_real_demos"] == 4 and meta["n_sim_demos"] == 6 and meta["demos"] == "all"


# -- one pipeline -------------------------------------------------------------------------------------


def test_inference_pipeline_is_the_training_pipeline(data: dict[str, Path], tmp_path: Path) -> None:
    config = _config(data, tmp_path / "p", "flow", frame_stack=3)
    policy = load_policy(train(config).out)
    refs, _ = prepare(dataclasses.replace(config, overwrite=True))
    datasets = load_datasets(config, refs, [train_ids for train_ids, _ in split_demos(config, refs)])
    trained = build_pipeline(config, datasets)
    assert policy.pipeline.to_dict() == trained.to_dict()  # same keys, shapes and statistics after the round trip

    real = datasets[0]
    demo = real.demo_ids[0]
    with open_dataset(data["real"]) as f:
        episode = f.demo(demo, states=False)
    positions = np.flatnonzero(real.get_batch(np.arange(len(real)))["demo_id"] == demo)
    batch = real.get_batch(positions)
    training_inputs = trained.encode_obs(batch["obs"])
    stacker = FrameStacker(policy.pipeline)
    for t in range(len(positions)):
        stacked = stacker.push({k: v[t] for k, v in episode.obs.items()})
        inference = policy.pipeline.encode_obs(stacked)
        np.testing.assert_array_equal(inference["state"][0], training_inputs["state"][t])
    # Actions: the normalized training targets map back to the data's actions, clipped to the action space when
    # the data's env id is registered (the toy env is once any test has registered it; its actions[:, 0] count
    # steps, beyond +-1), so the check holds in any test order.
    targets = trained.encode_actions(batch["actions"])
    expected = batch["actions"]
    if policy.pipeline.action_low is not None:
        expected = np.clip(expected, policy.pipeline.action_low, policy.pipeline.action_high)
    np.testing.assert_allclose(policy.pipeline.decode_actions(targets), expected, atol=1e-5)


def test_policy_replans_every_execute_steps_and_is_seeded(data: dict[str, Path], tmp_path: Path) -> None:
    policy = load_policy(train(_config(data, tmp_path / "rh", "flow", action_chunk=6, execute_steps=3)).out)
    calls = []
    predict = policy.predict_chunk
    policy.predict_chunk = lambda stacked: calls.append(1) or predict(stacked)
    env = ToyPickSortEnv()
    obs, _ = env.reset(seed=1)

    def run(seed: int) -> np.ndarray:
        policy.reset(seed)
        return np.stack([policy.act(obs) for _ in range(7)])

    first = run(5)
    assert len(calls) == 3  # steps 0, 3, 6
    np.testing.assert_array_equal(run(5), first)  # the flow's noise comes from the reset seed
    assert not np.array_equal(run(6), first)
    del policy.predict_chunk
    clone = pickle.loads(pickle.dumps(policy))  # what evaluation workers receive
    clone.reset(5)
    np.testing.assert_array_equal(np.stack([clone.act(obs) for _ in range(7)]), first)


def test_bad_observations_are_refused_clearly(data: dict[str, Path], tmp_path: Path) -> None:
    policy = load_policy(train(_config(data, tmp_path / "o", "bc")).out)
    obs, _ = ToyPickSortEnv().reset(seed=0)
    policy.reset(0)
    with pytest.raises(PipelineError, match="lacks key"):
        policy.act({k: v for k, v in obs.items() if k != "arm_qpos"})
    with pytest.raises(PipelineError, match="shape"):
        policy.act({**obs, "object_pos": np.zeros(6, np.float32)})
    with pytest.raises(PipelineError, match="not finite"):
        policy.act({**obs, "arm_qpos": np.full(7, np.nan, np.float32)})


# -- CFG and ADDA -------------------------------------------------------------------------------------


def _model(cfg: bool, adda: bool) -> PolicyModel:
    kw = dict(state_dim=6, chunk_dim=4, image_keys=[], frame_stack=1, hidden_dim=16, layers=2, feature_dim=8)
    return PolicyModel(generative=True, cfg=cfg, adda=adda, **kw)


def test_cfg_label_dropout_replaces_labels_at_the_set_rate() -> None:
    model = _model(cfg=True, adda=False)
    seen = []
    denoise = model.denoise
    model.denoise = lambda x, t, f, tokens: seen.append(tokens) or denoise(x, t, f, tokens)
    n = 20000
    domain = torch.from_numpy((np.arange(n) % 3 == 0).astype(np.int64))  # a third real
    inputs = {"state": torch.zeros(n, 6)}
    generator = torch.Generator().manual_seed(0)
    model.losses(inputs, torch.zeros(n, 4), torch.ones(n, 4), domain, generator, cfg_dropout=0.25)
    tokens = seen[0]
    dropped = tokens == NO_LABEL
    assert abs(dropped.float().mean().item() - 0.25) < 0.015
    assert torch.equal(tokens[~dropped], domain[~dropped])  # the others keep their domain


def test_cfg_guidance_extrapolates_toward_real() -> None:
    model = _model(cfg=True, adda=False)

    def velocity(x: torch.Tensor, t: torch.Tensor, f: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        # v_real = 3, v_none = 1 (and v_sim = -7, which guidance must never use)
        values = torch.where(tokens == REAL, 3.0, torch.where(tokens == NO_LABEL, 1.0, -7.0))
        return values[:, None].expand(len(x), 4)

    model.velocity = velocity
    x, t, f = torch.zeros(2, 4), torch.zeros(2), torch.zeros(2, 8)
    for scale, expected in ((0.0, 1.0), (1.0, 3.0), (2.0, 5.0), (1.5, 4.0)):
        assert torch.allclose(model.guided_velocity(x, t, f, scale), torch.full((2, 4), expected))
    sizes = {k: v for k, v in model.hparams.items() if k not in ("generative", "cfg", "adda")}
    with pytest.raises(ValueError, match="needs the generative"):
        PolicyModel(generative=False, cfg=True, adda=False, **sizes)


def test_gradient_reversal_flips_and_scales_the_gradient() -> None:
    x = torch.randn(5, 3, requires_grad=True)
    w = torch.randn(3)
    (gradient_reversal(x, 0.5) * w).sum().backward()
    torch.testing.assert_close(x.grad, -0.5 * w.expand(5, 3))
    # In the model: the encoder's gradient from the domain loss is the negated, scaled gradient without reversal,
    # while the discriminator still learns to tell the domains apart (same gradient either way).
    grads = {}
    for scale in (-1.0, 0.7):  # scale -1 is no reversal (identity gradient)
        torch.manual_seed(0)
        model = _model(cfg=False, adda=True)
        inputs = {"state": torch.randn(8, 6)}
        domain = torch.tensor([0, 1] * 4)
        zeros = torch.zeros(8, 4)
        out = model.losses(inputs, zeros, zeros, domain, torch.Generator(), reversal_scale=scale)
        out["domain"].backward()
        grads[scale] = (model.encoder.mlp[0].weight.grad.clone(), model.discriminator[0].weight.grad.clone())
    torch.testing.assert_close(grads[0.7][0], -0.7 * grads[-1.0][0])
    torch.testing.assert_close(grads[0.7][1], grads[-1.0][1])


# -- determinism --------------------------------------------------------------------------------------


def test_same_seed_same_weights_other_seed_other_weights(data: dict[str, Path], tmp_path: Path) -> None:
    def weights(name: str, seed: int) -> dict[str, torch.Tensor]:
        out = train(_config(data, tmp_path / name, "flow-cfg-adda", seed=seed, steps=6)).out
        return torch.load(out / WEIGHTS_FILE, weights_only=True)

    a, b, c = weights("a", 3), weights("b", 3), weights("c", 4)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
    log_a = json.loads((tmp_path / "a" / "train_log.json").read_text())["history"]
    log_b = json.loads((tmp_path / "b" / "train_log.json").read_text())["history"]
    assert log_a == log_b


# -- bad inputs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change,match",
    [
        ({"method": "dagger"}, "unknown method 'dagger'.*flow-cfg-adda"),
        ({"real_fraction": 1.5}, r"real_fraction must be a number in \[0, 1\]"),
        ({"real_fraction": -0.1}, r"real_fraction must be a number in \[0, 1\]"),
        ({"real_fraction": float("nan")}, r"real_fraction must be a number in \[0, 1\]"),
        ({"method": "flow-adda", "real_fraction": 1.0}, "needs both domains"),
        ({"execute_steps": 9, "action_chunk": 4}, "execute_steps"),
        ({"steps": 0}, "steps must be an integer >= 1"),
        ({"sim": ()}, "give a sim dataset"),
    ],
)
def test_bad_settings_fail_before_training(data: dict[str, Path], tmp_path: Path, change: dict, match: str) -> None:
    base = _config(data, tmp_path / "never", "flow")
    config = TrainConfig(**{**base.to_dict(), **change})
    with pytest.raises(ConfigError, match=match):
        train(config)
    assert not (tmp_path / "never").exists()


def test_bad_datasets_fail_before_training(
    data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(match: str, **kw: object) -> None:
        with pytest.raises(DataSelectionError, match=match):
            train(TrainConfig(**{**_config(data, tmp_path / "never", "bc").to_dict(), **kw}))
        assert not (tmp_path / "never").exists()

    fails("no dataset 'missing.hdf5'.*canonical names.*lab-50", real=("missing.hdf5",))
    monkeypatch.setenv("R2S2R_DATA_DIR", str(tmp_path / "empty-cache"))
    fails("not built yet.*r2s2r datasets make lab-50", real=("lab-50",))
    cache = tmp_path / "stale-cache"
    cache.mkdir()
    (cache / "lab-50.hdf5").write_bytes(data["real"].read_bytes())  # not the pinned lab-50
    monkeypatch.setenv("R2S2R_DATA_DIR", str(cache))
    fails("stale or foreign.*seed.*r2s2r datasets make lab-50", real=("lab-50",))
    fails("holds sim data.*give it as --sim", real=(str(data["sim"]),))
    fails("disagree on observations.*object_pos", sim=(str(data["sim2"]),))
    other = tmp_path / "other-task.hdf5"
    other.write_bytes(data["sim"].read_bytes())
    with h5py.File(other, "r+") as f:  # the same arrays, recorded as another task's data
        provenance = json.loads(f.attrs["provenance"])
        f.attrs["provenance"] = json.dumps({**provenance, "env_id": "StackCubes-Sim-v0"})
    fails("different tasks.*StackCubes-Sim-v0", sim=(str(other),))
    not_data = tmp_path / "notes.hdf5"
    not_data.write_text("hello")
    fails("--sim .*notes.hdf5", sim=(str(not_data),))


def test_existing_checkpoint_is_not_overwritten_silently(data: dict[str, Path], tmp_path: Path) -> None:
    train(_config(data, tmp_path / "ck", "bc"))
    with pytest.raises(ConfigError, match="already holds a checkpoint.*--overwrite"):
        train(_config(data, tmp_path / "ck", "bc"))
    train(_config(data, tmp_path / "ck", "bc", overwrite=True))


def test_load_policy_refuses_what_is_not_a_checkpoint(data: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_policy(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no config.json"):
        load_policy(tmp_path / "empty")
    good = train(_config(data, tmp_path / "good", "bc")).out
    doc = json.loads((good / CONFIG_FILE).read_text())

    def variant(name: str, document: dict, weights: bytes | None = None) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / CONFIG_FILE).write_text(json.dumps(rehashed_config(document)))
        (d / WEIGHTS_FILE).write_bytes((good / WEIGHTS_FILE).read_bytes() if weights is None else weights)
        return d

    with pytest.raises(CheckpointError, match=r"checkpoint version 99.*reads versions \[1, 2\]"):
        load_policy(variant("v99", {**doc, "checkpoint_version": 99}))
    with pytest.raises(CheckpointError, match="not a policy checkpoint config"):
        load_policy(variant("foreign", {"format": "something else"}))
    truncated = (good / WEIGHTS_FILE).read_bytes()[:100]
    with pytest.raises(CheckpointError, match="does not match the weights its config.json records"):
        load_policy(variant("truncated", doc, weights=truncated))
    rehashed = {**doc, "weights_sha256": hashlib.sha256(truncated).hexdigest()}
    with pytest.raises(CheckpointError, match="cannot be read as policy weights"):
        load_policy(variant("truncated-rehashed", rehashed, weights=truncated))
    noise = np.random.default_rng(0).bytes(5000)
    noisy = {**doc, "weights_sha256": hashlib.sha256(noise).hexdigest()}
    with pytest.raises(CheckpointError, match="cannot be read as policy weights") as info:
        load_policy(variant("random-rehashed", noisy, weights=noise))
    assert "weights_only" not in str(info.value)  # the suite never suggests loading a file with code execution
    with pytest.raises(CheckpointError, match="do not fit"):
        load_policy(variant("resized", {**doc, "model": {**doc["model"], "hidden_dim": 64}}))
    assert read_checkpoint(good)["metadata"]["method"] == "bc"


@pytest.mark.parametrize(
    "edit, message",
    [
        # A non-finite statistic: Python's json would read Infinity and the policy would act on it.
        (lambda text: text.replace('"mean": [', '"mean": [Infinity, ', 1), "Infinity is not a JSON value"),
        (lambda text: "[" * 100_000 + "]" * 100_000, "nested 100000 levels deep"),  # a raw RecursionError before
        (lambda text: text.replace("{", '{"format": "x", ', 1), "key 'format' appears twice"),
        (lambda text: text[: len(text) // 2], "not valid JSON"),
    ],
)
def test_checkpoint_config_is_read_as_strict_bounded_json(tmp_path: Path, edit, message) -> None:
    ckpt = tmp_path / "ck"
    shutil.copytree(zoo_root() / "flow-real-only", ckpt)
    (ckpt / CONFIG_FILE).write_text(edit((ckpt / CONFIG_FILE).read_text()))
    with pytest.raises(CheckpointError, match=message) as info:
        read_checkpoint(ckpt)
    assert str(ckpt / CONFIG_FILE) in str(info.value)


def test_a_weights_hash_mismatch_shows_both_hashes_whole(tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    shutil.copytree(zoo_root() / "flow-real-only", ckpt)
    config = json.loads((ckpt / CONFIG_FILE).read_text())
    config["weights_sha256"] = config["weights_sha256"][:-1] + "x"  # differs in its last digit only
    (ckpt / CONFIG_FILE).write_text(json.dumps(rehashed_config(config)))
    with pytest.raises(CheckpointError, match=r"sha256 [0-9a-f]{63}x, the file has [0-9a-f]{64}\)"):
        read_checkpoint(ckpt)


def test_check_config_accepts_the_defaults() -> None:
    data = {"real": ("lab-50",), "sim": ("ungrounded-1000",)}
    config = TrainConfig(method="flow-cfg-adda", **data, real_fraction=0.22, out="x")
    check_config(config)


# -- CLI and the torch extra --------------------------------------------------------------------------


def test_cli_train_writes_a_checkpoint_and_reports_bad_input(
    data: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from r2s2r_envs.cli import main

    common = ["--real", str(data["real"]), "--sim", str(data["sim"]), "--steps", "3", "--batch-size", "8"]
    common += ["--hidden-dim", "16", "--action-chunk", "4", "--execute-steps", "2", "--no-progress"]
    out = tmp_path / "cli"
    rc = main(["train", "--method", "flow-cfg", "--real-fraction", "0.4", "--seed", "1", "--out", str(out), *common])
    assert rc == 0
    assert "flow-cfg: 3 real + 5 sim demos" in capsys.readouterr().out
    config = read_checkpoint(out)["config"]
    assert config["method"] == "flow-cfg" and config["real_fraction"] == 0.4 and config["seed"] == 1
    assert config["hidden_dim"] == 16 and config["demos"] == "success"
    rc = main(["train", "--method", "bc", "--real-fraction", "2", "--out", str(tmp_path / "x"), *common])
    assert rc == 2 and "real_fraction must be a number in [0, 1]" in capsys.readouterr().err
    rc = main(["train", "--method", "bc", "--real-fraction", "1", "--out", str(tmp_path / "x"), "--real", "nope"])
    assert rc == 2 and "no dataset 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["train", "--method", "dagger", "--real-fraction", "0.5", "--out", str(tmp_path / "x")])
    assert exc.value.code == 2 and "invalid choice: 'dagger'" in capsys.readouterr().err


def test_package_and_cli_work_without_torch(data: dict[str, Path], tmp_path: Path) -> None:
    out = train(_config(data, tmp_path / "nt", "bc")).out
    code = (
        f"{BLOCK_TORCH}"
        "import r2s2r_envs, r2s2r_envs.cli, r2s2r_envs.policies, r2s2r_envs.policies.cli\n"
        "from r2s2r_envs.policies import load_policy, read_checkpoint\n"
        f"assert read_checkpoint({str(out)!r})['metadata']['method'] == 'bc'\n"
        "try:\n    load_policy(" + repr(str(out)) + ")\nexcept ImportError as e:\n    print('IMPORT-ERROR', e)\n"
        "rc = r2s2r_envs.cli.main(['train', '--method', 'bc', '--sim', 'x.hdf5', '--real-fraction', '0', "
        f"'--out', {str(tmp_path / 'nt2')!r}])\n"
        "print('RC', rc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "IMPORT-ERROR" in result.stdout and "r2s2r_envs[torch]" in result.stdout
    assert "RC 1" in result.stdout and "r2s2r_envs[torch]" in result.stderr


# -- on PickSort itself -------------------------------------------------------------------------------


@pytest.mark.slow
def test_trained_on_picksort_acts_in_the_lab(tmp_path: Path) -> None:
    import gymnasium as gym

    from r2s2r_envs.datasets.generate import generate
    from r2s2r_envs.evaluation.protocol import evaluate

    real, sim = tmp_path / "lab.hdf5", tmp_path / "sim.hdf5"
    generate("PickSort-Real-v0", 2, real, seed=5, progress=False, env_kwargs={"num_objects": 1})
    generate("PickSort-Ungrounded-v0", 2, sim, seed=5, progress=False, env_kwargs={"num_objects": 1})
    config = TrainConfig(
        method="flow-cfg-adda",
        real=(str(real),),
        sim=(str(sim),),
        real_fraction=0.5,
        out=str(tmp_path / "ck"),
        demos="all",
        progress=False,
        **TINY,
    )
    meta = train(config).metadata
    assert meta["variant"] == "Ungrounded" and meta["env_id"] == "PickSort-Real-v0"
    policy = load_policy(tmp_path / "ck")
    env = gym.make("PickSort-Real-v0", num_objects=1)
    obs, _ = env.reset(seed=0)
    policy.reset(0)
    action = policy.act(obs)
    assert action.shape == env.action_space.shape and np.all(np.abs(action) <= 1.0)
    env.close()
    result = evaluate("PickSort-Real-v0", policy, episodes=1, env_kwargs={"num_objects": 1, "episode_steps": 40})
    assert result.records[0].steps == 40 and result.summary["success_rate"] in (0.0, 1.0)
    assert result.policy["name"] == "r2s2r-flow-cfg-adda"
    assert result.policy["settings"]["metadata"]["method"] == "flow-cfg-adda"
    assert TrajectoryDataset(real).env_id == "PickSort-Real-v0"


def test_device_choice_is_checked_before_any_data_is_read(tmp_path: Path) -> None:
    from r2s2r_envs.policies.train import resolve_device, train

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="device"):
        check_config(TrainConfig(method="bc", sim=("x.hdf5",), real_fraction=0.0, out=str(tmp_path), device="tpu"))
    if not torch.cuda.is_available():
        # The dataset does not exist either: the device error comes first, before any file is looked at.
        config = TrainConfig(method="bc", sim=(str(tmp_path / "missing.hdf5"),), real_fraction=0.0, out=str(tmp_path))
        with pytest.raises(ConfigError, match="sees no GPU"):
            train(dataclasses.replace(config, device="cuda"))
        with pytest.raises(DataSelectionError):
            train(config)
