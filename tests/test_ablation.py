"""The grounding ablation (r2s2r_envs.ablation, docs/ablation.md): design and config hashes, bad input before any
work, the analysis' numbers against hand-computed values, and the whole pipeline on Ray with a tiny design (results
keyed by config hash, a re-run skips finished tasks, a killed task's partial output is redone, a failing task is
retried and recorded without stopping the sweep)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import hand_made_result

from r2s2r_envs.ablation import analysis
from r2s2r_envs.ablation.design import (
    REAL_ONLY,
    VARIANTS,
    AblationDesign,
    DataSpec,
    DesignError,
    check_design,
    config_hash,
    full_design,
    quick_design,
    smoke_design,
)
from r2s2r_envs.ablation.runner import AblationError, preflight
from r2s2r_envs.ablation.store import MANIFEST, Store
from r2s2r_envs.evaluation.schema import RESULT_SCHEMA_VERSION


def tiny_design() -> AblationDesign:
    """The smoke design with one method: the pipeline test's design."""
    return dataclasses.replace(smoke_design(), methods=("flow",), mixture_methods=("flow",))


# ---------------------------------------------------------------------- design and hashes
def test_importing_the_package_needs_neither_ray_nor_torch():
    code = (
        "import sys, r2s2r_envs.ablation, r2s2r_envs.ablation.cli; print('ray' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_config_hash_is_stable_and_covers_config_and_dependencies():
    a = config_hash("train", {"method": "flow", "seed": 0}, ("d1",))
    assert a == config_hash("train", {"seed": 0, "method": "flow"}, ("d1",))  # key order does not matter
    assert a != config_hash("train", {"method": "flow", "seed": 1}, ("d1",))
    assert a != config_hash("train", {"method": "flow", "seed": 0}, ("d2",))
    assert a != config_hash("eval", {"method": "flow", "seed": 0}, ("d1",))


def test_task_graph_of_the_presets():
    full = full_design()
    check_design(full)
    tasks = full.tasks()
    keys = [t.key for t in tasks]
    assert len(keys) == len(set(keys))
    position = {t.key: i for i, t in enumerate(tasks)}
    assert all(position[d] < position[t.key] for t in tasks for d in t.deps)  # dependencies first
    # 50 real and 1,000 sim demos: the mixing rule's high end, sqrt(50/1000) = 0.224.
    assert full.rule_fraction("FullyGrounded") == 0.224
    # 0.05 is within SWEEP_RESOLUTION of the rule's low end, 50 / 1,050 = 0.048: the sweep keeps the rule's end.
    assert full.sweep_values() == (0.0, 0.048, 0.224, 0.5, 1.0)
    trains = [t for t in tasks if t.kind == "train"]
    # Per table seed (5): one real-only policy (flow, shared by both methods), 2 methods x 4 variants; per sweep
    # seed (3): the sweep's other points of FullyGrounded.
    assert full.seeds == (0, 1, 2, 3, 4) and full.sweep_seed_list() == (0, 1, 2)
    real_only = [t for t in trains if t.config["real_fraction"] == 1.0]
    assert len(real_only) == 5 and {t.config["method"] for t in real_only} == {"flow"}
    co_trained = [t for t in trains if t.config["real_fraction"] == 0.224]
    assert len(co_trained) == 5 * 2 * 4
    swept = [t for t in trains if t.config["real_fraction"] not in (0.224, 1.0)]
    assert {t.config["seed"] for t in swept} == {0, 1, 2} and len(swept) == 3 * (1 + 2 + 2)  # 0; .048, .5
    assert {policy.seed for policy, _ in full.mixture_policies()} == {0, 1, 2}
    evals = [t for t in tasks if t.kind == "eval"]
    assert {t.config["episodes"] for t in evals} == {100}
    # Every co-trained policy is evaluated in the lab and in its own variant; real-only in the lab only.
    for t in trains:
        envs = sorted(e.config["env_id"] for e in evals if e.deps == (t.key,))
        variant_env = [] if t.config["real_fraction"] == 1.0 else ["PickSort-FullyGrounded-v0"]
        if t.config["real_fraction"] == 0.224:
            variant_env = [e for e in envs if e != "PickSort-Real-v0"]
            assert len(variant_env) == 1
        assert envs == sorted(["PickSort-Real-v0", *variant_env])
    quick = quick_design()
    check_design(quick)
    assert quick.seeds == (0,) and quick.real.episodes == 20
    # The quick design's data (lab and sim) follows the canonical datasets' recipes, with fewer demos.
    from r2s2r_envs.datasets.canonical import load_spec

    lab = {e.name: e for e in load_spec()}["lab-50"]
    assert quick.real.canonical is None and quick.real.domain == "real"
    assert (quick.real.env_id, quick.real.seed, quick.real.recipe_of) == (lab.env_id, lab.seed, "lab-50")
    spec = {e.name: e for e in load_spec()}["fullygrounded-1000"]
    fg = quick.sim_spec("FullyGrounded")
    assert (fg.env_id, fg.seed, fg.episodes, fg.recipe_of) == (spec.env_id, spec.seed, 50, "fullygrounded-1000")
    assert fg.generate_kwargs.get("action_noise", 0.0) == getattr(spec, "action_noise", 0.0)


def test_a_swept_number_next_to_a_rule_end_is_that_end():
    full = full_design()  # 50 real and 1,000 sim demos: rule ends 0.048 and 0.224
    sweep = dataclasses.replace
    assert sweep(full, sweep_fractions=(0.05, "low")).sweep_values() == (0.048,)
    assert sweep(full, sweep_fractions=(0.0445, 0.0515, "low")).sweep_values() == (0.048,)
    assert sweep(full, sweep_fractions=(0.042, 0.054, "low")).sweep_values() == (0.042, 0.048, 0.054)
    assert sweep(full, sweep_fractions=(0.05, 0.22, "high")).sweep_values() == (0.05, 0.224)  # the low end unnamed
    assert sweep(full, sweep_fractions=(0.05, 0.2)).sweep_values() == (0.05, 0.2)  # no end named: numbers as given


def test_a_changed_dataset_changes_exactly_the_keys_downstream_of_it():
    design = tiny_design()
    before = design.tasks()
    real = dataclasses.replace(design.real, seed=8)
    after = dataclasses.replace(design, real=real).tasks()
    assert [t.label for t in before] == [t.label for t in after]
    downstream = {before[0].key}  # the real data's task comes first
    for t in before:
        if set(t.deps) & downstream:
            downstream.add(t.key)
    for old, new in zip(before, after):
        assert (old.key != new.key) == (old.key in downstream), old.label
    # The sim-only policy of the sweep (real_fraction 0) and its evaluations do not read the real data.
    assert any(t.kind == "train" and t.config["real_fraction"] == 0.0 and t.key not in downstream for t in before)


def test_a_changed_recipe_value_changes_the_training_keys(monkeypatch):
    from r2s2r_envs.policies import config as policy_config

    design = tiny_design()
    recipe = design.train.get("recipe", policy_config.DEFAULT_RECIPE)
    before = {t.label: t.key for t in design.tasks() if t.kind == "train"}
    changed = {**policy_config.RECIPES[recipe], "adda_weight": 0.0123}
    monkeypatch.setitem(policy_config.RECIPES, recipe, changed)
    after = {t.label: t.key for t in design.tasks() if t.kind == "train"}
    assert before.keys() == after.keys() and before
    # The design names the recipe only; its resolved values are what the key covers.
    assert all(before[label] != after[label] for label in before)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"variants": ("Ungrounded", "Grounded")}, "unknown variant(s) ['Grounded']"),
        ({"methods": ("diffusion",)}, "unknown method(s) ['diffusion']"),
        ({"seeds": (0, 0)}, "seeds must be distinct"),
        ({"lab_episodes": 0}, "lab_episodes must be an integer >= 1"),
        ({"train": {"real_fraction": 0.3}}, "set by the ablation or unknown"),
        ({"sweep_fractions": (1.5,)}, "sweep real_fraction 1.5"),
    ],
)
def test_bad_designs_are_refused_with_the_choices(change, message):
    with pytest.raises(AblationError) as e:
        preflight(dataclasses.replace(tiny_design(), **change), "unused-dir")
    assert message in str(e.value)
    assert not Path("unused-dir").exists()


def test_a_missing_dataset_is_refused_with_the_command_that_builds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("R2S2R_DATA_DIR", str(tmp_path / "empty-cache"))
    with pytest.raises(AblationError) as e:
        preflight(full_design(), tmp_path / "out")
    assert "r2s2r datasets make lab-50" in str(e.value)
    assert not (tmp_path / "out").exists()
    # The quick design generates all its data: it needs no canonical dataset (README, "Next").
    tasks = preflight(quick_design(), tmp_path / "quick")
    data = [t for t in tasks if t.kind == "data"]
    assert len(data) == 5 and all(t.config["canonical"] is None for t in data)


def test_a_stale_canonical_dataset_is_refused_before_any_work(tmp_path, monkeypatch):
    from r2s2r_envs.datasets.generate import generate

    cache = tmp_path / "cache"
    # A lab dataset under lab-50's file name whose content is not the pinned lab-50 (one one-object demo).
    generate(
        "PickSort-Real-v0", 1, cache / "lab-50.hdf5", successes_only=True, env_kwargs={"num_objects": 1}, progress=False
    )
    monkeypatch.setenv("R2S2R_DATA_DIR", str(cache))
    real = DataSpec(label="lab-50", domain="real", canonical="lab-50", env_id="PickSort-Real-v0", episodes=1)
    reads_lab_50 = dataclasses.replace(tiny_design(), real=real)
    with pytest.raises(AblationError) as e:
        preflight(reads_lab_50, tmp_path / "out")
    assert "lab-50" in str(e.value) and "stale" in str(e.value)
    assert not (tmp_path / "out").exists()


def test_a_demo_subset_keeps_executed_actions_and_clean_labels(tmp_path):
    # The quick design's data subsets (tasks.write_subset): a subset of a noise-injected file keeps both arrays, and
    # a version-2 source of noisy actions, which has no clean labels, is refused before anything is written.
    from conftest import downgrade_to_v2

    from r2s2r_envs.ablation.tasks import write_subset
    from r2s2r_envs.datasets import NoCleanLabelsError, open_dataset
    from r2s2r_envs.datasets.generate import generate

    source = tmp_path / "noisy.hdf5"
    kw = dict(action_noise=0.1, env_kwargs={"num_objects": 1}, episode_steps=20, progress=False)
    generate("PickSort-Ungrounded-v0", 3, source, **kw)
    write_subset(source, tmp_path / "subset.hdf5", 2, source_name="noisy")
    with open_dataset(source) as src, open_dataset(tmp_path / "subset.hdf5") as sub:
        assert sub.num_demos == 2 and sub.action_noise == 0.1  # through the subset's source_generation
        for k in sub.demo_ids:
            for array in ("actions", "action_labels"):
                np.testing.assert_array_equal(sub.read(k, array), src.read(k, array))
            assert not np.array_equal(sub.read(k, "actions"), sub.read(k, "action_labels"))
    downgrade_to_v2(source, action_noise=0.1)
    with pytest.raises(NoCleanLabelsError, match="schema version 2"):
        write_subset(source, tmp_path / "old-subset.hdf5", 2, source_name="noisy")
    assert not (tmp_path / "old-subset.hdf5").exists()


def test_a_results_directory_of_another_schema_version_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / MANIFEST).write_text(json.dumps({"format": "r2s2r_envs.ablation", "schema_version": 0}))
    with pytest.raises(AblationError, match="schema version 0"):
        preflight(tiny_design(), out)
    (out / MANIFEST).unlink()
    (out / "results").mkdir()
    (out / "results" / "old.json").write_text(
        json.dumps({"format": "r2s2r_envs.evaluation_result", "schema_version": 1})
    )
    with pytest.raises(AblationError, match="schema version 1"):
        preflight(tiny_design(), out)


def test_cli_reports_bad_input_with_exit_code_2(tmp_path, capsys):
    from r2s2r_envs.cli import main

    code = main(["ablation", "--smoke", "--variants", "Ungrounded,Nope", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "unknown variant(s) ['Nope']" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "address, message",
    [
        ("127.0.0.1:{port}", "cannot reach the Ray cluster at --address '127.0.0.1:{port}' within 5 s"),
        ("no-such-host.invalid:6379", "cannot reach the Ray cluster at --address 'no-such-host.invalid:6379'"),
        ("head:port", "--address 'head:port' is not HOST:PORT (or 'auto')"),
    ],
)
def test_an_unreachable_cluster_is_a_one_line_error_within_seconds(tmp_path, capsys, address, message):
    import time

    from r2s2r_envs.ablation.runner import _check_reachable

    port = _closed_port()
    start = time.perf_counter()
    with pytest.raises(AblationError) as info:
        _check_reachable(address.format(port=port))
    assert message.format(port=port) in str(info.value) and "drop --address" in str(info.value)
    assert "\n" not in str(info.value) and time.perf_counter() - start < 10


def test_cli_steps_and_no_sweep_change_the_design_and_so_every_training_key():
    import argparse

    from r2s2r_envs.ablation.cli import add_subcommands, design_from_args

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers())
    base = design_from_args(parser.parse_args(["ablation", "--methods", "flow", "--out", "o"]))
    longer = design_from_args(
        parser.parse_args(["ablation", "--methods", "flow", "--steps", "12000", "--no-sweep", "--out", "o"])
    )
    assert base.train == {"recipe": "cpu"} and longer.train == {"recipe": "cpu", "steps": 12000}
    assert longer.sweep_variant is None and longer.sweep_values() == ()
    kinds = [t.kind for t in longer.tasks(canonical_hashes={})]
    # real-only + four variants, five seeds; each evaluated in the lab (and co-trained ones in their variant)
    assert kinds.count("train") == 25 and kinds.count("eval") == 45
    seeds = design_from_args(parser.parse_args(["ablation", "--seeds", "0,1", "--out", "o"]))
    assert seeds.seeds == (0, 1) and seeds.sweep_seed_list() == (0, 1)  # --seeds: the sweep's too
    apart = design_from_args(parser.parse_args(["ablation", "--seeds", "0,1", "--sweep-seeds", "1", "--out", "o"]))
    assert apart.seeds == (0, 1) and apart.sweep_seed_list() == (1,)
    base_trains = {t.key for t in base.tasks(canonical_hashes={}) if t.kind == "train"}
    longer_trains = {t.key for t in longer.tasks(canonical_hashes={}) if t.kind == "train"}
    assert base_trains.isdisjoint(longer_trains)  # a new budget is a new set of tasks, never a reused result
    with pytest.raises(SystemExit):
        parser.parse_args(["ablation", "--steps", "0", "--out", "o"])


def test_eval_batch_is_an_execution_setting_that_changes_no_key():
    import argparse

    from r2s2r_envs.ablation.cli import add_subcommands, design_from_args
    from r2s2r_envs.ablation.design import DesignError

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers())
    default = design_from_args(parser.parse_args(["ablation", "--quick", "--out", "o"]))
    single = design_from_args(parser.parse_args(["ablation", "--quick", "--eval-batch", "1", "--out", "o"]))
    assert default.eval_batch == 16 and single.eval_batch == 1
    tasks, single_tasks = default.tasks(canonical_hashes={}), single.tasks(canonical_hashes={})
    assert [t.key for t in tasks] == [t.key for t in single_tasks]
    evals = [t for t in tasks if t.kind == "eval"]
    # At most the evaluation's episodes: 20 in the lab, 10 in the policy's own variant at the quick size.
    assert {(t.config["episodes"], t.batch) for t in evals} == {(20, 16), (10, 10)}
    assert {t.batch for t in single_tasks if t.kind == "eval"} == {1}
    assert all(t.batch == 1 for t in tasks if t.kind != "eval") and evals[0].to_dict()["batch"] == 16
    with pytest.raises(SystemExit):
        parser.parse_args(["ablation", "--eval-batch", "0", "--out", "o"])
    with pytest.raises(DesignError, match="eval_batch must be an integer >= 1"):
        check_design(dataclasses.replace(default, eval_batch=0))


def test_cli_recipe_names_the_training_recipe_and_refuses_gpu_without_cuda():
    import argparse

    from r2s2r_envs.ablation.cli import add_subcommands, design_from_args
    from r2s2r_envs.ablation.design import DesignError
    from r2s2r_envs.policies.config import RECIPES

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers())

    def design(*extra: str):
        return design_from_args(parser.parse_args(["ablation", "--methods", "flow", "--out", "o", *extra]))

    full, v1, quick_cpu = design(), design("--recipe", "v1"), design("--quick", "--recipe", "cpu")
    assert v1.train == {"recipe": "v1"} and quick_cpu.train == {"recipe": "cpu", "steps": 1000}
    full_train = [t for t in full.tasks(canonical_hashes={}) if t.kind == "train"]
    assert {t.config["steps"] for t in full_train} == {RECIPES["cpu"]["steps"]}  # the recipe's values, resolved
    assert {t.config["steps"] for t in v1.tasks(canonical_hashes={}) if t.kind == "train"} == {5000}
    assert {t.key for t in full_train}.isdisjoint(t.key for t in v1.tasks(canonical_hashes={}))
    gpu = design("--recipe", "gpu", "--train-device", "cuda")
    assert gpu.train == {"recipe": "gpu", "device": "cuda"}
    with pytest.raises(DesignError, match="--train-device cuda"):
        design("--recipe", "gpu")
    with pytest.raises(SystemExit):
        parser.parse_args(["ablation", "--recipe", "fast", "--out", "o"])


def test_training_on_a_gpu_declares_a_gpu_share_per_training_and_keys_apart_from_cpu_training():
    import argparse

    from r2s2r_envs.ablation.cli import add_subcommands, design_from_args
    from r2s2r_envs.ablation.design import DesignError

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers())

    def design(*extra: str) -> AblationDesign:
        return design_from_args(
            parser.parse_args(["ablation", "--methods", "flow", "--no-sweep", *extra, "--out", "o"])
        )

    cpu, gpu = design(), design("--train-device", "cuda")
    assert gpu.train["device"] == "cuda" and gpu.train_gpus == 0.25 and cpu.train_gpus == 0
    check_design(gpu)
    tasks = gpu.tasks(canonical_hashes={})
    assert {t.num_gpus for t in tasks if t.kind == "train"} == {0.25}
    assert {t.num_gpus for t in tasks if t.kind != "train"} == {0.0}
    assert all(t.to_dict()["num_gpus"] == t.num_gpus for t in tasks)

    # GPU training is not bit-reproducible: its policies are other results than the CPU ones, under other keys;
    # the evaluations downstream of them too, and the data tasks stay shared.
    def keys(d: AblationDesign, kind: str) -> set[str]:
        return {t.key for t in d.tasks(canonical_hashes={}) if t.kind == kind}

    assert keys(cpu, "data") == keys(gpu, "data")
    assert keys(cpu, "train").isdisjoint(keys(gpu, "train")) and keys(cpu, "eval").isdisjoint(keys(gpu, "eval"))
    assert design("--train-device", "cuda", "--gpus-per-training", "0.5").train_gpus == 0.5
    with pytest.raises(DesignError, match="declares GPUs for trainings on 'cpu'"):
        check_design(design("--gpus-per-training", "0.5"))
    with pytest.raises(DesignError, match="needs a GPU share per training"):
        check_design(dataclasses.replace(gpu, train_gpus=0.0))
    with pytest.raises(DesignError, match=r"train_gpus must be a share of one GPU in \[0, 1\]"):
        check_design(dataclasses.replace(gpu, train_gpus=2.0))


# ---------------------------------------------------------------------- statistics
def test_scheduler_keeps_the_cpus_busy_and_evaluates_before_training_more(tmp_path, monkeypatch):
    # With one CPU and two trainings ready, a finished training's evaluation runs before the next training, so
    # results arrive while the sweep goes on; never more tasks in flight than the cluster has CPUs.
    import types

    from r2s2r_envs.ablation.design import Task
    from r2s2r_envs.ablation.runner import run_tasks

    submitted: list[str] = []
    in_flight: list[str] = []
    most = [0]

    class Ref:
        def __init__(self, key: str) -> None:
            self.key = key

    options: dict[str, dict] = {}

    class Remote:
        def options(self, **kwargs):
            self.kwargs = kwargs
            return self

        def remote(self, task: dict, root: str) -> Ref:
            options[task["key"]] = self.kwargs
            submitted.append(task["key"])
            in_flight.append(task["key"])
            most[0] = max(most[0], len(in_flight))
            return Ref(task["key"])

    def wait(refs, num_returns, timeout):
        first = min(refs, key=lambda r: submitted.index(r.key))
        in_flight.remove(first.key)
        return [first], []

    fake = types.SimpleNamespace(
        remote=lambda fn: Remote(),
        wait=wait,
        get=lambda ref: {"wall_time_s": 0.0},
        cluster_resources=lambda: {"CPU": 1.0},
    )
    monkeypatch.setitem(sys.modules, "ray", fake)

    def task(kind: str, key: str, *deps: str) -> Task:
        gpus = 0.5 if kind == "train" else 0.0  # trainings on a GPU declare their share of it
        return Task(kind=kind, key=key, config={}, deps=tuple(deps), num_cpus=1, num_gpus=gpus, label=key)

    tasks = [
        task("data", "d"),
        task("train", "t1", "d"),
        task("train", "t2", "d"),
        task("eval", "e1", "t1"),
        task("eval", "e2", "t2"),
        task("mixture", "m", "t1", "t2"),
    ]
    summary = run_tasks(tasks, Store(tmp_path), max_retries=0, log=lambda _: None)
    assert summary.ran == 6 and not summary.failed
    assert submitted == ["d", "t1", "e1", "t2", "m", "e2"]
    assert most[0] == 1
    assert options["t1"]["num_gpus"] == 0.5 and options["e1"]["num_gpus"] == 0.0
    assert all(o["num_cpus"] == 1 and o["max_retries"] == 0 for o in options.values())


def test_ready_work_is_taken_in_the_design_order_datasets_with_their_first_training():
    from r2s2r_envs.ablation.runner import need_ranks

    tasks = full_design().tasks(canonical_hashes={})
    ranks = need_ranks(tasks)
    trains = [t for t in tasks if t.kind == "train"]
    assert [ranks[t.key] for t in trains] == sorted(ranks[t.key] for t in trains)  # the design's order
    for data in (t for t in tasks if t.kind == "data"):
        # Each dataset ranks with the first training that reads it: seed 0's, not after every other seed's.
        first = min((t for t in trains if data.key in t.deps), key=lambda t: ranks[t.key])
        assert ranks[data.key] == ranks[first.key] and first.config["seed"] == 0
    # Seed 0's WorldGrounded training comes before seed 1's real-only one (the table of a seed first).
    w0 = next(t for t in trains if "WorldGrounded" in t.label and t.config["seed"] == 0)
    r1 = next(t for t in trains if "real-only" in t.label and t.config["seed"] == 1)
    assert ranks[w0.key] < ranks[r1.key]


def test_result_matrices_and_failure_counts_of_result_files():
    from r2s2r_envs.evaluation import EvaluationResult

    record = Path(__file__).resolve().parents[1] / "experiments" / "small-data" / "results"
    paths = [record / "base-s0.json", record / "steps-4k-s0.json"]
    results = [EvaluationResult.from_json(p.read_text()) for p in paths]
    m = analysis.result_matrices(paths)  # paths or results: the same
    assert {k: v.tolist() for k, v in m.items()} == {
        k: v.tolist() for k, v in analysis.result_matrices(results).items()
    }
    assert m["success"].shape == m["sort_accuracy"].shape == (2, len(results[0].records))
    assert m["success"][1].tolist() == [float(e.is_success) for e in results[1].records]
    assert m["sort_accuracy"].mean(axis=1).tolist() == pytest.approx([r.summary["sort_accuracy"] for r in results])
    counts = analysis.failure_counts(results)
    assert list(counts.values()) == sorted(counts.values(), reverse=True) and 0 not in counts.values()
    assert sum(counts.values()) == sum(e.failure_cause is not None for r in results for e in r.records)
    summed = {c: sum(r.summary["failure_causes"].get(c, 0) for r in results) for c in counts}
    assert counts == summed  # the results' own summaries agree
    with pytest.raises(ValueError, match="at least one"):
        analysis.result_matrices([])
    short = dataclasses.replace(results[0], records=results[0].records[:3])
    with pytest.raises(ValueError, match="different numbers of episodes"):
        analysis.result_matrices([results[0], short])


def test_bootstrap_interval_matches_the_exact_bootstrap_distribution():
    # One seed, four episodes with values 0, 0, 0, 1: the bootstrap mean is k/4 with k ~ Binomial(4, 1/4):
    # P(k=0) = 0.316 > 2.5%, P(k<=2) = 0.949 < 97.5% <= P(k<=3) = 0.996, so the 95% interval is [0, 0.75].
    cells = {"c": np.array([[0.0, 0.0, 0.0, 1.0]])}
    b = analysis.bootstrap_contrast(cells, {"c": 1.0}, replicates=4000)
    assert b["estimate"] == 0.25
    assert b["ci95"] == [0.0, 0.75]
    constant = analysis.bootstrap_contrast({"c": np.full((3, 5), 0.4)}, {"c": 1.0}, replicates=500)
    assert constant["estimate"] == pytest.approx(0.4) and constant["ci95"] == pytest.approx([0.4, 0.4])


def test_paired_episodes_cancel_in_a_contrast():
    # Two cells that differ by exactly 0.5 on every episode: the paired bootstrap of their difference has no spread.
    base = np.array([[0.0, 0.25, 0.5, 0.0, 0.25]])
    b = analysis.bootstrap_contrast({"a": base + 0.5, "b": base}, {"a": 1.0, "b": -1.0}, replicates=1000)
    assert b["estimate"] == pytest.approx(0.5) and b["ci95"] == pytest.approx([0.5, 0.5])


# Hand-made sort accuracies (2 seeds x 4 episodes, 3 objects) of the four co-trained cells of one method.
HAND = {
    "Ungrounded": [[0, 0, 0, 0], [0, 0, 0, 0]],
    "WorldGrounded": [[1, 1, 0, 0], [1, 1, 1, 1]],
    "BehaviorGrounded": [[0, 0, 1, 0], [0, 0, 0, 1]],
    "FullyGrounded": [[3, 3, 2, 2], [3, 2, 2, 3]],
}
# Cell means: U 0, W 0.25, B 1/12, F 5/6 (objects sorted / 3). World ((W-U) + (F-B)) / 2 = (0.25 + 0.75) / 2 = 0.5;
# behavior ((B-U) + (F-W)) / 2 = (1/12 + 7/12) / 2 = 1/3; interaction (F-B) - (W-U) = 0.75 - 0.25 = 0.5.
HAND_EFFECTS = {"world": 0.5, "behavior": 1 / 3, "interaction": 0.5}


def test_analysis_of_hand_made_result_files(tmp_path):
    design = dataclasses.replace(tiny_design(), sweep_variant=None, bootstrap_replicates=400)
    tasks = design.tasks()
    store = Store(tmp_path)
    written = 0
    for task in tasks:
        if task.kind != "eval":
            continue
        p = task.config["policy"]
        if task.config["env_id"] == "PickSort-Real-v0":
            counts = HAND.get(p["variant"], [[1, 0, 0, 0], [0, 0, 0, 0]])[p["seed"]]
        else:
            counts = [1, 1, 1, 1]  # in its own variant every co-trained policy sorts the first object only
        method = {
            "method": p["method"],
            "policy_class": "tests.HandMade",
            "real_fraction": p["real_fraction"],
            "variant": p["variant"],
            "datasets": [{"sha256": "0" * 64}],
            "training_seed": p["seed"],
            "n_real_demos": 2,
            "n_sim_demos": 2,
        }
        out = store.start("eval", task.key)
        (out / "result.json").write_text(hand_made_result(task.config["env_id"], counts, method))
        store.finish("eval", task.key, {"kind": "eval"})
        written += 1
    assert written == 2 * 5 + 2 * 4  # 2 seeds x (real-only + 4 variants) in the lab, the 4 variants in sim
    report = analysis.analyze(design, tasks, store)
    table = {row["variant"]: row for row in report["tables"]["flow"]}
    assert table["FullyGrounded"]["lab_sort_accuracy"]["mean"] == pytest.approx(5 / 6)
    assert table["FullyGrounded"]["lab_success"]["mean"] == pytest.approx(0.5)  # 4 of 8 episodes sort all 3
    assert table[REAL_ONLY]["lab_sort_accuracy"]["mean"] == pytest.approx(1 / 24)
    assert table["Ungrounded"]["lab_failure_causes"] == {"missed": 8}
    for name, value in HAND_EFFECTS.items():
        effect = report["effects"]["sort_accuracy"][name]["flow"]
        assert effect["estimate"] == pytest.approx(value)
        low, high = effect["ci95"]
        assert low <= value <= high and high - low > 0
    split = report["effects"]["sort_accuracy"]
    assert split["world, nominal behavior (W - U)"]["flow"]["estimate"] == pytest.approx(0.25)
    assert split["behavior, grounded world (F - W)"]["flow"]["estimate"] == pytest.approx(7 / 12)
    # Ungrounded is 0 everywhere and BehaviorGrounded too on success: the success effect of behavior is F - W only.
    assert report["effects"]["success"]["behavior"]["flow"]["estimate"] == pytest.approx(0.25)
    assert split["world minus behavior"]["flow"]["estimate"] == pytest.approx(0.25 - 1 / 12)
    finding = report["findings"]["sort_accuracy"]
    # One method: the findings read its effects, each with its Holm-adjusted p-value over the report's findings.
    assert list(finding["statements"]["interaction"]) == ["flow"]
    stated = finding["statements"]["interaction"]["flow"]
    assert stated["estimate"] == split["interaction"]["flow"]["estimate"] and stated["p_holm"] >= stated["p_value"]
    versus = report["versus_real_only"]["sort_accuracy"]["flow"]["FullyGrounded"]
    assert versus["estimate"] == pytest.approx(5 / 6 - 1 / 24)
    study = {row["figure"]: row for row in report["versus_study"]}
    assert study["real-only success, %"]["study"] == 0.52
    assert study["fully grounded co-training success, %"]["here"] == {"flow": table["FullyGrounded"]["lab_success"]}
    assert study["world grounding effect, points"]["here"] == {"flow": report["effects"]["success"]["world"]["flow"]}
    gain = study["fully grounded minus real-only, points"]
    assert gain["here"] == {"flow": report["versus_real_only"]["success"]["flow"]["FullyGrounded"]}
    more = study["behavior grounding matters more on the nominal world"]["here"]
    assert more == report["findings"]["success"]["behavior_more_with_nominal_world"] and list(more) == ["flow"]
    assert report["intervals"]["version"] == 2 and report["detectable"]["success"]["seeds"] == 2
    failures = {row["variant"]: row for row in report["failures"]}
    # FullyGrounded sorts 3, 3, 2, 2 and 3, 2, 2, 3 objects, always the first ones: the 3rd in 4 of 8 episodes.
    assert failures["FullyGrounded"]["lab_sorted_by_order"] == pytest.approx([1.0, 1.0, 0.5])
    assert failures["FullyGrounded"]["lab_second_after_first"] == {"share": 1.0, "of": 8}
    assert failures["WorldGrounded"]["lab_sorted_by_order"] == pytest.approx([0.75, 0.0, 0.0])
    assert failures["WorldGrounded"]["lab_second_after_first"] == {"share": 0.0, "of": 6}
    assert failures["FullyGrounded"]["sim_sorted_by_order"] == pytest.approx([1.0, 0.0, 0.0])
    gap = failures["FullyGrounded"]["transfer_gap"]  # lab 5/6 against sim 1/3
    assert gap["estimate"] == pytest.approx(5 / 6 - 1 / 3) and gap["ci95"][0] <= 0.5 <= gap["ci95"][1]
    assert failures["Ungrounded"]["transfer_gap"]["estimate"] == pytest.approx(-1 / 3)
    assert failures[REAL_ONLY]["transfer_gap"] is None and failures[REAL_ONLY]["sim_sorted_by_order"] is None
    path = analysis.write_report(design, tasks, store, tmp_path / "report")
    text = path.read_text()
    assert "+50.0 [" in text and "| FullyGrounded | 0.5 |" in text
    assert "## Which axis matters (lab)" in text and "Does behavior grounding matter more" in text
    assert "| flow | FullyGrounded | 100 / 100 / 50 | 100% of 8 | 100 / 0 / 0 | +50.0 [" in text
    assert "| real-only success, % | 52 | flow: " in text and "| world grounding effect, points | +18 | flow: " in text
    assert {p.name for p in (tmp_path / "report").iterdir()} >= {
        "report.md",
        "report.json",
        "variants.png",
        "effects.png",
    }


def _effect(estimate, p):
    return {"estimate": estimate, "ci95": [estimate - 0.1, estimate + 0.1], "p_value": p}


def test_findings_pool_only_what_may_be_pooled_and_correct_for_multiplicity():
    withheld = {"estimate": None, "ci95": None, "withheld": "the methods differ", "heterogeneity": {"p_value": 0.01}}
    effects = {
        "success": {
            # The methods differ on world grounding: the findings read each method, not the pool.
            "world": {"flow": _effect(0.2, 0.001), "bc": _effect(0.0, 0.9), "all methods": withheld},
            "behavior": {"flow": _effect(0.1, 0.2), "bc": _effect(0.1, 0.3), "all methods": _effect(0.1, 0.04)},
            "interaction": {"flow": _effect(-0.1, 0.1), "bc": _effect(-0.1, 0.1), "all methods": _effect(-0.2, 0.002)},
            "world minus behavior": {"flow": _effect(0.1, 0.5), "bc": _effect(0.1, 0.5), "all methods": withheld},
            "behavior, nominal world (B - U)": {"all methods": _effect(0.2, 0.01)},
            "behavior, grounded world (F - W)": {"all methods": withheld},
        },
        "sort_accuracy": {
            "world": {"flow": _effect(-0.2, 0.004)},
            "behavior": {"flow": {"estimate": None, "ci95": None, "missing": ["x"]}},
            "interaction": {"flow": _effect(0.1, 0.02)},
            "world minus behavior": {"flow": _effect(-0.2, 0.0001)},
        },
    }
    found = analysis.findings(effects)
    success = found["success"]
    assert list(success["statements"]["world"]) == ["flow", "bc"]
    assert list(success["statements"]["behavior"]) == ["all methods"]
    # Nine statements with an estimate; Holm multiplies the smallest p by 9, the next by 8, ...
    p_holm = {
        (m, n, w): e["p_holm"]
        for m, f in found.items()
        for n, per in f["statements"].items()
        for w, e in per.items()
        if "p_holm" in e
    }
    assert len(p_holm) == 9
    assert p_holm[("sort_accuracy", "world minus behavior", "flow")] == pytest.approx(9 * 0.0001)
    assert p_holm[("success", "world", "flow")] == pytest.approx(8 * 0.001)
    assert p_holm[("success", "interaction", "all methods")] == pytest.approx(7 * 0.002)
    assert p_holm[("sort_accuracy", "world", "flow")] == pytest.approx(6 * 0.004)
    assert p_holm[("sort_accuracy", "interaction", "flow")] == pytest.approx(5 * 0.02)
    assert success["signs"]["world"] == {"flow": "positive", "bc": "unresolved"}
    # p 0.04 alone would be a verdict; after Holm (0.04 x 4) it is not.
    assert success["signs"]["behavior"] == {"all methods": "unresolved"}
    assert success["behavior_more_with_nominal_world"] == {"all methods": "yes"}
    assert success["larger_axis"] == {"flow": "unresolved", "bc": "unresolved"}
    assert success["behavior_nominal_world"]["all methods"]["estimate"] == 0.2
    one = found["sort_accuracy"]
    assert one["signs"] == {
        "world": {"flow": "negative"},
        "behavior": {"flow": None},
        "interaction": {"flow": "unresolved"},
    }
    assert one["larger_axis"] == {"flow": "behavior"}
    text = analysis.findings_markdown({"findings": found, "effects": effects})
    assert "world grounding: flow: helps, +20.0" in text and "bc: not resolved" in text
    assert "behavior grounding: flow: cannot be computed (cells missing)" in text
    assert "all methods: yes, it adds more on the nominal world" in text and "F - W not pooled" in text
    assert "over the 9 statements above" in text


def test_report_intervals_are_marked_old_and_new(tmp_path, capsys):
    old = {"tables": {}, "effects": {}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    analysis.print_table(tmp_path / "old.json")
    assert "interval method 1: crossed percentile bootstrap" in capsys.readouterr().out
    with pytest.raises(ValueError, match="no measured variance components .*--report-only"):
        analysis.seeds_to_detect(old, 0.05)
    comps = {"seed": 0.001, "episode": 0.0002, "residual": 0.1}
    new = {"intervals": analysis.INTERVALS, "detectable": {"success": {"components": comps, "episodes": 100}}}
    n = analysis.seeds_to_detect(new, 0.1)
    assert n is not None and n >= 2
    assert analysis.seeds_to_detect(new, 0.05) > n  # half the difference needs more seeds
    with pytest.raises(ValueError, match="unknown metric 'speed'"):
        analysis.seeds_to_detect(new, 0.05, metric="speed")
    with pytest.raises(ValueError, match="no comparable cells for 'sweep'"):
        analysis.seeds_to_detect(new, 0.05, table="sweep")


def test_mixture_attribution_on_hand_made_states():
    from r2s2r_envs.ablation.mixture import attribute, calibrate, summarize

    real_s = np.array([[0.0, 0.0], [0.1, 0.0]])
    real_a = np.array([[1.0], [1.0]])
    sim_s = np.array([[10.0, 0.0], [10.1, 0.0]])
    sim_a = np.array([[-1.0], [-1.0]])
    states = np.array([[0.05, 0.0], [10.05, 0.0], [5.05, 0.0]])
    actions = np.array([[1.0], [-1.0], [0.9]])  # real-like on real data, sim-like on sim data, real-like halfway
    out = attribute(states, actions, (real_s, real_a), (sim_s, sim_a), neighbors=2)
    assert out["real_like"].tolist() == [True, False, True]
    assert out["coverage"][0] < 0.1 and out["coverage"][1] > 0.9 and out["coverage"][2] == pytest.approx(0.5)
    assert out["score"][0] == pytest.approx(1.0) and out["score"][1] == pytest.approx(-1.0)
    s = summarize(out)
    assert s["states"] == 3 and s["real_like_share"] == pytest.approx(2 / 3)
    assert sum(c["states"] for c in s["curve"]) == 3
    # Calibration on held-out demos: two demonstrators that act oppositely in overlapping states are told apart.
    rng = np.random.default_rng(0)
    demos = np.repeat(np.arange(10), 20)
    states_r, states_s = rng.normal(size=(200, 2)), rng.normal(size=(200, 2))
    real = (states_r, np.ones((200, 1)) + 0.1 * rng.normal(size=(200, 1)), demos)
    sim = (states_s, -np.ones((200, 1)) + 0.1 * rng.normal(size=(200, 1)), demos)
    assert calibrate(real, sim, neighbors=5) == {"real_demos_real_like": 1.0, "sim_demos_real_like": 0.0}
    # A dimension constant in both demo sets is left out: a policy's deviation there decides nothing.
    const = attribute(
        np.zeros((1, 2)),
        np.array([[1.0, 5.0]]),
        (real_s, np.array([[1.0, 0.0]] * 2)),
        (sim_s, np.array([[-1.0, 0.0]] * 2)),
        1,
    )
    assert const["real_like"].tolist() == [True]


# ---------------------------------------------------------------------- the pipeline on Ray
@pytest.fixture(scope="module")
def ray_local():
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'r2s2r_envs[ray]')")
    import ray

    from r2s2r_envs.ablation.runner import init_ray

    started = init_ray(None, 2)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def first_run(ray_local, tmp_path_factory):
    from r2s2r_envs.ablation.runner import run_ablation

    out = tmp_path_factory.mktemp("ablation")
    design = tiny_design()
    summary = run_ablation(design, out, log=lambda s: None)
    return design, out, summary


@pytest.mark.slow
def test_pipeline_runs_every_task_and_keys_results_by_config_hash(first_run):
    from r2s2r_envs.evaluation import EvaluationResult

    design, out, summary = first_run
    tasks = design.tasks()
    assert summary.total == len(tasks) and summary.ran == len(tasks)
    assert summary.skipped == 0 and not summary.failed and not summary.blocked
    store = Store(out)
    for task in tasks:
        record = store.done_record(task.kind, task.key)
        assert record["key"] == task.key == config_hash(task.kind, task.config, task.deps)
    results = sorted((out / "results").rglob("*.json"))
    assert len(results) == sum(t.kind == "eval" for t in tasks)
    for path in results:
        result = EvaluationResult.from_json(path.read_text())
        # The ablation's evaluations run nominal episodes on the legacy seeds (its records stay comparable).
        assert result.schema_version == RESULT_SCHEMA_VERSION and result.split == "legacy"
        assert result.method["training_seed"] in design.seeds
    assert (out / "leaderboard" / "leaderboard.md").is_file()
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["tasks"]["finished"] == len(tasks) and not report["tasks"]["missing"]
    assert [row["variant"] for row in report["tables"]["flow"]] == [REAL_ONLY, *VARIANTS]
    assert len(report["mixture"]) == len(design.mixture_policies())
    assert (out / "report" / "mixture.png").is_file() and (out / "report" / "sweep.png").is_file()


@pytest.mark.slow
def test_a_batched_evaluation_task_writes_the_records_of_an_unbatched_one(first_run, tmp_path):
    from r2s2r_envs.ablation.tasks import RESULT_FILE, execute_task

    design, out, _ = first_run
    task = next(t for t in design.tasks() if t.kind == "eval" and t.config["episodes"] > 1)
    assert task.batch == task.config["episodes"]  # the first run stepped its episodes together
    batched = json.loads((Store(out).task_dir("eval", task.key) / RESULT_FILE).read_text())
    unbatched_task = dataclasses.replace(task, batch=1).to_dict()
    shutil.copytree(out, tmp_path / "copy")
    record = execute_task(unbatched_task, str(tmp_path / "copy"))
    unbatched = json.loads(Path(record["result"]).read_text())
    assert unbatched["records"] == batched["records"] and unbatched["summary"] == batched["summary"]


@pytest.mark.slow
def test_rerun_skips_finished_tasks_and_redoes_partial_output(first_run):
    from r2s2r_envs.ablation.runner import run_ablation

    design, out, _ = first_run
    tasks = design.tasks()
    again = run_ablation(design, out, log=lambda s: None)
    assert again.skipped == len(tasks) and again.ran == 0
    # A killed evaluation leaves output without its done marker: it is run again, not taken for finished.
    store = Store(out)
    victim = next(t for t in tasks if t.kind == "eval")
    (store.task_dir("eval", victim.key) / "task.json").unlink()
    (store.task_dir("eval", victim.key) / "result.json").write_text("{truncated")
    third = run_ablation(design, out, log=lambda s: None)
    assert third.ran == 1 and third.skipped == len(tasks) - 1
    rewritten = json.loads((store.task_dir("eval", victim.key) / "result.json").read_text())
    assert rewritten["schema_version"] == RESULT_SCHEMA_VERSION


@pytest.mark.slow
def test_a_record_without_weights_trains_again_only_what_a_missing_result_needs(first_run, tmp_path):
    from r2s2r_envs.ablation.runner import run_ablation
    from r2s2r_envs.ablation.store import export_record
    from r2s2r_envs.cli import main as cli_main

    design, out, _ = first_run
    record = export_record(out, tmp_path / "record")  # what a committed record keeps
    assert not list(record.rglob("policy")) and not list(record.rglob("*.hdf5")) and not list(record.rglob("*.npz"))
    assert (record / "report" / "report.json").is_file()
    # Results kept once, compressed: results/ only repeated the store (a run rebuilds it).
    assert not (record / "results").exists() and not list(record.rglob("result.json"))
    tasks = design.tasks()
    assert all((record / "store" / t.kind / t.key / "task.json").is_file() for t in tasks)
    assert all((record / "store/eval" / t.key / "result.json.gz").is_file() for t in tasks if t.kind == "eval")
    again = run_ablation(design, record, log=lambda s: None)
    assert again.ran == 0 and again.skipped == len(tasks)  # every result is there: nothing needs the weights
    assert sorted(p.name for p in (record / "results").rglob("*.json")) == sorted(
        p.name for p in (out / "results").rglob("*.json")
    )
    store = Store(record)
    victim = next(t for t in tasks if t.kind == "eval")
    shutil.rmtree(store.task_dir("eval", victim.key))
    lines: list[str] = []
    third = run_ablation(design, record, log=lines.append)
    (train,) = [t for t in tasks if t.key in victim.deps and t.kind == "train"]
    # The evaluation, its training, and the generated data that training reads (not kept in a record).
    assert third.ran == 2 + len(train.deps) and third.skipped == len(tasks) - third.ran
    assert sum(line.startswith("again    ") for line in lines) == 1 + len(train.deps)
    assert (store.task_dir("train", train.key) / "policy" / "config.json").is_file()
    assert store.is_done("eval", victim.key)
    # Into a directory that holds something: refused, nothing written.
    assert cli_main(["ablation", "--out", str(out), "--export-record", str(record)]) == 2


@pytest.mark.slow
def test_a_failing_task_is_retried_recorded_and_blocks_only_its_dependents(first_run):
    from r2s2r_envs.ablation.runner import run_ablation

    design, out, _ = first_run
    # Three successful demos cannot come out of one attempt: this generation fails every time.
    bad = DataSpec(
        label="impossible",
        domain="sim",
        env_id="PickSort-WorldGrounded-v0",
        episodes=3,
        env_kwargs={"num_objects": 1},
        episode_steps=200,
        max_attempts=1,
    )
    sim = tuple((v, bad if v == "WorldGrounded" else s) for v, s in design.sim)
    broken = dataclasses.replace(design, sim=sim)
    tasks = broken.tasks()
    summary = run_ablation(broken, out, log=lambda s: None)
    bad_key = next(t.key for t in tasks if t.label == "data impossible")
    assert list(summary.failed) == [bad_key]
    assert "GenerationError: stopped after 1 attempts" in summary.failed[bad_key]
    store = Store(out)
    assert store.attempts(bad_key) == broken.max_retries + 1  # retried, then recorded
    assert json.loads(store.failed_path(bad_key).read_text())["task"]["key"] == bad_key
    dependents = {t.key for t in tasks if bad_key in t.deps}
    dependents |= {t.key for t in tasks if set(t.deps) & dependents}
    assert set(summary.blocked) == dependents and dependents
    # Everything else was finished by the first run and reused.
    assert summary.skipped == len(tasks) - 1 - len(dependents) and summary.ran == 0
    report = json.loads((out / "report" / "report.json").read_text())
    assert len(report["tasks"]["missing"]) == 1 + len(dependents)
    world = next(row for row in report["tables"]["flow"] if row["variant"] == "WorldGrounded")
    assert world["lab_success"] is None


def test_seeds_for_answers_from_the_report(tmp_path, capsys):
    from r2s2r_envs.cli import main as cli_main

    comps = {"seed": 0.001, "episode": 0.0002, "residual": 0.1}
    found = {"components": comps, "episodes": 100}
    report = {"intervals": analysis.INTERVALS, "detectable": {"success": found, "sort_accuracy": found}}
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "report.json").write_text(json.dumps(report))
    assert cli_main(["ablation", "--out", str(tmp_path), "--seeds-for", "10"]) == 0
    out = capsys.readouterr().out
    n = analysis.seeds_to_detect(report, 0.10)
    assert f"episode success: 10 points between two co-trained cells need {n} seeds per cell" in out
    # Below what the episode noise allows at 100 episodes: no number of seeds, and the way out.
    assert cli_main(["ablation", "--out", str(tmp_path), "--seeds-for", "0.5"]) == 0
    assert "evaluate more episodes" in capsys.readouterr().out
    assert cli_main(["ablation", "--out", str(tmp_path / "none"), "--seeds-for", "3"]) == 2
    assert "no report at" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["ablation", "--out", str(tmp_path), "--seeds-for", "many"])
    assert "expected percentage points between 0 and 100" in capsys.readouterr().err


def test_one_seed_per_cell_gives_episode_intervals_and_no_detectable_difference():
    rng = np.random.default_rng(0)
    cells = {m: {v: (rng.random((1, 12)) < 0.7).astype(float) for v in VARIANTS} for m in ("flow", "flow-cfg-adda")}
    found = analysis.effects(cells)
    world = found["world"]["flow"]
    assert world["seed_noise"] is False and world["n_seeds"] == 1 and world["ci95"][0] < world["ci95"][1]
    assert "heterogeneity" in found["world"]["all methods"]
    detect = analysis.detectable({(m, v): x for m, c in cells.items() for v, x in c.items()})
    assert detect["mdd"] is None and detect["components"] is None
    report = {"intervals": analysis.INTERVALS, "detectable": {"success": detect, "sort_accuracy": detect}}
    assert "unknown with 1 seed per cell" in analysis.detectable_markdown(report)
    with pytest.raises(ValueError, match="1 seed each: their seed variance is unknown"):
        analysis.seeds_to_detect(report, 0.05)


def test_an_eval_split_runs_the_standard_mix_and_the_tables_read_nominal():
    """``eval_split``: eval tasks name the split, run the standard mix scaled to their episodes, and the analysis
    reads the nominal episodes only; designs without it keep their task keys."""
    from r2s2r_envs.ablation.tasks import _episodes_of
    from r2s2r_envs.evaluation.protocol import evaluate

    design = quick_design()
    plain = {t.key for t in design.tasks({})}
    split = dataclasses.replace(design, eval_split="test", lab_episodes=100, sim_episodes=100)
    check_design(split)
    evals = [t for t in split.tasks({}) if t.kind == "eval"]
    assert evals and all(t.config["split"] == "test" for t in evals)
    assert not {t.key for t in evals} & plain  # evaluations of another protocol: other keys
    assert "eval_split" not in design.to_dict() and AblationDesign.from_dict(split.to_dict()) == split
    assert _episodes_of({"episodes": 200, "split": "test"}) == {
        "split": "test",
        "conditions": {"nominal": 100, "fast-belt": 50, "novel-objects": 50},
    }
    assert _episodes_of({"episodes": 20}) == {"episodes": 20}
    for bad, match in (({"eval_split": "legacy"}, "eval_split must be"), ({"eval_split": "test"}, "multiple of 100")):
        with pytest.raises(DesignError, match=match):
            check_design(dataclasses.replace(design, **bad))

    class Idle:
        def reset(self, seed):
            pass

        def act(self, obs):
            return np.zeros(22)

    result = evaluate(
        "PickSort-Ungrounded-v0",
        Idle(),
        split="test",
        conditions={"nominal": 2, "fast-belt": 1},
        env_kwargs={"num_objects": 1, "episode_steps": 5},
        progress=False,
    )
    assert len(result.records) == 3
    assert analysis.result_matrices([result])["success"].shape == (1, 2)
    assert len(analysis.nominal_records(result)) == 2
