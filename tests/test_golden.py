"""Golden rollouts: fixed-seed trajectories of every registered id, pinned in ``tests/golden_rollouts.json``.

Results are only comparable within one env version (``-vN``), so a change of dynamics, observations, reward,
defaults or of the id's own demonstrator must come with a version bump.  This test makes that visible: every id
has two pinned records, and any such change alters one of them and fails here:

- ``random``: a short random-action rollout (dynamics, observations, reward, outcomes);
- ``demonstrator``: an episode of the id's own demonstrator (``make_demonstrator(env)``: the scripted planner with
  the id's tuned settings, the humanlike generator, the lab's teleoperator), seeded by the suite's convention
  (``episode_seeds``), long enough to approach and grasp an object: its actions, observations and outcomes.

The file records the MuJoCo and numpy versions the records were taken with; a mismatch under other versions names
both, since it may be theirs rather than this project's.  After bumping the id's version, re-pin with::

    MUJOCO_GL=egl python tests/test_golden.py --update

``--update`` refuses to re-pin an id whose records changed while its version did not (pass ``--force`` only
for a change that is not a behaviour change, e.g. a pinned value that was wrong, and say so in the commit).
Registered ids without an entry fail, so a new variant gets its golden records when it is registered.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

GOLDEN = Path(__file__).with_name("golden_rollouts.json")
STEPS = 30
CHECKPOINTS = (0, 10, 20, 30)
SEED = 7
ACTION_SEED = 1234
# The demonstrator's episode: episode 0 of base seed DEMO_SEED under the seeding convention. 200 steps cover the
# approach, the grasp and (for every shipped demonstrator) the first object's transport.
DEMO_SEED = 7
DEMO_STEPS = 200
DEMO_CHECKPOINTS = (0, 40, 80, 120, 160, 200)
DEMO_ACTION_EVERY = 10
KINDS = ("random", "demonstrator")
# float32 observations of a deterministic simulation: equal on one machine; the tolerance absorbs last-digit
# differences of another CPU's floating point, far below any physics change worth a version.
ATOL = 2e-5
# A closed-loop episode with contacts magnifies such differences: perturbing the initial joint velocities by 1e-13
# moved the Ungrounded and WorldGrounded demonstrator episodes' observations by up to 4.6e-4 between checkpoints
# (3.5e-6 at them) and their actions by up to 3.4e-6, where retuning the planner (position gain 0.3 -> 0.33) moves
# actions by 7e-3 to 0.8. Demonstrator records are compared at this tolerance.
DEMO_ATOL = 1e-3


def _values(obs: dict) -> dict:
    return {k: np.asarray(v, dtype=float).round(7).tolist() for k, v in obs.items()}


def rollout(env_id: str) -> dict:
    """The random-action record of ``env_id``: state observations at the checkpoints, rewards and outcomes."""
    env = gym.make(env_id)
    try:
        rng = np.random.default_rng(ACTION_SEED)
        obs, _ = env.reset(seed=SEED)
        record: dict = {"observations": {}, "rewards": [], "outcomes": None}
        for t in range(STEPS + 1):
            if t in CHECKPOINTS:
                record["observations"][str(t)] = _values(obs)
            if t == STEPS:
                break
            action = rng.uniform(-1.0, 1.0, size=env.action_space.shape).astype(np.float32)
            obs, reward, terminated, truncated, info = env.step(action)
            record["rewards"].append(round(float(reward), 7))
            record["outcomes"] = info["object_outcomes"]
            assert not (terminated or truncated), f"{env_id}: the golden rollout ended early"
        assert env.spec is not None
        record["version"] = env.spec.version
        return record
    finally:
        env.close()


def demonstrator_rollout(env_id: str, **settings: Any) -> dict:
    """The demonstrator record of ``env_id``: its own demonstrator (``settings`` over the env's) driving episode 0
    of base seed ``DEMO_SEED``, as ``r2s2r demo`` and dataset generation run it; actions every
    ``DEMO_ACTION_EVERY`` steps, observations and outcomes at the checkpoints, all rewards."""
    from r2s2r_envs.behavior import make_demonstrator
    from r2s2r_envs.envs.seeding import episode_seeds

    env = gym.make(env_id)
    try:
        demo = make_demonstrator(env, **settings)
        env_seed, demo_seed = episode_seeds(DEMO_SEED, 0)
        obs, _ = env.reset(seed=env_seed)
        demo.reset(seed=demo_seed)
        record: dict = {"demonstrator": demo.name, "actions": {}, "observations": {}, "outcomes": {}, "rewards": []}
        for t in range(DEMO_STEPS + 1):
            if t in DEMO_CHECKPOINTS:
                record["observations"][str(t)] = _values(obs)
            if t == DEMO_STEPS:
                break
            action = np.asarray(demo.act(obs), dtype=np.float32)
            if t % DEMO_ACTION_EVERY == 0:
                record["actions"][str(t)] = action.astype(float).round(7).tolist()
            obs, reward, terminated, truncated, info = env.step(action)
            record["rewards"].append(round(float(reward), 7))
            if t + 1 in DEMO_CHECKPOINTS:
                record["outcomes"][str(t + 1)] = info["object_outcomes"]
            assert not (terminated or truncated), f"{env_id}: the demonstrator's golden episode ended early"
        assert env.spec is not None
        record["version"] = env.spec.version
        return record
    finally:
        env.close()


RECORDERS: dict[str, Callable[[str], dict]] = {"random": rollout, "demonstrator": demonstrator_rollout}
TOLERANCE = {"random": ATOL, "demonstrator": DEMO_ATOL}


def _load() -> dict:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


def _taken_with() -> dict[str, str]:
    """The versions the records depend on beyond this project: the simulator's and numpy's."""
    from r2s2r_envs.provenance import versions

    return versions("mujoco", "numpy")


def _versions_note(pinned: dict[str, str], now: dict[str, str]) -> str:
    """Both MuJoCo (and numpy) versions, for a failure message: whether a mismatch may be theirs."""
    note = (
        f"pinned with MuJoCo {pinned.get('mujoco', '?')} / numpy {pinned.get('numpy', '?')}, "
        f"run with MuJoCo {now['mujoco']} / numpy {now['numpy']}"
    )
    if pinned.get("mujoco") != now["mujoco"]:
        return note + ": another MuJoCo version, so the mismatch may be MuJoCo's rather than this project's"
    if pinned.get("numpy") != now["numpy"]:
        return note + ": another numpy version, so the mismatch may be numpy's rather than this project's"
    return note + ": the same versions"


def _registered() -> tuple[str, ...]:
    import r2s2r_envs

    return r2s2r_envs.registered_ids()


def _close(a: Any, b: Any, atol: float = ATOL) -> bool:
    return b is not None and np.shape(a) == np.shape(b) and bool(np.allclose(a, b, atol=atol, rtol=0))


def _differences(a: dict, b: dict, atol: float = ATOL) -> list[str]:
    out = []
    if a["version"] != b["version"]:
        out.append(f"version {a['version']} != {b['version']}")
    if a.get("demonstrator") != b.get("demonstrator"):
        out.append(f"demonstrator {a.get('demonstrator')} != {b.get('demonstrator')}")
    if a["outcomes"] != b["outcomes"]:
        out.append(f"outcomes {a['outcomes']} != {b['outcomes']}")
    if not _close(a["rewards"], b["rewards"], atol):
        out.append("rewards differ")
    for t, action in a.get("actions", {}).items():
        if not _close(action, b.get("actions", {}).get(t), atol):
            out.append(f"step {t} action")
    for t, obs in a["observations"].items():
        for key, value in obs.items():
            if not _close(value, b["observations"].get(t, {}).get(key), atol):
                out.append(f"step {t} {key}")
    return out


def _check(kind: str, env_id: str) -> None:
    golden = _load()
    assert env_id in golden.get(kind, {}), (
        f"{env_id} has no golden {kind} record: pin one with `MUJOCO_GL=egl python tests/test_golden.py --update`"
    )
    diffs = _differences(golden[kind][env_id], RECORDERS[kind](env_id), TOLERANCE[kind])
    assert not diffs, (
        f"{env_id} no longer reproduces its golden {kind} record ({', '.join(diffs[:6])}; "
        f"{_versions_note(golden.get('taken_with', {}), _taken_with())}). A change of dynamics, observations, "
        "reward, defaults or the id's demonstrator needs a new env version (-vN+1) and re-pinned records; see this "
        "file's docstring"
    )


@pytest.mark.parametrize("env_id", _registered())
def test_golden_rollout(env_id):
    _check("random", env_id)


@pytest.mark.parametrize("env_id", _registered())
def test_golden_demonstrator(env_id):
    _check("demonstrator", env_id)


def test_demonstrator_records_cover_a_grasp():
    """Every pinned demonstrator episode gets past the approach: an object is no longer pending at its end."""
    for env_id, record in _load()["demonstrator"].items():
        last = record["outcomes"][str(DEMO_STEPS)]
        assert any(o != "pending" for o in last), f"{env_id}: no grasp within {DEMO_STEPS} steps; lengthen DEMO_STEPS"


def test_checker_detects_a_change():
    golden = _load()["random"]
    env_id = next(iter(golden))
    changed = json.loads(json.dumps(golden[env_id]))
    changed["observations"]["30"]["eef_pos"][0] += 1e-3
    assert _differences(golden[env_id], changed) == ["step 30 eef_pos"]


def test_checker_detects_a_demonstrator_change():
    """A retuned demonstrator (the WorldGrounded planner's position gain 0.3 -> 0.33) fails its id's record."""
    env_id = "PickSort-WorldGrounded-v0"
    pinned = _load()["demonstrator"][env_id]
    diffs = _differences(pinned, demonstrator_rollout(env_id, position_gain=0.33), DEMO_ATOL)
    assert any(d.endswith(" action") for d in diffs), diffs  # its actions, not only where they lead
    assert not any(d.startswith("version") for d in diffs)


def test_failure_message_names_both_mujoco_versions():
    now = _taken_with()
    other = _versions_note({"mujoco": "0.0.1", "numpy": now["numpy"]}, now)
    assert f"MuJoCo 0.0.1 / numpy {now['numpy']}" in other and f"MuJoCo {now['mujoco']}" in other
    assert "may be MuJoCo's" in other
    assert _versions_note(now, now).endswith("the same versions")


def main(argv: list[str]) -> int:
    if "--update" not in argv:
        print(__doc__)
        return 2
    force = "--force" in argv
    golden = _load()
    taken_with = _taken_with()
    note = _versions_note(golden.get("taken_with", {}), taken_with)
    for kind in KINDS:
        pinned = golden.setdefault(kind, {})
        for env_id in _registered():
            new = RECORDERS[kind](env_id)
            old = pinned.get(env_id)
            if (
                old is not None
                and old["version"] == new["version"]
                and _differences(old, new, TOLERANCE[kind])
                and not force
            ):
                print(
                    f"{env_id}: the {kind} record changed but the version is still v{new['version']} ({note}): "
                    "bump the version (or pass --force for a fix that is not a behaviour change)",
                    file=sys.stderr,
                )
                return 1
            pinned[env_id] = new
            print(f"pinned {env_id} {kind} (v{new['version']})")
    golden["taken_with"] = taken_with
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
