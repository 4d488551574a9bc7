"""Why does behavior grounding not help plain ``flow``? The sim data of the four variants beside the lab's demos.

The four-variant table at 30,000 steps (experiments/four-variants-30k/README.md) has ``flow`` policies
co-trained on the human-like generator's data (BehaviorGrounded, FullyGrounded) sort less in the lab than those
co-trained on the scripted planner's (Ungrounded, WorldGrounded), and their first failure is mostly a ``missed``
object. This script measures
the data each policy trained on, with what a real cell records (states and commands; no simulator state, no lab
parameter), for the lab's demos and each variant's sim demos:

* **timing** per grasp (``r2s2r_envs.behavior.segments``): object arrival to closure onset, reach duration, where
  along the belt the object was at closure and how much time it had left before leaving the arm's reach there
  (``reach_limit_y``, at the object's perceived speed), the share of steps the hand rests; per demo its length.
* **predictability** of each demonstrator's actions from the state: every held-out demo's actions (the last 20% of
  the demos) predicted by the mean action of the ``k`` nearest states of the other demos (the mixture analysis's
  state features and scaling), as a normalized error (1: no better than the mean action; 0: a function of the
  state). What a policy conditioned on the state cannot learn from a demonstrator shows here.
* **agreement with the teleoperator**: the lab's demo actions predicted from each sim set's ``k`` nearest states,
  beside the lab demos' own held-out figure: how alike the two demonstrators act *at the teleoperator's states*,
  which is what co-training mixes.

With ``--generator-episodes N`` it runs the human-like generator itself (the canonical model, no action noise) for
``N`` episodes in the lab, in the grounded world and in the nominal world, and the lab's teleoperator on the same
scenes (base seed ``ROLLOUT_SEED``: not the scenes of ``lab-50``, the generator's sources), and reports their
success (with its Wilson 95% interval), failure causes and the same timing: how faithful the generator is to the
operator it was fitted to, in each world (a diagnostic, as deploying a demonstrator on the real robot would be; no
grounding code reads it). In the grounded and nominal worlds the generator knows what its env says (the grounding
file, or the nominal model); in the lab it knows what the team knows of the lab: the shipped grounding file
(``GENERATOR_WORLD_IN_LAB``), never the lab's parameters. The issue-20 goals are checked and printed: success in
FullyGrounded >= 75%, in the lab >= 60% with arrival-to-grasp within 0.2 s of the teleoperator's.
``--generator-only`` skips the datasets and the predictability part (it needs no canonical sim set).

**Another operator** (issue 20): ``--lab LAB_FILE`` runs the lab rows in another lab (a lab file with another
``"operator"`` block: its teleoperator is that operator) and ``--behavior MODEL`` gives the generator, in every
world, a model fitted to that lab's demos (``r2s2r fit-behavior``) instead of the shipped one. With ``--behavior``
the goal checked is the FullyGrounded success goal within 10 points (>= 65%); the lab goals are the default
operator's and are not checked. ``--fitted-demos FILE`` (with ``--behavior``) adds the timing of the demos that model
was fitted to as a reference row.

With ``--policy NAME=CHECKPOINT`` it also rolls policies out in the lab for ``--episodes`` episodes (scenes
other than the training demos') and measures the same per-object timing on what they did (objects they lifted),
plus, per object never lifted, whether the hand came within 5 cm of it before it left the arm's reach and whether
the fingers closed.

Example (the run of experiments/behavior-axis/README.md, 2 cores; each set's canonical file from the cache,
or its first ``--demos`` demos made with its recipe where the cache lacks it)::

    python experiments/behavior_axis.py --demos 300 --out runs/behavior_axis
    python experiments/behavior_axis.py --demos 300 --policy B1=runs/bf_30k/behaviorgrounded-seed1 --episodes 30 \\
        --out runs/behavior_axis

Another operator (experiments/behavior-axis-v2/README.md#another-operator)::

    r2s2r generate PickSort-Real-v0 --episodes 50 --seed 2000000 --successes-only --obs-mode state \\
        --lab experiments/behavior-axis-v2/follow_pinch_place_lab.json --out runs/other-op/lab-other-50.hdf5
    r2s2r fit-behavior --demos runs/other-op/lab-other-50.hdf5 --out runs/other-op/other_model.json
    python experiments/behavior_axis.py --generator-only --generator-episodes 50 --workers 1 --rollout-seed 9000 \\
        --lab experiments/behavior-axis-v2/follow_pinch_place_lab.json \\
        --behavior runs/other-op/other_model.json --fitted-demos runs/other-op/lab-other-50.hdf5 \\
        --out runs/other-op/axis-s9000
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import numpy as np  # noqa: E402

from r2s2r_envs.ablation.mixture import split_held_out  # noqa: E402

LAB_SET = "lab-50"
SIM_SETS = ("ungrounded-1000", "worldgrounded-1000", "behaviorgrounded-1000", "fullygrounded-1000")
#: Nearest demo states whose mean action predicts an action.
NEIGHBORS = 5
#: Base seed of the policies' recorded lab episodes: not ``lab-50``'s, whose scenes the policies trained on
#: (``--rollout-seed`` sets another, e.g. for scenes no design choice was made on).
ROLLOUT_SEED = 7_000
#: Rise of the mean finger flexion command above its open level that counts as closing, [-1, 1] units.
CLOSED_RISE = 0.06
#: Hand within this horizontal distance of an object counts as having reached it, m.
NEAR = 0.05


# ---------------------------------------------------------------------- timing
def timing(traces) -> dict[str, float]:
    """Per-grasp and per-demo timing of a list of ``DemoTrace`` (means over grasps or demos)."""
    from r2s2r_envs.behavior.metrics import grasp_traits
    from r2s2r_envs.behavior.segments import DT, REST_SPEED
    from r2s2r_envs.envs.outcomes import OutcomeRules

    limit = OutcomeRules().reach_limit_y
    rows: dict[str, list[float]] = {k: [] for k in ("arrival_to_grasp", "reach_duration", "y_at_close", "slack")}
    for t in traces:
        for g in t.grasps:
            traits = grasp_traits(t, g)
            rows["arrival_to_grasp"].append(traits["arrival_to_grasp"])
            rows["reach_duration"].append(traits["reach_duration"])
            y = t.objects[:, g.obj, 1]
            rows["y_at_close"].append(float(y[g.close]))
            # The object's own speed along the belt over the second before closure (the perceived belt speed).
            a = max(g.close - int(round(1.0 / DT)), 0)
            speed = (y[a] - y[g.close]) / max((g.close - a) * DT, DT)
            rows["slack"].append(float((y[g.close] - limit) / speed) if speed > 0.01 else np.nan)
    out = {k: float(np.nanmean(v)) if v else np.nan for k, v in rows.items()}
    out.update({f"{k}_p10": float(np.nanpercentile(v, 10)) if v else np.nan for k, v in rows.items()})
    out["grasps"] = float(sum(len(t.grasps) for t in traces))
    out["demo_s"] = float(np.mean([len(t.eef) * DT for t in traces])) if traces else np.nan
    out["rest_share"] = float(np.mean(np.concatenate([t.speed < REST_SPEED for t in traces]))) if traces else np.nan
    return out


# ---------------------------------------------------------------------- predictability
def _scaled(states: np.ndarray, actions: np.ndarray, ref_states: np.ndarray, ref_actions: np.ndarray):
    from r2s2r_envs.ablation.mixture import _informative

    s_keep, s_scale = _informative(np.concatenate([states, ref_states]))
    a_keep, a_scale = _informative(np.concatenate([actions, ref_actions]))
    return (
        states[:, s_keep] / s_scale,
        actions[:, a_keep] / a_scale,
        ref_states[:, s_keep] / s_scale,
        ref_actions[:, a_keep] / a_scale,
    )


def knn_error(states, actions, ref_states, ref_actions, neighbors: int = NEIGHBORS) -> float:
    """Mean squared error of ``actions`` predicted by the mean action of the ``neighbors`` nearest ``ref_states``,
    divided by that of the mean reference action (both in the pooled scaling): 0 means the actions are a function of
    the state as the reference set acts it, 1 no better than ignoring the state."""
    from sklearn.neighbors import NearestNeighbors

    s, a, rs, ra = _scaled(states, actions, ref_states, ref_actions)
    idx = NearestNeighbors(n_neighbors=min(neighbors, len(rs))).fit(rs).kneighbors(s, return_distance=False)
    err = ((a - ra[idx].mean(axis=1)) ** 2).sum(axis=1).mean()
    base = ((a - ra.mean(axis=0)) ** 2).sum(axis=1).mean()
    return float(err / base)


# ---------------------------------------------------------------------- data
def read_set(path: Path, demos: int):
    """(traces, (states, actions, demo index), record) of the first ``demos`` demos of a dataset; the record holds
    the file's content hash, its demos and the attempts its generation took (the demonstrator's success in its
    world)."""
    from r2s2r_envs.ablation.mixture import FEATURE_KEYS, features
    from r2s2r_envs.behavior.segments import OBS_KEYS, trace_from_arrays
    from r2s2r_envs.datasets import open_dataset

    traces, states, actions, index = [], [], [], []
    with open_dataset(path, verify="none") as f:
        for k, demo_id in enumerate(f.demo_ids[:demos]):
            obs = {key: f.read(demo_id, f"obs/{key}") for key in set(OBS_KEYS) | set(FEATURE_KEYS)}
            acts = np.asarray(f.read(demo_id, "actions"), dtype=np.float64)
            traces.append(trace_from_arrays(demo_id, obs, acts, f.demo_attrs(demo_id)))
            states.append(features({key: obs[key][: len(acts)] for key in FEATURE_KEYS}))
            actions.append(acts)
            index.append(np.full(len(acts), k))
        record = {"sha256": f.content_hash, "file_demos": f.num_demos, "file_attempts": f.attempts}
    return traces, (np.concatenate(states), np.concatenate(actions), np.concatenate(index)), record


def dataset(name: str, demos: int, out: Path, workers: int) -> Path:
    """The canonical dataset ``name`` from the cache when it is there (complete, not being written), else its first
    ``demos`` demos generated here with its recipe (the same base seed: the same demos as the canonical file's
    first ones on this machine)."""
    from r2s2r_envs.ablation.design import canonical_recipe
    from r2s2r_envs.datasets.canonical import default_cache_dir
    from r2s2r_envs.datasets.generate import generate

    cached = default_cache_dir() / f"{name}.hdf5"
    if cached.exists() and not Path(f"{cached}.lock").exists():
        return cached
    recipe = canonical_recipe(name, demos, name)
    file = out / f"{name.rsplit('-', 1)[0]}-{demos}.hdf5"
    generate(
        recipe.env_id,
        recipe.episodes,
        file,
        workers=workers,
        seed=recipe.seed,
        successes_only=True,
        env_kwargs=recipe.env_kwargs,
        progress=False,
        **recipe.generate_kwargs,
    )
    return file


# ---------------------------------------------------------------------- policies
class _Recorder:
    """Wraps a trained policy as a demonstrator so that ``generate`` records its lab rollouts."""

    name = "policy"

    def __init__(self, env, path: str):
        from r2s2r_envs.policies import load_policy

        self._policy = load_policy(path)
        self.settings = {"checkpoint": path}

    def reset(self, seed=None):
        self._policy.reset(seed)

    def act(self, obs):
        return self._policy.act(obs)


def record(
    env_id: str,
    demonstrator,
    episodes: int,
    file: Path,
    workers: int = 1,
    seed: int = ROLLOUT_SEED,
    env_kwargs: dict | None = None,
) -> Path:
    """``episodes`` episodes of ``demonstrator`` in ``env_id`` recorded as a dataset: every attempt kept, no action
    noise, base seed ``seed`` (default ``ROLLOUT_SEED``), env arguments ``env_kwargs``."""
    from r2s2r_envs.datasets.generate import generate

    generate(
        env_id,
        episodes,
        file,
        workers=workers,
        seed=seed,
        demonstrator=demonstrator,
        env_kwargs=env_kwargs,
        progress=False,
    )
    return file


def policy_rollouts(path: str, episodes: int, out: Path) -> Path:
    """The policy's lab rollouts, recorded as a dataset (:func:`record`)."""
    from functools import partial

    recorder = partial(_Recorder, path=str(path))
    return record("PickSort-Real-v0", recorder, episodes, out / f"rollouts-{Path(path).name}.hdf5")


#: Where the generator runs with ``--generator-episodes``: the lab, then the worlds of FullyGrounded and
#: BehaviorGrounded (each variant's own generator: the same shipped model).
GENERATOR_ENVS = ("PickSort-Real-v0", "PickSort-FullyGrounded-v0", "PickSort-BehaviorGrounded-v0")
#: What the generator knows of the lab when run there: the grounding shipped for it (what a team deploying its
#: generator on the real cell would know), never the lab's parameters.
GENERATOR_WORLD_IN_LAB = "default"
#: The goals of issue 20 checked on the generator's runs.
GOAL_FULLY_GROUNDED = 0.75
#: Points of the FullyGrounded goal another operator's generator may lose (``--behavior``).
GOAL_OTHER_OPERATOR_MARGIN = 0.10
GOAL_LAB = 0.60
GOAL_TIMING_S = 0.2


def humanlike_in_lab(env, model: str | None = None):
    """The human-like generator as deployed in the lab: knowing the lab's shipped grounding (module level, so that
    ``generate`` records it by name and can pickle it); ``model``: its behavior model (default the shipped one)."""
    from r2s2r_envs.behavior.humanlike import HumanlikeGenerator, WorldKnowledge
    from r2s2r_envs.grounding.result import load_grounding

    grounding = load_grounding(GENERATOR_WORLD_IN_LAB)
    return HumanlikeGenerator(
        env, model=model, world=WorldKnowledge.from_grounding(grounding, source=f"grounding {grounding.source}")
    )


class HumanlikeInLab:
    """:func:`humanlike_in_lab` with a given behavior model file, as a picklable factory. Its ``__name__`` (file
    names) and ``__qualname__`` (how ``generate`` records a factory) carry the model's hash, so that a run with
    another model never resumes this one's file."""

    def __init__(self, model: str) -> None:
        from r2s2r_envs.behavior.fit import load_model, model_sha256

        self.model = model
        sha = model_sha256(load_model(model))[:12]
        self.__name__ = f"humanlike_in_lab-{sha}"
        self.__qualname__ = f"HumanlikeInLab[model {sha}]"

    def __call__(self, env):
        return humanlike_in_lab(env, model=self.model)


def generator_runs(
    env_id: str,
    episodes: int,
    out: Path,
    workers: int,
    demonstrator="humanlike",
    seed: int = ROLLOUT_SEED,
    env_kwargs: dict | None = None,
) -> dict[str, float]:
    """A demonstrator's own episodes in ``env_id`` (default the human-like generator; None: the env's own, in the lab
    its teleoperator; or a factory), every attempt kept, no action noise, env arguments ``env_kwargs``: success with
    its Wilson 95% interval, sort accuracy, failure causes (every object's outcome but ``sorted``, counted) and the
    timing of its grasps."""
    from collections import Counter

    from r2s2r_envs.behavior.segments import load_demos
    from r2s2r_envs.datasets import open_dataset
    from r2s2r_envs.evaluation import wilson_interval

    label = demonstrator if isinstance(demonstrator, str) or demonstrator is None else demonstrator.__name__
    file = record(env_id, demonstrator, episodes, out / f"{label or 'own'}-{env_id}.hdf5", workers, seed, env_kwargs)
    with open_dataset(file, verify="none") as f:
        outcomes = [f.demo_attrs(d)["object_outcomes"] for d in f.demo_ids]
    solved = [all(o == "sorted" for o in ep) for ep in outcomes]
    low, high = wilson_interval(int(sum(solved)), len(solved))
    return {
        "episodes": float(len(outcomes)),
        "success": float(np.mean(solved)),
        "success_ci95": [float(low), float(high)],
        "sort_accuracy": float(np.mean([np.mean([o == "sorted" for o in ep]) for ep in outcomes])),
        "object_outcomes": dict(sorted(Counter(o for ep in outcomes for o in ep if o != "sorted").items())),
        **timing(load_demos(file).traces),
    }


def goals(rows: dict[str, dict], other_operator: bool = False) -> dict[str, dict]:
    """The issue-20 goals on the generator's rows: each with the measured figure and whether it is met. With
    ``other_operator`` (a generator fitted to another operator's demos) only the FullyGrounded success goal, less
    ``GOAL_OTHER_OPERATOR_MARGIN``."""
    out = {}
    fully = rows.get("generator in PickSort-FullyGrounded-v0")
    lab, operator = rows.get("generator in PickSort-Real-v0"), rows.get("teleoperator in PickSort-Real-v0")
    if other_operator:
        if fully:
            goal = GOAL_FULLY_GROUNDED - GOAL_OTHER_OPERATOR_MARGIN
            out[f"another operator: success in FullyGrounded >= {goal:.0%}"] = {
                "value": fully["success"],
                "met": fully["success"] >= goal - 1e-9,
            }
        return out
    if fully:
        out["success in FullyGrounded >= 75%"] = {
            "value": fully["success"],
            "met": fully["success"] >= GOAL_FULLY_GROUNDED,
        }
    if lab:
        out["success in the lab >= 60%"] = {"value": lab["success"], "met": lab["success"] >= GOAL_LAB}
    if lab and operator:
        gap = lab["arrival_to_grasp"] - operator["arrival_to_grasp"]
        out["arrival-to-grasp within 0.2 s of the operator's (lab)"] = {"value": gap, "met": abs(gap) <= GOAL_TIMING_S}
    return out


def misses(path: Path) -> dict[str, float]:
    """Objects never lifted in a rollout file: how many, and for how many of them the hand came near (within
    ``NEAR`` horizontally while the object was reachable) and the fingers closed while near."""
    from r2s2r_envs.behavior.segments import ARRIVAL_Y, DIGIT_JOINTS, FINGER_ACTION_START
    from r2s2r_envs.datasets import open_dataset
    from r2s2r_envs.envs.outcomes import OutcomeRules

    limit = OutcomeRules().reach_limit_y
    counts = {"objects": 0, "never_lifted": 0, "never_near": 0, "near_not_closed": 0, "closed_near": 0}
    flex = sorted(i for idx in DIGIT_JOINTS.values() for i in idx)
    with open_dataset(path, verify="none") as f:
        for demo_id in f.demo_ids:
            attrs = f.demo_attrs(demo_id)
            acts = np.asarray(f.read(demo_id, "actions"))
            eef = np.asarray(f.read(demo_id, "obs/eef_pos"))[: len(acts)]
            objs = np.asarray(f.read(demo_id, "obs/object_pos"))[: len(acts)].reshape(len(acts), -1, 3)
            # Fingers closing: the mean flexion command risen CLOSED_RISE above its open level (the episode's 5th
            # percentile). A grasp closes them only part of the way (about 0.12 of the [-1, 1] range, in the lab's
            # demos and the generator's alike), so a fixed "half closed" level would never be reached.
            flexion = acts[:, FINGER_ACTION_START:][:, flex].mean(axis=1)
            closed = flexion > np.percentile(flexion, 5) + CLOSED_RISE
            for k, outcome in enumerate(attrs.get("object_outcomes") or []):
                counts["objects"] += 1
                if outcome not in ("missed", "fell_off_belt", "timeout"):
                    continue
                counts["never_lifted"] += 1
                reachable = (objs[:, k, 1] > limit) & (objs[:, k, 1] < ARRIVAL_Y)
                near = reachable & (np.linalg.norm(eef[:, :2] - objs[:, k, :2], axis=1) < NEAR)
                if not near.any():
                    counts["never_near"] += 1
                elif (near & closed).any():
                    counts["closed_near"] += 1
                else:
                    counts["near_not_closed"] += 1
    return counts


# ---------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=int, default=300, help="first demos of each sim set read (default 300)")
    parser.add_argument("--workers", type=int, default=2, help="dataset-building worker processes")
    parser.add_argument("--policy", action="append", default=[], help="NAME=CHECKPOINT_DIR, repeatable")
    parser.add_argument("--episodes", type=int, default=30, help="lab episodes per policy (default 30)")
    parser.add_argument(
        "--generator-episodes", type=int, default=0, help="episodes of the generator itself per world (default 0: none)"
    )
    parser.add_argument(
        "--generator-only", action="store_true", help="only the generator's and the teleoperator's own runs"
    )
    parser.add_argument(
        "--rollout-seed", type=int, default=ROLLOUT_SEED, help=f"base seed of the runs (default {ROLLOUT_SEED})"
    )
    parser.add_argument(
        "--lab", default=None, help="lab of the lab rows: a shipped lab name or a lab JSON file (default: the default)"
    )
    parser.add_argument(
        "--behavior",
        type=Path,
        default=None,
        help="behavior model of the generator in every world (default: the shipped one); the other-operator goal",
    )
    parser.add_argument(
        "--fitted-demos",
        type=Path,
        default=None,
        help="with --behavior: the lab demos it was fitted to, a reference row (its timing) beside lab-50's",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.behavior is not None and not args.behavior.is_file():
        parser.error(f"--behavior takes a behavior model file (r2s2r fit-behavior --out), got {str(args.behavior)!r}")
    if args.fitted_demos is not None and (args.behavior is None or not args.fitted_demos.is_file()):
        parser.error("--fitted-demos takes the lab dataset the --behavior model was fitted to (an existing file)")
    policies = {}
    for item in args.policy:
        name, sep, path = item.partition("=")
        if not sep or not Path(path).is_dir():
            parser.error(f"--policy takes NAME=CHECKPOINT_DIR with an existing directory, got {item!r}")
        policies[name] = path

    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    sets = (LAB_SET,) if args.generator_only else (LAB_SET, *SIM_SETS)
    paths = {name: dataset(name, args.demos, args.out, args.workers) for name in sets}
    print(f"[{time.perf_counter() - t0:.0f} s] datasets ready", flush=True)

    lab_traces, lab, record = read_set(paths[LAB_SET], 10**9)
    lab_fit, lab_held = split_held_out(lab)
    rows = {LAB_SET: {**record, **timing(lab_traces), "self": knn_error(*lab_held, *lab_fit), "lab_from_this": np.nan}}
    if args.fitted_demos is not None:  # the other operator's own demos: the timing its generator is fitted to
        fitted_traces, _, fitted_record = read_set(args.fitted_demos, 10**9)
        rows[f"fitted demos {args.fitted_demos.name}"] = {**fitted_record, **timing(fitted_traces)}
    for name in sets[1:]:
        traces, data, record = read_set(paths[name], args.demos)
        fit, held = split_held_out(data)
        rows[name] = {
            **record,
            **timing(traces),
            "self": knn_error(*held, *fit),
            # The teleoperator's held-out actions, predicted from this set: same held-out lab states as "self" above.
            "lab_from_this": knn_error(*lab_held, data[0], data[1]),
        }
        print(f"[{time.perf_counter() - t0:.0f} s] {name}: {len(traces)} demos", flush=True)
    if args.generator_episodes > 0:  # the operator on the same new scenes (lab-50's are the generator's sources)
        model = None if args.behavior is None else str(args.behavior.resolve())
        in_lab = humanlike_in_lab if model is None else HumanlikeInLab(model)
        lab_kwargs = {} if args.lab is None else {"lab": args.lab}
        sim_kwargs = {} if model is None else {"behavior": model}
        runs = [("teleoperator", "PickSort-Real-v0", None, lab_kwargs)]
        runs += [
            ("generator", env_id, in_lab, lab_kwargs)
            if env_id == "PickSort-Real-v0"
            else ("generator", env_id, "humanlike", sim_kwargs)
            for env_id in GENERATOR_ENVS
        ]
        for who, env_id, demonstrator, env_kwargs in runs:
            row = generator_runs(
                env_id,
                args.generator_episodes,
                args.out,
                args.workers,
                demonstrator=demonstrator,
                seed=args.rollout_seed,
                env_kwargs=env_kwargs,
            )
            rows[f"{who} in {env_id}"] = row
            print(
                f"[{time.perf_counter() - t0:.0f} s] {who} in {env_id}: {args.generator_episodes} episodes", flush=True
            )
    from r2s2r_envs.behavior.segments import load_demos

    for name, path in policies.items():
        file = policy_rollouts(path, args.episodes, args.out)
        rows[f"policy {name}"] = {**timing(load_demos(file).traces), **misses(file)}
        print(f"[{time.perf_counter() - t0:.0f} s] policy {name}: {args.episodes} lab episodes", flush=True)

    print_table(rows)
    clean = {
        name: {k: None if isinstance(v, float) and not np.isfinite(v) else v for k, v in row.items()}
        for name, row in rows.items()
    }
    met = goals(rows, other_operator=args.behavior is not None)
    for name, g in met.items():
        print(f"goal {name}: {g['value']:+.3f} {'met' if g['met'] else 'NOT met'}")
    if met:
        clean["goals"] = met
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    clean["config"] = {**config, "generator_world_in_lab": GENERATOR_WORLD_IN_LAB}
    if args.behavior is not None:
        from r2s2r_envs.behavior.fit import load_model, model_sha256

        fitted = load_model(args.behavior)
        clean["config"]["behavior_model"] = {
            "model_sha256": model_sha256(fitted),
            "demos": fitted.get("provenance", {}).get("demos"),
        }
    (args.out / "behavior_axis.json").write_text(json.dumps(clean, indent=1, default=float) + "\n")


def print_table(rows: dict[str, dict[str, float]]) -> None:
    cols = [
        ("file_attempts", "attempts", "{:.0f}"),
        ("file_demos", "demos", "{:.0f}"),
        ("success", "success", "{:.2f}"),
        ("sort_accuracy", "sorted", "{:.2f}"),
        ("arrival_to_grasp", "arrival->close s", "{:.2f}"),
        ("arrival_to_grasp_p10", "p10", "{:.2f}"),
        ("reach_duration", "reach s", "{:.2f}"),
        ("y_at_close", "y at close m", "{:+.3f}"),
        ("slack", "slack s", "{:.2f}"),
        ("slack_p10", "p10", "{:.2f}"),
        ("rest_share", "resting", "{:.2f}"),
        ("demo_s", "demo s", "{:.1f}"),
        ("self", "own kNN err", "{:.3f}"),
        ("lab_from_this", "lab from this", "{:.3f}"),
    ]
    print("\n| set | " + " | ".join(c[1] for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, row in rows.items():
        cells = [
            fmt.format(row[key]) if row.get(key) is not None and np.isfinite(row[key]) else "" for key, _, fmt in cols
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name, row in rows.items():
        if "success_ci95" in row:
            low, high = row["success_ci95"]
            causes = ", ".join(f"{k} {v}" for k, v in row["object_outcomes"].items()) or "none"
            print(
                f"{name}: {row['success'] * row['episodes']:.0f} of {row['episodes']:.0f} episodes solved "
                f"(Wilson 95% {low:.2f}-{high:.2f}); objects not sorted: {causes}"
            )
        if "never_lifted" in row:
            print(
                f"{name}: {row['never_lifted']} of {row['objects']} objects never lifted: hand never within "
                f"{NEAR * 100:.0f} cm {row['never_near']}, near but fingers open {row['near_not_closed']}, closed "
                f"near {row['closed_near']}"
            )


if __name__ == "__main__":
    main()
