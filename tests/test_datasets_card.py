"""Data cards (r2s2r_envs.datasets.card, r2s2r_envs.behavior.card): figures checked against demonstrations whose
events are known by construction, the card written by generation outside the content hash, cards of files made
before cards existed, bad input, and the card in the ablation's data task and report."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import downgrade_to_v2

from r2s2r_envs.ablation import tasks as ablation_tasks
from r2s2r_envs.ablation.presets import smoke_design
from r2s2r_envs.ablation.report import data_cards_markdown, to_markdown
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.ablation.tables import analyze, data_cards
from r2s2r_envs.datasets import DatasetWriter, Episode, open_dataset
from r2s2r_envs.datasets import generate as generate_module
from r2s2r_envs.datasets.card import (
    CARD_ATTR,
    card_state,
    compute_card,
    data_card,
    store_card,
    stored_card,
    to_ranges,
)
from r2s2r_envs.datasets.cli import add_subcommands
from r2s2r_envs.datasets.generate import generate
from r2s2r_envs.datasets.toy import make_toy_demonstrator, register_toy_env
from r2s2r_envs.envs.hand import JOINT_INDEX
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import scene_layout

DT = 0.05
STEPS = 120
TOY = register_toy_env()
SHORT = {"env_kwargs": {"num_objects": 1}, "episode_steps": 130, "progress": False}


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="r2s2r")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def _ramp(start: int, length: int = 6) -> np.ndarray:
    """0 until ``start``, then a minimum-jerk rise to 1 over ``length`` steps."""
    x = np.clip((np.arange(STEPS) - start) / length, 0.0, 1.0)
    return x**3 * (10 - 15 * x + 6 * x * x)


def hand_made_episode(*, y0: float, pace: float, close: int | None, lift: int, wrap: bool, alpha: float, seed: int):
    """One object riding the belt at ``pace`` from ``y0``; the fingers start closing at ``close`` (``None``: never,
    the object rides on), the hand's lowest point is at ``lift`` (a parabola, which smoothing keeps exact) and the
    object rises with it. ``wrap`` also curls the fingers' distal joints. The clean arm commands are
    ``alpha * t**2`` along x (the executed ones carry noise)."""
    lay = scene_layout()
    t = np.arange(STEPS + 1)
    obj = np.zeros((STEPS + 1, 3))
    obj[:, 0] = lay.belt_center_x
    obj[:, 1] = y0 - pace * DT * t
    obj[:, 2] = lay.belt_top + 0.025
    eef = obj + np.array([0.0, 0.0, 0.02])
    if close is not None:
        bend = np.clip(t, close - 6, lift + 25)
        eef[:, 2] = obj[lift, 2] + 0.02 + 0.002 * (bend - lift) ** 2
        held = slice(lift, lift + 30)
        eef[held, :2] = eef[lift, :2]
        eef[lift + 25 : lift + 30, 2] = eef[lift + 25, 2]
        obj[held] = eef[held] - np.array([0.0, 0.0, 0.02])
        obj[lift + 30 :] = [0.25, 0.0, 0.05]  # released over its bin
        eef[lift + 30 :] = eef[lift + 29]
    fingers = np.full((STEPS, len(C.HAND_JOINTS)), -0.9)
    if close is not None:
        squeeze = _ramp(close)
        squeeze[lift + 30 :] = 0.0
        for digit in ("if", "mf", "rf", "th"):
            fingers[:, JOINT_INDEX[f"{digit}_mcp"]] = -0.9 + 0.6 * squeeze
            if wrap and digit != "th":
                for joint in ("pip", "dip"):
                    fingers[:, JOINT_INDEX[f"{digit}_{joint}"]] = -0.9 + 0.15 * squeeze
    labels = np.zeros((STEPS, 6 + len(C.HAND_JOINTS)), dtype=np.float32)
    labels[:, 0] = alpha * np.arange(STEPS) ** 2
    labels[:, 6:] = fingers
    executed = labels.copy()
    executed[:, :6] += np.random.default_rng(seed).normal(0.0, 0.1, (STEPS, 6))
    one_hot = np.zeros(3, dtype=np.float32)
    one_hot[0] = 1.0
    obs = {
        "eef_pos": eef.astype(np.float32),
        "eef_quat": np.tile([0.0, 1.0, 0.0, 0.0], (STEPS + 1, 1)).astype(np.float32),
        "object_pos": obj.astype(np.float32),
        "object_quat": np.tile([1.0, 0.0, 0.0, 0.0], (STEPS + 1, 1)).astype(np.float32),
        "object_category": np.tile(one_hot, (STEPS + 1, 1)),
    }
    return obs, executed, labels


# The three hand-made demos: attempt, seed, geometry, outcome.
HAND_MADE = [
    {"attempt": 0, "seed": 100, "y0": 0.45, "pace": 0.08, "close": 50, "lift": 58, "wrap": False, "alpha": 5e-5},
    {"attempt": 2, "seed": 102, "y0": 0.452, "pace": 0.1, "close": 60, "lift": 66, "wrap": True, "alpha": 4e-5},
    {"attempt": 3, "seed": 103, "y0": 0.45, "pace": 0.08, "close": None, "lift": 0, "wrap": False, "alpha": 3e-5},
]
TIME_TO_SORT = [5.0, 6.5, None]


def write_hand_made(path: Path) -> None:
    provenance = {"env_id": "PickSort-Real-v0", "domain": "real", "seed": 11, "demonstrator": {"name": "hand-made"}}
    env_args = {"env_name": "PickSort-Real-v0", "type": 2, "env_kwargs": {}}
    generation = {"seed": 11, "successes_only": False}
    with DatasetWriter.create(path, provenance=provenance, env_args=env_args, generation=generation) as w:
        for spec, tts in zip(HAND_MADE, TIME_TO_SORT, strict=True):
            geometry = {k: spec[k] for k in ("y0", "pace", "close", "lift", "wrap", "alpha")}
            obs, executed, labels = hand_made_episode(**geometry, seed=spec["seed"])
            sorted_ = spec["close"] is not None
            w.append(
                Episode(
                    observations=obs,
                    actions=executed,
                    action_labels=labels,
                    rewards=np.zeros(STEPS, dtype=np.float32),
                    terminated=sorted_,
                    truncated=not sorted_,
                    seed=spec["seed"],
                    demonstrator_seed=spec["seed"],
                    attempt=spec["attempt"],
                    success=sorted_,
                    success_any_step=sorted_,
                    failure_cause=None if sorted_ else "missed",
                    time_to_sort=tts,
                    object_outcomes=["sorted" if sorted_ else "missed"],
                ),
                attempts=spec["attempt"] + 1,
            )
        w.set_attempts(5)


@pytest.fixture(scope="module")
def hand_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("card") / "hand_made.hdf5"
    write_hand_made(path)
    return path


# ---------------------------------------------------------------------------------------------- the figures
def test_card_of_hand_made_demos_has_the_figures_they_were_made_with(hand_made: Path) -> None:
    card = compute_card(hand_made, per_episode=True)
    with open_dataset(hand_made) as f:
        assert card["content_sha256"] == f.content_hash and card["card_version"] == 1
    demonstrator = card["demonstrator"]
    assert demonstrator["name"] == "hand-made" and demonstrator["successes_only"] is False
    assert (demonstrator["successes"], demonstrator["attempts"], demonstrator["success_rate"]) == (2, 5, 0.4)
    assert demonstrator["failure_causes"] == {"missed": 1}
    scenes = card["scenes"]
    assert (scenes["base_seed"], scenes["attempted"], scenes["kept"], scenes["kept_attempts"]) == (11, 5, 3, "0,2-3")
    assert scenes["kept_seeds_sha256"] == hashlib.sha256(b"100,102,103").hexdigest()[:16]
    tts = card["time_to_sort"]
    assert (tts["sorted_episodes"], tts["unsorted_episodes"]) == (2, 1)
    assert tts["seconds"]["median"] == 5.75 and (tts["seconds"]["min"], tts["seconds"]["max"]) == (5.0, 6.5)
    assert card["objects"] == [{"object": 1, "sorted_share": 0.6667, "outcomes": {"missed": 1, "sorted": 2}}]

    grasps = card["grasps"]
    assert grasps["available"] and (grasps["episodes"], grasps["grasps"], grasps["regrasps"]) == (3, 2, 0)
    assert grasps["types"] == {"pinch": 1, "wrap": 1}
    # Arrival: the first step with y < 0.3 (38 at 0.08 m/s from 0.45, 31 at 0.1 m/s from 0.452).
    arrival = [(50 - 38) * DT, (60 - 31) * DT]
    # Margin at the lift: distance to the reach limit at the closure onset over the pace, minus closure to lift.
    margin = [
        (0.45 - 0.08 * DT * 50 - C.REACH_LIMIT_Y) / 0.08 - 8 * DT,
        (0.452 - 0.1 * DT * 60 - C.REACH_LIMIT_Y) / 0.1 - 6 * DT,
    ]
    episodes = card["episodes"]
    assert [e["demo"] for e in episodes] == [0, 1, 2] and [e["attempt"] for e in episodes] == [0, 2, 3]
    assert [e["grasp_types"] for e in episodes] == [["pinch"], ["wrap"], [None]]
    for e, want_arrival, want_margin in zip(episodes[:2], arrival, margin, strict=True):
        assert e["arrival_to_closure_s"][0] == pytest.approx(want_arrival, abs=1e-9)
        assert e["margin_s"][0] == pytest.approx(want_margin, rel=1e-4)
    assert episodes[2]["arrival_to_closure_s"] == [None] and episodes[2]["time_to_sort_s"] is None
    assert grasps["arrival_to_closure_s"]["median"] == pytest.approx(np.median(arrival))
    assert grasps["closure_to_lift_s"]["min"] == pytest.approx(6 * DT)
    assert grasps["closure_to_lift_s"]["max"] == pytest.approx(8 * DT)
    assert grasps["margin_s"]["min"] == pytest.approx(min(margin), rel=1e-3)
    assert grasps["closure_spread_s"]["max"] == 0.0  # every digit closes at once in both
    assert grasps["objects"][0]["grasped"] == 2

    # Smoothness from the clean labels alpha * t**2: a change of alpha * (2t + 1) per step (mean alpha * (T - 1)),
    # a jerk of 2 alpha in command units per step^2, i.e. 2 alpha * 0.02 m / 0.05 s / 0.05^2 s^2 = 320 alpha m/s^3.
    smooth = card["smoothness"]
    assert smooth["array"] == "action_labels" and smooth["note"] is None
    alphas = [s["alpha"] for s in HAND_MADE]
    for e, alpha in zip(episodes, alphas, strict=True):
        assert e["action_change"] == pytest.approx(alpha * (STEPS - 1), rel=1e-3)
        assert e["mean_squared_jerk"] == pytest.approx((320 * alpha) ** 2, rel=1e-3)
    assert smooth["mean_squared_jerk"]["median"] == pytest.approx((320 * 4e-5) ** 2, rel=1e-3)
    assert smooth["action_change"]["n"] == 3


def test_ranges_of_kept_attempts() -> None:
    assert to_ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert to_ranges([4]) == "4" and to_ranges([]) == ""


# ---------------------------------------------------------------------------------------------- generation
def test_generation_writes_the_card_outside_the_content_hash(tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "with_card.hdf5"
    result = generate("PickSort-Ungrounded-v0", 2, out, seed=3, **SHORT)
    card = stored_card(out)
    assert card is not None and card["content_sha256"] == result.content_hash
    assert card == json.loads(json.dumps(compute_card(out)))  # what the file's content gives
    with open_dataset(out, verify="full") as f:  # the card is outside every hash
        attrs = [f.demo_attrs(k) for k in f.demo_ids]
        assert f.content_hash == result.content_hash
    assert card["demonstrator"]["name"] == "scripted" and card["demonstrator"]["attempts"] == 2
    assert card["time_to_sort"]["seconds"]["median"] == pytest.approx(np.median([a["time_to_sort"] for a in attrs]))
    assert card["scenes"]["kept_attempts"] == "0-1"
    # The scripted planner pinches: its fingers' distal joints never curl.
    assert card["grasps"]["available"] and card["grasps"]["types"]["wrap"] == 0
    assert card["grasps"]["types"]["pinch"] == card["grasps"]["grasps"] >= 1
    assert card["smoothness"]["array"] == "action_labels"

    # The same recipe without the card: the same content hash, and no card.
    monkeypatch.setattr(generate_module, "refresh_card", lambda path: None)
    bare = tmp_path / "bare.hdf5"
    assert generate("PickSort-Ungrounded-v0", 2, bare, seed=3, **SHORT).content_hash == result.content_hash
    assert stored_card(bare) is None
    # Storing a card into it leaves every hash as it was.
    assert _cli(["datasets", "card", str(bare), "--store"]) == 0
    assert "content hash is unchanged" in capsys.readouterr().out
    with open_dataset(bare, verify="full") as f:
        assert f.content_hash == result.content_hash
    assert stored_card(bare) == card


def test_a_card_of_another_task_says_why_it_has_no_grasps(tmp_path: Path) -> None:
    out = tmp_path / "toy.hdf5"
    generate(TOY, 3, out, seed=1, demonstrator=make_toy_demonstrator, progress=False)
    card = stored_card(out)
    assert card is not None and card["grasps"] == {
        "available": False,
        "reason": card["grasps"]["reason"],
    }
    assert card["grasps"]["reason"].startswith("the file holds demonstrations of 'ToyPickSort-v0', another task")
    assert str(tmp_path) not in json.dumps(card)  # content only: the same data anywhere give the same card
    assert card["demonstrator"]["attempts"] == 3 and card["smoothness"]["mean_squared_jerk"] is not None


# ---------------------------------------------------------------------------------------------- older files
def test_a_file_made_before_cards_gets_one_computed(tmp_path: Path, capsys) -> None:
    out = tmp_path / "old.hdf5"
    generate(TOY, 3, out, seed=2, demonstrator=make_toy_demonstrator, progress=False)
    new_card = stored_card(out)
    old_hash = downgrade_to_v2(out)  # a schema-version-2 file; its stored card now describes other content
    assert _cli(["datasets", "info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["data_card_status"] == "stale" and info["schema_version"] == 2
    with h5py.File(out, "r+") as f:
        del f.attrs[CARD_ATTR]  # as a file made before cards
    assert _cli(["datasets", "info", str(out)]) == 0
    assert "none current (the file was made before data cards" in capsys.readouterr().out
    assert _cli(["datasets", "card", str(out), "--json", "--episodes"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["content_sha256"] == old_hash and len(card["episodes"]) == 3
    # Version 2 without injected noise: its actions are the demonstrator's own.
    assert card["smoothness"]["array"] == "actions" and card["smoothness"]["note"] is None
    assert card["demonstrator"] == {**new_card["demonstrator"]} and card["scenes"] == new_card["scenes"]
    assert _cli(["datasets", "card", str(out), "--store"]) == 0
    capsys.readouterr()
    assert _cli(["datasets", "info", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"data card of content {old_hash[:16]}" in text and "demonstrator   toy-reacher" in text
    with open_dataset(out, verify="full") as f:
        assert f.content_hash == old_hash


def test_a_stale_card_is_recomputed_not_trusted(hand_made: Path, tmp_path: Path) -> None:
    path = tmp_path / "grown.hdf5"
    path.write_bytes(hand_made.read_bytes())
    first = data_card(path, store=True)
    with DatasetWriter.resume(path) as w:  # one more demo: other content, the stored card now stale
        spec = HAND_MADE[0]
        obs, executed, labels = hand_made_episode(
            **{k: spec[k] for k in ("y0", "pace", "close", "lift", "wrap")}, alpha=0.0, seed=9
        )
        w.append(
            Episode(
                observations=obs,
                actions=executed,
                action_labels=labels,
                rewards=np.zeros(STEPS, dtype=np.float32),
                seed=104,
                attempt=5,
                success=True,
                time_to_sort=4.0,
                object_outcomes=["sorted"],
            )
        )
    with open_dataset(path) as f:
        assert card_state(f)[0] == "stale"
    second = data_card(path)
    assert second["demos"] == 4 and second["content_sha256"] != first["content_sha256"]
    assert second["scenes"]["kept_attempts"] == "0,2-3,5" and second["time_to_sort"]["seconds"]["min"] == 4.0


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_input_is_named(tmp_path: Path, hand_made: Path, capsys) -> None:
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a dataset")
    assert _cli(["datasets", "card", str(text_file)]) == 1
    err = capsys.readouterr().err
    assert f"{text_file} is not an HDF5 file" in err and "Traceback" not in err
    assert _cli(["datasets", "card", str(tmp_path / "missing.hdf5")]) == 1
    assert "no such dataset file" in capsys.readouterr().err
    foreign = tmp_path / "foreign.hdf5"
    with h5py.File(foreign, "w") as f:
        f.create_group("data")
    assert _cli(["datasets", "card", str(foreign)]) == 1
    assert "is not an r2s2r_envs dataset (no r2s2r_schema_version attribute)" in capsys.readouterr().err
    # A damaged stored card: info still works and says so; the data are not affected and a new card replaces it.
    damaged = tmp_path / "damaged.hdf5"
    damaged.write_bytes(hand_made.read_bytes())
    with h5py.File(damaged, "r+") as f:
        f.attrs[CARD_ATTR] = "[1, 2"
    assert _cli(["datasets", "info", str(damaged), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["data_card_status"] == "unreadable" and info["data_card"] is None
    assert data_card(damaged, store=True)["demos"] == 3
    with open_dataset(damaged) as f:
        assert card_state(f)[0] == "current"


def test_storing_refuses_a_file_another_process_has_open(hand_made: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "busy.hdf5"
    path.write_bytes(hand_made.read_bytes())
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import h5py, time; f = h5py.File({str(path)!r}, 'r'); print('open', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(Exception, match="open in another process"):
            store_card(path, compute_card(path))
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------------------------------------- the ablation
def test_the_data_task_records_its_card_and_the_report_shows_it(tmp_path: Path) -> None:
    design = smoke_design()
    tasks = design.tasks()
    data = {t.config["label"]: t for t in tasks if t.kind == "data"}
    store = Store(tmp_path)
    for label in ("lab-smoke", "ungrounded-smoke"):
        record = ablation_tasks.execute_task(data[label].to_dict(), str(tmp_path))
        card = record["card"]
        assert card == stored_card(Path(record["dataset"]))
        assert card["demos"] == 2 and card["content_sha256"] == record["sha256"]
    lab = store.done_record("data", data["lab-smoke"].key)["card"]
    assert lab["demonstrator"]["name"] == "teleoperator" and lab["grasps"]["available"]
    rows = {row["data"]: row for row in data_cards(design, tasks, store)}
    assert rows["lab-smoke"]["variant"] == "real" and rows["ungrounded-smoke"]["variant"] == "Ungrounded"
    assert rows["worldgrounded-smoke"] == {
        "data": "worldgrounded-smoke",
        "variant": "WorldGrounded",
        "done": False,
        "card": None,
    }
    table = data_cards_markdown(list(rows.values())).splitlines()
    un = store.done_record("data", data["ungrounded-smoke"].key)["card"]
    line = next(x for x in table if x.startswith("| ungrounded-smoke | Ungrounded |"))
    rate = un["demonstrator"]["success_rate"]
    assert f"| {100 * rate:.0f}% ({un['demonstrator']['successes']}/{un['demonstrator']['attempts']}) |" in line
    assert f"| {un['time_to_sort']['seconds']['median']:.3g} |" in line
    assert f"| {un['grasps']['objects'][0]['arrival_to_closure_s']['median']:.3g} |" in line
    assert next(x for x in table if x.startswith("| worldgrounded-smoke")).count("not made yet") == 1
    report = analyze(design, tasks, store)
    assert report["data_cards"] == list(rows.values())
    assert "## Who made each cell's data (data cards)" in to_markdown(design, report)


def test_importing_the_package_registers_the_grasp_section_without_the_datasets_layer():
    import subprocess
    import sys

    code = (
        "import sys, r2s2r_envs\n"
        "from r2s2r_envs.card_sections import SECTIONS\n"
        "print(sorted(SECTIONS), 'h5py' in sys.modules, 'r2s2r_envs.datasets' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["['grasps']", "False", "False"]
    from r2s2r_envs import card_sections
    from r2s2r_envs.datasets import card

    assert card.register_card_section is card_sections.register_card_section  # the old import path still works
