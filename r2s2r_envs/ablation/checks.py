"""The checks of a design before any work (:func:`check_design`): names, numbers and training fields, everything
that can be checked without data."""

from __future__ import annotations

import dataclasses
import math
from typing import cast

from r2s2r_envs.ablation.arms import check_arms
from r2s2r_envs.ablation.interventions import check_interventions
from r2s2r_envs.ablation.specs import LAB_ENV_ID, VARIANTS, DesignError, policy_label
from r2s2r_envs.ablation.study import AblationDesign
from r2s2r_envs.envs.conditions import STANDARD_MIX
from r2s2r_envs.mappings import check_choice, check_keys


def check_design(design: AblationDesign) -> None:
    """Checks every setting that can be checked without data (names, numbers, training fields).

    Raises:
        DesignError: naming the first bad setting and what is accepted.
    """
    from r2s2r_envs.policies.config import METHODS, ConfigError, Method, TrainConfig, check_config

    check_keys(design.variants, VARIANTS, what="variant", error=DesignError)
    if not design.variants:
        raise DesignError(f"no variant selected; choose from {list(VARIANTS)}")
    if design.sweep_variant is not None:
        check_choice(design.sweep_variant, VARIANTS, what="sweep variant", error=DesignError)
    check_arms(design.arms, design.variants)
    check_interventions(design.interventions)
    missing = [v for v in design._sim_variants_used() if v not in dict(design.sim)]
    if missing:
        raise DesignError(f"no sim data given for variant(s) {missing}")
    for name in ("methods", "sweep_methods", "mixture_methods"):
        check_keys(getattr(design, name), METHODS, what="method", where=name, error=DesignError)
    device = design.train.get("device", "cpu")
    gpus = design.train_gpus
    if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or not 0 <= gpus <= 1:
        raise DesignError(f"train_gpus must be a share of one GPU in [0, 1], got {gpus!r}")
    if device == "cuda" and gpus == 0:
        raise DesignError(
            'train device "cuda" needs a GPU share per training declared to Ray: train_gpus in (0, 1] '
            "(--gpus-per-training; 0.25 lets four trainings share a GPU)"
        )
    if gpus > 0 and device != "cuda":
        raise DesignError(f'train_gpus={gpus} declares GPUs for trainings on {device!r}: set train device "cuda"')
    if not design.methods:
        raise DesignError(f"no method selected; choose from {list(METHODS)}")
    for name in ("seeds", "sweep_seeds"):
        seeds = getattr(design, name)
        if seeds is None and name == "sweep_seeds":
            continue
        if not seeds or len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
            raise DesignError(f"{name} must be distinct integers >= 0, got {None if seeds is None else list(seeds)}")
    names = (
        "lab_episodes",
        "sim_episodes",
        "eval_batch",
        "mixture_episodes",
        "mixture_neighbors",
        "bootstrap_replicates",
    )
    for name in names:
        value = getattr(design, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DesignError(f"{name} must be an integer >= 1, got {value!r}")
    if design.max_retries < 0:
        raise DesignError(f"max_retries must be >= 0, got {design.max_retries}")
    if design.eval_split is not None:
        if design.eval_split not in ("dev", "test"):
            raise DesignError(f"eval_split must be 'dev', 'test' or None (legacy seeds), got {design.eval_split!r}")
        total = sum(STANDARD_MIX.values())
        for name in ("lab_episodes", "sim_episodes"):
            if getattr(design, name) % total:
                raise DesignError(
                    f"with eval_split the evaluations run the standard mix {STANDARD_MIX} scaled: {name} must be a "
                    f"multiple of {total}, got {getattr(design, name)}"
                )
    if design.rule_end not in ("low", "high"):
        raise DesignError(f"rule_end must be 'low' or 'high', got {design.rule_end!r}")
    for v in design.sweep_fractions:
        ok = v in ("low", "high") or (
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1
        )
        if not ok:
            raise DesignError(f"sweep real_fraction {v!r}: expected a number in [0, 1] or 'low' / 'high'")
    for spec in [design.real, *(s for _, s in design.sim)]:
        if spec.episodes < 1:
            raise DesignError(f"dataset {spec.label}: episodes must be >= 1, got {spec.episodes}")
    if design.real.domain != "real":
        raise DesignError(f"the real data {design.real.label} must have domain 'real'")
    for variant, spec in design.sim:
        if spec.domain != "sim":
            raise DesignError(f"the sim data of {variant} ({spec.label}) must have domain 'sim'")
    if (design.lab is None) != (design.chain is None):
        raise DesignError("a design with a lab needs its chain settings and the other way round (lab_design())")
    if design.lab is not None and design.chain is not None:
        try:
            design.chain.check()
        except ValueError as exc:
            raise DesignError(str(exc)) from None
        canonical = [s.label for s in [design.real, *(s for _, s in design.sim)] if s.canonical is not None]
        if canonical:
            raise DesignError(
                f"dataset(s) {canonical} are canonical, made in the default lab: a design with --lab generates all "
                "its data in its own chain"
            )
        if design.real.env_id != LAB_ENV_ID:
            raise DesignError(f"the real data {design.real.label} of a lab design is made in {LAB_ENV_ID}")
    check_track(design)
    fixed = {"method", "real", "sim", "real_fraction", "seed", "out", "demos", "progress", "overwrite"}
    known = {f.name for f in dataclasses.fields(TrainConfig)} - fixed
    bad = sorted(set(design.train) - known)
    if bad:
        raise DesignError(f"train: field(s) {bad} are set by the ablation or unknown; settable: {sorted(known)}")
    for policy in design.policies():
        config = TrainConfig(
            **dict(design.train),
            method=cast(Method, policy.method),  # every method of the design is in METHODS (checked above)
            real=("real",),
            sim=("sim",),
            real_fraction=policy.real_fraction,
            seed=policy.seed,
            out="unused",
        )
        try:
            check_config(config)
        except ConfigError as exc:
            raise DesignError(f"policy {policy_label(policy)}: {exc}") from None


#: The ablation's tracks: what its policies observe (``AblationDesign.track``).
ABLATION_TRACKS: tuple[str, ...] = ("state", "image")


def check_track(design: AblationDesign) -> None:
    """The design's track, and what the image track needs: its own lab chain (the canonical datasets hold no
    images), no control arms (their data has no cameras), and cameras in every dataset and evaluation.

    Raises:
        DesignError: naming the setting and what is accepted.
    """
    check_choice(design.track, ABLATION_TRACKS, what="track", error=DesignError)
    if design.track != "image":
        return
    if design.lab is None:
        raise DesignError(
            "the image track generates every dataset with cameras in a lab's own chain: add --lab LAB (e.g. --lab v3); "
            "the canonical datasets of the default lab hold state only"
        )
    if design.arms:
        raise DesignError(f"control arms {list(design.arms)} are not defined for the image track; drop --arms")
    for spec in [design.real, *(s for _, s in design.sim)]:
        if spec.generate_kwargs.get("obs_mode") != "state+rgb" or "image_size" not in spec.env_kwargs:
            raise DesignError(
                f"dataset {spec.label} of the image track holds no camera images: make the design with "
                "presets.image_track()"
            )
    if design.eval_env_kwargs.get("obs_mode") != "state+rgb":
        raise DesignError("the image track evaluates with cameras: eval_env_kwargs needs obs_mode 'state+rgb'")
