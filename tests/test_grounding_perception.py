"""Identification of the object estimator's fields (r2s2r_envs.grounding.perception_fit, docs/lab_logs.md#recovery):
logs of a simulated world with a known estimator give its fields back within the documented tolerances, logs of
a world that perceives exactly give exact perception, and older logs without ``object_visible`` stay readable."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.grounding import excitation, perception_fit
from r2s2r_envs.grounding.identify import identify
from r2s2r_envs.grounding.logs import LogSet
from r2s2r_envs.world.params import PERCEPTION_FIELDS, WorldParams, nominal

# A world that sees through the estimator, at lab v3's sizes (docs/lab.md#perception).
KNOWN = dataclasses.replace(
    nominal(),
    object_pos_noise=0.004,
    object_vel_noise=0.02,
    object_pos_offset=(0.003, -0.002, 0.001),
    perception_delay=0.08,
    object_pos_noise_speed=0.03,
    object_pos_noise_occlusion=0.01,
    object_pos_rotation=(0.006, -0.004, 0.005),
    object_quat_noise=0.05,
    object_dropout=0.03,
    category_confusion=0.01,
    hand_occlusion_radius=0.06,
)
# The tolerances of docs/lab_logs.md#recovery (quick budget).
TOLERANCE = {
    "perception_delay": 0.02,  # s
    "object_pos_noise_speed": 0.01,  # m per m/s
    "object_pos_noise_occlusion": 0.003,  # m
    "object_quat_noise": 0.005,  # rad
    "object_dropout": 0.02,
    "category_confusion": 0.015,
    "hand_occlusion_radius": 0.006,  # m
}
FIELD_TOLERANCE = 0.002  # calibration error field over the belt, m (largest of any axis)
PROTOCOLS = ("sensing_rest", *perception_fit.PERCEPTION_PROTOCOLS)


def _log(world: WorldParams, out, seed: int, grasp: bool = False) -> LogSet:
    lift = ("lift_cube_0", "lift_cube_0_empty") if grasp else ()
    plans = [p for p in excitation.plan_runs(quick=True) if p.protocol in PROTOCOLS or p.name in lift]
    env = lambda kw: PickSortEnv(world=world, **{**kw, "sensors": tuple(kw["sensors"])})  # noqa: E731
    return excitation.log_env(env, out, seed=seed, plans=plans)


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    logs = _log(KNOWN, tmp_path_factory.mktemp("known"), seed=3, grasp=True)  # a grasp: the hand at the object
    return logs, identify(logs, quick=True)


def _belt_grid() -> np.ndarray:
    xs, ys = np.meshgrid(np.linspace(0.46, 0.64, 4), np.linspace(-0.45, 0.6, 8))
    return np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, 0.125)], axis=1)


def test_recovers_a_known_estimator(known):
    _, result = known
    w = result.world
    for field, tolerance in TOLERANCE.items():
        assert field in result.identified, (field, result.not_identifiable.get(field))
        assert abs(getattr(w, field) - getattr(KNOWN, field)) <= tolerance, (field, getattr(w, field))
    # The calibration: offset and rotation trade off (the camera looks down from afar), the error field is fixed.
    grid = _belt_grid()
    truth = perception_fit.calibration_error(grid, KNOWN.object_pos_rotation, KNOWN.object_pos_offset)
    found = perception_fit.calibration_error(grid, w.object_pos_rotation, w.object_pos_offset)
    assert np.abs(found - truth).max() <= FIELD_TOLERANCE
    assert abs(w.object_pos_rotation[2] - KNOWN.object_pos_rotation[2]) <= 0.002  # about the vertical: well seen
    # The intervals hold the estimates.
    for field in TOLERANCE:
        low, high = result.intervals[field]
        assert low <= getattr(w, field) <= high, field
    # The grasped cube is hidden in the hand (its estimate stays on the belt): the mass fit still reads the lift.
    assert "object_mass" in result.identified
    assert result.world.object_mass[0] == pytest.approx(KNOWN.object_mass[0], rel=0.2)
    occlusion = result.details["perception"]["occlusion"]
    assert "lift_cube_0" in occlusion["runs"]
    # One camera, as modelled: only the estimator's dropouts are misclassified.
    assert occlusion["misclassified_frames"] <= 2 * KNOWN.object_dropout * occlusion["frames"]


def test_a_world_that_perceives_exactly_is_found_so(tmp_path):
    world = dataclasses.replace(nominal(), object_pos_noise=0.003, object_pos_offset=(0.004, 0.0, -0.002))
    result = identify(_log(world, tmp_path, seed=5), quick=True)
    for field in PERCEPTION_FIELDS:
        value = getattr(result.world, field)
        assert value == getattr(nominal(), field) or field in result.not_identifiable, (field, value)
    assert not result.world.perceives
    assert np.allclose(result.world.object_pos_offset, world.object_pos_offset, atol=0.0015)


def test_logs_without_visibility_read_every_object_as_seen(known):
    logs, _ = known
    run = logs.by_protocol("perception_static")[0]
    old = dataclasses.replace(run, obs={k: v for k, v in run.obs.items() if k != "object_visible"})
    assert perception_fit.visible(old).all()
    assert not perception_fit.visible(run).all() or KNOWN.object_dropout == 0.0
    assert "object_visible" in run.obs and set(np.unique(run.obs["object_visible"])) <= {0.0, 1.0}


def test_missing_perception_runs_are_named(known):
    logs, _ = known
    without = dataclasses.replace(logs, runs=[r for r in logs.runs if r.protocol != "perception_occlusion"])
    result = identify(without, quick=True)
    for field in ("hand_occlusion_radius", "object_pos_noise_occlusion"):
        assert "no perception_occlusion runs" in result.not_identifiable[field]
        assert getattr(result.world, field) == 0.0
    assert "perception_delay" in result.identified


def _corrupt_hidden(run, key: str, width: int):
    """The run with every value the estimator did not measure (a held estimate) replaced by nonsense."""
    seen = perception_fit.visible(run)
    values = np.array(run.obs[key], dtype=np.float32).reshape(len(seen), seen.shape[1], width)
    values[~seen] = 7.0
    return dataclasses.replace(run, obs={**run.obs, key: values.reshape(len(seen), -1)})


def test_the_belt_and_sensing_fits_skip_what_the_estimator_missed(known):
    from r2s2r_envs.grounding import identify_sensing as sensing
    from r2s2r_envs.grounding.identify_common import FitState

    logs, _ = known
    moving = logs.by_protocol("perception_moving")
    assert any(not perception_fit.visible(r).all() for r in moving)  # dropouts: held estimates to skip
    # The belt speed reads the riding objects' velocities: a held (repeated) one is not averaged in.
    original = sensing._belt_speed_series(moving)
    corrupted = sensing._belt_speed_series([_corrupt_hidden(r, "object_vel", 6) for r in moving])
    for a, b in zip(original, corrupted):
        np.testing.assert_array_equal(a, b)
    # The sensing noise levels pool the objects' seen rows only.
    rest = logs.by_protocol("sensing_rest")
    assert any(not perception_fit.visible(r)[sensing.SETTLE_STEPS :].all() for r in rest)
    fits = []
    for runs in (rest, [_corrupt_hidden(r, "object_pos", 3) for r in rest]):
        fit = FitState()
        sensing.fit_sensing(runs, fit)
        fits.append(fit.values["object_pos_noise"])
    assert fits[0] == pytest.approx(fits[1], rel=1e-9)
    assert fits[0] == pytest.approx(KNOWN.object_pos_noise, rel=0.1)
