"""The grounding file (r2s2r_envs.grounding.result): schema, round trips and clear errors for bad files."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math

import pytest

from r2s2r_envs.grounding.result import (
    GROUNDING_SCHEMA_VERSION,
    Grounding,
    GroundingFileError,
    grounding_schema,
    load_grounding,
    shipped_groundings,
    validate_grounding,
    write_grounding,
)
from r2s2r_envs.safe_json import content_sha256
from r2s2r_envs.world import WorldParams, nominal
from r2s2r_envs.world.params import PERCEPTION_FIELDS


def example_grounding(**changes) -> Grounding:
    """A hand-made grounding (not an identification): belt speed, latency and masses changed from nominal."""
    world = dataclasses.replace(
        nominal(), belt_speed=0.095, control_latency=0.04, object_mass=(0.11, 0.13, 0.22), object_pos_noise=0.002
    )
    fields = dict(
        world=world,
        intervals={
            "belt_speed": [0.094, 0.096],
            "control_latency": [0.035, 0.045],
            "object_mass": [[0.10, 0.12], [0.12, 0.14], [0.20, 0.24]],
            "object_pos_noise": [0.0015, 0.0025],
        },
        identified=["belt_speed", "control_latency", "object_mass", "object_pos_noise"],
        not_identifiable={"arm_armature": "the logs do not excite joint accelerations enough"},
        validation={
            "nrmse": {"arm joints": {"nominal": 0.5, "grounded": 0.1, "reduction_percent": 80.0, "samples": 100}},
            "planner": None,
            "unmodeled": None,
        },
        provenance={
            "lab": {"name": "test-lab", "config_sha256": "ab" * 32},
            "logs": {"arm_steps.hdf5": "cd" * 32},
            "versions": {"r2s2r_envs": "0.2.0", "mujoco": "4.0.0"},
            "seed": 0,
            "wall_time_s": {"logging": 1.0, "fitting": 2.0, "validation": 0.5},
        },
    )
    fields.update(changes)
    return Grounding(**fields)


def _tuned(**changes):
    """A ``demonstrator`` section: the planner's position gain set by hand."""
    return {"name": "scripted", "settings": {"position_gain": 0.3}, "tuning": None, **changes}


def write_example(tmp_path, name="grounding.json", **changes):
    path = tmp_path / name
    write_grounding(example_grounding(**changes), path)
    return path


def _edit(tmp_path, edit, name="edited.json"):
    """A grounding file whose JSON object was changed by ``edit(data)``."""
    data = example_grounding().to_dict()
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_round_trip_is_exact_and_records_the_file_hash(tmp_path):
    g = example_grounding()
    path = tmp_path / "g.json"
    digest = write_grounding(g, path)
    # the SHA-256 of the file's text without its content_sha256 (the field ends the file)
    assert digest == hashlib.sha256(g.to_json().encode()).hexdigest()
    assert json.loads(path.read_text())["content_sha256"] == content_sha256(g.to_dict())
    loaded = load_grounding(path)
    assert loaded == g
    assert loaded.world == g.world and loaded.world.control_latency == 0.04
    assert loaded.file_sha256 == digest and loaded.source == str(path)
    assert Grounding.from_dict(json.loads(path.read_text())) == g
    assert load_grounding(str(path)) == g  # str and Path both accepted
    assert load_grounding(g) is g


def test_file_lists_every_world_field_and_the_schema_keys():
    data = example_grounding().to_dict()
    # The estimator's fields appear only where not nominal (files from before they existed keep their hash).
    assert set(data["world"]) == set(WorldParams.field_names()) - set(PERCEPTION_FIELDS)
    example = example_grounding()
    seeing = dataclasses.replace(example, world=dataclasses.replace(example.world, perception_delay=0.08))
    assert set(seeing.to_dict()["world"]) == set(WorldParams.field_names()) - set(PERCEPTION_FIELDS) | {
        "perception_delay"
    }
    assert Grounding.from_dict(seeing.to_dict()).world.perception_delay == 0.08
    schema = grounding_schema()
    assert set(data) == set(schema["properties"]) == set(schema["required"])
    assert data["schema_version"] == GROUNDING_SCHEMA_VERSION == 2
    validate_grounding(data)  # the schema and the checks accept what to_dict writes


def test_the_demonstrator_section_round_trips_and_version_1_files_still_read(tmp_path):
    g = example_grounding(demonstrator=_tuned())
    path = write_example(tmp_path, demonstrator=_tuned())
    loaded = load_grounding(path)
    assert loaded == g and loaded.demonstrator_settings() == {"position_gain": 0.3}
    assert example_grounding().demonstrator_settings() == {}  # null: the planner's defaults
    # A file written before the section existed (schema version 1) reads as "not tuned".
    old = example_grounding().to_dict()
    old["schema_version"] = 1
    del old["demonstrator"]
    (tmp_path / "v1.json").write_text(json.dumps(old))
    v1 = load_grounding(tmp_path / "v1.json")
    assert v1.demonstrator is None and v1.world == g.world
    assert v1.to_dict()["schema_version"] == 2 and v1.to_dict()["demonstrator"] is None  # rewritten as version 2


def test_infinite_interval_ends_are_written_as_null(tmp_path):
    path = write_example(tmp_path, intervals={"control_latency": [0.03, math.inf]})
    assert json.loads(path.read_text())["intervals"]["control_latency"] == [0.03, None]
    assert load_grounding(path).interval("control_latency") == [0.03, None]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(schema_version=3), "schema_version 3; this r2s2r_envs reads grounding schema versions 1"),
        (lambda d: d.update(schema_version=True), "schema_version True"),
        (lambda d: d.pop("schema_version"), "has no schema_version"),
        (lambda d: d.update(format="something"), "expected 'r2s2r_envs.grounding'"),
        (lambda d: d.update(extra=1), "unknown field(s) ['extra']"),
        (lambda d: d.pop("validation"), "missing field(s) ['validation']"),
        (lambda d: d.pop("demonstrator"), "missing field(s) ['demonstrator']"),
        (lambda d: d.update(schema_version=1, demonstrator=None), "unknown field(s) ['demonstrator']"),
        (lambda d: d.update(demonstrator=_tuned(name="humanlike")), "at demonstrator"),
        (lambda d: d.update(demonstrator=_tuned(settings={"warp": 1.0})), "unknown planner setting(s) ['warp']"),
        (lambda d: d.update(demonstrator=_tuned(settings={"position_gain": "high"})), "at demonstrator"),
        (lambda d: d["world"].pop("belt_speed"), "world lacks field(s) ['belt_speed']"),
        (lambda d: d["world"].update(warp_drive=1.0), "world: unknown WorldParams field(s) ['warp_drive']"),
        (lambda d: d["world"].update(belt_speed=-1.0), "WorldParams.belt_speed must be"),
        (lambda d: d["world"].update(object_mass=[0.1, 0.1]), "object_mass"),
        (lambda d: d["intervals"].update(belt_speed=[0.05, 0.06]), "excludes the field's value 0.095"),
        (lambda d: d["intervals"].update(belt_speed=[0.1, 0.09]), "low > high"),
        (lambda d: d["intervals"].update(object_mass=[0.1, 0.2]), "list of 3 [low, high] pairs"),
        (lambda d: d["intervals"].update(belt_speed=[[0.09, 0.1]]), "must be [low, high] (a scalar field)"),
        (lambda d: d["intervals"].update(flux=[0, 1]), "'flux', which is not a WorldParams field"),
        (lambda d: d["identified"].append("flux"), "identified names 'flux'"),
        (lambda d: d["identified"].append("object_mass[3]"), "indices 0-2"),
        (lambda d: d["identified"].append("belt_speed[0]"), "a scalar field, no index"),
        (lambda d: d["not_identifiable"].update(belt_speed="?"), "both as identified and as not identifiable"),
        (lambda d: d["provenance"]["lab"].pop("config_sha256"), "'config_sha256' is a required property"),
        (lambda d: d["provenance"]["logs"].update(x="not-a-hash"), "at provenance/logs/x"),
        (lambda d: d["validation"]["nrmse"]["arm joints"].pop("grounded"), "'grounded' is a required property"),
        (lambda d: d["validation"].update(comment="x"), "at validation: Additional properties"),
        (lambda d: d["validation"]["nrmse"]["arm joints"].update(rmse=1), "at validation/nrmse/arm joints"),
        (lambda d: d["provenance"].update(operator="me"), "at provenance: Additional properties"),
    ],
)
def test_bad_files_name_what_is_wrong(tmp_path, edit, message):
    path = _edit(tmp_path, edit)
    with pytest.raises(GroundingFileError) as info:
        load_grounding(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not valid JSON"),
        ('{"format": "r2s2r_envs.grounding", "schema_', "not valid JSON"),  # truncated
        ("[1, 2]", "must hold a JSON object"),
        ('{"x": NaN}', "NaN is not a JSON value"),
        ("\xff\xfe", "not UTF-8 text"),
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels deep; at most 64 levels are accepted"),
        ('{"format": 1, "format": 2}', "key 'format' appears twice"),
    ],
)
def test_malformed_files(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(GroundingFileError, match="bad.json") as info:
        load_grounding(path)
    assert message in str(info.value)


# Values within a field's type but outside what is physically plausible (world/params.py FIELD_BOUNDS, with units;
# grounding/tuning.py PLANNER_BOUNDS): each refused with the field and the accepted range named.
ABSURD = [
    (
        lambda d: d["world"].update(belt_speed=50.0),
        "WorldParams.belt_speed must be a number, finite and >= 0 and <= 0.5",
    ),
    (lambda d: d["world"].update(object_mass=[1e6, 0.12, 0.2]), "WorldParams.object_mass must be a sequence of 3"),
    (lambda d: d["world"].update(arm_kp=[1e12] * 7), "WorldParams.arm_kp must be a sequence of 7 numbers, each"),
    (
        lambda d: d["world"].update(arm_kv=[0.0] * 7),
        "WorldParams.arm_kv must be a sequence of 7 numbers, each finite and > 0",
    ),
    (
        lambda d: d["world"].update(joint_pos_noise=1e3),
        "WorldParams.joint_pos_noise must be a number, finite and >= 0 and <= 0.1",
    ),
    (
        lambda d: d["world"].update(object_pos_offset=[1e6, 0, 0]),
        "WorldParams.object_pos_offset must be a sequence of 3 numbers, each finite and >= -0.1 and <= 0.1",
    ),
    (
        lambda d: d["world"].update(finger_force_limit=1e4),
        "WorldParams.finger_force_limit must be a number, finite and > 0 and <= 10",
    ),
    (
        lambda d: d.update(demonstrator=_tuned(settings={"position_gain": -5.0})),
        "demonstrator.settings.position_gain must be a number, finite and > 0 and <= 1",
    ),
    (
        lambda d: d.update(demonstrator=_tuned(settings={"lead_time": -100.0})),
        "demonstrator.settings.lead_time must be a number, finite and >= 0 and <= 2",
    ),
]


@pytest.mark.parametrize(("edit", "message"), ABSURD)
def test_implausible_values_are_refused_with_the_accepted_range(tmp_path, edit, message):
    path = _edit(tmp_path, edit)
    with pytest.raises(GroundingFileError) as info:
        load_grounding(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_missing_file_names_the_shipped_groundings(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_grounding(tmp_path / "absent.json")
    assert "absent.json" in str(info.value)
    assert str(shipped_groundings()) in str(info.value)
    with pytest.raises(TypeError, match="shipped grounding name"):
        load_grounding(3)  # type: ignore[arg-type]


def test_a_grounding_in_code_is_checked_too():
    with pytest.raises(GroundingFileError, match="excludes"):
        example_grounding(intervals={"belt_speed": [0.0, 0.01]})
    with pytest.raises(TypeError, match="WorldParams"):
        Grounding(world={"belt_speed": 0.1})  # type: ignore[arg-type]


def test_write_refuses_an_incomplete_grounding(tmp_path):
    g = example_grounding(provenance={})  # no lab, logs, versions: a reader would refuse it
    with pytest.raises(GroundingFileError, match="required property"):
        write_grounding(g, tmp_path / "g.json")
    assert not (tmp_path / "g.json").exists()


def test_shipped_groundings_load():
    for name in shipped_groundings():
        g = load_grounding(name)
        assert g.source == name and g.file_sha256 is not None
        assert g.provenance["lab"]["name"]  # identified from a named lab


def test_from_identification_takes_an_identify_result():
    g0 = example_grounding()

    @dataclasses.dataclass
    class FakeIdentification:  # the fields r2s2r_envs.grounding.identify.Identification has
        world: WorldParams
        intervals: dict
        identified: list
        not_identifiable: dict
        details: dict
        wall_time_s: float

    intervals = copy.deepcopy(dict(g0.intervals))
    intervals["belt_speed"] = [-math.inf, 0.2]
    intervals["arm_kp"] = [[v, v] for v in g0.world.arm_kp]  # kept at nominal: states no uncertainty
    ident = FakeIdentification(g0.world, intervals, list(g0.identified), dict(g0.not_identifiable), {}, 1.0)
    g = Grounding.from_identification(ident, validation=g0.validation, provenance=g0.provenance)
    assert g.intervals["belt_speed"] == [None, 0.2]
    assert "arm_kp" not in g.intervals
    assert g.world == g0.world and g.identified == g0.identified
