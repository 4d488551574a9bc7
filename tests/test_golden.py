"""Golden rollouts: a short fixed-seed trajectory of every registered id, pinned in ``tests/golden_rollouts.json``.

Results are only comparable within one env version (``-vN``), so a change of dynamics, observations, reward or
defaults must come with a version bump.  This test makes that visible: any such change alters the pinned
trajectory and fails here.  After bumping the id's version, re-pin with::

    MUJOCO_GL=egl python tests/test_golden.py --update

``--update`` refuses to re-pin an id whose trajectory changed while its version did not (pass ``--force`` only
for a change that is not a behaviour change, e.g. a pinned value that was wrong, and say so in the commit).
Registered ids without an entry fail, so a new variant gets its golden rollout when it is registered.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

GOLDEN = Path(__file__).with_name("golden_rollouts.json")
STEPS = 30
CHECKPOINTS = (0, 10, 20, 30)
SEED = 7
ACTION_SEED = 1234
# float32 observations of a deterministic simulation: equal on one machine; the tolerance absorbs last-digit
# differences of another CPU's floating point, far below any physics change worth a version.
ATOL = 2e-5


def rollout(env_id: str) -> dict:
    """The golden record of ``env_id``: state observations at the checkpoints, rewards and outcomes."""
    env = gym.make(env_id)
    try:
        rng = np.random.default_rng(ACTION_SEED)
        obs, _ = env.reset(seed=SEED)
        record: dict = {"observations": {}, "rewards": [], "outcomes": None}
        for t in range(STEPS + 1):
            if t in CHECKPOINTS:
                record["observations"][str(t)] = {
                    k: np.asarray(v, dtype=float).round(7).tolist() for k, v in obs.items()
                }
            if t == STEPS:
                break
            action = rng.uniform(-1.0, 1.0, size=env.action_space.shape).astype(np.float32)
            obs, reward, terminated, truncated, info = env.step(action)
            record["rewards"].append(round(float(reward), 7))
            record["outcomes"] = info["object_outcomes"]
            assert not (terminated or truncated), f"{env_id}: the golden rollout ended early"
        record["version"] = env.spec.version
        return record
    finally:
        env.close()


def _load() -> dict:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


def _registered() -> tuple[str, ...]:
    import r2s2r_envs

    return r2s2r_envs.registered_ids()


def _differences(a: dict, b: dict) -> list[str]:
    out = []
    if a["version"] != b["version"]:
        out.append(f"version {a['version']} != {b['version']}")
    if a["outcomes"] != b["outcomes"]:
        out.append(f"outcomes {a['outcomes']} != {b['outcomes']}")
    if not np.allclose(a["rewards"], b["rewards"], atol=ATOL, rtol=0):
        out.append("rewards differ")
    for t, obs in a["observations"].items():
        for key, value in obs.items():
            other = b["observations"].get(t, {}).get(key)
            if other is None or np.shape(value) != np.shape(other) or not np.allclose(value, other, atol=ATOL, rtol=0):
                out.append(f"step {t} {key}")
    return out


@pytest.mark.parametrize("env_id", _registered())
def test_golden_rollout(env_id):
    golden = _load()
    assert env_id in golden, (
        f"{env_id} has no golden rollout: pin one with `MUJOCO_GL=egl python tests/test_golden.py --update`"
    )
    diffs = _differences(golden[env_id], rollout(env_id))
    assert not diffs, (
        f"{env_id} no longer reproduces its golden rollout ({', '.join(diffs[:6])}). A change of dynamics, "
        "observations, reward or defaults needs a new env version (-vN+1) and a re-pinned rollout; see this file's "
        "docstring"
    )


def test_checker_detects_a_change():
    golden = _load()
    env_id = next(iter(golden))
    changed = json.loads(json.dumps(golden[env_id]))
    changed["observations"]["30"]["eef_pos"][0] += 1e-3
    assert _differences(golden[env_id], changed) == ["step 30 eef_pos"]


def main(argv: list[str]) -> int:
    if "--update" not in argv:
        print(__doc__)
        return 2
    force = "--force" in argv
    golden = _load()
    for env_id in _registered():
        new = rollout(env_id)
        old = golden.get(env_id)
        if old is not None and old["version"] == new["version"] and _differences(old, new) and not force:
            print(
                f"{env_id}: the trajectory changed but the version is still v{new['version']}: bump the version "
                "(or pass --force for a fix that is not a behaviour change)",
                file=sys.stderr,
            )
            return 1
        golden[env_id] = new
        print(f"pinned {env_id} (v{new['version']})")
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
