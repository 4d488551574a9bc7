"""The mixture analysis: per lab state, does a co-trained policy act more like the real demos or the sim demos?

A co-trained policy has seen two demonstrators: the lab's teleoperator (real data) and the variant's sim
demonstrator. The study this suite reproduces found that deployed policies act like a mixture of the two: they
imitate the real demos in states the real data covers and fall back on the sim behaviour elsewhere
(docs/concepts.md#findings). This module measures that by **nearest-neighbour attribution in state space**
(docs/ablation.md, "Mixture analysis"):

1. Roll the policy out in the lab (``gym.make("PickSort-Real-v0")``, the protocol's seeds) and record each state it
   visits (the features :data:`FEATURE_KEYS` of its observation) and the action it takes there.
2. For each visited state, find its ``k`` nearest states in the real demos and in the sim demos (features scaled
   by their standard deviation over both demo sets; dimensions constant in both left out) and the mean action the
   demonstrators took there.
3. The state is **real-like** when the policy's action is nearer (actions scaled the same way) to the real
   neighbours' action than to the sim neighbours'. Its **coverage** ``d_real / (d_real + d_sim)`` says which data
   lies nearer: 0 on top of a real demo state, 0.5 equally near, 1 where only sim data is near.

The share of real-like states as a function of coverage is the mixture curve (plotted by
:mod:`r2s2r_envs.ablation.analysis`). Two calibrations say how far the measure can be trusted: held-out demos of
each demonstrator attributed the same way (:func:`calibrate`: how well single actions tell the two apart at all),
and policies trained on one domain only (real_fraction 1 and 0: what imitation of either looks like).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

#: Observation keys that make the state of the attribution: where the arm, the hand and the objects are.
FEATURE_KEYS: tuple[str, ...] = ("arm_qpos", "hand_qpos", "eef_pos", "object_pos")
#: At most this many demo states per domain are searched (evenly strided over the demos; all when fewer).
MAX_DEMO_STATES = 60_000
#: Dimensions with a pooled demo standard deviation below this (in their units: rad, m, action units) are left out.
MIN_STD = 1e-3
#: Version of the attribution (part of the mixture tasks' config hash: a change re-runs them only).
ATTRIBUTION_VERSION = 3
#: Coverage bins of the mixture curve.
COVERAGE_BINS: tuple[float, ...] = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0)
ARRAYS_FILE = "mixture.npz"
LAB_ENV_ID = "PickSort-Real-v0"


def features(obs: Mapping[str, np.ndarray]) -> np.ndarray:
    """The attribution's state vector of one observation (or of a batch, stacked on the last axis)."""
    return np.concatenate([np.asarray(obs[k], dtype=np.float64) for k in FEATURE_KEYS], axis=-1)


def demo_states(
    path: str | os.PathLike[str], max_states: int = MAX_DEMO_STATES
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(states, actions, demo index)`` of every step of a dataset's successful demos, strided to ``max_states``."""
    from r2s2r_envs.datasets.reader import open_dataset

    states: list[np.ndarray] = []
    actions: list[np.ndarray] = []
    demos: list[np.ndarray] = []
    with open_dataset(path, verify="none") as f:
        success = set(f.masks().get("success", f.demo_ids))
        for demo_id in f.demo_ids:
            if demo_id not in success:
                continue
            demo = f.demo(demo_id, obs_keys=list(FEATURE_KEYS), next_obs=False, states=False)
            states.append(features(demo.obs))
            actions.append(np.asarray(demo.actions, dtype=np.float64))
            demos.append(np.full(len(demo.actions), len(demos)))
    s, a, d = np.concatenate(states), np.concatenate(actions), np.concatenate(demos)
    if len(s) > max_states:
        idx = np.linspace(0, len(s) - 1, max_states).round().astype(int)
        s, a, d = s[idx], a[idx], d[idx]
    return s, a, d


def calibrate(
    real: tuple[np.ndarray, np.ndarray, np.ndarray], sim: tuple[np.ndarray, np.ndarray, np.ndarray], neighbors: int
) -> dict[str, float]:
    """How well the attribution tells the two demonstrators apart: the last 20% of each domain's demos are
    attributed against the rest (and the other domain's demos), as if they were a policy's rollouts.

    Returns:
        ``real_demos_real_like`` (share of held-out real demo steps called real-like; 1 is perfect) and
        ``sim_demos_real_like`` (the same for held-out sim demo steps; 0 is perfect).
    """

    real_ref, real_out = split_held_out(real)
    sim_ref, sim_out = split_held_out(sim)
    r = attribute(*real_out, real_ref, (sim[0], sim[1]), neighbors)
    m = attribute(*sim_out, (real[0], real[1]), sim_ref, neighbors)
    return {"real_demos_real_like": float(r["real_like"].mean()), "sim_demos_real_like": float(m["real_like"].mean())}


def split_held_out(
    data: tuple[np.ndarray, np.ndarray, np.ndarray], held_share: float = 0.2
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``(states, actions)`` of the first demos and of the last ``held_share`` of them, from ``demo_states``'s
    ``(states, actions, demo index)``; with one demo only, its first and second half."""
    s, a, d = data
    held = d >= max(1, int(round((1 - held_share) * (d.max() + 1))))
    if not held.any() or held.all():  # one demo only: no split possible
        held = np.zeros_like(held)
        held[len(held) // 2 :] = True
    return (s[~held], a[~held]), (s[held], a[held])


def attribute(
    states: np.ndarray,
    actions: np.ndarray,
    real: tuple[np.ndarray, np.ndarray],
    sim: tuple[np.ndarray, np.ndarray],
    neighbors: int,
) -> dict[str, np.ndarray]:
    """Attributes each (state, action) of a policy to the real or the sim demos.

    Args:
        states: ``(n, d)`` visited states (:func:`features`).
        actions: ``(n, a)`` the policy's actions there.
        real: ``(states, actions)`` of the real demos.
        sim: ``(states, actions)`` of the sim demos.
        neighbors: ``k`` nearest demo states per domain.

    Returns:
        Per visited state: ``d_real``, ``d_sim`` (scaled distance to the nearest demo state of each domain),
        ``coverage`` (``d_real / (d_real + d_sim)``), ``e_real``, ``e_sim`` (scaled distance of the policy's action
        to the mean action of the ``k`` neighbours of each domain), ``real_like`` (``e_real < e_sim``) and
        ``score`` (``(e_sim - e_real) / (e_sim + e_real)``: +1 acts exactly like the real demos, -1 like the sim).
    """
    from sklearn.neighbors import NearestNeighbors

    s_keep, s_scale = _informative(np.concatenate([real[0], sim[0]]))
    a_keep, a_scale = _informative(np.concatenate([real[1], sim[1]]))
    out: dict[str, np.ndarray] = {}
    for name, (demo_s, demo_a) in (("real", real), ("sim", sim)):
        k = min(neighbors, len(demo_s))
        index = NearestNeighbors(n_neighbors=k).fit(demo_s[:, s_keep] / s_scale)
        dist, idx = index.kneighbors(states[:, s_keep] / s_scale)
        mean_action = demo_a[idx].mean(axis=1)
        out[f"d_{name}"] = dist[:, 0]
        out[f"e_{name}"] = np.linalg.norm((actions - mean_action)[:, a_keep] / a_scale, axis=1)
    total = out["d_real"] + out["d_sim"]
    out["coverage"] = np.divide(out["d_real"], total, out=np.full_like(total, 0.5), where=total > 0)
    errors = out["e_real"] + out["e_sim"]
    out["score"] = np.divide(out["e_sim"] - out["e_real"], errors, out=np.zeros_like(errors), where=errors > 0)
    out["real_like"] = out["e_real"] < out["e_sim"]
    return out


def _informative(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dimensions that vary over the pooled demos, and their standard deviations.

    A dimension (nearly) constant in both demo sets (std below :data:`MIN_STD`, e.g. an action component neither
    demonstrator uses) says nothing about which one a policy follows; scaled by its tiny std, a policy's small
    deviation there would swamp every other dimension, so it is left out.
    """
    std = x.std(axis=0)
    keep = std > MIN_STD
    if not keep.any():
        keep = np.ones_like(keep)
    return keep, np.maximum(std[keep], MIN_STD)


def summarize(attribution: Mapping[str, np.ndarray], bins: tuple[float, ...] = COVERAGE_BINS) -> dict[str, Any]:
    """The share of real-like states overall and per coverage bin (the mixture curve)."""
    real_like = np.asarray(attribution["real_like"], dtype=bool)
    coverage = np.asarray(attribution["coverage"])
    curve = []
    for low, high in zip(bins[:-1], bins[1:]):
        inside = (coverage >= low) & ((coverage < high) if high < bins[-1] else (coverage <= high))
        n = int(inside.sum())
        curve.append(
            {
                "coverage": [low, high],
                "states": n,
                "real_like_share": float(real_like[inside].mean()) if n else None,
                "mean_score": float(np.mean(attribution["score"][inside])) if n else None,
            }
        )
    return {
        "states": int(len(real_like)),
        "real_like_share": float(real_like.mean()) if len(real_like) else None,
        "mean_score": float(np.mean(attribution["score"])) if len(real_like) else None,
        "mean_coverage": float(coverage.mean()) if len(coverage) else None,
        "curve": curve,
        "feature_keys": list(FEATURE_KEYS),
    }


def rollout_lab(
    policy: Any, episodes: int, env_kwargs: Mapping[str, Any] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs ``policy`` in the lab on the protocol's first ``episodes`` seeds.

    Returns:
        ``(states, actions, episode index)`` of every step.
    """
    import gymnasium as gym

    from r2s2r_envs.evaluation import evaluation_seeds
    from r2s2r_envs.evaluation.protocol import with_policy_inputs

    env = gym.make(LAB_ENV_ID, **with_policy_inputs(policy, env_kwargs or {}))  # what it reads, as evaluate
    states, actions, index = [], [], []
    try:
        for i, (env_seed, policy_seed) in enumerate(evaluation_seeds(episodes)):
            obs, _ = env.reset(seed=int(env_seed))
            policy.reset(int(policy_seed))
            done = False
            while not done:
                action = np.asarray(policy.act(obs), dtype=np.float64)
                states.append(features(obs))
                actions.append(action)
                index.append(i)
                obs, _reward, terminated, truncated, _info = env.step(action.astype(np.float32))
                done = terminated or truncated
    finally:
        env.close()
    return np.asarray(states), np.asarray(actions), np.asarray(index)


def attribute_policy(
    *,
    policy_dir: str,
    real_data: str,
    sim_data: str,
    episodes: int,
    neighbors: int,
    env_kwargs: Mapping[str, Any] | None,
    out: Path,
) -> dict[str, Any]:
    """Rolls a trained policy out in the lab, attributes every step and writes ``mixture.npz`` to ``out``.

    Returns:
        :func:`summarize` of the attribution, plus the policy's metadata (method, variant, real_fraction, seed).
    """
    from r2s2r_envs.policies import load_policy

    policy = load_policy(policy_dir)
    real, sim = demo_states(real_data), demo_states(sim_data)
    states, actions, index = rollout_lab(policy, episodes, env_kwargs)
    result = attribute(states, actions, real[:2], sim[:2], neighbors)
    # numpy's stub lets **kwds name allow_pickle (a bool); attribute()'s keys are array names only.
    np.savez_compressed(Path(out) / ARRAYS_FILE, episode=index, **result)  # type: ignore[arg-type]
    summary = summarize(result)
    summary["calibration"] = calibrate(real, sim, neighbors)
    meta = policy.metadata
    summary["policy"] = {k: meta.get(k) for k in ("method", "variant", "real_fraction", "training_seed")}
    summary["demo_states"] = {"real": int(len(real[0])), "sim": int(len(sim[0]))}
    json.dumps(summary)  # JSON-able
    return summary
