"""Result files stored gzip-compressed (``*.json.gz``, r2s2r_envs.evaluation.result_files): one read for both forms,
the same result and the same content check from either; the leaderboard, the ablation's store and its analysis
read them; ``--export-record`` keeps results compressed, once; and the committed records read back as their
tasks recorded them."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import hand_made_result

from r2s2r_envs.ablation import analysis
from r2s2r_envs.ablation.design import smoke_design
from r2s2r_envs.ablation.runner import check_results_dir, export_results
from r2s2r_envs.ablation.store import RESULT_FILE, Store, export_record
from r2s2r_envs.ablation.tasks import read_result
from r2s2r_envs.evaluation import EvaluationResult
from r2s2r_envs.evaluation.leaderboard import LeaderboardError, build_leaderboard, load_results
from r2s2r_envs.evaluation.result_files import (
    gzip_bytes,
    read_result_bytes,
    read_result_data,
    read_result_file,
    result_files,
)
from r2s2r_envs.evaluation.schema import ResultSchemaError

ROOT = Path(__file__).resolve().parents[1]
LAB = "PickSort-Real-v0"


def _result(env_id: str, sorted_counts: list[int], method: dict) -> str:
    """A result's JSON text as an export writes it: episode ``i`` sorts ``sorted_counts[i]`` of 3 objects."""
    return hand_made_result(env_id, sorted_counts, method, indent=2)


def _method(p: dict) -> dict:
    return {
        "method": p["method"],
        "policy_class": "tests.HandMade",
        "real_fraction": p["real_fraction"],
        "variant": p["variant"],
        "datasets": [{"sha256": "0" * 64}],
        "training_seed": p["seed"],
        "n_real_demos": 2,
        "n_sim_demos": 2,
    }


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    """One result as ``r.json`` and as ``r.json.gz``."""
    text = _result(LAB, [3, 2, 0, 3], _method({"method": "flow", "real_fraction": 0.5, "variant": None, "seed": 0}))
    plain = tmp_path / "r.json"
    plain.write_text(text)
    packed = tmp_path / "r.json.gz"
    packed.write_bytes(gzip_bytes(plain.read_bytes()))
    return plain, packed


def test_a_compressed_result_reads_as_its_json(tmp_path):
    plain, packed = _pair(tmp_path)
    assert read_result_bytes(packed) == plain.read_bytes()
    assert read_result_data(packed) == read_result_data(plain) == json.loads(plain.read_text())
    assert read_result_file(packed) == read_result_file(plain) == EvaluationResult.from_json(plain.read_text())
    # Deterministic and plain gzip: no name, no time, so one result makes one file; gzip and zcat read it.
    data = gzip_bytes(plain.read_bytes())
    assert data == packed.read_bytes() and data[3] == 0 and data[4:8] == b"\0\0\0\0"
    assert gzip.decompress(data) == plain.read_bytes()
    assert result_files(tmp_path) == [plain, packed]


def test_a_tampered_compressed_result_fails_its_content_hash_like_its_json(tmp_path):
    plain, packed = _pair(tmp_path)
    good = packed.read_bytes()
    tampered = plain.read_text().replace('"steps": 100', '"steps": 101', 1)  # valid JSON, another content
    plain.write_text(tampered)
    packed.write_bytes(gzip_bytes(tampered.encode()))
    for path in (plain, packed):
        with pytest.raises(ResultSchemaError, match="content_sha256") as caught:
            read_result_file(path)
        assert str(path) in str(caught.value)
    # A damaged compressed stream (a flipped byte, a cut-off file) is refused as such, never read as a result.
    for name, data in {"flipped": good[:40] + bytes([good[40] ^ 0x10]) + good[41:], "cut": good[:-9]}.items():
        path = tmp_path / f"{name}.json.gz"
        path.write_bytes(data)
        with pytest.raises(ResultSchemaError, match="damaged or cut short|content_sha256|not valid JSON"):
            read_result_file(path)
    # The decompressed text is bounded as a plain file is: a small file cannot expand without limit.
    (tmp_path / "big.json.gz").write_bytes(gzip_bytes(b" " * 100_000))
    assert len(read_result_bytes(tmp_path / "big.json.gz", max_bytes=1_000)) == 1_001


def _results_folder(root: Path, *, compressed: bool) -> Path:
    """Two methods' lab and sim results, 2 seeds each, as ``*.json`` or ``*.json.gz``."""
    for method in ("flow", "bc"):
        for seed in (0, 1):
            for env_id, counts in ((LAB, [3, 3, seed, 0]), ("PickSort-Ungrounded-v0", [3, 2, 3, 3])):
                p = {"method": method, "real_fraction": 0.5, "variant": "Ungrounded", "seed": seed}
                data = _result(env_id, counts, _method(p)).encode()
                path = root / method / f"seed{seed}_{'lab' if env_id == LAB else 'sim'}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                if compressed:
                    path.with_name(path.name + ".gz").write_bytes(gzip_bytes(data))
                else:
                    path.write_bytes(data)
    return root


def test_the_leaderboard_of_compressed_results_is_the_leaderboard_of_json_results(tmp_path):
    plain = _results_folder(tmp_path / "plain" / "results", compressed=False)
    packed = _results_folder(tmp_path / "packed" / "results", compressed=True)
    build_leaderboard(plain, tmp_path / "plain" / "board", title="t")
    build_leaderboard(packed, tmp_path / "packed" / "board", title="t")
    for name in ("leaderboard.md", "index.html"):
        assert (tmp_path / "plain/board" / name).read_text() == (tmp_path / "packed/board" / name).read_text()
    board = json.loads((tmp_path / "packed/board/leaderboard.json").read_text())
    files = [f for row in board["rows"] for cell in row["cells"].values() for f in cell["files"]]
    assert len(files) == 8 and all(f.endswith(".json.gz") for f in files)
    # The same board but for the names of the files it read.
    same = (
        (tmp_path / "packed/board/leaderboard.json").read_text().replace(".json.gz", ".json").replace("packed", "plain")
    )
    assert same == (tmp_path / "plain/board/leaderboard.json").read_text()
    check_results_dir(tmp_path / "packed")  # of the current schema version, compressed or not
    # A damaged compressed result is a damaged result: named, not silently left off the board.
    path = packed / "bc" / "seed1_lab.json.gz"
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(LeaderboardError, match=r"1 file\(s\) under .* look like damaged .*seed1_lab\.json\.gz"):
        load_results(packed)


def _hand_made_run(root: Path):
    """A run directory of the smoke design (one method) whose evaluations finished with hand-made results."""
    design = dataclasses.replace(
        smoke_design(), methods=("flow",), mixture_methods=("flow",), sweep_variant=None, bootstrap_replicates=200
    )
    tasks = design.tasks()
    store = Store(root)
    store.write_manifest(design.to_dict(), "test")
    for task in tasks:
        if task.kind != "eval":
            continue
        p = task.config["policy"]
        counts = [3, p["seed"] + 1, 2, 0] if task.config["env_id"] == LAB else [3, 3, 1, 2]
        out = store.start("eval", task.key)
        (out / RESULT_FILE).write_text(_result(task.config["env_id"], counts, _method(p)))
        store.finish("eval", task.key, {"kind": "eval", "key": task.key})
    return design, tasks, store


def test_an_exported_record_keeps_each_result_once_compressed_and_reports_the_same(tmp_path):
    design, tasks, run = _hand_made_run(tmp_path / "run")
    export_results(design, tasks, run)  # results/: the copies for `r2s2r leaderboard`
    extra = run.root / "results" / "by-hand" / "extra.json"  # a result the store does not hold
    extra.parent.mkdir()
    extra.write_text(
        _result(LAB, [1, 1, 1, 1], _method({"method": "x", "real_fraction": 1.0, "variant": None, "seed": 0}))
    )
    record = export_record(run.root, tmp_path / "record")
    evals = [t for t in tasks if t.kind == "eval"]
    assert len(evals) == 18 and not list(record.rglob(RESULT_FILE))
    for task in evals:
        packed = record / "store" / "eval" / task.key / (RESULT_FILE + ".gz")
        assert gzip.decompress(packed.read_bytes()) == (run.task_dir("eval", task.key) / RESULT_FILE).read_bytes()
        assert read_result(Store(record), task.key) == read_result(run, task.key)
    # results/ repeated the store byte for byte: left out; the one result only it held is kept, compressed.
    assert [p.relative_to(record) for p in result_files(record / "results")] == [Path("results/by-hand/extra.json.gz")]
    assert gzip.decompress((record / "results/by-hand/extra.json.gz").read_bytes()) == extra.read_bytes()
    # The analysis of the compressed record is the analysis of the run: the report, byte for byte.
    analysis.write_report(design, tasks, run, tmp_path / "report-run")
    analysis.write_report(design, tasks, Store(record), tmp_path / "report-record")
    for path in sorted((tmp_path / "report-run").iterdir()):
        assert path.read_bytes() == (tmp_path / "report-record" / path.name).read_bytes(), path.name
    # results/ rebuilt from the record's store: the plain files the run had, byte for byte.
    shutil.rmtree(record / "results")
    export_results(design, tasks, Store(record))
    rebuilt = sorted(p.relative_to(record) for p in (record / "results").rglob("*.json"))
    assert rebuilt == sorted(p.relative_to(run.root) for p in (run.root / "results").rglob("*.json") if p != extra)
    assert all((record / p).read_bytes() == (run.root / p).read_bytes() for p in rebuilt)
    # Exporting the record again changes nothing: the compressed files are deterministic.
    shutil.rmtree(record / "results")
    again = export_record(record, tmp_path / "again")
    digest = {p.relative_to(again): hashlib.sha256(p.read_bytes()).digest() for p in again.rglob("*") if p.is_file()}
    assert digest == {
        p.relative_to(record): hashlib.sha256(p.read_bytes()).digest() for p in record.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("record", ["ablation-cpu", "ablation-quick-drawn"])
def test_committed_records_read_back_as_their_tasks_recorded(record):
    store = Store(ROOT / "experiments" / record)
    done = sorted((store.root / "store" / "eval").glob("*/task.json"))
    assert done and not list((store.root / "store" / "eval").rglob(RESULT_FILE))  # kept compressed
    for path in done:
        task = json.loads(path.read_text())
        assert read_result(store, path.parent.name).summary == task["summary"], path.parent.name
