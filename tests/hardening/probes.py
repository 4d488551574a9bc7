"""Hardening probes (issues 25, 50): bad input fed to the suite as a hostile or careless user would, by kind.

Each probe prepares a damaged or absurd input in a temporary folder (copies only: the shipped files, the zoo
checkpoints and the cached datasets are never touched), runs one ``r2s2r`` command (or, for env inputs and the
``verify="none"`` reader, a short Python program in a subprocess) and records its exit code, wall and CPU time, whether
its output holds a ``Traceback`` and whether the message names what was wrong (a per-probe expected text: the
file, field, run or signal). A probe passes when the command refuses the input (non-zero exit, or the documented
outcome, e.g. the leaderboard skipping a folder named ``x.json`` with the reason), prints no traceback, names what
was wrong, holds none of the probe's forbidden texts (raw ``<script>``, torch's ``weights_only=False`` advice) and,
for sysid logs, fails within 5 s of CPU time.

Three families are measurements run as probes, each a short program that exits 0 when the goal holds:

* ``flips``: seeded single-bit flips (a random byte, a random bit) in a copy of each kind of file the suite reads,
  each read by the suite's own reader; passes when every flip is refused with a message naming the file
  (datasets: flips in the bytes of their arrays, where content lives; other kinds: any byte).
* ``fuzz``: random, boundary, constant and zero actions on the five shipped ids and the joint mode; passes with 0
  exceptions, 0 NaN and 0 observations outside their space.
* ``writers``: a second ``r2s2r generate`` on a file another one is writing (a lock error); ``kill -9`` of a
  generation, and of one of its workers (reported as killed, without the ``__main__`` guard advice), each followed
  by the same command (it resumes; ``datasets verify`` passes; nothing lost).

Five families probe issue 50's findings: ``export`` (an array edited in place, Minari ``--out`` and
``--dataset-id``), ``results`` (result files with a flipped byte, seeded flips read by the leaderboard's reader,
markup in every plot of ``index.html``), ``policies`` (``evaluate`` of policies that raise or return complex
values), ``loaders`` (a one-category behavior model, damaged ablation manifests, an edited lab copy, a hash-free
checkpoint, impossible or mistyped log values) and ``vector`` (a million envs, non-numeric actions).

This module holds the probe definitions (``FAMILIES``) and the check of one probe (``run_probe``). Two things run
them: tests/hardening/test_hardening.py, a slow test per family that CI runs (``make test``), with the sampled
families smaller (``TEST_SIZES``); and benchmarks/hardening_probes.py, which runs every probe at ``FULL_SIZES`` and
writes the record (benchmarks/results/hardening/probes.json, read by benchmarks/results/hardening/README.md).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The installed command beside this interpreter (``python -m r2s2r_envs.cli`` where there is none).
_ENTRY = Path(sys.executable).parent / "r2s2r"
R2S2R = [str(_ENTRY)] if _ENTRY.exists() else [sys.executable, "-m", "r2s2r_envs.cli"]
#: sysid log problems must be reported before fitting starts, within this many seconds of CPU time (the issue's
#: goal; CPU, not wall time, so that other processes on a loaded machine do not count).
SYSID_DEADLINE_S = 5.0
#: Any single probe taking longer than this is killed and recorded as a failure.
PROBE_TIMEOUT_S = 300.0
ZOO = REPO_ROOT / "zoo" / "r2s2r_envs_zoo"  # the zoo's data package (zoo/)
SHIPPED_GROUNDING = REPO_ROOT / "r2s2r_envs" / "grounding" / "groundings" / "default.json"
SHIPPED_BEHAVIOR = REPO_ROOT / "r2s2r_envs" / "behavior" / "models" / "default.json.gz"
SHIPPED_LAB = REPO_ROOT / "r2s2r_envs" / "lab" / "configs" / "default.json"
ENV_ID = "PickSort-Ungrounded-v0"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Probe:
    """One bad input and how the suite must answer it.

    Attributes:
        family: the kind of input (issue 25's list).
        name: what is wrong with it.
        command: the argument list run in a subprocess (cwd: the family's temp folder).
        expect: text (case-insensitive) the output must hold: the file, field, run or signal at fault.
        expect_rc: ``"nonzero"`` (a refusal), ``"zero"`` (accepted, e.g. skipped with a reason) or ``"any"``.
        forbid: texts the output (or ``forbid_in`` files) must not hold.
        forbid_re: regular expressions the output (or ``forbid_in`` files) must not match (e.g. a link that is
            live: ``](`` not escaped as ``\\](``).
        forbid_in: files (relative to the temp folder) searched for ``forbid`` and ``forbid_re`` after the run.
        expect_in: ``(file, text)`` pairs: the file (relative to the temp folder) must exist and hold the text
            after the run (e.g. a method name written escaped, not dropped).
        deadline_s: the command must end within this many seconds of CPU time (sysid logs), else None.
        quick: part of the ``--quick`` subset.
        known: a failure known and kept by design, with the issue that says why (e.g. lab configs carry no hash);
            empty for a probe that must pass. The tests expect such a probe to fail (``xfail``).
    """

    family: str
    name: str
    command: list[str]
    expect: str
    expect_rc: str = "nonzero"
    forbid: tuple[str, ...] = ()
    forbid_re: tuple[str, ...] = ()
    forbid_in: tuple[str, ...] = ()
    expect_in: tuple[tuple[str, str], ...] = ()
    deadline_s: float | None = None
    quick: bool = False
    known: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sizes:
    """How many inputs the sampled families try (seeded: a smaller size tries the first of the same inputs).

    Attributes:
        flips: single-bit flips per file kind (``flips``): ``json`` files, ``checkpoint`` files, lab ``logs``,
            ``dataset`` arrays.
        fuzz_steps: steps fuzzed per id and control mode (``fuzz``).
        result_flips: single-bit flips of a result file read by the leaderboard's reader (``results``).
    """

    flips: dict[str, int]
    fuzz_steps: int
    result_flips: int


#: The record's sizes (benchmarks/hardening_probes.py): the issue's earlier run fuzzed 140,000 steps in all; this is
#: a re-check, sized for a loaded 2-core machine.
FULL_SIZES = Sizes(flips={"json": 120, "checkpoint": 40, "logs": 25, "dataset": 40}, fuzz_steps=10000, result_flips=400)
#: The tests' sizes (tests/hardening/test_hardening.py): the first inputs of the same seeded sequences, so that the
#: families fit the test suite's time on 2 cores.
TEST_SIZES = Sizes(flips={"json": 40, "checkpoint": 10, "logs": 10, "dataset": 15}, fuzz_steps=1000, result_flips=100)


# ----------------------------------------------------------------------------------------------- helpers
def _write_json(path: Path, data: Any) -> Path:
    """Write an edited copy; a copy of a file with a ``content_sha256`` is re-hashed (the probes test the checks
    behind the hash: a file whose hash does not match is refused before them, see the ``flips`` family)."""
    from r2s2r_envs.safe_json import CONTENT_HASH_FIELD, with_content_hash

    if isinstance(data, dict) and CONTENT_HASH_FIELD in data:
        data = with_content_hash(data)
    path.write_text(json.dumps(data, indent=1))
    return path


def _deep_json(path: Path, depth: int = 100_000) -> Path:
    path.write_text("[" * depth + "]" * depth)
    return path


def _flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _evaluate(policy: str | Path, *extra: str, env_id: str = ENV_ID, episodes: int = 1) -> list[str]:
    """``r2s2r evaluate`` of ``policy`` in ``env_id``: ``episodes`` episodes of 20 steps, no progress bar."""
    return [*R2S2R, "evaluate", "--policy", str(policy), "--env", env_id, "--episodes", str(episodes)] + [
        "--episode-steps",
        "20",
        "--no-progress",
        *extra,
    ]


def _generate(env_id: str, *extra: str, out: str | Path, episodes: int = 1, steps: int = 20) -> list[str]:
    """``r2s2r generate`` of ``episodes`` episodes of ``steps`` steps in ``env_id`` (``extra``: its inputs)."""
    return [*R2S2R, "generate", env_id, *extra, "--episodes", str(episodes), "--episode-steps", str(steps)] + [
        "--out",
        str(out),
        "--no-progress",
    ]


def _sysid(logdir: Path, tmp: Path) -> list[str]:
    """``r2s2r sysid --quick`` of the logs ``logdir``, untuned and quiet."""
    return [*R2S2R, "sysid", "--logs", str(logdir), "--out", str(tmp / f"{logdir.name}.json")] + [
        "--tune-episodes",
        "0",
        "--quick",
        "--quiet",
    ]


def _board(tmp: Path, src: Path, out: str, *extra: str) -> list[str]:
    return [*R2S2R, "leaderboard", str(src), "--out", str(tmp / out), *extra]


def _result_file(tmp: Path, out: Path, env_id: str = ENV_ID) -> dict:
    """A 1-episode result of the zoo's real-only policy in ``env_id``, written to ``out`` (its dict returned)."""
    subprocess.run(
        _evaluate("zoo:flow-real-only", "--out", str(out), env_id=env_id), check=True, cwd=tmp, capture_output=True
    )
    return json.loads(out.read_text())


def _dataset(tmp: Path, out: Path) -> None:
    """A generated dataset of two short one-object episodes at ``out``."""
    command = _generate(ENV_ID, "--env-kwargs", '{"num_objects": 1}', out=out, episodes=2, steps=25)
    subprocess.run(command, check=True, cwd=tmp, capture_output=True)


def _smoke_logs(out: Path) -> None:
    """Lab logs of the smoke runs (``excitation.SMOKE_RUNS``) of the simulator at ``out``."""
    from r2s2r_envs.envs.pick_sort import PickSortEnv
    from r2s2r_envs.grounding import excitation

    plans = [p for p in excitation.plan_runs(quick=True) if p.name in excitation.SMOKE_RUNS]
    excitation.log_env(lambda kw: PickSortEnv(**{**kw, "sensors": tuple(kw["sensors"])}), out, seed=1, plans=plans)


def _rehash_logs(logdir: Path) -> None:
    """Writes each run file's hash into the manifest of ``logdir`` (the edited run files pass the hash check)."""
    from r2s2r_envs.grounding.logs import MANIFEST, file_sha256

    manifest = json.loads((logdir / MANIFEST).read_text())
    for entry in manifest["runs"]:
        entry["sha256"] = file_sha256(logdir / entry["file"])
    _write_json(logdir / MANIFEST, manifest)


def _set_value(key: str, index: tuple[int, ...], value: float) -> Callable[[Any], None]:
    """An edit of an HDF5 file: ``value`` at ``index`` of the array ``key``."""

    def edit(f: Any) -> None:
        import numpy as np

        data = np.array(f[key])
        data[index] = value
        f[key][...] = data

    return edit


def _flip_in_array(path: Path, key: str, at: int) -> None:
    """Flips a bit of byte ``at`` of the array ``key`` of the HDF5 file ``path`` (its first chunk when chunked)."""
    import h5py

    with h5py.File(path, "r") as f:
        offset = f[key].id.get_offset()
        if offset is None:
            offset = f[key].id.get_chunk_info(0).byte_offset
    _flip_byte(path, int(offset) + at)


def _at(data: Any, keys: tuple[Any, ...]) -> Any:
    for key in keys:
        data = data[key]
    return data


def _update(*keys: Any, **values: Any) -> Callable[[dict], None]:
    """An edit of a JSON file: ``values`` set in its object at ``keys``."""
    return lambda d: _at(d, keys).update(values)


def _surprise(*keys: Any) -> Callable[[dict], None]:
    """An edit of a JSON file: an unknown key ``surprise`` in its object at ``keys``."""
    return _update(*keys, surprise=1)


def _edited_files(
    tmp: Path, prefix: str, base: dict, cases: list[tuple[str, Callable[[dict], None], str, bool]], deep_quick: bool
) -> list[tuple[str, Path, str, bool]]:
    """``(name, file, expect, quick)``: per case an edited copy of ``base`` (``<prefix>-<name>.json``), then a
    100,000-deep JSON file."""
    files = []
    for name, edit, expect, quick in cases:
        data = json.loads(json.dumps(base))
        edit(data)
        stem = re.sub(r"\W+", "-", name)
        files.append((name, _write_json(tmp / f"{prefix}-{stem}.json", data), expect, quick))
    deep = _deep_json(tmp / f"{prefix}-deep.json")
    return [*files, ("100,000-deep JSON", deep, deep.name, deep_quick)]


def _generate_probes(
    family: str, tmp: Path, env_id: str, files: list[tuple[str, Path, str, bool]], given: Callable[[Path], list[str]]
) -> list[Probe]:
    """A short ``r2s2r generate`` in ``env_id`` of each file (``given``: the arguments that pass it)."""
    return [
        Probe(
            family=family,
            name=name,
            expect=expect,
            quick=quick,
            command=_generate(env_id, *given(path), out=tmp / f"{path.stem}.hdf5"),
        )
        for name, path, expect, quick in files
    ]


# ----------------------------------------------------------------------------------------------- checkpoints
def checkpoints(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    import torch

    from r2s2r_envs.policies.checkpoint import WEIGHTS_FILE, weights_digest

    source = ZOO / "flow-real-only"

    def copy(name: str) -> Path:
        out = tmp / name
        shutil.copytree(source, out)
        return out

    def rehash(ckpt: Path) -> None:
        config = json.loads((ckpt / "config.json").read_text())
        config["weights_sha256"] = weights_digest(ckpt / WEIGHTS_FILE)
        _write_json(ckpt / "config.json", config)

    flipped = copy("flipped")
    _flip_byte(flipped / WEIGHTS_FILE, (flipped / WEIGHTS_FILE).stat().st_size // 2)

    nan = copy("nan-weight")
    state = torch.load(nan / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    key = next(k for k, v in state.items() if torch.is_floating_point(v) and v.numel() > 1)
    state[key].view(-1)[0] = float("nan")  # in an int8-packed file: a row scale, named "<weight>@scale"
    torch.save(state, nan / WEIGHTS_FILE)
    rehash(nan)
    key = key.removesuffix("@scale")  # the loader names the weight the scale belongs to

    nan_stats = copy("nan-stats")
    config = json.loads((nan_stats / "config.json").read_text())
    config["pipeline"]["stats"]["actions"]["mean"][0] = 1e400  # json writes Infinity: a non-finite statistic
    (nan_stats / "config.json").write_text(json.dumps(config, indent=1))

    steps0 = copy("execute-steps-0")
    config = json.loads((steps0 / "config.json").read_text())
    config["config"]["execute_steps"] = 0
    _write_json(steps0 / "config.json", config)

    random_bytes = copy("random-bytes")
    (random_bytes / WEIGHTS_FILE).write_bytes(os.urandom(4096))
    rehash(random_bytes)

    pickle_code = copy("pickle-code")
    import pickle

    class _Evil:
        def __reduce__(self):  # a pickle that would run code when loaded without weights_only
            return (os.system, ("echo PWNED",))

    (pickle_code / WEIGHTS_FILE).write_bytes(pickle.dumps(_Evil()))
    rehash(pickle_code)

    deep = copy("deep-config")
    _deep_json(deep / "config.json")

    never = ("weights_only=False", "PWNED")
    return [
        Probe(
            family="checkpoints",
            name="flipped byte in policy.pt",
            command=_evaluate(flipped),
            expect="policy.pt",
            quick=True,
        ),
        Probe(family="checkpoints", name="NaN weight, re-hashed", command=_evaluate(nan), expect=key),
        Probe(
            family="checkpoints",
            name="non-finite action statistic in config.json",
            command=_evaluate(nan_stats),
            expect="config.json",
        ),
        Probe(
            family="checkpoints",
            name="execute_steps=0 in config.json",
            command=_evaluate(steps0),
            expect="execute_steps",
            quick=True,
        ),
        Probe(
            family="checkpoints",
            name="--execute-steps 0",
            command=_evaluate(source, "--execute-steps", "0"),
            expect="execute",
        ),
        Probe(
            family="checkpoints",
            name="--execute-steps 99 (> action_chunk 16)",
            command=_evaluate(source, "--execute-steps", "99"),
            expect="execute_steps",
        ),
        Probe(
            family="checkpoints",
            name="random bytes as weights, re-hashed",
            command=_evaluate(random_bytes),
            expect="policy.pt",
            forbid=never,
            quick=True,
        ),
        Probe(
            family="checkpoints",
            name="pickle with code as weights, re-hashed",
            command=_evaluate(pickle_code),
            expect="policy.pt",
            forbid=never,
        ),
        Probe(family="checkpoints", name="100,000-deep config.json", command=_evaluate(deep), expect="config.json"),
    ]


# ----------------------------------------------------------------------------------------------- sysid logs
def sysid(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    import h5py
    import numpy as np

    from r2s2r_envs.grounding.logs import MANIFEST, file_sha256

    clean = tmp / "logs-clean"
    _smoke_logs(clean)

    def variant(
        name: str,
        edit_run: Callable[[h5py.File], None] | None = None,
        run: str = "",
        edit_manifest: Callable[[dict], None] | None = None,
        rehash: bool = True,
    ) -> Path:
        out = tmp / f"logs-{name}"
        shutil.copytree(clean, out)
        manifest = json.loads((out / MANIFEST).read_text())
        if edit_run is not None:
            with h5py.File(out / f"{run}.hdf5", "r+") as f:
                edit_run(f)
            if rehash:
                for entry in manifest["runs"]:
                    if entry["file"] == f"{run}.hdf5":
                        entry["sha256"] = file_sha256(out / entry["file"])
        if edit_manifest is not None:
            edit_manifest(manifest)
        _write_json(out / MANIFEST, manifest)
        return out

    def set_attr(key: str, value: Any) -> Callable[[h5py.File], None]:
        def edit(f: h5py.File) -> None:
            f.attrs[key] = value

        return edit

    def delete(key: str) -> Callable[[h5py.File], None]:
        def edit(f: h5py.File) -> None:
            del f[key]

        return edit

    def narrow(key: str, columns: int) -> Callable[[h5py.File], None]:
        def edit(f: h5py.File) -> None:
            data = np.array(f[key])[:, :columns]
            del f[key]
            f[key] = data

        return edit

    def no_heldout(manifest: dict) -> None:
        for entry in manifest["runs"]:
            entry["split"] = "fit"

    def lab_string(manifest: dict) -> None:
        manifest["lab"] = "default"

    def outside(manifest: dict) -> None:
        shutil.copy(tmp / "logs-clean" / manifest["runs"][0]["file"], tmp / "outside.hdf5")
        manifest["runs"][0]["file"] = "../outside.hdf5"

    heldout = variant("no-heldout", edit_manifest=no_heldout)
    for path in heldout.glob("*.hdf5"):  # the run files carry their split too
        with h5py.File(path, "r+") as f:
            f.attrs["split"] = "fit"
    _rehash_logs(heldout)

    flipped = variant("flipped-byte")
    _flip_in_array(flipped / "arm_steps_j1.hdf5", "obs/arm_qpos", 7)

    cases = [
        (
            "one NaN joint angle, manifest re-hashed",
            variant("nan-qpos", _set_value("obs/arm_qpos", (40, 2), np.nan), "arm_steps_j1"),
            "arm_steps_j1",
            True,
        ),
        (
            "inf object position, manifest re-hashed",
            variant("inf-objpos", _set_value("obs/object_pos", (3, 0), np.inf), "belt_ride_0"),
            "belt_ride_0",
            False,
        ),
        (
            "NaN control_dt attribute, re-hashed",
            variant("nan-dt", set_attr("control_dt", float("nan")), "latency_0"),
            "control_dt",
            False,
        ),
        (
            "missing signal obs/object_pos",
            variant("missing-signal", delete("obs/object_pos"), "belt_ride_0"),
            "object_pos",
            False,
        ),
        (
            "obs/arm_qpos with 5 columns, not 7",
            variant("narrow-qpos", narrow("obs/arm_qpos", 5), "arm_steps_j1"),
            "arm_qpos",
            False,
        ),
        ("no held-out runs", heldout, "held-out", False),
        ("manifest 'lab' is a string", variant("lab-string", edit_manifest=lab_string), "'lab'", True),
        (
            "run file outside the folder (../outside.hdf5)",
            variant("outside", edit_manifest=outside),
            "outside.hdf5",
            False,
        ),
        ("flipped byte in a run file", flipped, "arm_steps_j1.hdf5", False),
    ]
    return [
        Probe(
            family="sysid",
            name=name,
            command=_sysid(logdir, tmp),
            expect=expect,
            deadline_s=SYSID_DEADLINE_S,
            quick=quick,
        )
        for name, logdir, expect, quick in cases
    ]


# ----------------------------------------------------------------------------------------------- grounding files
def grounding(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    world, demo = partial(_update, "world"), partial(_update, "demonstrator", "settings")
    cases = [
        ("belt_speed 50 m/s", world(belt_speed=50.0), "belt_speed", True),
        ("object_mass 1e6 kg", world(object_mass=[1e6, 1e6, 1e6]), "object_mass", False),
        ("arm_kp 1e12 with zero arm_kv", world(arm_kp=[1e12] * 7, arm_kv=[0.0] * 7), "arm_k", False),
        ("joint_pos_noise 1e3 rad", world(joint_pos_noise=1e3), "joint_pos_noise", False),
        ("object_pos_offset 1e6 m", world(object_pos_offset=[1e6, 0.0, 0.0]), "object_pos_offset", False),
        ("tuned position_gain -5", demo(position_gain=-5.0), "position_gain", False),
        ("tuned lead_time -100 s", demo(lead_time=-100.0), "lead_time", False),
        ("unknown top-level key", _surprise(), "surprise", True),
        ("unknown key in world", _surprise("world"), "surprise", False),
        ("unknown key in validation", _surprise("validation"), "surprise", False),
        ("unknown key in provenance", _surprise("provenance"), "surprise", False),
    ]
    files = _edited_files(tmp, "grounding", json.loads(SHIPPED_GROUNDING.read_text()), cases, deep_quick=True)
    return _generate_probes("grounding", tmp, "PickSort-WorldGrounded-v0", files, lambda p: ["--grounding", str(p)])


# ----------------------------------------------------------------------------------------------- behavior models
def behavior(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    def swap_limits(d: dict) -> None:
        lim = d["limits"]
        lim["reach_limit_y"], lim["reach_upstream_y"] = lim["reach_upstream_y"], lim["reach_limit_y"]

    def finger(d: dict) -> None:
        d["sources"][0]["approach"]["fingers"][0][1] = 1e6

    cases = [
        ("unknown top-level key", _surprise(), "surprise", True),
        ("unknown key in a source", _surprise("sources", 0), "surprise", False),
        ("unknown key in calibration", _surprise("calibration"), "surprise", False),
        ("unknown key in limits", _surprise("limits"), "surprise", False),
        ("unknown key in provenance", _surprise("provenance"), "surprise", False),
        ("swapped reach limits", swap_limits, "reach_", True),
        ("delay_s 1e6 s", _update("sources", 0, delay_s=1e6), "delay_s", False),
        ("finger target 1e6 rad", finger, "fingers", False),
        ("missing provenance", lambda d: d.pop("provenance"), "provenance", False),
    ]
    base = json.loads(gzip.decompress(SHIPPED_BEHAVIOR.read_bytes()))
    files = _edited_files(tmp, "behavior", base, cases, deep_quick=False)
    probes = _generate_probes(
        "behavior",
        tmp,
        "PickSort-BehaviorGrounded-v0",
        files,
        lambda p: ["--env-kwargs", json.dumps({"behavior": str(p)})],
    )
    api = (
        f"from r2s2r_envs.behavior.fit import BehaviorModelError, load_model\ntry:\n"
        f"    load_model({str(tmp / 'behavior-deep.json')!r})\nexcept BehaviorModelError as exc:\n"
        f"    print(f'refused: {{exc}}')\n    raise SystemExit(1)\nprint('accepted')\n"
    )
    probes.append(
        Probe(
            family="behavior",
            name="load_model() of a 100,000-deep JSON file (Python API)",
            expect="behavior-deep.json",
            command=_python(api),
        )
    )
    return probes


# ----------------------------------------------------------------------------------------------- lab configs
def lab(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    world = partial(_update, "world")
    cases = [
        ("belt_speed 50 m/s", world(belt_speed=50.0), "belt_speed", True),
        ("object_mass 1e6 kg", world(object_mass=[1e6, 1e6, 1e6]), "object_mass", False),
        ("arm_kp 1e12 with zero arm_kv", world(arm_kp=[1e12] * 7, arm_kv=[0.0] * 7), "arm_k", False),
        ("joint_pos_noise 1e3 rad", world(joint_pos_noise=1e3), "joint_pos_noise", False),
        ("object_pos_offset 1e6 m", world(object_pos_offset=[1e6, 0.0, 0.0]), "object_pos_offset", False),
        ("control_latency -100 s", world(control_latency=-100.0), "control_latency", False),
        ("operator reaction_time 1e6 s", _update("operator", reaction_time=1e6), "reaction_time", False),
        ("unknown top-level key", _surprise(), "surprise", True),
        ("unknown key in effects", _surprise("effects"), "surprise", False),
        ("unknown key in operator", _surprise("operator"), "surprise", False),
    ]
    files = _edited_files(tmp, "lab", json.loads(SHIPPED_LAB.read_text()), cases, deep_quick=False)
    probes = _generate_probes("lab", tmp, "PickSort-Real-v0", files, lambda p: ["--lab", str(p)])
    course = _deep_json(tmp / "answer-deep.json")
    probes.append(
        Probe(
            family="lab",
            name="course answer: 100,000-deep JSON",
            expect="answer-deep.json",
            command=[*R2S2R, "course", "check", "0", str(course)],
        )
    )
    return probes


# ----------------------------------------------------------------------------------------------- leaderboard
def leaderboard(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    results = tmp / "results"
    results.mkdir()
    base = results / "base.json"
    record = _result_file(tmp, base)

    def with_method(name: str) -> dict:
        data = json.loads(json.dumps(record))
        data["method"]["method"] = name
        return data

    html = tmp / "results-html"
    html.mkdir()
    _write_json(html / "script.json", with_method("<script>alert(1)</script>"))
    _write_json(html / "link.json", with_method("[x](javascript:alert(1))"))
    _write_json(html / "pipe.json", with_method("a | b\n| forged | row |"))

    folder = tmp / "results-folder"
    folder.mkdir()
    shutil.copy(base, folder / "base.json")
    (folder / "x.json").mkdir()

    dangling = tmp / "results-dangling"
    dangling.mkdir()
    shutil.copy(base, dangling / "base.json")
    (dangling / "gone.json").symlink_to(tmp / "does-not-exist.json")

    deep = tmp / "results-deep"
    deep.mkdir()
    shutil.copy(base, deep / "base.json")
    _deep_json(deep / "deep.json")

    out_file = tmp / "board-is-a-file"
    out_file.write_text("")

    board = partial(_board, tmp)
    return [
        Probe(
            family="leaderboard",
            name="method named <script>: leaderboard.md escapes it",
            command=board(html, "board-html"),
            expect="leaderboard",
            expect_rc="zero",
            forbid=("<script>",),
            forbid_in=("board-html/leaderboard.md", "board-html/index.html"),
            expect_in=(("board-html/leaderboard.md", "&lt;script&gt;"), ("board-html/index.html", "&lt;script&gt;")),
            quick=True,
        ),
        # Markdown shows ``[x\](javascript:...)`` as text: only a ``](`` without the backslash is a live link.
        Probe(
            family="leaderboard",
            name="method named [x](javascript:...): no live link",
            command=board(html, "board-link"),
            expect="leaderboard",
            expect_rc="zero",
            forbid_re=(r"(?<!\\)\]\(javascript:",),
            forbid_in=("board-link/leaderboard.md",),
            expect_in=(("board-link/leaderboard.md", "javascript:alert(1)"),),
        ),
        Probe(
            family="leaderboard",
            name="method name with a newline and | forged | row |: no forged row",
            command=board(html, "board-pipe"),
            expect="leaderboard",
            expect_rc="zero",
            forbid_re=(r"(?m)^\| forged",),
            forbid_in=("board-pipe/leaderboard.md",),
            expect_in=(("board-pipe/leaderboard.md", "forged"),),
        ),
        Probe(
            family="leaderboard",
            name="a directory named x.json: skipped with the reason",
            command=board(folder, "board-folder"),
            expect="x.json",
            expect_rc="zero",
            quick=True,
        ),
        Probe(
            family="leaderboard",
            name="a dangling .json symlink: skipped with the reason",
            command=board(dangling, "board-dangling"),
            expect="gone.json",
            expect_rc="zero",
        ),
        Probe(
            family="leaderboard",
            name="a 100,000-deep result JSON: skipped with the reason",
            command=board(deep, "board-deep"),
            expect="deep.json",
            expect_rc="zero",
        ),
        Probe(
            family="leaderboard",
            name="--out is a file",
            command=board(results, "board-is-a-file"),
            expect="board-is-a-file",
        ),
    ]


# ----------------------------------------------------------------------------------------------- env inputs
_ENV_PROGRAM = """
import gymnasium as gym, numpy as np, r2s2r_envs
env = gym.make({env_id!r}{kwargs})
env.reset(seed=0)
try:
    {call}
except (TypeError, ValueError) as exc:
    print(f"refused: {{type(exc).__name__}}: {{exc}}")
    raise SystemExit(1)
print("accepted")
"""


def env_inputs(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    shape = "env.action_space.shape"
    cases = [
        ("action as a string", "env.step('left')", "action", True),
        ("action as a dict", "env.step({'arm': 1.0})", "action", False),
        ("action as an object array", f"env.step(np.full({shape}, object(), dtype=object))", "action", True),
        ("action as a ragged list", "env.step([[0.0] * 3, [0.0] * 5])", "action", False),
        ("complex action", f"env.step(np.zeros({shape}, dtype=complex))", "action", True),
        ("bool action", f"env.step(np.zeros({shape}, dtype=bool))", "action", False),
        ("action of the wrong shape", "env.step(np.zeros(3, dtype=np.float32))", "action", False),
        (
            "set_state with NaN",
            "s = env.unwrapped.get_state(); s[...] = np.nan; env.unwrapped.set_state(s)",
            "state",
            True,
        ),
        (
            "set_state with inf",
            "s = env.unwrapped.get_state(); s[0] = np.inf; env.unwrapped.set_state(s)",
            "state",
            False,
        ),
        ("set_state with a string", "env.unwrapped.set_state('state')", "state", False),
    ]
    probes = [
        Probe(
            family="env",
            name=name,
            expect=expect,
            quick=quick,
            command=_python(_ENV_PROGRAM.format(env_id=ENV_ID, kwargs="", call=call)),
        )
        for name, call, expect, quick in cases
    ]
    # Documented: Gymnasium wraps the env in HumanRendering, a pygame window; without pygame its make refuses.
    human = _ENV_PROGRAM.replace(
        "except (TypeError, ValueError)", "except (TypeError, ValueError, DependencyNotInstalled)"
    )
    human = (
        "from gymnasium.error import DependencyNotInstalled\ntry:\n"
        + "".join(
            "    " + line + "\n"
            for line in human.format(env_id=ENV_ID, kwargs=", render_mode='human'", call="env.render()")
            .strip()
            .splitlines()
        )
        + "except DependencyNotInstalled as exc:\n    print(f'refused: {exc}')\n    raise SystemExit(1)\n"
    )
    probes.append(
        Probe(family="env", name='render_mode="human" without pygame', expect="pygame", command=_python(human))
    )
    return probes


# ----------------------------------------------------------------------------------------------- command line
_FACTORIES = '''
"""Factories for the CLI probes."""
NOT_CALLABLE = 42


def raises(env):
    raise RuntimeError("the factory broke")


def returns_int(env):
    return 3


class NoAct:
    def reset(self, seed):
        pass


def returns_no_act(env):
    return NoAct()
'''


def cli(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    (tmp / "probe_factories.py").write_text(_FACTORIES)
    (tmp / "out-dir.json").mkdir()

    zoo = "zoo:flow-real-only"
    proc = "/proc/r2s2r-probe"
    factory = "probe_factories"
    bad_kwargs = [*R2S2R, "generate", ENV_ID, "--episodes", "1", "--env-kwargs", "{num_objects: 1"]
    cases = [
        (
            "evaluate --out unwritable (/proc)",
            f"{proc}/result.json",
            _evaluate(zoo, "--out", f"{proc}/result.json"),
            True,
        ),
        ("evaluate --out is a directory", "out-dir.json", _evaluate(zoo, "--out", str(tmp / "out-dir.json")), False),
        ("evaluate --out without .json", "result.txt", _evaluate(zoo, "--out", str(tmp / "result.txt")), False),
        ("evaluate --video .avi", "video.avi", _evaluate(zoo, "--video", str(tmp / "video.avi")), True),
        (
            "evaluate --video unwritable (/proc)",
            f"{proc}/video.mp4",
            _evaluate(zoo, "--video", f"{proc}/video.mp4"),
            False,
        ),
        ("factory that raises", f"{factory}.raises", _evaluate(f"{factory}:raises"), True),
        (
            "factory that returns a non-policy (int)",
            f"{factory}.returns_int",
            _evaluate(f"{factory}:returns_int"),
            False,
        ),
        ("factory that returns an object without act", "act", _evaluate(f"{factory}:returns_no_act"), False),
        ("module:name that is not callable", "NOT_CALLABLE", _evaluate(f"{factory}:NOT_CALLABLE"), False),
        ("module:name that does not exist", "missing_factory", _evaluate(f"{factory}:missing_factory"), False),
        (
            "--policy folder that does not exist",
            "no-such-checkpoint",
            _evaluate(str(tmp / "no-such-checkpoint")),
            False,
        ),
        (
            "unknown env id",
            "PickSort-Nope-v0",
            [*R2S2R, "evaluate", "--policy", zoo, "--env", "PickSort-Nope-v0", "--episodes", "1"],
            False,
        ),
        (
            "evaluate --episodes -1",
            "episodes",
            [*R2S2R, "evaluate", "--policy", zoo, "--env", ENV_ID, "--episodes", "-1", "--no-progress"],
            False,
        ),
        ("generate --env-kwargs not JSON", "env-kwargs", [*bad_kwargs, "--out", str(tmp / "g.hdf5")], False),
        # Port 1 on this machine: nothing listens (never 'auto', which joins whatever cluster runs here).
        (
            "ablation --address to a cluster it cannot reach",
            "127.0.0.1:1",
            [*R2S2R, "ablation", "--smoke", "--address", "127.0.0.1:1", "--out", str(tmp / "ablation")],
            False,
        ),
    ]
    return [
        Probe(family="cli", name=name, expect=expect, command=command, quick=quick)
        for name, expect, command, quick in cases
    ]


# ----------------------------------------------------------------------------------------------- datasets
_NONE_READ = """
from r2s2r_envs.datasets import DatasetError, open_dataset
try:
    with open_dataset({path!r}, verify="none") as f:
        {read}
except DatasetError as exc:
    print(f"refused: {{type(exc).__name__}}: {{exc}}")
    raise SystemExit(1)
print("accepted")
"""


def datasets(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    import h5py

    from r2s2r_envs.datasets.writer import _store_content_hash

    base = tmp / "base.hdf5"
    _dataset(tmp, base)

    def copy(name: str) -> Path:
        out = tmp / f"{name}.hdf5"
        shutil.copy(base, out)
        return out

    def restamp(f: h5py.File) -> None:
        _store_content_hash(f, {int(g.attrs["demo_id"]): str(g.attrs["sha256"]) for g in f["data"].values()})

    flipped = copy("flipped-byte")
    _flip_in_array(flipped, "data/demo_0/actions", 5)

    edited_value = copy("edited-value")  # a changed number with valid checksums: only the content hash sees it
    with h5py.File(edited_value, "r+") as f:
        f["data/demo_0/rewards"][0] = f["data/demo_0/rewards"][0] + 1.0

    bad_json = copy("bad-json-attr")
    with h5py.File(bad_json, "r+") as f:
        f.attrs["provenance"] = "{not json"

    missing = copy("missing-actions")
    with h5py.File(missing, "r+") as f:
        del f["data/demo_0/actions"]

    passwd = copy("world-passwd")
    with h5py.File(passwd, "r+") as f:
        generation = json.loads(f.attrs["generation"])
        generation["env_kwargs"]["world"] = "/etc/passwd"
        f.attrs["generation"] = json.dumps(generation)
        env_args = json.loads(f["data"].attrs["env_args"])
        env_args["env_kwargs"]["world"] = "/etc/passwd"
        f["data"].attrs["env_args"] = json.dumps(env_args)
        restamp(f)

    fmt = copy("format-mark")
    with h5py.File(fmt, "r+") as f:
        f.attrs["r2s2r_format"] = "someone.else"

    parts = copy("empty-content-parts")
    with h5py.File(parts, "r+") as f:
        f.attrs["content_parts"] = "{}"

    verify = [*R2S2R, "datasets", "verify"]
    return [
        Probe(
            family="datasets",
            name="flipped byte in an actions chunk",
            command=[*verify, str(flipped)],
            expect=flipped.name,
            quick=True,
        ),
        Probe(
            family="datasets",
            name="edited reward, checksums intact",
            command=[*verify, str(edited_value)],
            expect="demo 0",
        ),
        Probe(
            family="datasets",
            name="verify='none' read of a non-JSON provenance attribute",
            command=_python(_NONE_READ.format(path=str(bad_json), read="f.provenance")),
            expect="provenance",
            quick=True,
        ),
        Probe(
            family="datasets",
            name="verify='none' read of a demo without actions",
            command=_python(_NONE_READ.format(path=str(missing), read="f.demo(0)")),
            expect="actions",
        ),
        Probe(
            family="datasets",
            name="datasets verify: non-JSON provenance attribute",
            command=[*verify, str(bad_json)],
            expect="provenance",
        ),
        Probe(
            family="datasets",
            name="replay of env kwargs world=/etc/passwd (re-hashed)",
            command=[*R2S2R, "replay", str(passwd), "--demo", "0", "--check"],
            expect="/etc/passwd",
            quick=True,
        ),
        Probe(
            family="datasets", name="r2s2r_format attribute edited", command=[*verify, str(fmt)], expect="r2s2r_format"
        ),
        Probe(family="datasets", name="empty content_parts", command=[*verify, str(parts)], expect="content_parts"),
        Probe(
            family="datasets",
            name="verify --expect another hash",
            expect="expect",
            command=[*verify, str(base), "--expect", "0" * 64],
        ),
    ]


# ----------------------------------------------------------------------------------------------- flipped bytes
_FLIP_PROGRAM = r"""
import json, shutil, sys
from pathlib import Path
import numpy as np

kind, source, target, n, ranges = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])


def read(path):
    if kind == "grounding file":
        from r2s2r_envs.grounding.result import load_grounding
        load_grounding(path)
    elif kind == "lab config":
        from r2s2r_envs.lab.config import load_lab
        load_lab(path)
    elif kind == "behavior model":
        from r2s2r_envs.behavior.fit import load_model
        load_model(path)
    elif kind == "result file":
        from r2s2r_envs.evaluation.leaderboard import load_results
        results, skipped = load_results(path)
        if skipped:
            raise ValueError("; ".join(f"skipped {p}: {why}" for p, why in skipped))
    elif kind.startswith("checkpoint"):
        from r2s2r_envs.policies import load_policy
        load_policy(path)
    elif kind.startswith("lab log"):
        from r2s2r_envs.grounding.log_checks import check_logs
        from r2s2r_envs.grounding.logs import read_logs
        check_logs(read_logs(path))
    elif kind == "dataset":
        from r2s2r_envs.datasets.generate import verify_file
        verify_file(path)
    else:
        raise SystemExit(f"unknown kind {kind}")


work = Path("flip-work")
shutil.rmtree(work, ignore_errors=True)
if source.is_dir():
    shutil.copytree(source, work)
    path, flipped = work, work / target
else:
    work.mkdir()
    path = flipped = work / source.name
    shutil.copy(source, path)
original = flipped.read_bytes()
read(path)  # the unflipped copy must read
rng = np.random.default_rng(0)
spans = ranges or [[0, len(original)]]
sizes = np.array([b - a for a, b in spans], dtype=float)
examples = {k: [] for k in ("refused naming the file", "refused without naming it", "accepted")}
for _ in range(n):
    a, b = spans[rng.choice(len(spans), p=sizes / sizes.sum())]
    offset, bit = int(rng.integers(a, b)), int(rng.integers(0, 8))
    data = bytearray(original)
    data[offset] ^= 1 << bit
    flipped.write_bytes(bytes(data))
    try:
        read(path)
        outcome, why = "accepted", ""
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        named = flipped.name in str(exc) or str(path) in str(exc)
        outcome = "refused naming the file" if named else "refused without naming it"
    context = original[max(0, offset - 12):offset + 12]
    examples[outcome].append(f"byte {offset} bit {bit} near {context!r}" + (f" -> {why[:160]}" if why else ""))
flipped.write_bytes(original)
for outcome, lines in examples.items():
    for line in lines[:4]:
        print(f"{outcome}: {line}")
summary = ", ".join(f"{len(v)} {k}" for k, v in examples.items())
print(f"{kind} ({flipped.name}): {n} single-bit flips: {summary}")
raise SystemExit(0 if len(examples["refused naming the file"]) == n else 1)
"""


def flips(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    """A flipped bit in every kind of file the suite reads: is it detected (refused naming the file)?"""
    import h5py

    inputs = tmp / "inputs"
    inputs.mkdir()
    results = inputs / "results"
    results.mkdir()
    _result_file(tmp, results / "result.json")
    dataset = inputs / "data.hdf5"
    _dataset(tmp, dataset)
    chunks: list[list[int]] = []  # where the dataset's arrays lie: a flip there changes content

    def visit(_name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset) and obj.size:
            if obj.chunks is None:
                if obj.id.get_offset() is not None:
                    chunks.append([obj.id.get_offset(), obj.id.get_offset() + obj.id.get_storage_size()])
            else:
                for i in range(obj.id.get_num_chunks()):
                    info = obj.id.get_chunk_info(i)
                    chunks.append([info.byte_offset, info.byte_offset + info.size])

    with h5py.File(dataset, "r") as f:
        f.visititems(visit)
    logs = inputs / "logs"
    _smoke_logs(logs)

    n = sizes.flips
    return [
        flip_probe("grounding file", SHIPPED_GROUNDING, "", n["json"]),
        lab_config_flips(sizes),
        flip_probe("behavior model", SHIPPED_BEHAVIOR, "", n["json"]),
        flip_probe("result file", results, "result.json", n["json"]),
        flip_probe("checkpoint config.json", ZOO / "flow-real-only", "config.json", n["checkpoint"]),
        flip_probe("checkpoint policy.pt", ZOO / "flow-real-only", "policy.pt", n["checkpoint"]),
        flip_probe("lab log manifest", logs, "manifest.json", n["logs"]),
        flip_probe("lab log run file", logs, "arm_steps_j1.hdf5", n["logs"]),
        flip_probe("dataset", dataset, "", n["dataset"], chunks),
    ]


def flip_probe(kind: str, source: Path, target: str, n: int, ranges: list[list[int]] | None = None, **kw: Any) -> Probe:
    """``n`` seeded single-bit flips of ``source`` (or of ``target`` in the folder ``source``), each read by the
    suite's reader of ``kind``; in ``ranges`` (byte spans) if given, else anywhere in the file."""
    return Probe(
        family="flips",
        name=f"a flipped bit in a {kind} ({n} flips, {'its arrays' if ranges else 'any byte'})",
        expect_rc="zero",
        expect="single-bit flips",
        command=_python(_FLIP_PROGRAM) + [kind, str(source), target, str(n), json.dumps(ranges or [])],
        quick=kind in ("grounding file", "checkpoint policy.pt"),
        **kw,
    )


def lab_config_flips(sizes: Sizes = FULL_SIZES) -> Probe:
    """Flips in the shipped lab config: some leave valid JSON with a value within bounds, accepted (issue 25)."""
    return flip_probe(
        "lab config",
        SHIPPED_LAB,
        "",
        sizes.flips["json"],
        known="issue 25: lab configs are written by hand and carry no hash (a hash would refuse every legitimate "
        "edit), so a flip that leaves valid JSON with a value within bounds is read",
    )


# ----------------------------------------------------------------------------------------------- fuzzing
FUZZ_IDS = (
    "PickSort-Ungrounded-v0",
    "PickSort-WorldGrounded-v0",
    "PickSort-BehaviorGrounded-v0",
    "PickSort-FullyGrounded-v0",
    "PickSort-Real-v0",
)

_FUZZ_PROGRAM = r"""
import sys
import gymnasium as gym, numpy as np, r2s2r_envs

env_id, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = gym.make(env_id, control_mode=mode, episode_steps=200)
space = env.action_space
rng = np.random.default_rng(0)
exceptions, nan, outside, episodes = [], 0, 0, 0


def check(obs):
    global nan, outside
    flat = np.concatenate([np.ravel(np.asarray(v, dtype=np.float64)) for v in obs.values()])
    nan += int(not np.all(np.isfinite(flat)))
    outside += int(not env.observation_space.contains(obs))


obs, _ = env.reset(seed=0)
check(obs)
for t in range(steps):
    kind = rng.integers(0, 4)  # uniform; at the bounds; sticky extremes; zeros
    if kind == 0:
        action = rng.uniform(space.low, space.high)
    elif kind == 1:
        action = np.where(rng.random(space.shape) < 0.5, space.low, space.high)
    elif kind == 2:
        action = np.full(space.shape, rng.choice([-1.0, 1.0]))
    else:
        action = np.zeros(space.shape)
    try:
        obs, reward, terminated, truncated, info = env.step(action.astype(space.dtype))
    except Exception as exc:
        exceptions.append(f"step {t}: {type(exc).__name__}: {exc}"[:200])
        obs, _ = env.reset(seed=t)
        episodes += 1
        continue
    check(obs)
    nan += int(not np.isfinite(reward))
    if terminated or truncated:
        episodes += 1
        obs, _ = env.reset(seed=int(rng.integers(0, 2**31)))
        check(obs)
for line in exceptions[:5]:
    print(line)
print(f"{env_id} {mode}: {steps} fuzzed steps, {episodes} episodes: {len(exceptions)} exceptions, {nan} NaN, "
      f"{outside} observations outside their space")
raise SystemExit(0 if not exceptions and not nan and not outside else 1)
"""


def fuzz(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    """Random, boundary and constant actions on every shipped id (and the joint mode): 0 exceptions, 0 NaN."""
    cases = [(env_id, "task") for env_id in FUZZ_IDS] + [("PickSort-Ungrounded-v0", "joint")]
    return [
        Probe(
            family="fuzz",
            name=f"{sizes.fuzz_steps} fuzzed steps, {env_id}, {mode} control",
            expect_rc="zero",
            expect="fuzzed steps",
            command=_python(_FUZZ_PROGRAM) + [env_id, mode, str(sizes.fuzz_steps)],
            quick=env_id == "PickSort-Ungrounded-v0" and mode == "task",
        )
        for env_id, mode in cases
    ]


# ----------------------------------------------------------------------------------------------- writers
_WRITERS_PROGRAM = r"""
import json, os, signal, subprocess, sys, time
from pathlib import Path

r2s2r, case, episodes = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
out = Path(f"{case}.hdf5")
generate = [*r2s2r, "generate", "PickSort-Ungrounded-v0", "--episodes", str(episodes), "--env-kwargs",
            '{"num_objects": 1}', "--episode-steps", "60", "--out", str(out), "--no-progress"]


def started(proc, demos=1, limit=120.0):
    # wait until the first writer has written at least `demos` demos (the file exists and is locked)
    import h5py
    t0 = time.time()
    while time.time() - t0 < limit and proc.poll() is None:
        time.sleep(0.5)
        try:
            with h5py.File(out, "r", locking=False) as f:
                if len(f.get("data", {})) >= demos:
                    return True
        except (OSError, KeyError):
            pass
    return False


if case == "worker":
    generate += ["--workers", "2"]
first = subprocess.Popen(generate, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if not started(first, demos=1 if case == "concurrent" else 3):
    first.kill()
    print(f"the first writer did not start: {first.communicate()[0][-400:]}")
    raise SystemExit(2)
if case == "concurrent":
    second = subprocess.run(generate, capture_output=True, text=True)
    first.kill()
    first.wait()
    print(second.stdout + second.stderr)
    print(f"second writer: exit {second.returncode}")
    raise SystemExit(0 if second.returncode != 0 else 3)
if case == "worker":  # kill -9 one generation worker (not the resource tracker), let the parent report it
    children = Path(f"/proc/{first.pid}/task/{first.pid}/children").read_text().split()
    workers = [int(c) for c in children if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()]
    os.kill(workers[0], signal.SIGKILL)
    try:
        told = first.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        first.kill()
        told = first.communicate()[0]
    print(told.strip()[-600:])
    print(f"generate after one of its workers was killed: exit {first.returncode}")
    if first.returncode == 0:
        raise SystemExit(1)
else:
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
verify = subprocess.run([*r2s2r, "datasets", "verify", str(out)], capture_output=True, text=True)
print(f"after kill -9: datasets verify exit {verify.returncode}: {(verify.stdout + verify.stderr).strip()[-300:]}")
again = subprocess.run(generate, capture_output=True, text=True)
print(f"the same command again: exit {again.returncode}: {(again.stdout + again.stderr).strip()[-300:]}")
verify = subprocess.run([*r2s2r, "datasets", "verify", str(out)], capture_output=True, text=True)
import h5py
with h5py.File(out, "r") as f:
    demos = len(f["data"])
print(f"then datasets verify exit {verify.returncode}; the file holds {demos} of {episodes} demos; resumed")
raise SystemExit(0 if again.returncode == 0 and verify.returncode == 0 and demos == episodes else 1)
"""


def writers(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    """Concurrent writers and kill -9 during generation (the issue: unchanged, a clear lock error, nothing lost)."""
    return [
        Probe(
            family="writers",
            name="a second generate on a file another process is writing",
            expect="another process is writing",
            expect_rc="zero",  # the program exits 0 when the second writer was refused
            command=_python(_WRITERS_PROGRAM) + [json.dumps(R2S2R), "concurrent", "40"],
            quick=True,
        ),
        Probe(
            family="writers",
            name="kill -9 during generate, then the same command again",
            expect_rc="zero",
            expect="resumed",
            command=_python(_WRITERS_PROGRAM) + [json.dumps(R2S2R), "killed", "12"],
        ),
        # The message must say the worker was killed, without the `__main__` guard advice (not the cause here).
        Probe(
            family="writers",
            name="kill -9 one of generate --workers 2's workers, then the same command again",
            expect_rc="zero",
            expect="killed by SIGKILL",
            forbid=("__main__",),
            command=_python(_WRITERS_PROGRAM) + [json.dumps(R2S2R), "worker", "16"],
        ),
    ]


# ----------------------------------------------------------------------------------------------- issue 50's families
def export(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    """``r2s2r datasets export`` of a file with an array edited in place (HDF5 checksum rewritten with it), and
    Minari output paths and ids from the user (item 1 and 4)."""
    import h5py

    from r2s2r_envs.datasets.toy import write_synthetic_dataset

    write_synthetic_dataset(tmp / "sim.hdf5", [5, 4])
    shutil.copy(tmp / "sim.hdf5", tmp / "edited.hdf5")
    with h5py.File(tmp / "edited.hdf5", "r+") as f:
        actions = f["data"][sorted(f["data"])[0]]["actions"]
        actions[0, 0] = actions[0, 0] + 0.5

    def run(source: str, fmt: str, out: str, *extra: str) -> list[str]:
        return [*R2S2R, "datasets", "export", source, "--format", fmt, "--out", out, "--no-progress", *extra]

    probes = [
        Probe(
            family="export",
            name=f"{fmt} export of a file with an action edited in place (checksum rewritten)",
            command=run("edited.hdf5", fmt, f"edited-{fmt}"),
            expect="edited.hdf5: the arrays of demo 0 do not match",
            quick=fmt == "lerobot",
        )
        for fmt in ("lerobot", "minari")
    ]
    probes.append(
        Probe(
            family="export",
            name="minari export to a relative --out (the form docs/interop.md shows)",
            command=run("sim.hdf5", "minari", "rel/minari"),
            expect="wrote",
            expect_rc="zero",
            expect_in=(("rel/minari/r2s2r/namespace_metadata.json", ""),),
            quick=True,
        )
    )
    for name, dataset_id in [("no version", "foo"), ("../ in it", "../../escaped/x-v0"), ("absolute", "/abs/x-v0")]:
        probes.append(
            Probe(
                family="export",
                name=f"minari --dataset-id {dataset_id!r} ({name}): refused, nothing outside --out",
                command=run("sim.hdf5", "minari", "out/minari", "--dataset-id", dataset_id),
                expect=f"--dataset-id {dataset_id!r} is not a Minari dataset id",
                forbid=("Traceback", "TypeError"),
            )
        )
    return probes


_MARKUP = '<a href="https://example.com/x">link</a>'
#: A tag plotly would draw (``<a>``, ``<b>``, ``<i>``, ``<br>``, ...) as it reaches the page: plotly's JSON writes
#: ``<`` as ``\u003c``; an escaped text holds ``&lt;`` instead. plotly.js itself holds no such sequence.
_RAW_CHART_TAG = r"\\u003c/?(?:a|b|i|br|em|s|u|sub|sup|span)\b"

_RESULT_FLIP_PROGRAM = """
import json, random, shutil, sys
from pathlib import Path
from r2s2r_envs.evaluation.leaderboard import LeaderboardError, load_results

source, count, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
data = source.read_bytes()
rng = random.Random(seed)
work = Path("result-flip-work")
tally = {"refused naming the file": 0, "read with equal content": 0, "silently skipped": 0,
         "silently accepted changed": 0, "refused without naming it": 0, "other error": 0}
clean = load_results(source.parent)[0][0][1].to_dict()
for k in range(count):
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    shutil.copy(source.parent / "other.json", work / "other.json")
    flipped = bytearray(data)
    flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
    (work / "result.json").write_bytes(bytes(flipped))
    try:
        results, skipped = load_results(work)
    except LeaderboardError as exc:
        tally["refused naming the file" if "result.json" in str(exc) else "refused without naming it"] += 1
        continue
    except Exception as exc:
        print(f"flip {k}: {type(exc).__name__}: {exc}")
        tally["other error"] += 1
        continue
    mine = [r for p, r in results if p.endswith("result.json")]
    if not mine:
        tally["silently skipped"] += 1
    elif mine[0].to_dict() == clean:
        tally["read with equal content"] += 1
    else:
        tally["silently accepted changed"] += 1
print(json.dumps(tally))
bad = count - tally["refused naming the file"] - tally["read with equal content"]
print(f"{count} flips of a result file: {tally['refused naming the file']} refused naming result.json, "
      f"{tally['silently skipped']} silently skipped, {tally['silently accepted changed']} silently accepted")
raise SystemExit(1 if bad else 0)
"""


def results(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    """Result files that look damaged (a flipped byte) must stop the leaderboard unless --skip-damaged (item 2);
    markup in result texts must not reach a chart (item 3)."""
    inputs = tmp / "inputs"
    inputs.mkdir()
    record = _result_file(tmp, inputs / "result.json")
    other = json.loads(json.dumps(record))
    other["method"]["training_seed"] = 7
    _write_json(inputs / "other.json", other)
    text = (inputs / "result.json").read_text()

    def folder(name: str, edit: Callable[[str], bytes]) -> Path:
        out = tmp / name
        out.mkdir()
        shutil.copy(inputs / "other.json", out / "other.json")
        (out / "result.json").write_bytes(edit(text))
        return out

    def flip_at(index: int) -> Callable[[str], bytes]:
        def edit(t: str) -> bytes:
            raw = bytearray(t.encode())
            raw[index] ^= 0x01
            return bytes(raw)

        return edit

    broken = folder("invalid-json", flip_at(text.index('"records"')))  # '"' -> '#': not JSON
    format_value = folder("format-value", flip_at(text.index("evaluation_result")))
    format_key = folder("format-key", flip_at(text.index('"format"') + 2))
    # Two rows evaluated in sim and in the lab: every plot of the page is drawn (lab plots and the ranking).
    lab_record = _result_file(tmp, inputs / "lab.json", "PickSort-Real-v0")
    markup = tmp / "markup"
    markup.mkdir()
    for row in range(2):
        for where, env_result in (("sim", record), ("lab", lab_record)):
            data = json.loads(json.dumps(env_result))
            data["method"]["method"] = f"{_MARKUP} {row}"
            data["method"]["variant"] = "<b>bold</b>"
            _write_json(markup / f"m{row}-{where}.json", data)

    board = partial(_board, tmp)
    probes = [
        Probe(
            family="results",
            name=f"a result file with a flipped byte ({what}): the build fails, naming it",
            command=board(src, f"board-{src.name}"),
            expect="result.json",
            forbid=("Traceback",),
            quick=src is broken,
        )
        for what, src in (("invalid JSON", broken), ("format value", format_value), ("format key", format_key))
    ]
    probes.append(
        Probe(
            family="results",
            name="the same with --skip-damaged: built, the file listed as skipped",
            command=board(broken, "board-skip", "--skip-damaged"),
            expect="skipped",
            expect_rc="zero",
            expect_in=(("board-skip/leaderboard.json", "result.json"),),
        )
    )
    probes.append(
        Probe(
            family="results",
            name="method <a href=...> and variant <b>: no tag in any plot of index.html",
            command=board(markup, "board-markup"),
            expect="rows",
            expect_rc="zero",
            forbid_re=(_RAW_CHART_TAG,),
            forbid_in=("board-markup/index.html",),
            expect_in=(
                ("board-markup/index.html", "&lt;a href="),
                ("board-markup/index.html", 'Plotly.newPlot(                        "plot-lab-variant-0"'),
                ("board-markup/index.html", 'Plotly.newPlot(                        "plot-sim-vs-lab"'),
            ),
            quick=True,
        )
    )
    probes.append(
        Probe(
            family="results",
            name=f"{sizes.result_flips} seeded single-bit flips of a result file: none skipped or accepted silently",
            command=_python(_RESULT_FLIP_PROGRAM) + [str(inputs / "result.json"), str(sizes.result_flips), "50"],
            expect="silently skipped",
            expect_rc="zero",
        )
    )
    return probes


_POLICIES = """
\"\"\"Policies for the policy-exception probes.\"\"\"
import numpy as np


class Raising:
    def reset(self, seed):
        self.t = 0

    def act(self, obs):
        self.t += 1
        if self.t >= 2:
            raise KeyError("object_pos")
        return np.zeros(22, dtype=np.float32)


class Complex(Raising):
    def act(self, obs):
        return np.zeros(22) + 1j


class ResetRaising(Raising):
    def reset(self, seed):
        raise RuntimeError("CUDA out of memory")
"""


def policies(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    """``r2s2r evaluate`` of policies that raise or return complex values (item 12): recorded failures, the run
    goes on, the result file is written."""
    (tmp / "probe_policies.py").write_text(_POLICIES)
    cases = [
        ("act() raises KeyError from step 1", "Raising", "step 1: the policy raised KeyError: 'object_pos'"),
        ("act() returns complex numbers", "Complex", "step 0: the action holds complex numbers"),
        ("reset() raises RuntimeError", "ResetRaising", "reset: the policy raised RuntimeError: CUDA out of memory"),
    ]
    return [
        Probe(
            family="policies",
            name=name,
            command=_evaluate(f"probe_policies:{cls}", "--out", f"{cls}.json", episodes=2),
            expect="policy",
            expect_rc="zero",
            expect_in=((f"{cls}.json", message),),
            quick=cls == "Raising",
        )
        for name, cls, message in cases
    ]


def loaders(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    """Loaders apply the checks of the command that writes their files (items 5-9): a behavior model with one
    category's sources, an ablation run directory's damaged manifest or edited lab copy, a checkpoint without its
    hashes, lab logs with physically impossible values or a non-integer attribute."""
    import h5py

    from r2s2r_envs.ablation.chain import install_lab, resolve_lab
    from r2s2r_envs.ablation.store import Store

    probes = []
    # Item 5: a behavior model left with the cube sources only, re-hashed.
    model = json.loads(gzip.decompress(SHIPPED_BEHAVIOR.read_bytes()))
    model["sources"] = [s for s in model["sources"] if s["category"] == "cube"]
    one = _write_json(tmp / "behavior-cubes-only.json", model)
    probes.append(
        Probe(
            family="loaders",
            name="behavior model with the sources of one category only (re-hashed)",
            command=_generate(
                "PickSort-BehaviorGrounded-v0", "--env-kwargs", json.dumps({"behavior": str(one)}), out="cubes.hdf5"
            ),
            expect="lacks ['ball', 'bar']",
            quick=True,
        )
    )
    # Item 6: an ablation run directory whose manifest was damaged.
    for k, (name, lab) in enumerate([("'lab': 'default'", '"default"'), ("'lab': [1]", "[1]"), ("'lab': NaN", "NaN")]):
        out = tmp / f"run-manifest-{k}"
        Store(out).write_manifest({}, "0")
        text = (out / "ablation.json").read_text()
        (out / "ablation.json").write_text(text.rstrip().rstrip("}") + f', "lab": {lab}}}')
        probes.append(
            Probe(
                family="loaders",
                name=f"ablation manifest with {name}",
                command=[*R2S2R, "ablation", "--smoke", "--out", str(out)],
                expect="ablation.json",
                forbid=("AttributeError", "RecursionError"),
                quick=lab == '"default"',
            )
        )
    deep = tmp / "run-deep"
    deep.mkdir()
    _deep_json(deep / "ablation.json")
    probes.append(
        Probe(
            family="loaders",
            name="ablation manifest 100,000 levels deep",
            command=[*R2S2R, "ablation", "--smoke", "--out", str(deep)],
            expect="ablation.json",
            forbid=("RecursionError",),
        )
    )
    # Item 7: the lab copy inside a run directory was edited.
    lab_file = tmp / "mylab.json"
    shutil.copy(SHIPPED_LAB, lab_file)
    ref = resolve_lab(lab_file)
    run = tmp / "run-lab-copy"
    install_lab(ref, run)
    copy = run / str(ref.file)
    edited = json.loads(copy.read_text())
    edited["world"]["belt_speed"] = float(edited["world"].get("belt_speed", 0.1)) * 1.1
    _write_json(copy, edited)
    probes.append(
        Probe(
            family="loaders",
            name="the lab copy inside the run directory was edited",
            command=[*R2S2R, "ablation", "--smoke", "--lab", str(lab_file), "--out", str(run)],
            expect=f"{copy}, the run directory's copy of lab",
        )
    )
    # Item 8: a checkpoint whose config.json has no hashes (relabelled version 1) and a shifted statistic.
    ckpt = tmp / "hash-free"
    shutil.copytree(ZOO / "flow-real-only", ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config.pop("content_sha256")
    config.pop("weights_sha256")
    config["checkpoint_version"] = 1
    config["pipeline"]["stats"]["actions"]["mean"] = [m + 5.0 for m in config["pipeline"]["stats"]["actions"]["mean"]]
    (ckpt / "config.json").write_text(json.dumps(config, indent=1))
    probes.append(
        Probe(
            family="loaders",
            name="checkpoint config.json without its hashes (version 1), statistics shifted",
            command=_evaluate(ckpt),
            expect="has no content_sha256 or weights_sha256",
            quick=True,
        )
    )
    # Items 9 and 10: lab logs with a physically impossible value, or a seed attribute that is not an integer.
    clean = tmp / "logs-clean"
    _smoke_logs(clean)

    def logs(name: str, run_name: str, edit: Callable[[h5py.File], None]) -> Path:
        out = tmp / f"logs-{name}"
        shutil.copytree(clean, out)
        with h5py.File(out / f"{run_name}.hdf5", "r+") as f:
            edit(f)
        _rehash_logs(out)
        return out

    cases = [
        (
            "a joint angle of 1e30 rad (re-hashed)",
            logs("1e30", "latency_0", _set_value("obs/arm_qpos", (5, 0), 1e30)),
            "beyond",
        ),
        ("a command of -1e30 (re-hashed)", logs("cmd", "latency_0", _set_value("actions", (5, 0), -1e30)), "beyond"),
        (
            "a run file's seed attribute 'seven' (re-hashed)",
            logs("seed", "latency_0", lambda f: f.attrs.__setitem__("seed", "seven")),
            "attribute 'seed' must be an integer",
        ),
    ]
    for name, logdir, expect in cases:
        probes.append(
            Probe(
                family="loaders",
                name=f"sysid logs with {name}",
                command=_sysid(logdir, tmp),
                expect=expect,
                deadline_s=SYSID_DEADLINE_S,
                quick=expect == "beyond",
            )
        )
    return probes


_VECTOR_PROGRAM = """
import gymnasium as gym, numpy as np, r2s2r_envs
try:
    {call}
except (TypeError, ValueError) as exc:
    print(f"refused: {{type(exc).__name__}}: {{exc}}")
    raise SystemExit(1)
print("accepted")
"""


def vector(tmp: Path, sizes: Sizes = FULL_SIZES) -> list[Probe]:
    """The vector env's arguments (items 10 and 11): a million envs, a string as the actions."""
    make = f"gym.make_vec({ENV_ID!r}, num_envs=2)"
    cases = [
        ("gym.make_vec(num_envs=10**6)", f"gym.make_vec({ENV_ID!r}, num_envs=10**6)", "num_envs=1000000 needs"),
        ("make_vec(...).step('x')", f"v = {make}; v.reset(seed=0); v.step('x')", "got str"),
        ("make_vec(...).step({'a': 1})", f"v = {make}; v.reset(seed=0); v.step({{'a': 1}})", "got dict"),
    ]
    return [
        Probe(family="vector", name=name, command=_python(_VECTOR_PROGRAM.format(call=call)), expect=expect, quick=True)
        for name, call, expect in cases
    ]


FAMILIES: dict[str, Callable[[Path, Sizes], list[Probe]]] = {
    "checkpoints": checkpoints,
    "sysid": sysid,
    "grounding": grounding,
    "behavior": behavior,
    "lab": lab,
    "leaderboard": leaderboard,
    "env": env_inputs,
    "cli": cli,
    "datasets": datasets,
    "flips": flips,
    "fuzz": fuzz,
    "writers": writers,
    "export": export,
    "results": results,
    "policies": policies,
    "loaders": loaders,
    "vector": vector,
}


# ----------------------------------------------------------------------------------------------- running
def _shown(arg: str) -> str:
    """A command argument as the record shows it: the interpreter by name, a long program by its constant's name."""
    programs = {
        _FLIP_PROGRAM: "<_FLIP_PROGRAM>",
        _FUZZ_PROGRAM: "<_FUZZ_PROGRAM>",
        _WRITERS_PROGRAM: "<_WRITERS_PROGRAM>",
        _RESULT_FLIP_PROGRAM: "<_RESULT_FLIP_PROGRAM>",
    }
    return Path(arg).name if arg == sys.executable else programs.get(arg, arg)


def _children_cpu_s() -> float:
    """CPU seconds (user and system) of this process's finished, waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def run_probe(probe: Probe, cwd: Path) -> dict[str, Any]:
    """Runs one probe and returns its record (see the module docstring for when it passes)."""
    path = os.pathsep.join(p for p in (str(cwd), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "PYTHONPATH": path}
    env.pop("R2S2R_TRACEBACK", None)
    start, cpu_start = time.perf_counter(), _children_cpu_s()
    try:
        done = subprocess.run(
            probe.command,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        rc, output, timed_out = done.returncode, done.stdout + done.stderr, False
    except subprocess.TimeoutExpired as exc:
        rc, timed_out = None, True
        output = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
    wall, cpu = time.perf_counter() - start, _children_cpu_s() - cpu_start
    found = []
    for where, text in [*((rel, _read(cwd / rel)) for rel in probe.forbid_in), ("output", output)]:
        found += [f"{text_!r} in {where}" for text_ in probe.forbid if text_ in text]
        found += [f"/{pattern}/ in {where}" for pattern in probe.forbid_re if re.search(pattern, text)]
    missing = [f"{text!r} not in {rel}" for rel, text in probe.expect_in if text not in _read(cwd / rel)]
    rc_ok = {"nonzero": rc not in (0, None), "zero": rc == 0, "any": rc is not None}[probe.expect_rc]
    checks = {
        "exit_ok": rc_ok and not timed_out,
        "no_traceback": "Traceback" not in output,
        "names_what": probe.expect.lower() in output.lower() and not missing,
        "nothing_forbidden": not found,
        "in_time": probe.deadline_s is None or (not timed_out and cpu <= probe.deadline_s),
    }
    message = next((line for line in reversed(output.strip().splitlines()) if line.strip()), "")
    return {
        "family": probe.family,
        "name": probe.name,
        "command": [_shown(c) for c in probe.command],
        "exit_code": rc,
        "expected_exit": probe.expect_rc,
        "timed_out": timed_out,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "deadline_s": probe.deadline_s,
        "traceback": "Traceback" in output,
        "expect": probe.expect,
        "names_what": checks["names_what"],
        "expected_missing": missing,
        "forbidden_found": found,
        "checks": checks,
        "passed": all(checks.values()),
        "known": probe.known,
        "message": message[:600],
        "output_tail": output[-2000:],
    }


def failure_kinds(record: dict[str, Any]) -> list[str]:
    """Which of the issue's goals a failed probe misses."""
    kinds = {
        "exit_ok": "accepted or wrong exit",
        "no_traceback": "traceback",
        "names_what": "unclear message",
        "nothing_forbidden": "forbidden output",
        "in_time": "too slow",
    }
    return [kinds[k] for k, ok in record["checks"].items() if not ok]


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts a record's reader quotes: probes passed and failed, by family and by failed check."""
    by_kind: dict[str, int] = {}
    for r in records:
        for kind in failure_kinds(r):
            by_kind[kind] = by_kind.get(kind, 0) + 1
    by_family: dict[str, dict[str, int]] = {}
    for r in records:
        fam = by_family.setdefault(r["family"], {"probes": 0, "passed": 0})
        fam["probes"] += 1
        fam["passed"] += int(r["passed"])
    return {
        "probes": len(records),
        "passed": sum(r["passed"] for r in records),
        "failed": sum(not r["passed"] for r in records),
        "known_failures": sum(not r["passed"] and bool(r.get("known")) for r in records),
        "tracebacks": sum(r["traceback"] for r in records),
        "unclear_messages": sum(not r["names_what"] for r in records),
        "failures_by_kind": by_kind,
        "by_family": by_family,
    }
