"""A dataset's env arguments hold values, never paths: generation records a file by value, replay refuses a path
(docs/datasets.md#env-arguments; short episodes, one object)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import pytest
from test_grounding_result import write_example

import r2s2r_envs  # noqa: F401 - registers the envs
from r2s2r_envs.behavior.fit import load_model, model_sha256, resolve_model_path
from r2s2r_envs.datasets import DatasetError, open_dataset
from r2s2r_envs.datasets import replay as replay_mod
from r2s2r_envs.datasets.canonical import load_spec
from r2s2r_envs.datasets.cli import add_subcommands
from r2s2r_envs.datasets.env_values import FILES_KEY, check_recorded, file_arguments_of, record_by_value
from r2s2r_envs.datasets.generate import GenerationError, generate
from r2s2r_envs.datasets.replay import replay_demo
from r2s2r_envs.datasets.writer import _store_content_hash
from r2s2r_envs.grounding.result import GroundingFileError, load_grounding
from r2s2r_envs.safe_json import read_json
from r2s2r_envs.world.presets import load_world

SHORT = {"episode_steps": 25, "progress": False}
ONE_OBJECT = {"num_objects": 1}


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="r2s2r")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def _set_recorded_kwarg(path: Path, name: str, value: object) -> None:
    """Writes ``name=value`` into both records of the env arguments and re-stamps the hashes, as a crafted file
    would."""
    with h5py.File(path, "r+") as f:
        generation = json.loads(f.attrs["generation"])
        generation["env_kwargs"][name] = value
        f.attrs["generation"] = json.dumps(generation)
        env_args = json.loads(f["data"].attrs["env_args"])
        env_args["env_kwargs"][name] = value
        f["data"].attrs["env_args"] = json.dumps(env_args)
        _store_content_hash(f, {int(g.attrs["demo_id"]): str(g.attrs["sha256"]) for g in f["data"].values()})


# ---------------------------------------------------------------------- replay refuses a path
@pytest.mark.parametrize("path_kind", ["system file", "valid world file"])
def test_replay_refuses_a_recorded_path_and_says_what_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], path_kind: str
) -> None:
    out = tmp_path / "demos.hdf5"
    generate("PickSort-Ungrounded-v0", 1, out, seed=0, env_kwargs=ONE_OBJECT, **SHORT)
    if path_kind == "system file":
        value = "/etc/passwd"
    else:  # a file the env would read without complaint: refused all the same
        world = tmp_path / "world.json"
        world.write_text(json.dumps({"name": "mine", "description": "", "world": {}}))
        value = str(world)
    _set_recorded_kwarg(out, "world", value)
    with open_dataset(out) as f:  # a valid file: refused for what it says, not for a broken hash
        assert f.generation["env_kwargs"]["world"] == value

    def no_env(*args: object, **kwargs: object) -> None:
        raise AssertionError("an env was made from a dataset naming a path")

    with monkeypatch.context() as m:
        m.setattr(replay_mod.gym, "make", no_env)
        with pytest.raises(DatasetError) as info:
            replay_demo(out, 0, check=True)
    message = str(info.value)
    for part in (str(out), f"world={value!r}", "world file", "'nominal'", "values, never paths", "re-generate"):
        assert part.lower() in message.lower(), (part, message)
    assert "trust_paths=True" in message and "--trust-paths" in message
    assert _cli(["replay", str(out), "--demo", "0", "--check"]) == 1
    assert "name local files" in capsys.readouterr().err

    if path_kind == "valid world file":  # a dataset one made oneself may be trusted explicitly
        assert replay_demo(out, 0, check=True, trust_paths=True).first_divergent_step is None
        assert _cli(["replay", str(out), "--demo", "0", "--check", "--trust-paths"]) == 0


def test_replay_accepts_shipped_names_and_values_and_refuses_a_path_of_every_file_argument() -> None:
    expected = {
        "PickSort-Ungrounded-v0": {"world"},
        "PickSort-WorldGrounded-v0": {"grounding"},
        "PickSort-BehaviorGrounded-v0": {"world", "behavior"},
        "PickSort-FullyGrounded-v0": {"grounding", "behavior"},
        "PickSort-Real-v0": {"lab"},
    }
    for env_id, names in expected.items():
        arguments = file_arguments_of(env_id)
        assert set(arguments) == names, env_id
        registered = {k: v for k, v in gym.spec(env_id).kwargs.items() if k in names}
        check_recorded("x.hdf5", env_id, registered)  # the registered ids' shipped names pass
        check_recorded("x.hdf5", env_id, {name: {"inline": "object"} for name in names})
        for name in names:
            with pytest.raises(DatasetError, match=f"{name}='/tmp/x.json'"):
                check_recorded("x.hdf5", env_id, {name: "/tmp/x.json"})


# ---------------------------------------------------------------------- generation records a file by value
def test_a_grounding_file_is_recorded_by_value_and_replays_after_it_is_deleted(tmp_path: Path) -> None:
    grounding = write_example(tmp_path)
    content, digest = json.loads(grounding.read_text()), hashlib.sha256(grounding.read_bytes()).hexdigest()
    out = tmp_path / "grounded.hdf5"
    env_kwargs = {**ONE_OBJECT, "grounding": str(grounding)}
    generate("PickSort-WorldGrounded-v0", 1, out, seed=0, env_kwargs=env_kwargs, **SHORT)
    with open_dataset(out) as f:
        assert f.generation["env_kwargs"]["grounding"] == content
        assert f.env_args["env_kwargs"]["grounding"] == content  # robomimic's record too
        assert f.generation[FILES_KEY] == {"grounding": {"file": "grounding.json", "sha256": digest}}
        # The provenance's env spec (a description) names the file rather than holding a third copy.
        assert f.provenance["env_spec"]["kwargs"]["grounding"] == {
            "recorded_by_value": f.generation[FILES_KEY]["grounding"]
        }
        identity = f.provenance["world"]["grounding"]
        assert identity["source"] == "inline" and identity["lab"] == {"name": "test-lab", "config_sha256": "ab" * 32}
        assert f.provenance["world"]["world_sha256"] == load_grounding(grounding).world.sha256()
        states = f.demo(0).states
    grounding.unlink()
    result = replay_demo(out, 0, check=True)
    assert result.first_divergent_step is None and result.max_state_error == 0.0
    # The same file given as a path and as its object makes the same demo.
    write_example(tmp_path)
    again = tmp_path / "inline.hdf5"
    generate("PickSort-WorldGrounded-v0", 1, again, seed=0, env_kwargs={**ONE_OBJECT, "grounding": content}, **SHORT)
    with open_dataset(again) as f:
        np.testing.assert_array_equal(f.demo(0).states, states)
        assert FILES_KEY not in f.generation  # given as a value: no file to name


def test_a_behavior_model_file_is_recorded_by_value_and_makes_the_shipped_models_demos(tmp_path: Path) -> None:
    model_file = tmp_path / "model.json"
    model_file.write_text(json.dumps(read_json(resolve_model_path("default")), indent=2) + "\n")  # shipped as .gz
    digest = hashlib.sha256(model_file.read_bytes()).hexdigest()
    model_file_text = model_file.read_text()
    by_path, shipped = tmp_path / "by_path.hdf5", tmp_path / "shipped.hdf5"
    env_id = "PickSort-BehaviorGrounded-v0"
    generate(env_id, 1, by_path, seed=0, env_kwargs={**ONE_OBJECT, "behavior": str(model_file)}, **SHORT)
    generate(env_id, 1, shipped, seed=0, env_kwargs={**ONE_OBJECT, "behavior": "default"}, **SHORT)
    model_file.unlink()
    with open_dataset(by_path) as f, open_dataset(shipped) as g:
        recorded = f.generation["env_kwargs"]["behavior"]
        assert recorded == json.loads(model_file_text)  # the file's object, as it is:
        assert recorded["content_sha256"] and load_model(recorded) == load_model("default")  # with its own hash
        assert f.generation[FILES_KEY] == {"behavior": {"file": "model.json", "sha256": digest}}
        assert g.generation["env_kwargs"]["behavior"] == "default" and FILES_KEY not in g.generation
        assert f.provenance["world"]["behavior"] == {
            "model": "inline",
            "model_sha256": model_sha256(load_model("default")),
        }
        np.testing.assert_array_equal(f.demo(0).actions, g.demo(0).actions)
    assert replay_demo(by_path, 0, check=True).first_divergent_step is None


def test_a_malformed_file_fails_at_generation_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "r2s2r_envs.grounding", "schema_version": 2}))
    with pytest.raises(GenerationError, match="grounding file .*bad.json: missing field"):
        generate("PickSort-WorldGrounded-v0", 1, tmp_path / "x.hdf5", env_kwargs={"grounding": str(bad)}, **SHORT)
    assert not (tmp_path / "x.hdf5").exists()


def test_the_envs_take_the_files_object_inline(tmp_path: Path) -> None:
    grounding = write_example(tmp_path)
    content = json.loads(grounding.read_text())
    env = gym.make("PickSort-WorldGrounded-v0", grounding=content)
    assert env.unwrapped.world_params == load_grounding(grounding).world
    assert env.unwrapped.provenance()["grounding"]["sha256"] is None  # no file
    env.close()
    with pytest.raises(GroundingFileError, match="inline grounding"):
        gym.make("PickSort-WorldGrounded-v0", grounding={**content, "world": {}})
    world = {"name": "mine", "description": "", "world": {"belt_speed": 0.09}}
    env = gym.make("PickSort-Ungrounded-v0", world=world)
    assert env.unwrapped.world_params == load_world(world)
    env.close()


# ---------------------------------------------------------------------- canonical sets record what they did
def test_canonical_recipes_and_shipped_names_record_their_arguments_unchanged(tmp_path: Path) -> None:
    for entry in load_spec():
        if entry.env_id in gym.registry:
            assert record_by_value(entry.env_id, entry.env_kwargs) == (dict(entry.env_kwargs), {}), entry.name
    for env_id in ("PickSort-Ungrounded-v0", "PickSort-WorldGrounded-v0", "PickSort-FullyGrounded-v0"):
        names = {k: v for k, v in gym.spec(env_id).kwargs.items() if k in file_arguments_of(env_id)}
        assert names and record_by_value(env_id, names) == (names, {})
    # A lab file stays a path: its content is the lab's hidden parameters (lab datasets are never replayed).
    lab = tmp_path / "lab.json"
    lab.write_text("{}")
    assert record_by_value("PickSort-Real-v0", {"lab": str(lab)}) == ({"lab": str(lab)}, {})
    out = tmp_path / "canonical-style.hdf5"
    generate("PickSort-Ungrounded-v0", 1, out, seed=0, env_kwargs=ONE_OBJECT, action_noise=0.1, **SHORT)
    with open_dataset(out) as f:
        assert f.generation["env_kwargs"] == {**ONE_OBJECT, "episode_steps": 25}
        assert FILES_KEY not in f.generation
        assert f.env_args["env_kwargs"] == {**ONE_OBJECT, "episode_steps": 25, "obs_mode": "state"}
