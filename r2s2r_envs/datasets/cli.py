"""``r2s2r`` subcommands of the datasets module: ``generate``, ``replay``, ``datasets {make,list,info,card,verify}``
and ``datasets export``.

``r2s2r_envs.cli`` calls :func:`add_subcommands` on its subparsers; every handler takes the parsed
arguments and returns an exit code (0 ok, 1 error, 130 interrupted).

Examples:
    r2s2r generate PickSort-Ungrounded-v0 --episodes 100 --out ungrounded.hdf5 --workers 2 --successes-only
    r2s2r replay ungrounded.hdf5 --demo 3 --video demo3.mp4 --check
    r2s2r datasets make --all --obs-mode state
    r2s2r datasets info ungrounded.hdf5
    r2s2r datasets card old-file.hdf5 --episodes
    r2s2r datasets export ungrounded.hdf5 --format lerobot --out ungrounded-lerobot
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from r2s2r_envs.argtypes import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_json_option,
    add_no_progress_option,
    add_seed_option,
    add_workers_option,
    comma_list,
    json_object,
    report_error,
)
from r2s2r_envs.datasets.schema import DatasetError
from r2s2r_envs.env_cli import ENV_SOURCE_OPTIONS, add_env_source_options, env_source_kwargs, envs_taking


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``generate``, ``replay`` and ``datasets`` to the ``r2s2r`` command.

    Args:
        subparsers: the object returned by ``parser.add_subparsers()``.
    """
    from r2s2r_envs.datasets.generate import OBS_MODES
    from r2s2r_envs.envs.demonstrators import demonstrator_names

    gen = subparsers.add_parser(
        "generate",
        help="generate a demonstration dataset with the env's demonstrator",
        description="Run the env's demonstrator and write a robomimic-compatible HDF5 dataset with provenance. "
        "Re-running the same command resumes an interrupted run.",
    )
    gen.add_argument("env_id", metavar="ENV_ID", help="registered env id, e.g. PickSort-Ungrounded-v0")
    gen.add_argument("--episodes", type=int, required=True, help="number of demos the file should hold")
    gen.add_argument("--out", type=Path, required=True, help="output HDF5 file")
    add_workers_option(gen, "parallel worker processes (default 1; the same file for any number)")
    add_seed_option(gen, 0, "base seed (default 0)")
    gen.add_argument("--successes-only", action="store_true", help="keep only successful episodes")
    gen.add_argument("--obs-mode", choices=OBS_MODES, default="state", help="observations stored (default state)")
    gen.add_argument("--obs-keys", type=comma_list, default=None, help="comma-separated subset of observation keys")
    gen.add_argument(
        "--env-kwargs", type=json_object, default={}, help="JSON object of env arguments, e.g. '{\"num_objects\": 1}'"
    )
    add_env_source_options(gen)
    gen.add_argument(
        "--episode-steps",
        "--max-episode-steps",
        dest="episode_steps",
        type=int,
        default=None,
        metavar="N",
        help="the env's time limit in steps (its episode_steps argument; pending objects then time out); "
        "--max-episode-steps is the older name",
    )
    gen.add_argument(
        "--max-attempts", type=int, default=None, help="give up after this many attempts (default 20 x episodes)"
    )
    gen.add_argument(
        "--demonstrator",
        default=None,
        metavar="NAME",
        help=f"registered demonstrator name (default: the env's own); registered: {', '.join(demonstrator_names())}",
    )
    gen.add_argument("--valid-fraction", type=float, default=0.1, help="share of demos in mask/valid (default 0.1)")
    gen.add_argument(
        "--action-noise",
        type=float,
        default=0.0,
        metavar="SIGMA",
        help="noise injection (DART): Gaussian noise of this standard deviation, in normalized action units, added to "
        "the demonstrator's arm actions before they are executed; the executed action is recorded as actions, the "
        "demonstrator's own as action_labels (default 0: none; the canonical sim datasets use 0.1, "
        "docs/datasets.md#noise-injection)",
    )
    gen.add_argument("--overwrite", action="store_true", help="start over instead of resuming an existing file")
    add_no_progress_option(gen)
    gen.set_defaults(func=cmd_generate)

    rep = subparsers.add_parser(
        "replay",
        help="re-render a stored simulated demo to a video, or check that it re-simulates",
        description="Re-render a demo of a simulated dataset from its stored MuJoCo states, or replay its actions "
        "and compare states. Lab datasets carry no simulator state and cannot be replayed. The env is rebuilt only "
        "from a registered PickSort-* id.",
    )
    rep.add_argument("file", type=Path, metavar="FILE", help="dataset file")
    rep.add_argument("--demo", type=int, required=True, help="demo id (k of data/demo_k)")
    rep.add_argument("--video", type=Path, default=None, help="write a video (.mp4 or .gif)")
    rep.add_argument("--fps", type=float, default=None, help="video frame rate (default: the env's)")
    rep.add_argument("--check", action="store_true", help="replay the actions from the seed and compare the states")
    rep.add_argument(
        "--trust-paths",
        action="store_true",
        help="let the recorded env arguments name local files (grounding, behavior model, world), which the env then "
        "opens; only for a dataset you made yourself with an older version (this one records such files by value)",
    )
    rep.set_defaults(func=cmd_replay)

    ds = subparsers.add_parser("datasets", help="canonical datasets and dataset files")
    ds_sub = ds.add_subparsers(dest="datasets_command", metavar="{make,list,info,card,verify,export}")
    ds_sub.required = True
    make = ds_sub.add_parser("make", help="build missing canonical datasets into the cache and verify hashes")
    make.add_argument("names", nargs="*", help="datasets to make (see `r2s2r datasets list`)")
    make.add_argument("--all", action="store_true", help="make every dataset of the spec")
    make.add_argument(
        "--obs-mode",
        choices=OBS_MODES,
        default=None,
        help="make only the datasets of this observation mode: state (the state sets) or state+rgb (the *-rgb64 "
        "image sets, about 3 GB per 1,000 demos)",
    )
    make.add_argument("--spec", type=Path, default=None, help="spec file (default: the one shipped with the package)")
    make.add_argument(
        "--cache-dir", type=Path, default=None, help="default $R2S2R_DATA_DIR or ~/.cache/r2s2r_envs/datasets"
    )
    add_workers_option(make, "worker processes per generation (default 1)")
    add_env_source_options(
        make,
        which="of the datasets whose env takes one",
        note="; the datasets are built as '<name>+<LAB or FILE stem>.hdf5', unpinned (the spec's hashes are the "
        "shipped ones')",
    )
    make.add_argument("--update-spec", action="store_true", help="write missing hashes into the spec (a checkout's)")
    make.add_argument(
        "--rebuild-stale",
        action="store_true",
        help="move a cached file of an older dataset schema aside (NAME.schema-vN.hdf5) and build the dataset again",
    )
    add_no_progress_option(make)
    make.set_defaults(func=cmd_datasets_make)
    lst = ds_sub.add_parser("list", help="list the canonical datasets and whether they are cached")
    lst.add_argument("--spec", type=Path, default=None, help="spec file (default: the one shipped with the package)")
    lst.add_argument("--cache-dir", type=Path, default=None)
    lst.set_defaults(func=cmd_datasets_list)
    info = ds_sub.add_parser("info", help="print a dataset file's summary, data card and provenance")
    info.add_argument("file", type=Path, metavar="FILE")
    add_json_option(info, "the summary, data card and provenance")
    info.set_defaults(func=cmd_datasets_info)
    card = ds_sub.add_parser(
        "card",
        help="compute a dataset file's data card (docs/datasets.md#data-card)",
        description="Compute the data card of a dataset file from its content: demonstrator success and attempts, "
        "the scenes kept, time to sort, grasp timing against the belt and grasp types, action smoothness. Works on "
        "files made before cards existed. The card is outside the content hash: --store changes no hash.",
    )
    card.add_argument("file", type=Path, metavar="FILE")
    card.add_argument("--episodes", action="store_true", help="also list each episode's values")
    card.add_argument(
        "--store", action="store_true", help="write the card into the file's metadata (what `datasets info` shows)"
    )
    add_json_option(card, "the card")
    card.set_defaults(func=cmd_datasets_card)
    ver = ds_sub.add_parser(
        "verify", help="check files' schema and content hashes (a canonical dataset's name: its cached file)"
    )
    ver.add_argument("files", type=Path, nargs="+", metavar="FILE")
    ver.add_argument(
        "--expect",
        type=_sha256_arg,
        default=None,
        metavar="SHA256",
        help="also require this content hash (a hash you trust, e.g. a canonical dataset's pinned one): the content "
        "hash detects damage, not a file rehashed on purpose (docs/datasets.md#integrity)",
    )
    ver.set_defaults(func=cmd_datasets_verify)
    exp = ds_sub.add_parser(
        "export",
        help="export a dataset file to LeRobot (v3.0) or Minari (docs/interop.md)",
        description="Write a dataset file in another tool's format, streaming one demo at a time. The output "
        "folder must be new or empty; a failed export leaves nothing there.",
    )
    exp.add_argument("file", type=Path, metavar="FILE", help="dataset file")
    exp.add_argument("--format", required=True, metavar="{lerobot,minari}", help="lerobot (v3.0 layout) or minari")
    exp.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (new or empty)")
    exp.add_argument(
        "--verify",
        choices=("full", "quick"),
        default="full",
        help="before writing, recompute every hash of the file, its arrays' included (full, default: reads the file "
        "twice), or every hash but the arrays' (quick: an array edited in place goes unnoticed; the output records "
        "that its source was checked quickly)",
    )
    exp.add_argument("--fps", type=int, default=None, help="lerobot: frames per second (default: the control rate)")
    exp.add_argument("--dataset-id", default=None, help="minari: the dataset id (default r2s2r/<file stem>-v0)")
    add_no_progress_option(exp)
    exp.set_defaults(func=cmd_datasets_export)


# -- handlers --------------------------------------------------------------------------------------


def cmd_generate(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r generate``."""
    from r2s2r_envs.datasets.generate import GenerationError, generate

    try:
        env_kwargs = env_source_kwargs(args.env_id, args.env_kwargs, lab=args.lab, grounding=args.grounding)
        result = generate(
            args.env_id,
            args.episodes,
            args.out,
            workers=args.workers,
            seed=args.seed,
            successes_only=args.successes_only,
            obs_mode=args.obs_mode,
            obs_keys=args.obs_keys,
            env_kwargs=env_kwargs,
            demonstrator=args.demonstrator,
            episode_steps=args.episode_steps,
            max_attempts=args.max_attempts,
            valid_fraction=args.valid_fraction,
            action_noise=args.action_noise,
            overwrite=args.overwrite,
            progress=not args.no_progress,
        )
    except UsageError as exc:
        return _fail(exc, args, EXIT_USAGE)
    except (DatasetError, GenerationError, ValueError, FileExistsError, FileNotFoundError) as exc:
        return _fail(exc, args)
    if result.interrupted:
        print(
            f"interrupted: {result.path} holds {result.num_demos} complete demos; run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    verb = "resumed" if result.resumed else "wrote"
    print(
        f"{verb} {result.path}: {result.num_demos} demos ({result.new_demos} new) from {result.attempts} attempts, "
        f"{result.demos_per_minute:.1f} demos/min, sha256 {result.content_hash}"
    )
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r replay``."""
    from r2s2r_envs.datasets.replay import replay_demo

    if args.video is None and not args.check:
        return _fail(ValueError("nothing to do: pass --video PATH and/or --check"), args, EXIT_USAGE)
    try:
        result = replay_demo(
            args.file, args.demo, video=args.video, fps=args.fps, check=args.check, trust_paths=args.trust_paths
        )
    except (DatasetError, KeyError, FileNotFoundError) as exc:
        return _fail(exc, args)
    if result.video is not None:
        print(f"wrote {result.video} ({result.num_steps} frames)")
    if args.check:
        if result.first_divergent_step is None:
            print(
                f"demo {result.demo_id} re-simulates exactly "
                f"({result.num_steps} steps, max state error {result.max_state_error:.3g})"
            )
        else:
            print(
                f"demo {result.demo_id} diverges from step {result.first_divergent_step} "
                f"(max state error {result.max_state_error:.3g})"
            )
            return EXIT_ERROR
    return EXIT_OK


def cmd_datasets_make(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r datasets make``."""
    from r2s2r_envs.datasets.canonical import make_datasets

    if not args.all and not args.names:
        return _fail(ValueError("name datasets to make or pass --all (see `r2s2r datasets list`)"), args, EXIT_USAGE)
    spec = args.spec
    try:
        if args.lab is not None or args.grounding is not None:
            if args.update_spec:
                raise ValueError(
                    "--update-spec pins the canonical hashes, which are made with the shipped lab and grounding: "
                    "do not combine it with --lab or --grounding"
                )
            spec = _spec_with_env_sources(args, _scratch_dir(args))
        reports = make_datasets(
            spec,
            names=None if args.all else args.names,
            cache_dir=args.cache_dir,
            workers=args.workers,
            update_spec=args.update_spec,
            rebuild_stale=args.rebuild_stale,
            progress=not args.no_progress,
            obs_mode=args.obs_mode,
        )
    except (OSError, KeyError, ValueError) as exc:  # the spec, the names, --lab or --grounding: before any build
        return _fail(exc, args, EXIT_USAGE)
    for r in reports:
        digest = r.sha256[:16] if r.sha256 else "-"
        print(f"{r.name:30s} {r.status:14s} {digest:16s} {r.message}")
    return EXIT_OK if all(r.ok for r in reports) else EXIT_ERROR


def cmd_datasets_list(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r datasets list``."""
    from r2s2r_envs.datasets.canonical import default_cache_dir, load_spec, spec_entries_for_display

    try:
        entries = load_spec(args.spec)
    except (FileNotFoundError, ValueError) as exc:
        return _fail(exc, args)
    for row in spec_entries_for_display(entries, args.cache_dir or default_cache_dir()):
        cached = ("cached" if row["complete"] else "partial") if row["cached"] else "missing"
        builds = row["known_builds"]
        if row["sha256"]:
            known = f"pinned {row['sha256'][:16]}... (+{builds - 1} other builds)"
        else:
            known = f"{builds} known build(s), none pinned" if builds else "no known build: the recipe is the check"
        file = {"known": "; cached file: a known build", "unknown": "; cached file: an unknown build"}.get(
            row["cached_build"] or "", ""
        )
        print(f"{row['name']:30s} {row['env_id']:32s} {row['episodes']:6d} {cached:8s} {known}{file}")
    print(
        "A known build verifies by its hash (r2s2r datasets verify NAME recomputes it); another build of the same "
        "recipe (another kind of CPU) is usable with a warning and its hash recorded (docs/datasets.md)"
    )
    return EXIT_OK


def cmd_datasets_info(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r datasets info``: the summary, the stored data card (``data_card``: ``None`` when the file
    has none; ``data_card_status``: current, stale, absent or unreadable) and the provenance."""
    from r2s2r_envs.datasets.card import card_state, format_card
    from r2s2r_envs.datasets.reader import open_dataset

    try:
        with open_dataset(args.file, verify="quick", allow_empty=True) as f:
            status, card = card_state(f)
            summary: dict[str, Any] = {
                "path": str(f.path),
                "schema_version": f.schema_version,
                "env_id": f.env_id,
                "domain": f.domain,
                "demos": f.num_demos,
                "samples": f.num_samples,
                "attempts": f.attempts,
                "successes": f.successes,
                "complete": f.complete,
                "content_sha256": f.content_hash,
                "obs_keys": f.obs_keys,
                "robomimic_obs": f.robomimic_modalities() if f.num_demos else {},
                "filter_keys": {k: len(v) for k, v in f.masks().items()},
                "data_card_status": status,
                "data_card": card,
                "provenance": f.provenance,
            }
    except (DatasetError, FileNotFoundError) as exc:
        return _fail(exc, args)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return EXIT_OK
    for key, value in summary.items():
        if key == "robomimic_obs":  # JSON, for a robomimic config's observation.modalities.obs
            print(f"{key:15s} {json.dumps(value)}")
        elif key not in ("provenance", "data_card", "data_card_status"):
            print(f"{key:15s} {value}")
    if status == "current":
        print("\n".join(format_card(card or {})))
    else:
        why = {
            "stale": "the stored one describes other content or is of another card version",
            "unreadable": "the stored one is not a JSON object",
            "absent": "the file was made before data cards, or its generation was interrupted",
        }[status]
        print(f"data card       none current ({why}); `r2s2r datasets card {args.file}` computes it")
    print("provenance     ", json.dumps(summary["provenance"], sort_keys=True))
    return EXIT_OK


def cmd_datasets_card(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r datasets card``: the card computed from the file's content (and stored with ``--store``)."""
    from r2s2r_envs.datasets.card import compute_card, format_card, format_episodes, store_card

    try:
        card = compute_card(args.file, per_episode=args.episodes)
        if args.store:
            store_card(args.file, card)
    except (DatasetError, FileNotFoundError) as exc:
        return _fail(exc, args)
    if args.json:
        print(json.dumps(card, indent=2, sort_keys=True))
    else:
        print("\n".join(format_card(card)))
        if args.episodes:
            print("\n".join(format_episodes(card["episodes"])))
        if args.store:
            print(f"stored in {args.file} (root attribute data_card; the content hash is unchanged)")
    return EXIT_OK


def _sha256_arg(text: str) -> str:
    """A SHA-256 hex digest (64 hex digits, any case)."""
    value = text.strip().lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise argparse.ArgumentTypeError(f"expected a SHA-256 as 64 hex digits, got {text!r}")
    return value


def cmd_datasets_verify(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r datasets verify``."""
    from r2s2r_envs.datasets.canonical import default_cache_dir, load_spec
    from r2s2r_envs.datasets.reader import open_dataset

    status = EXIT_OK
    expect = getattr(args, "expect", None)
    for path in args.files:
        if not Path(path).exists():  # a canonical dataset's name stands for its cached file
            names = {e.name: default_cache_dir() / e.file for e in load_spec()}
            if str(path) not in names:
                print(
                    f"FAILED  {path}: no such file, nor the name of a canonical dataset ({', '.join(names)})",
                    file=sys.stderr,
                )
                status = EXIT_ERROR
                continue
            path = names[str(path)]
        try:
            with open_dataset(path, verify="full") as f:
                if expect is not None and f.content_hash != expect:
                    print(
                        f"FAILED  {path}: content hash {f.content_hash} is not the expected {expect}: the file is "
                        "internally consistent but holds other data than the one you trust",
                        file=sys.stderr,
                    )
                    status = EXIT_ERROR
                    continue
                partial = "" if f.complete else "  (incomplete: its generation was interrupted; re-run it to resume)"
                print(f"ok      {path}  {f.num_demos} demos  sha256 {f.content_hash}{partial}")
        except (DatasetError, FileNotFoundError) as exc:
            print(f"FAILED  {path}: {exc}", file=sys.stderr)
            status = EXIT_ERROR
    return status


def cmd_datasets_export(args: argparse.Namespace) -> int:
    """Handler of ``r2s2r datasets export``."""
    from r2s2r_envs.datasets.export import export_dataset

    options: dict[str, Any] = {}
    if args.fps is not None:
        if args.format != "lerobot":
            return _fail(ValueError("--fps applies to --format lerobot"), args, EXIT_USAGE)
        options["fps"] = args.fps
    if args.dataset_id is not None:
        if args.format != "minari":
            return _fail(ValueError("--dataset-id applies to --format minari"), args, EXIT_USAGE)
        options["dataset_id"] = args.dataset_id
    try:
        result = export_dataset(
            args.file, args.out, format=args.format, progress=not args.no_progress, verify=args.verify, **options
        )
    except (DatasetError, ValueError, FileNotFoundError, OSError) as exc:
        return _fail(exc, args)
    except KeyboardInterrupt:
        print(f"interrupted: nothing was written to {args.out}", file=sys.stderr)
        return EXIT_INTERRUPTED
    what = f"Minari dataset {result.dataset_id!r} (MINARI_DATASETS_PATH={result.out})" if result.dataset_id else ""
    print(
        f"wrote {result.out}: {what or 'LeRobot v3.0 dataset'}, {result.episodes} episodes, {result.frames} frames "
        f"in {result.seconds:.1f} s, from sha256 {result.source_sha256}"
    )
    return EXIT_OK


# -- --lab and --grounding -------------------------------------------------------------------------


def _scratch_dir(args: argparse.Namespace) -> Path:
    from r2s2r_envs.datasets.canonical import default_cache_dir

    return Path(args.cache_dir) if args.cache_dir is not None else default_cache_dir()


def _spec_with_env_sources(args: argparse.Namespace, cache_dir: Path) -> Path:
    """A copy of the spec whose datasets of envs taking ``--lab`` / ``--grounding`` use them, written to the cache.

    Those datasets get their own file name (``<name>+<stem>.hdf5``) and no expected hash; the others are as in
    the spec.  Raises ValueError when none of the selected datasets takes the option.
    """
    import gymnasium as gym

    from r2s2r_envs.datasets.canonical import read_spec_text

    raw = json.loads(read_spec_text(args.spec))
    selected = None if args.all else set(args.names)
    for key in ENV_SOURCE_OPTIONS:
        value = getattr(args, key)
        if value is None:
            continue
        stem = Path(value).stem
        hit = []
        for item in raw.get("datasets", []):
            if selected is not None and item.get("name") not in selected:
                continue
            env_id = item.get("env_id")
            if env_id not in gym.registry or key not in gym.spec(env_id).kwargs:
                continue
            item["env_kwargs"] = env_source_kwargs(env_id, item.get("env_kwargs") or {}, **{key: value})
            item["file"] = f"{item['name']}+{stem}.hdf5"
            item["sha256"] = None
            item["other_builds"] = {}  # the shipped recipe's builds: none is of this env
            item.pop("command", None)  # recomputed from the fields
            hit.append(item["name"])
        if not hit:
            raise UsageError(
                f"{ENV_SOURCE_OPTIONS[key]} applies to datasets whose env takes a {key} ({envs_taking(key)}); none "
                "of the selected does"
            )
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / ".spec-with-env-sources.json"
    path.write_text(json.dumps(raw, indent=2))
    return path


# -- helpers ---------------------------------------------------------------------------------------


def _fail(exc: BaseException, args: argparse.Namespace, code: int = EXIT_ERROR) -> int:
    """:func:`~r2s2r_envs.argtypes.report_error` for the (sub)command of ``args``; returns ``code``
    (:data:`EXIT_USAGE` for bad input found before any work, :data:`EXIT_ERROR` for an error of the run)."""
    command = " ".join(c for c in (getattr(args, "command", None), getattr(args, "datasets_command", None)) if c)
    return report_error(command or "datasets", exc, code)
