"""Files the suite writes and reads back carry ``content_sha256``, a hash of their own content (issue 25).

For each kind (a checkpoint's ``config.json``, a result file, a behavior model, a grounding file): the shipped
files verify, a flipped digit in a value (valid JSON, a value within bounds) is refused naming the file, and a
file without the field still loads.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from r2s2r_envs.behavior.fit import BehaviorModelError, load_model, model_sha256, save_model
from r2s2r_envs.evaluation.leaderboard import LeaderboardError, load_results
from r2s2r_envs.evaluation.protocol import EpisodeRecord, EvaluationResult, evaluation_seeds
from r2s2r_envs.grounding.result import GroundingFileError, load_grounding, write_grounding
from r2s2r_envs.policies.checkpoint import CheckpointError, read_checkpoint
from r2s2r_envs.safe_json import (
    CONTENT_HASH_FIELD,
    ContentHashError,
    check_content_hash,
    content_sha256,
    gzip_bytes,
    with_content_hash,
)

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "zoo" / "r2s2r_envs_zoo"  # the zoo's data package (zoo/)
SHIPPED_BEHAVIOR = ROOT / "r2s2r_envs" / "behavior" / "models" / "default.json.gz"  # shipped gzip-compressed
SHIPPED_GROUNDING = ROOT / "r2s2r_envs" / "grounding" / "groundings" / "default.json"
#: SHA-256 of the shipped default grounding file's bytes before it carried content_sha256 (results and dataset
#: provenance record it); its file_sha256 must not change with the field.
GROUNDING_FILE_SHA256 = "588d11e2ff314f961882b5785fb88a1d7a41bbeeef88d057b855f1ef38f842a7"
#: model_sha256 of the shipped default behavior model (dataset provenance records it).
BEHAVIOR_MODEL_SHA256 = "02b519469f57961d2731c0bdb105cd5341cef73d5018d19466cf4269d1224a9a"


def flip_digit(text: str, marker: str, nth: int = 1) -> str:
    """``text`` with the ``nth`` digit after ``marker`` changed (still valid JSON: a digit for a digit)."""
    start = text.index(marker) + len(marker)
    i = [m.start() for m in re.finditer(r"\d", text[start : start + 200])][nth - 1] + start
    return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :]


def drop_field(path: Path, indent: int | None = 2) -> None:
    data = json.loads(path.read_text())
    del data[CONTENT_HASH_FIELD]
    path.write_text(json.dumps(data, indent=indent) + "\n")


# ---------------------------------------------------------------------- the helper
def test_the_hash_is_of_the_canonical_content_without_the_field():
    data = {"b": [1, 2.5, None], "a": {"y": "é", "x": True}}
    expected = hashlib.sha256(b'{"a":{"x":true,"y":"\\u00e9"},"b":[1,2.5,null]}').hexdigest()
    assert content_sha256(data) == expected
    hashed = with_content_hash(data)
    assert list(hashed)[-1] == CONTENT_HASH_FIELD and hashed[CONTENT_HASH_FIELD] == expected
    assert content_sha256(hashed) == expected  # the field itself is not hashed
    assert with_content_hash(hashed) == hashed
    reordered = json.loads(json.dumps(hashed, indent=3, sort_keys=True))
    assert check_content_hash(reordered, "x.json", fix="f") == data  # formatting and key order do not matter
    assert check_content_hash(data, "x.json", fix="f") is data  # no field: returned as it is
    assert check_content_hash([1], "x.json", fix="f") == [1]
    with pytest.raises(ContentHashError, match=r"x\.json: its content does not match the content_sha256.*do this"):
        check_content_hash({**hashed, "b": [1, 2.6, None]}, "x.json", fix="do this")
    with pytest.raises(ContentHashError, match=expected):  # the actual hash is shown whole
        check_content_hash({**data, CONTENT_HASH_FIELD: "0" * 64}, "x.json", fix="f")
    renamed = {**data, "content_sha257": expected}  # a flipped byte in the field's name
    with pytest.raises(ContentHashError, match=r"x\.json: it has the key 'content_sha257' where 'content_sha256'"):
        check_content_hash(renamed, "x.json", fix="f")


# ---------------------------------------------------------------------- checkpoints' config.json
@pytest.mark.parametrize("name", sorted(p.name for p in ZOO.iterdir() if p.is_dir()))
def test_shipped_checkpoint_configs_carry_a_valid_hash(name):
    data = json.loads((ZOO / name / "config.json").read_text())
    assert data[CONTENT_HASH_FIELD] == content_sha256(data)
    assert CONTENT_HASH_FIELD not in read_checkpoint(f"zoo:{name}")


def test_a_flipped_digit_in_a_checkpoint_config_is_refused(tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ZOO / "flow-real-only", ckpt)
    config = ckpt / "config.json"
    text = config.read_text()
    config.write_text(flip_digit(text, '"mean": ['))  # a normalization statistic: any value is plausible
    with pytest.raises(CheckpointError, match=r"config\.json: its content does not match.*retrain"):
        read_checkpoint(ckpt)
    config.write_text(text)
    drop_field(config)  # an older checkpoint, or one whose hash was dropped: refused unless trusted (issue 50)
    with pytest.raises(CheckpointError, match=r"config\.json \(checkpoint version 2\) has no content_sha256"):
        read_checkpoint(ckpt, trust_unhashed=False)
    assert read_checkpoint(ckpt, trust_unhashed=True)["format"] == "r2s2r_envs.policy_checkpoint"


# ---------------------------------------------------------------------- result files
def small_result() -> EvaluationResult:
    records = tuple(
        EpisodeRecord(
            index=i,
            env_seed=env_seed,
            policy_seed=policy_seed,
            is_success=i == 0,
            success_any_step=i == 0,
            sort_accuracy=1.0 if i == 0 else 0.0,
            time_to_sort=4.0 if i == 0 else None,
            failure_cause=None if i == 0 else "missed",
            object_outcomes=("sorted",) if i == 0 else ("missed",),
            steps=80,
            episode_return=1.0,
            terminated=True,
            truncated=False,
            unstable=False,
        )
        for i, (env_seed, policy_seed) in enumerate(evaluation_seeds(2))
    )
    return EvaluationResult(
        env_id="PickSort-Ungrounded-v0",
        env_kwargs={"num_objects": 1},
        provenance={"domain": "sim", "num_objects": 1, "episode_steps": 500},
        policy={"name": "bc", "class": "r2s2r_envs.policies.Policy", "settings": None},
        method=None,
        base_seed=271828,
        records=records,
        versions={"r2s2r_envs": "0.2.0", "mujoco": "4.0.0", "gymnasium": "1.4.0", "numpy": "2", "python": "3.11"},
        wall_time_s=12.375,
    )


def test_result_files_carry_a_hash_the_leaderboard_verifies(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    path = folder / "r.json"
    text = small_result().to_json(indent=2)
    data = json.loads(text)
    assert data[CONTENT_HASH_FIELD] == content_sha256(data)
    path.write_text(text)
    (loaded,) = load_results(folder)[0]
    assert loaded[1].to_dict() == small_result().to_dict()
    path.write_text(flip_digit(text, '"wall_time_s": '))  # a value no other check constrains
    with pytest.raises(LeaderboardError, match=r"r\.json: this result: its content does not match.*re-run"):
        load_results(folder)
    with pytest.raises(Exception, match="content does not match"):
        EvaluationResult.from_json(flip_digit(text, '"wall_time_s": '))
    path.write_text(text)
    drop_field(path)  # an older result file: no field
    assert len(load_results(folder)[0]) == 1


# ---------------------------------------------------------------------- behavior models
def test_the_shipped_behavior_model_carries_a_valid_hash_and_keeps_its_model_sha256():
    data = json.loads(gzip.decompress(SHIPPED_BEHAVIOR.read_bytes()))
    assert data[CONTENT_HASH_FIELD] == content_sha256(data)
    model = load_model("default")
    assert CONTENT_HASH_FIELD not in model
    assert model_sha256(model) == model_sha256(data) == BEHAVIOR_MODEL_SHA256


def test_a_flipped_digit_in_a_behavior_model_is_refused(tmp_path):
    path = save_model(load_model("default"), tmp_path / "model.json")
    text = path.read_text()
    assert text == gzip.decompress(SHIPPED_BEHAVIOR.read_bytes()).decode()  # the writer writes the shipped text
    assert SHIPPED_BEHAVIOR.read_bytes() == gzip_bytes(text.encode())  # compressed as the suite compresses
    path.write_text(flip_digit(text, '"sources":'))  # a trajectory value
    with pytest.raises(BehaviorModelError, match=r"model\.json: its content does not match.*refit"):
        load_model(path)
    path.write_text(text)
    drop_field(path, indent=None)  # an older model: no field
    assert model_sha256(load_model(path)) == BEHAVIOR_MODEL_SHA256


# ---------------------------------------------------------------------- grounding files
def test_the_shipped_grounding_carries_a_valid_hash_and_keeps_its_file_sha256():
    data = json.loads(SHIPPED_GROUNDING.read_text())
    assert data[CONTENT_HASH_FIELD] == content_sha256(data)
    assert load_grounding("default").file_sha256 == GROUNDING_FILE_SHA256


def test_written_groundings_are_hashed_and_hand_edits_must_drop_the_hash(tmp_path):
    path = tmp_path / "g.json"
    sha = write_grounding(load_grounding("default"), path)
    assert path.read_text() == SHIPPED_GROUNDING.read_text()  # the writer writes the shipped file's bytes
    assert sha == GROUNDING_FILE_SHA256 == load_grounding(path).file_sha256
    text = path.read_text()
    path.write_text(flip_digit(text, '"world": {', nth=10))  # a world value, within its bounds
    with pytest.raises(GroundingFileError, match=r"g\.json: its content does not match.*delete its content_sha256"):
        load_grounding(path)
    # edited by hand: without the field it loads, and its file_sha256 is the hash of its bytes
    data = json.loads(flip_digit(text, '"world": {', nth=10))
    del data[CONTENT_HASH_FIELD]
    path.write_text(json.dumps(data, indent=2) + "\n")
    edited = load_grounding(path)
    assert edited.file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest() != GROUNDING_FILE_SHA256
    assert edited.world != load_grounding("default").world
    with pytest.raises(GroundingFileError, match="inline grounding: its content does not match"):
        load_grounding(json.loads(flip_digit(text, '"world": {', nth=10)))


def test_a_gzip_compressed_behavior_model_reads_as_its_json(tmp_path):
    from r2s2r_envs.behavior.variants import BehaviorGroundedEnv
    from r2s2r_envs.envs.file_arguments import read_by_value

    path = tmp_path / "model.json.gz"
    path.write_bytes(SHIPPED_BEHAVIOR.read_bytes())
    assert model_sha256(load_model(path)) == BEHAVIOR_MODEL_SHA256
    value, digest = read_by_value(BehaviorGroundedEnv.file_arguments["behavior"], path)  # an env argument by path
    assert model_sha256(value) == BEHAVIOR_MODEL_SHA256
    assert digest == hashlib.sha256(SHIPPED_BEHAVIOR.read_bytes()).hexdigest()  # of the file as it is
    path.write_bytes(SHIPPED_BEHAVIOR.read_bytes()[:-20])  # cut short
    with pytest.raises(BehaviorModelError, match="not readable gzip data"):
        load_model(path)
