"""The course's exercises: every exercise lab runs, its twist is measurable the way the lesson measures it, and
``r2s2r course check`` grades right and wrong answers without revealing solutions (docs/course.md).

Tests are the teacher's side: they derive correct answers from the lab configs, which lessons never read.
"""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest

from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.cli import main
from r2s2r_envs.course import AnswerError, check_answer, exercise, exercises
from r2s2r_envs.course.checks import mixing_rule, planner_success, ranking_figures
from r2s2r_envs.lab.config import available_labs, load_lab
from r2s2r_envs.world.constants import CATEGORIES
from r2s2r_envs.world.params import WorldParams

REAL, SIM = "PickSort-Real-v0", "PickSort-Ungrounded-v0"
LESSONS = list(range(9))
CHEAP = [0, 1, 2, 3, 4, 6, 7]  # graded without running episodes


def _lab(lesson: int):
    return load_lab(exercise(lesson).lab)


def correct_answer(lesson: int) -> dict:
    """The right answer, read from the lab config (teacher side)."""
    lab = _lab(lesson)
    w = lab.world
    if lesson == 0:
        return {"belt_speed": w.belt_speed * 1.05}
    if lesson == 1:
        order = lab.interface.arm_joint_order
        return {"swapped_joints": [i for i in range(7) if order[i] != i][::-1]}  # order-free
    if lesson == 2:
        return {"control_latency": w.control_latency + 0.008}
    if lesson == 3:
        k = max(range(3), key=lambda i: w.object_mass[i])
        return {"heavier_category": CATEGORIES[k], "mass": w.object_mass[k] * 0.8}
    if lesson == 4:
        return {
            "object_pos_offset": [v + 0.002 for v in w.object_pos_offset],
            "perception_delay": w.perception_delay + 0.008,
        }
    if lesson == 5:
        return {"world": w.to_dict()}
    if lesson == 6:
        low, high = mixing_rule(40, 600)
        return {"real_fraction": [low + 0.004, high - 0.004]}
    if lesson == 7:
        op = lab.operator
        return {"approach": op.approach, "grasp": op.grasp, "release": op.release, "reaction_time": op.reaction_time}
    figures = ranking_figures(lab.name)
    return {"pearson": figures["pearson"], "mmrv": figures["mmrv"] + 0.03}


def wrong_answer(lesson: int) -> dict:
    lab = _lab(lesson)
    w = lab.world
    if lesson == 0:
        return {"belt_speed": w.belt_speed * 1.15}
    if lesson == 1:
        return {"swapped_joints": [5, 6]}
    if lesson == 2:
        return {"control_latency": w.control_latency - 0.02}
    if lesson == 3:
        k = max(range(3), key=lambda i: w.object_mass[i])
        return {"heavier_category": CATEGORIES[(k + 1) % 3], "mass": w.object_mass[k] * 1.5}
    if lesson == 4:
        return {
            "object_pos_offset": [w.object_pos_offset[0], w.object_pos_offset[1] + 0.005, w.object_pos_offset[2]],
            "perception_delay": w.perception_delay - 0.015,
        }
    if lesson == 5:
        return {"world": {}}  # the nominal model
    if lesson == 6:
        return {"real_fraction": [0.0, 1.0]}
    if lesson == 7:
        op = lab.operator
        other = {"above": "follow", "follow": "above"}[op.approach]
        return {"approach": other, "grasp": op.grasp, "release": op.release, "reaction_time": op.reaction_time + 0.3}
    figures = ranking_figures(lab.name)
    return {"pearson": figures["pearson"] - 0.3, "mmrv": figures["mmrv"] + 0.1}


def _secrets(lesson: int) -> list[str]:
    """Spellings of the true values a hint must never contain."""
    lab = _lab(lesson)
    w = lab.world
    values = {
        0: [w.belt_speed],
        2: [w.control_latency],
        3: list(w.object_mass),
        4: [*w.object_pos_offset, w.perception_delay],
        6: list(mixing_rule(40, 600)),
        7: [lab.operator.reaction_time],
    }.get(lesson, [])
    out = []
    for v in values:
        out += [repr(v), f"{v:g}", f"{v:.3f}", f"{v:.2f}", f"{1000 * v:g}"]
    if lesson == 1:
        out += ["[1, 3]", "1 and 3", "joints 1"]
    if lesson == 7:
        out += [lab.operator.approach, lab.operator.grasp, lab.operator.release]
    return [s for s in out if s not in ("0", "0.0", "0.00", "0.000")]


# ---------------------------------------------------------------------- the exercises and their labs
def test_one_exercise_per_lesson_on_a_shipped_lab():
    ex = exercises()
    assert [e.lesson for e in ex] == LESSONS
    assert len({e.lab for e in ex}) == 9
    assert all(e.lab.startswith("course-") and e.lab in available_labs() for e in ex)


@pytest.mark.parametrize("lesson", LESSONS)
def test_exercise_lab_runs_a_planner_episode(lesson):
    name = exercise(lesson).lab
    env = gym.make(REAL, lab=name, num_objects=1, episode_steps=300)
    planner = make_demonstrator(env, "scripted")
    obs, _ = env.reset(seed=lesson)
    planner.reset(seed=lesson)
    steps, done = 0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(planner.act(obs))
        assert math.isfinite(reward)
        steps += 1
        done = terminated or truncated
    assert info["object_outcomes"][0] != "pending" and not info["unstable"]
    assert env.unwrapped.provenance()["lab"]["name"] == name
    env.close()


@pytest.mark.parametrize("lesson", CHEAP)
def test_placeholder_examples_are_wellformed_but_not_solutions(lesson):
    result = check_answer(lesson, exercise(lesson).example)
    assert not result.passed


def test_latency_twist_is_the_lab_world_only():
    # The lesson measures the latency with sysid: the lab must differ from nominal in latency and sensing only.
    lab, nominal = _lab(2), WorldParams()
    differ = {f for f in nominal.field_names() if getattr(lab.world, f) != getattr(nominal, f)}
    sensing = {"joint_pos_noise", "joint_vel_noise", "eef_pos_noise", "object_pos_noise", "object_vel_noise"}
    assert "control_latency" in differ and differ <= {"control_latency"} | sensing
    assert lab.world.control_latency >= 0.08 and not lab.interface.faulty
    assert lab.effects.arm_command_gain == (1.0,) * 7  # no lag from the low-level controller either


# ---------------------------------------------------------------------- twists are measurable from observations
def _hold(env: gym.Env) -> np.ndarray:
    return np.zeros(env.action_space.shape, dtype=np.float32)


def test_belt_speed_measured_from_object_positions():
    # Lesson 0's method: fit the perceived position of an object riding the belt against time.
    env = gym.make(REAL, lab="course-tour", num_objects=1)
    obs, _ = env.reset(seed=0, options={"setup": {"objects": [{"category": "cube", "position": [0.55, 0.6]}]}})
    ys, ts = [], []
    for k in range(30):
        obs, *_ = env.step(_hold(env))
        ys.append(obs["object_pos"][1])
        ts.append((k + 1) * env.unwrapped.dt)
    speed = -np.polyfit(ts[5:], ys[5:], 1)[0]
    truth = _lab(0).world.belt_speed
    assert abs(speed - truth) <= 0.1 * truth, (speed, truth)
    assert abs(speed - 0.08) > 0.1 * 0.08  # not the nominal belt
    assert check_answer(0, {"belt_speed": float(speed)}).passed
    env.close()


def test_swapped_joints_found_by_comparing_home_postures():
    # Lesson 1's method: same seed in the sim and the lab, compare the joint readings at reset.
    lab, sim = gym.make(REAL, lab="course-interface"), gym.make(SIM)
    q_lab = lab.reset(seed=5)[0]["arm_qpos"]
    q_sim = sim.reset(seed=5)[0]["arm_qpos"]
    found = [int(i) for i in np.flatnonzero(np.abs(q_lab - q_sim) > 0.1)]
    assert len(found) == 2
    assert check_answer(1, {"swapped_joints": found}).passed
    lab.close()
    sim.close()


def test_camera_offset_measured_by_placing_objects():
    # Lesson 4's method: the same placed objects, belt stopped, perceived in the lab and in the sim.
    setup = {"belt": False, "objects": [{"category": "cube", "position": [0.55, 0.1]}]}
    lab, sim = gym.make(REAL, lab="course-calibration", num_objects=1), gym.make(SIM, num_objects=1)
    lab.reset(seed=0, options={"setup": setup})
    sim.reset(seed=0, options={"setup": setup})
    diffs = []
    for _ in range(20):
        obs_lab, *_ = lab.step(_hold(lab))
        obs_sim, *_ = sim.step(_hold(sim))
        diffs.append(obs_lab["object_pos"] - obs_sim["object_pos"])
    offset = np.mean(diffs[5:], axis=0)
    assert check_answer(4, {"object_pos_offset": offset.tolist(), "perception_delay": 0.0}).items[0].passed
    assert np.linalg.norm(offset) > 0.01  # a twist worth finding (1-2 cm)
    lab.close()
    sim.close()


def test_perception_delay_measured_from_belt_rides():
    # Lesson 4's method: cubes placed upstream on the running belt; a line through each perceived track meets
    # t = 0 ahead of the placed spot by the offset plus speed x delay (the offset's y from the lab config here:
    # the test above measures it).
    spots = [[0.50, 0.75], [0.55, 0.95], [0.60, 1.15]]
    offset_y = _lab(4).world.object_pos_offset[1]
    found = []
    for seed in range(4):
        env = gym.make(REAL, lab="course-calibration", num_objects=3, sensors=("object_visible",))
        obs, _ = env.reset(
            seed=seed, options={"setup": {"objects": [{"category": "cube", "position": xy} for xy in spots]}}
        )
        ts, ys = [], []
        for k in range(60):
            obs, *_ = env.step(_hold(env))
            assert obs["object_visible"].all()
            ts.append((k + 1) * env.unwrapped.dt)
            ys.append(obs["object_pos"].reshape(-1, 3)[:, 1])
        env.close()
        for i, (_, y0) in enumerate(spots):
            slope, intercept = np.polyfit(ts[4:], np.array(ys)[4:, i], 1)
            found.append((intercept - y0 - offset_y) / -slope)
    delay = float(np.mean(found))
    truth = _lab(4).world.perception_delay
    assert 0.06 <= truth <= 0.09  # a realistic camera pipeline's delay, docs/lab.md#lab-v3
    assert abs(delay - truth) <= 0.010, (delay, truth)
    answer = {"object_pos_offset": list(_lab(4).world.object_pos_offset), "perception_delay": delay}
    assert check_answer(4, answer).passed
    # Without the offset the same rides miss the delay by far more than the tolerance.
    assert abs(delay + offset_y / 0.08 - truth) > 0.1


# ---------------------------------------------------------------------- grading
@pytest.mark.parametrize("lesson", CHEAP)
def test_correct_answer_passes(lesson):
    result = check_answer(lesson, correct_answer(lesson))
    assert result.passed, result
    assert all(item.message.startswith(f"{item.key}: right") for item in result.items)
    assert result.lab == exercise(lesson).lab


@pytest.mark.parametrize("lesson", CHEAP)
def test_wrong_answer_fails_without_revealing_the_truth(lesson):
    result = check_answer(lesson, wrong_answer(lesson))
    assert not result.passed
    wrong = [item for item in result.items if not item.passed]
    assert wrong and all(": wrong (" in item.message for item in wrong)
    text = " ".join(item.message for item in result.items)
    leaked = [s for s in _secrets(lesson) if s in text]
    assert not leaked, f"hint reveals {leaked}: {text}"


def test_partial_answers_are_graded_per_key():
    truth = correct_answer(3)
    result = check_answer(3, {**truth, "mass": truth["mass"] * 2})
    assert [i.passed for i in result.items] == [True, False]
    assert result.items[1].message == "mass: wrong (off by more than 25 %)"
    truth = correct_answer(4)
    result = check_answer(4, {**truth, "perception_delay": truth["perception_delay"] + 0.02})
    assert [i.passed for i in result.items] == [True, False]
    assert result.items[1].message == "perception_delay: wrong (off by more than 10 ms)"
    one_right = check_answer(1, {"swapped_joints": [1, 6]})
    assert one_right.items[0].message == "swapped_joints: wrong (one of the two joints is right)"


def test_optional_key_may_be_left_out():
    answer = correct_answer(7)
    del answer["reaction_time"]
    result = check_answer(7, answer)
    assert result.passed and [i.key for i in result.items] == ["approach", "grasp", "release"]


def test_result_serialises():
    data = json.loads(json.dumps(check_answer(2, wrong_answer(2)).to_dict()))
    assert data["passed"] is False and data["lab"] == "course-latency"
    assert data["items"][0]["message"] == "control_latency: wrong (off by more than 0.01 s)"


@pytest.mark.parametrize(
    "lesson, answer, match",
    [
        (9, {}, r"unknown lesson 9; lessons with an exercise: \[0, 1, 2, 3, 4, 5, 6, 7, 8\]"),
        ("2", {}, "unknown lesson '2'"),
        (True, {}, "unknown lesson True"),
        (2, [0.09], r"must be a JSON object with the key\(s\) \['control_latency'\]"),
        (2, {}, r"lesson 2: missing answer key\(s\) \['control_latency'\]; required: \['control_latency'\]"),
        (2, {"control_latency": 0.1, "latency": 0.1}, r"unknown answer key\(s\) \['latency'\]; valid: \['control"),
        (2, {"control_latency": "90 ms"}, "'control_latency' must be a finite number"),
        (2, {"control_latency": True}, "must be a finite number"),
        (2, {"control_latency": float("nan")}, "must be a finite number"),
        (1, {"swapped_joints": [1]}, "two different arm joint indices in 0-6"),
        (1, {"swapped_joints": [3, 3]}, "two different"),
        (1, {"swapped_joints": [1, 7]}, "two different"),
        (3, {"heavier_category": "sphere", "mass": 0.3}, r"\['cube', 'ball', 'bar'\]"),
        (4, {"object_pos_offset": [0.01, 0.0], "perception_delay": 0.05}, "list of 3 finite numbers"),
        (4, {"object_pos_offset": [0.01, 0.0, 0.0]}, r"missing answer key\(s\) \['perception_delay'\]"),
        (5, {"world": {"belt_sped": 0.1}}, r"unknown WorldParams field\(s\) \['belt_sped'\]"),
        (5, {"world": {"belt_speed": -1.0}}, "belt_speed"),
        (5, {"world": [0.1]}, "JSON object of WorldParams fields"),
        (6, {"real_fraction": [0.3, 0.1]}, "low <= high"),
        (7, {"approach": "below", "grasp": "wrap", "release": "drop"}, r"\['above', 'follow'\]"),
        (8, {"pearson": "high", "mmrv": 0.1}, "finite number or null"),
    ],
)
def test_bad_input_names_the_problem(lesson, answer, match):
    with pytest.raises(AnswerError, match=match):
        check_answer(lesson, answer)


# ---------------------------------------------------------------------- the command line
def _write(tmp_path, content) -> str:
    path = tmp_path / "answer.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_cli_exit_codes(tmp_path, capsys):
    assert main(["course", "check", "2", _write(tmp_path, correct_answer(2))]) == 0
    out = capsys.readouterr().out
    assert "control_latency: right (within 0.01 s)" in out and "all right" in out
    assert main(["course", "check", "2", _write(tmp_path, wrong_answer(2)), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["passed"] is False


@pytest.mark.parametrize(
    "args, content, match",
    [
        (["course", "check", "12"], {}, "unknown lesson '12'"),
        (["course", "check", "two"], {}, "unknown lesson 'two'"),
        (["course", "check", "2"], "{not json", "not valid JSON"),
        (["course", "check", "2"], "[" * 100_000 + "]" * 100_000, "nested 100000 levels deep; at most 64"),
        (["course", "check", "2"], '{"control_latency": NaN}', "NaN is not a JSON value"),
        (["course", "check", "2"], {"latency": 0.09}, "unknown answer key"),
        (["course", "check", "2"], None, "does not exist"),
    ],
)
def test_cli_bad_input_exits_2(tmp_path, capsys, args, content, match):
    path = _write(tmp_path, content) if content is not None else str(tmp_path / "missing.json")
    assert main([*args, path]) == 2
    err = capsys.readouterr().err
    assert "r2s2r course check: error:" in err and match in err


def test_cli_labs_lists_exercises_not_solutions(capsys):
    assert main(["course", "labs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [e["lab"] for e in listed] == [e.lab for e in exercises()]
    assert all({"lesson", "lab", "task", "answer", "example", "check", "runs"} <= set(e) for e in listed)
    # What the checker runs is published for the lessons it grades by running episodes, and only for those.
    assert [e["lesson"] for e in listed if e["runs"]] == [5, 8]
    assert listed[8]["runs"]["settings"] == [
        {"lead_time": 0.0},
        {"lead_time": 0.12},
        {"lead_time": 0.3},
        {"position_gain": 0.25},
    ]
    assert listed[5]["runs"]["episodes"] == 20 and listed[8]["runs"]["episodes"] == 8
    assert main(["course", "labs"]) == 0
    text = capsys.readouterr().out
    assert "course-latency" in text and "r2s2r course check" in text
    # (the offset's z, 0.005 m, is spelled like lesson 6's tolerance, so only x and y are looked for)
    w4 = _lab(4).world
    for value in (
        _lab(0).world.belt_speed,
        _lab(2).world.control_latency,
        *w4.object_pos_offset[:2],
        w4.perception_delay,
    ):
        assert repr(value) not in text and f"{value:.3f}" not in text


def test_cli_seal_writes_a_loadable_sealed_lab(tmp_path, capsys):
    src = tmp_path / "mine.json"
    src.write_text(json.dumps({"name": "course-mine", "world": {"control_latency": 0.05}, "effects": {}}))
    out = tmp_path / "sealed.json"
    assert main(["course", "seal", str(src), "--out", str(out)]) == 0
    assert set(json.loads(out.read_text())) == {"sealed_lab"}
    assert load_lab(out) == load_lab(src)
    assert main(["course", "seal", str(tmp_path / "nope.json"), "--out", str(out)]) == 2
    assert "nope.json" in capsys.readouterr().err


def test_cli_course_without_action_prints_usage(capsys):
    assert main(["course"]) == 2
    assert "labs" in capsys.readouterr().err


# ---------------------------------------------------------------------- lessons that run episodes
@pytest.mark.slow
def test_world_exercise_grades_by_planner_success():
    # The lab's own world reproduces the lab (no unmodeled effects in course-world); the nominal model does not.
    right = check_answer(5, correct_answer(5))
    assert right.passed, right
    wrong = check_answer(5, wrong_answer(5))
    assert not wrong.passed, wrong
    assert "more than 10 points apart" in wrong.items[0].message


@pytest.mark.slow
def test_ranking_exercise_grades_against_its_own_figures():
    figures = ranking_figures("course-ranking")
    assert figures["pearson"] is not None and len(figures["sim"]) == 4
    assert len(set(figures["real"])) > 1  # the lab tells the policies apart
    assert check_answer(8, correct_answer(8)).passed
    result = check_answer(8, wrong_answer(8))
    assert [i.passed for i in result.items] == [False, False]
    # A student who repeats the documented runs gets the checker's figures exactly.
    assert planner_success(REAL, {"lab": "course-ranking"}, 8, 2, lead_time=0.0) == figures["real"][0]
