"""``r2s2r train``: trains a baseline policy (a thin shell over :func:`r2s2r_envs.policies.train.train`); ``r2s2r
dagger``: DAgger rounds from a trained one (over :func:`r2s2r_envs.policies.dagger.dagger`).

The options are built from the fields of :class:`~r2s2r_envs.policies.config.TrainConfig` (one option per field,
``--real-fraction`` for ``real_fraction``; help text from the field's documentation), so the CLI and the library
never disagree. Bad settings and datasets are reported before torch is imported or any data is loaded.

Examples:
    r2s2r train --method bc --real lab-50 --sim ungrounded-1000 --real-fraction 0.22 --seed 0 --out runs/bc-s0
    r2s2r train --method flow-cfg-adda --real lab-50 --sim ungrounded-1000 --real-fraction 0.22 --out runs/cfg-adda
    r2s2r train --method flow --real lab-50 --real-fraction 1.0 --steps 2000 --out runs/flow-real-only
    r2s2r train --method byo_bc:DomainWeightedBC --real lab-50 --sim worldgrounded-1000 --real-fraction 0.22 \
        --out runs/dw-bc    # a Method class of yours (docs/byo_method.md)
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import sys
from typing import Any

from r2s2r_envs.argtypes import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    add_json_option,
    add_no_progress_option,
    add_seed_option,
    add_workers_option,
    comma_list,
    json_object,
    report_error,
)
from r2s2r_envs.policies.config import (
    DEFAULT_RECIPE,
    METHOD_CLASS_PATTERN,
    METHODS,
    RECIPES,
    ConfigError,
    TrainConfig,
    check_config,
    field_choices,
    field_type,
    recipe_values,
)

_METAVARS = {
    "method": "METHOD",
    "real": "DATA",
    "sim": "DATA",
    "out": "DIR",
    "obs_keys": "KEY,KEY",
    "image_keys": "KEY,KEY",
}


def _field_docs() -> dict[str, str]:
    """Each field's description from the ``Attributes:`` section of :class:`TrainConfig`'s docstring."""
    doc = inspect.getdoc(TrainConfig) or ""
    section = doc.split("Attributes:", 1)[-1]
    docs: dict[str, str] = {}
    current = None
    for line in section.splitlines():
        m = re.match(r"^    (\w+): (.*)$", line)
        if m:
            current = m.group(1)
            docs[current] = m.group(2)
        elif current and line.startswith("        "):
            docs[current] += " " + line.strip()
    # Plain text for --help: ``x`` -> x, :data:`X` -> X.
    plain = {k: re.sub(r":\w+:`([^`]*)`", r"\1", v).replace("``", "") for k, v in docs.items()}
    return {k: v.replace("%", "%%") for k, v in plain.items()}


def _method(text: str) -> str:
    """A ``--method``: a reference method's name or ``module:Class`` (a user's method class, imported later)."""
    if text in METHODS or METHOD_CLASS_PATTERN.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r} (choose from {', '.join(METHODS)}, or module:Class for a Method class of yours: "
        "docs/byo_method.md)"
    )


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``train`` to the ``r2s2r`` command.

    Args:
        subparsers: the object returned by ``parser.add_subparsers()``.
    """
    parser = subparsers.add_parser(
        "train",
        help="train a baseline policy (bc, flow, flow-cfg, flow-adda, flow-cfg-adda) or your own method "
        "(module:Class) on real and sim data",
        description="Train a co-training baseline on real (lab) and simulated demonstrations mixed by "
        "--real-fraction, the expected share of real samples per batch (1.0: real only, 0.0: sim only). Datasets "
        "are canonical names (r2s2r datasets list) or HDF5 files. Writes DIR/config.json, policy.pt, "
        "train_log.json and loss.png; load with r2s2r_envs.policies.load_policy(DIR). Needs the torch extra. "
        "See docs/baselines.md; your own method: --method module:Class (docs/byo_method.md).",
    )
    docs = _field_docs()
    recipe_defaults = recipe_values(DEFAULT_RECIPE)
    for field in dataclasses.fields(TrainConfig):
        name = field.name
        flag = "--" + name.replace("_", "-")
        help_text = docs.get(name, "")
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        default = None if required else field.default
        hint = field_type(name)
        if name in recipe_defaults:  # unset: the recipe's value
            help_text += f" (default: the recipe's; {DEFAULT_RECIPE}: {recipe_defaults[name]})"
        elif name == "recipe":
            help_text += f" (default {DEFAULT_RECIPE}; choices {sorted(RECIPES)})"
        if hint is bool:
            if default:
                parser.add_argument(f"--no-{name.replace('_', '-')}", dest=name, action="store_false", help=help_text)
            else:
                parser.add_argument(flag, dest=name, action="store_true", help=help_text)
            parser.set_defaults(**{name: default})
            continue
        kwargs: dict[str, Any] = {"dest": name, "help": help_text, "metavar": _METAVARS.get(name)}
        choices = field_choices(name)
        if name == "recipe":
            kwargs.update(choices=sorted(RECIPES), metavar=None)
        elif choices is not None:
            kwargs.update(choices=choices, metavar=None)
            kwargs["help"] += f" (default {default})" if default is not None else ""
        elif name in ("real", "sim"):
            kwargs.update(action="extend", nargs="+", default=[], help=help_text + " (repeatable)")
        elif name == "obs_keys":
            kwargs.update(type=comma_list, default=[])
        elif name == "image_keys":  # unset: the recipe's
            kwargs["type"] = comma_list
        elif name == "method":
            kwargs["type"] = _method
        else:
            kwargs["type"] = {int: int, float: float, str: str}[hint]
            if default is not None and name != "recipe":
                kwargs["help"] += f" (default {default})"
        if required:
            kwargs["required"] = True
        elif "default" not in kwargs:
            kwargs["default"] = default
        parser.add_argument(flag, **kwargs)
    add_json_option(parser, "the result (metadata, timings)")
    parser.set_defaults(func=_cmd_train)
    _add_dagger(subparsers)


def _add_dagger(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from r2s2r_envs.policies.dagger import DAGGER_BASE_SEED

    parser = subparsers.add_parser(
        "dagger",
        help="DAgger: roll a trained policy out in a simulated variant, label its states with the reactive "
        "planner, aggregate and retrain",
        description="DAgger with a programmatic expert (docs/baselines.md#dagger). Each round rolls the policy out "
        "in ENV (a simulated variant; the lab is refused), labels every visited state with the reactive planner "
        "(which decides from the current observation; the env's tuned planner settings where it has them), adds "
        "the rollouts to the policy's simulated datasets, retrains with the policy's own training config, and "
        "evaluates the new policy on held-out simulated episodes. Writes OUT/round-N/{rollouts.hdf5,policy/,"
        "eval.json} and OUT/dagger_log.json; an interrupted run resumes. Needs the torch extra.",
    )
    parser.add_argument("--policy", required=True, metavar="DIR", help="round-0 checkpoint (DIR or zoo:NAME)")
    parser.add_argument("--env", required=True, dest="env_id", metavar="ID", help="simulated env id to roll out in")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (resumed if it exists)")
    parser.add_argument(
        "--env-kwargs",
        type=json_object,
        default={},
        help="JSON object of env arguments, e.g. '{\"num_objects\": 2}' (the policy's training data's)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--episodes", type=int, default=200, help="rollouts per round (default 200)")
    parser.add_argument(
        "--beta", type=float, default=0.0, help="share of rollouts the expert drives instead (default 0)"
    )
    parser.add_argument("--steps", type=int, default=None, help="training steps per round (default: the policy's)")
    parser.add_argument(
        "--eval-episodes", type=int, default=100, help="held-out sim episodes per round's policy (default 100; 0: none)"
    )
    add_workers_option(parser, "rollout and evaluation processes (default 1)")
    add_seed_option(parser, DAGGER_BASE_SEED, f"rollout base seed (default {DAGGER_BASE_SEED})")
    add_no_progress_option(parser)
    parser.set_defaults(func=_cmd_dagger)


def _cmd_dagger(args: argparse.Namespace) -> int:
    from r2s2r_envs.datasets.schema import DatasetError
    from r2s2r_envs.policies.checkpoint import CheckpointError
    from r2s2r_envs.policies.dagger import DaggerConfig

    fields: tuple[str, ...] = ("policy", "env_id", "out", "env_kwargs", "rounds", "episodes", "beta", "steps")
    fields += ("eval_episodes", "workers", "seed")
    config = DaggerConfig(**{name: getattr(args, name) for name in fields}, progress=not args.no_progress)
    try:
        config.check()
    except ConfigError as exc:
        return report_error("dagger", exc, EXIT_USAGE)
    if not _torch_available("dagger"):
        return EXIT_ERROR
    from r2s2r_envs.policies.dagger import dagger

    try:
        log = dagger(config)
    except (ConfigError, CheckpointError, FileNotFoundError) as exc:
        return report_error("dagger", exc, EXIT_USAGE)
    except DatasetError as exc:
        return report_error("dagger", exc)
    except KeyboardInterrupt:
        print("r2s2r dagger: interrupted (finished rounds are kept; run again to resume)", file=sys.stderr)
        return EXIT_INTERRUPTED
    evals = [(0, log["round_0_eval"])] if "round_0_eval" in log else []
    evals += [(entry["round"], entry.get("eval")) for entry in log["rounds"]]
    for round_, ev in evals:
        if ev is None:
            print(f"round {round_}: not evaluated")
        else:
            success, sort = 100 * ev["success_rate"], 100 * ev["sort_accuracy"]
            print(f"round {round_}: held-out sim success {success:.1f}%, sort accuracy {sort:.1f}%")
    print(f"log: {config.out}/dagger_log.json")
    return EXIT_OK


def _torch_available(command: str) -> bool:
    """Imports the training stack (which needs torch); without torch prints how to install it and returns False."""
    try:
        import r2s2r_envs.policies.train  # noqa: F401
    except ImportError as exc:
        if getattr(exc, "name", None) != "torch":
            raise
        from r2s2r_envs.policies import TORCH_HINT

        report_error(command, TORCH_HINT)
        return False
    return True


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` of parsed ``r2s2r train`` arguments."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(TrainConfig):
        value = getattr(args, field.name)
        values[field.name] = tuple(value) if isinstance(value, list) else value
    return TrainConfig(**values)


def _cmd_train(args: argparse.Namespace) -> int:
    from r2s2r_envs.datasets.schema import DatasetError
    from r2s2r_envs.policies.data import DataSelectionError

    try:
        config = config_from_args(args)
        check_config(config)
    except ConfigError as exc:
        return report_error("train", exc, EXIT_USAGE)
    if not _torch_available("train"):
        return EXIT_ERROR
    from r2s2r_envs.policies.train import train

    try:
        result = train(config)
    except (ConfigError, DataSelectionError) as exc:
        return report_error("train", exc, EXIT_USAGE)
    except (DatasetError, FloatingPointError) as exc:
        return report_error("train", exc)
    except KeyboardInterrupt:
        print("r2s2r train: interrupted (no checkpoint written)", file=sys.stderr)
        return EXIT_INTERRUPTED
    summary = {
        "out": str(result.out),
        "final_loss": result.final_loss,
        "load_time_s": result.load_time_s,
        "train_time_s": result.train_time_s,
        "samples_per_s": result.samples_per_s,
        "metadata": result.metadata,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        m = result.metadata
        print(
            f"{m['method']}: {m['n_real_demos']} real + {m['n_sim_demos']} sim demos, real_fraction "
            f"{m['real_fraction']}, seed {m['training_seed']}: final loss {result.final_loss:.4f}, "
            f"train {result.train_time_s:.1f} s ({result.samples_per_s:.0f} samples/s), load {result.load_time_s:.1f} s"
        )
        print(f"checkpoint: {result.out} (load with r2s2r_envs.policies.load_policy)")
    return EXIT_OK
