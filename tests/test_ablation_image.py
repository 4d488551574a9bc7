"""The ablation's image track (``r2s2r ablation --lab LAB --track image``, docs/ablation.md#image-track): every
dataset records both cameras beside the state, every policy trains with the image recipe and is evaluated with
cameras, the chain's identification also fits the cameras and look, and what the track cannot do is refused before any
work (no lab chain, control arms, a run directory of the other track)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from test_ablation_lab import lab_file, tiny_lab_design  # noqa: F401  (the fixture)

from r2s2r_envs.ablation.chain import resolve_lab
from r2s2r_envs.ablation.cli import add_subcommands, design_from_args
from r2s2r_envs.ablation.design import (
    LAB_ENV_ID,
    AblationDesign,
    DesignError,
    check_design,
    image_track,
    smoke_design,
)
from r2s2r_envs.ablation.presets import IMAGE_RECIPE, IMAGE_SIZE
from r2s2r_envs.ablation.runner import AblationError, design_lab, preflight
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.cli import main


def test_the_image_track_records_cameras_trains_the_image_recipe_and_evaluates_with_cameras(lab_file):  # noqa: F811
    state = tiny_lab_design(resolve_lab(lab_file))
    image = image_track(state)
    check_design(image)
    assert image.track == "image" and image.name == f"{state.name}-image"
    for spec in [image.real, *(s for _, s in image.sim)]:
        assert spec.generate_kwargs["obs_mode"] == "state+rgb" and spec.env_kwargs["image_size"] == IMAGE_SIZE
        assert "object_visible" in spec.env_kwargs["sensors"]  # the chain's datasets still record visibility
    assert image.train["recipe"] == IMAGE_RECIPE
    assert {k: v for k, v in image.train.items() if k != "recipe"} == {
        k: v for k, v in state.train.items() if k != "recipe"
    }  # the design's budget
    assert image.eval_env_kwargs["obs_mode"] == "state+rgb" and image.eval_env_kwargs["image_size"] == IMAGE_SIZE

    state_tasks = {t.label: t for t in state.tasks()}
    image_tasks = image.tasks()
    for task in image_tasks:
        assert state_tasks[task.label].key != task.key, task.label  # every task records or fits the cameras
        if task.kind == "sysid":  # the same identification plus the visual protocols
            state_config = state_tasks[task.label].config
            assert task.config == {**state_config, "visual": True} and "visual" not in state_config
        if task.kind == "train":
            assert task.config["recipe"] == IMAGE_RECIPE and task.config["features"] == "proprio"
        if task.kind in ("eval", "mixture"):
            assert task.config["env_kwargs"]["obs_mode"] == "state+rgb"
            if task.kind == "eval" and task.config["env_id"] == LAB_ENV_ID:
                assert task.config["lab"] == image.lab.to_config()


def test_the_track_round_trips_through_the_manifest_and_state_manifests_are_unchanged(lab_file):  # noqa: F811
    state = tiny_lab_design(resolve_lab(lab_file))
    assert "track" not in state.to_dict()  # a state design's manifest is as before the image track
    image = image_track(state)
    assert image.to_dict()["track"] == "image"
    assert AblationDesign.from_dict(image.to_dict()) == image
    assert AblationDesign.from_dict(state.to_dict()).track == "state"


def test_what_the_image_track_cannot_do_is_refused_before_any_work(lab_file, tmp_path):  # noqa: F811
    with pytest.raises(DesignError, match=r"add --lab LAB.*canonical datasets of the default lab hold state only"):
        check_design(image_track(smoke_design()))
    lab_design_ = tiny_lab_design(resolve_lab(lab_file))
    with pytest.raises(DesignError, match=r"control arms \['slowed-planner'\] are not defined for the image track"):
        check_design(image_track(dataclasses.replace(lab_design_, arms=("slowed-planner",))))
    with pytest.raises(DesignError, match="holds no camera images"):
        check_design(dataclasses.replace(lab_design_, track="image"))
    with pytest.raises(DesignError, match=r"unknown track 'video'; valid: \['state', 'image'\]"):
        check_design(dataclasses.replace(lab_design_, track="video"))

    out = tmp_path / "run"
    Store(out).write_manifest(lab_design_.to_dict(), "test", lab=design_lab(lab_design_, out))  # the state track's
    with pytest.raises(AblationError, match=r"made for the state track; this run is for the image track"):
        preflight(image_track(lab_design_), out)


def test_the_cli_selects_the_track_and_refuses_it_without_a_lab(lab_file, tmp_path, capsys):  # noqa: F811
    code = main(["ablation", "--smoke", "--track", "image", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "add --lab LAB" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing written

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers())
    args = parser.parse_args(["ablation", "--smoke", "--lab", str(lab_file), "--track", "image", "--out", "x"])
    design = design_from_args(args)
    assert design.track == "image" and design.train["recipe"] == IMAGE_RECIPE


def test_a_canonical_recipe_of_any_lab_id_is_real_data():
    from r2s2r_envs.ablation.specs import canonical_recipe

    assert canonical_recipe("lab-50", 5, "a").domain == "real"
    assert canonical_recipe("lab-v3-50-rgb64", 5, "b").domain == "real"  # PickSort-Real-v1
    assert canonical_recipe("ungrounded-v1-1000-rgb64", 5, "c").domain == "sim"


def test_the_image_tracks_sysid_fits_the_cameras_and_reports_the_visual_gap(lab_file, tmp_path, monkeypatch):  # noqa: F811
    import types

    from r2s2r_envs.ablation import chain
    from r2s2r_envs.ablation import tasks as tasks_module
    from r2s2r_envs.ablation.report import chain_markdown
    from r2s2r_envs.world.params import nominal

    gap = {"cameras": {"scene": {"nominal": 0.25, "grounded": 0.02, "reduction_percent": 92.0}}, "reprojection_px": {}}
    seen: dict = {}

    def fake_run_sysid(out, **kwargs):
        seen.update(kwargs)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("{}")
        grounding = types.SimpleNamespace(
            not_identifiable={},
            world=nominal(),
            identified=("belt_speed",),
            validation={"nrmse": {}, **({"visual_gap": gap} if kwargs.get("visual") else {})},
            demonstrator=None,
            provenance={},
        )
        logs = types.SimpleNamespace(runs=[], fit=[], heldout=[])
        return types.SimpleNamespace(grounding=grounding, logs=logs, wall_time_s={})

    monkeypatch.setattr(chain, "sysid_entry", lambda: fake_run_sysid)
    state = tiny_lab_design(resolve_lab(lab_file))
    for design, visual in ((state, False), (image_track(state), True)):
        task = next(t for t in design.tasks() if t.kind == "sysid").to_dict()
        record = tasks_module.execute_task(task, str(tmp_path / design.track))
        assert seen["visual"] is visual and record["visual_gap"] == (gap if visual else None)
        entry = {"stage": "sysid", "label": task["label"], "status": "done", "why": None, "sha256": record["sha256"]}
        entry.update({k: record[k] for k in ("identified", "not_identifiable", "reduction_percent", "demonstrator")})
        table = chain_markdown([{**entry, "visual_gap": record["visual_gap"]}])
        assert ("visual gap, spec sheet -> identified: scene 0.25 -> 0.02" in table) is visual
