"""The whole study as one frozen dataclass, :class:`AblationDesign`, and its expansion into a graph of tasks
(:meth:`AblationDesign.tasks`): make or select a dataset, train a policy, evaluate it in one env, attribute its lab
behaviour to the real or the sim demos (the mixture analysis), and for a design with a lab (``--lab``) the chain's
stages before them: identify the lab's world (sysid) and fit the behavior model to its demos.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from r2s2r_envs.ablation.arm_data import CALIBRATION_ROUNDS, calibration_episodes, sensing_world
from r2s2r_envs.ablation.arms import MATCHED_CELLS, arm_cells, arm_reads, arm_stages
from r2s2r_envs.ablation.chain import ChainSpec, LabRef
from r2s2r_envs.ablation.interventions import intervention_episodes
from r2s2r_envs.ablation.mixture import ATTRIBUTION_VERSION
from r2s2r_envs.ablation.specs import (
    AXIS_INPUTS,
    DEFAULT_METHODS,
    DEFAULT_SWEEP,
    LAB_ENV_ID,
    SINGLE_DOMAIN_METHOD,
    SWEEP_RESOLUTION,
    VARIANT_AXES,
    VARIANTS,
    DataSpec,
    DesignError,
    PolicySpec,
    RuleEnd,
    Task,
    canonical_recipe,
    env_id_of,
    policy_label,
)
from r2s2r_envs.mappings import check_keys


@dataclasses.dataclass(frozen=True, kw_only=True)
class AblationDesign:
    """The whole study: data, policies, evaluations and analyses.

    Attributes:
        name: ``"full"``, ``"quick"``, ``"smoke"`` or a user's name.
        real: the real (lab) demonstrations every policy trains on.
        sim: the sim demonstrations of each variant, as ``(variant, DataSpec)`` pairs.
        variants: grounding variants co-trained with (a subset of :data:`VARIANTS`).
        methods: training methods.
        seeds: training seeds of the four-variant table (>= 3 for the study).
        sweep_seeds: training seeds of the real_fraction sweep and the mixture analysis (``None``: ``seeds``).
        rule_end: which end of the mixing rule's range the co-trained policies use (``"high"``: sqrt(N/M)).
        train: ``TrainConfig`` fields that override its defaults (steps, widths, ``device``, ...) for every policy.
        train_gpus: share of a GPU each training declares to Ray when ``train["device"]`` is ``"cuda"`` (0.25: four
            trainings share a GPU); 0 for trainings on the CPU. Not part of any config hash (the device is).
        lab_episodes: protocol episodes per policy in the lab.
        sim_episodes: protocol episodes per policy in its own simulated variant.
        eval_env_kwargs: env arguments of every evaluation (task settings: ``num_objects``, ``episode_steps``).
        eval_split: the protocol's seed split of every evaluation (``"test"``: its standard mix of conditions on
            the test seeds, scaled to ``lab_episodes`` / ``sim_episodes``; docs/protocol.md), or ``None``: that
            many nominal episodes on the legacy seeds, as every design before protocol v2 (whose task keys it
            keeps). With a split the tables read the nominal episodes.
        eval_batch: episodes each evaluation steps together in the native vector env, its policy answering for all
            of them in one call (at most the evaluation's episodes). Results are identical at every value, so it is
            not part of any key: a run with another value reuses finished evaluations.
        sweep_variant: the variant of the real_fraction sweep (``None``: no sweep).
        sweep_fractions: its real_fraction values (numbers or ``"low"`` / ``"high"``).
        sweep_methods: methods swept (a CFG/ADDA method skips 0 and 1, which it cannot train).
        mixture_methods: methods whose fully grounded (``sweep_variant``) policies get the mixture analysis, with
            the single-domain policies at real_fraction 0 and 1 as references when the sweep has them.
        mixture_episodes: lab episodes per policy rolled out for the mixture analysis.
        mixture_neighbors: nearest demo states per domain whose actions a policy action is compared with.
        bootstrap_replicates: bootstrap replicates of the effect intervals.
        max_retries: retries of a failed task (Ray's ``max_retries``, exceptions included).
        lab: the lab of the whole chain (``--lab``), or ``None``: the default lab's canonical data and groundings
            (the shipped grounding file and behavior model), as before ``--lab`` existed.
        chain: how the chain's stages run (sysid, behavior fit); set exactly when ``lab`` is. With both, the real
            data is made in that lab by its teleoperator, the grounded variants' envs take the grounding file and
            the behavior model its chain produced, and every policy is evaluated in that lab.
        arms: control arms (:mod:`~r2s2r_envs.ablation.arms`: ``"untuned-planner"``, ``"lab-sensing"``,
            ``"slowed-planner"``, ``"generator-planner-pace"``, ``"success-matched"``): data variants whose cells
            are trained and evaluated in the lab like the table's, and split the axes' effects in the report. Their
            tasks come after all others; a design without arms has the tasks and keys it had before they existed.
        track: ``"state"`` (policies read the state observations) or ``"image"`` (every dataset also holds both
            cameras' images, policies train with an image recipe and are evaluated with cameras:
            :func:`~r2s2r_envs.ablation.presets.image_track`). A run directory is made for one track.
        interventions: diagnostic conditions (:mod:`~r2s2r_envs.ablation.interventions`: ``"no-latency"``,
            ``"nominal-belt"``, ``"nominal-timing"``) under which the table's policies (:meth:`intervention_policies`)
            are evaluated again in the lab; the report sets each axis's effect under them beside its effect under
            ``nominal``. Their tasks come after all others; a design without them has the tasks and keys it had
            before they existed.
    """

    name: str
    real: DataSpec
    sim: tuple[tuple[str, DataSpec], ...]
    variants: tuple[str, ...] = VARIANTS
    methods: tuple[str, ...] = DEFAULT_METHODS
    seeds: tuple[int, ...] = (0, 1, 2)
    sweep_seeds: tuple[int, ...] | None = None
    rule_end: RuleEnd = "high"
    train: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    train_gpus: float = 0.0
    lab_episodes: int = 100
    sim_episodes: int = 100
    eval_env_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    eval_batch: int = 16
    eval_split: str | None = None
    sweep_variant: str | None = "FullyGrounded"
    sweep_fractions: tuple[float | str, ...] = DEFAULT_SWEEP
    sweep_methods: tuple[str, ...] = ("flow", "flow-cfg-adda")
    mixture_methods: tuple[str, ...] = DEFAULT_METHODS
    mixture_episodes: int = 20
    mixture_neighbors: int = 5
    bootstrap_replicates: int = 2000
    max_retries: int = 2
    lab: LabRef | None = None
    chain: ChainSpec | None = None
    arms: tuple[str, ...] = ()
    track: str = "state"
    interventions: tuple[str, ...] = ()

    # ------------------------------------------------------------------ derived
    def sim_spec(self, variant: str) -> DataSpec:
        """The sim data of ``variant``."""
        return dict(self.sim)[variant]

    def rule_range(self, variant: str) -> tuple[float, float, bool]:
        """``(low, high, rule_applies)`` of the mixing rule for the real data and ``variant``'s sim data."""
        from r2s2r_envs.datasets.mixture import suggest_real_fraction

        s = suggest_real_fraction(self.real.episodes, self.sim_spec(variant).episodes)
        return s.low, s.high, s.rule_applies

    def rule_fraction(self, variant: str) -> float:
        """The real_fraction of the co-trained policies of ``variant``: the mixing rule's ``rule_end``, 3 digits."""
        low, high, _ = self.rule_range(variant)
        return round(high if self.rule_end == "high" else low, 3)

    def sweep_values(self) -> tuple[float, ...]:
        """The sweep's real_fractions as numbers, sorted, duplicates removed: rule ends that coincide, and a number
        within :data:`SWEEP_RESOLUTION` of a rule end the sweep names (the end is kept)."""
        if self.sweep_variant is None:
            return ()
        low, high, _ = self.rule_range(self.sweep_variant)
        named = {"low": round(low, 3), "high": round(high, 3)}
        ends = {named[v] for v in self.sweep_fractions if isinstance(v, str)}
        numbers = {float(v) for v in self.sweep_fractions if not isinstance(v, str)}
        kept = {v for v in numbers if v in ends or all(abs(v - end) >= SWEEP_RESOLUTION for end in ends)}
        return tuple(sorted(kept | ends))

    def policies(self) -> list[PolicySpec]:
        """Every policy of the design (duplicates removed; real-only policies are shared by all methods): the
        four-variant table's for every seed first, then the sweep's, so the headline table is finished first."""
        out = self.table_policies()
        for seed in self.sweep_seed_list():
            for method in self.sweep_methods:
                for rf in self.sweep_values():
                    spec = self.sweep_policy(method, rf, seed)
                    if spec is not None:
                        out.append(spec)
        return list(dict.fromkeys(out))

    def table_policies(self) -> list[PolicySpec]:
        """The four-variant table's policies, seed by seed: real-only, then each method co-trained on each variant at
        the rule's real_fraction (real-only repeats per method; callers remove duplicates)."""
        out: list[PolicySpec] = []
        for seed in self.seeds:
            for method in self.methods:
                out.append(PolicySpec(method=SINGLE_DOMAIN_METHOD, variant=None, real_fraction=1.0, seed=seed))
                for variant in self.variants:
                    rf = self.rule_fraction(variant)
                    out.append(PolicySpec(method=method, variant=variant, real_fraction=rf, seed=seed))
        return out

    def sweep_seed_list(self) -> tuple[int, ...]:
        """The seeds of the sweep and the mixture analysis (``sweep_seeds``, else ``seeds``)."""
        return self.seeds if self.sweep_seeds is None else self.sweep_seeds

    def sweep_policy(self, method: str, real_fraction: float, seed: int) -> PolicySpec | None:
        """The policy of one sweep point (``None`` when ``method`` cannot train with one domain only)."""
        if real_fraction in (0.0, 1.0) and method != SINGLE_DOMAIN_METHOD:
            return None
        variant = None if real_fraction == 1.0 else self.sweep_variant
        return PolicySpec(method=method, variant=variant, real_fraction=real_fraction, seed=seed)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (written to the output directory's manifest)."""
        d = dataclasses.asdict(self)
        d["real"] = self.real.to_dict()
        d["sim"] = [[v, s.to_dict()] for v, s in self.sim]
        d["train"] = dict(self.train)
        d["eval_env_kwargs"] = dict(self.eval_env_kwargs)
        d["lab"] = None if self.lab is None else self.lab.to_dict()
        d["chain"] = None if self.chain is None else self.chain.to_dict()
        if self.eval_split is None:  # the designs before protocol v2 keep their manifests
            del d["eval_split"]
        if not self.arms:  # so do the designs without control arms
            del d["arms"]
        if self.track == "state":  # and those of the state track
            del d["track"]
        if not self.interventions:  # and those without interventions
            del d["interventions"]
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AblationDesign:
        """Reads :meth:`to_dict` output (unknown fields are refused)."""
        check_keys(data, sorted(f.name for f in dataclasses.fields(cls)), what="design field", error=DesignError)
        kw = dict(data)
        kw["real"] = DataSpec(**data["real"])
        kw["sim"] = tuple((v, DataSpec(**s)) for v, s in data["sim"])
        lists = ("variants", "methods", "seeds", "sweep_fractions", "sweep_methods", "mixture_methods", "arms")
        for name in (*lists, "interventions"):
            if name in kw:
                kw[name] = tuple(kw[name])
        if kw.get("sweep_seeds") is not None:
            kw["sweep_seeds"] = tuple(kw["sweep_seeds"])
        if kw.get("lab") is not None:
            kw["lab"] = LabRef(**kw["lab"])
        if kw.get("chain") is not None:
            kw["chain"] = ChainSpec.from_dict(kw["chain"])
        return cls(**kw)

    # ------------------------------------------------------------------ the task graph
    def tasks(self, canonical_hashes: Mapping[str, str] | None = None) -> list[Task]:
        """The task graph, dependencies before the tasks that need them.

        Args:
            canonical_hashes: content hash of each canonical dataset the design reads (part of its data task's
                config, so new data under the same name re-runs everything trained on it).
        """
        hashes = dict(canonical_hashes or {})
        tasks: list[Task] = []
        data_keys: dict[str, str] = {}
        stage_keys: dict[str, str] = {}  # chain stage kind -> key (designs with a lab only)
        # A stage runs when a variant of the design is grounded on its axis (--variants may leave one out).
        used = self._sim_variants_used()
        needs_world = any(VARIANT_AXES[v][0] for v in used) or "world" in arm_stages(self.arms)
        needs_behavior = any(VARIANT_AXES[v][1] for v in used) or "behavior" in arm_stages(self.arms)
        if self.lab is not None and self.chain is not None and needs_world:
            config = self.chain.sysid_config(self.lab)
            label = f"sysid lab {self.lab.name}"
            tasks.append(Task.of("sysid", config, num_cpus=self.chain.sysid_workers, label=label))
            stage_keys["sysid"] = tasks[-1].key
        for variant, spec in [(None, self.real), *((v, self.sim_spec(v)) for v in self._sim_variants_used())]:
            config = spec.to_dict()
            if spec.canonical is not None:
                config["expected_sha256"] = hashes.get(spec.canonical)
            deps: tuple[str, ...] = ()
            if self.lab is not None and spec.env_id == LAB_ENV_ID:
                config["lab"] = self.lab.to_config()
            if variant is not None and stage_keys:
                config["inputs"], deps = self._grounding_inputs(variant, stage_keys)
            data = Task.of("data", config, deps, label=f"data {spec.label}")
            tasks.append(data)
            data_keys["real" if variant is None else variant] = data.key
            if variant is None and self.lab is not None and self.chain is not None and needs_behavior:
                config = self.chain.behavior_config(self.lab)
                tasks.append(Task.of("behavior", config, (data.key,), label=f"behavior fit to {spec.label}"))
                stage_keys["behavior"] = tasks[-1].key
        policy_keys: dict[PolicySpec, str] = {}
        for policy in self.policies():
            deps = tuple(data_keys[d] for d in (["real"] if policy.real_fraction > 0 else []) + self._sim_deps(policy))
            task = self.train_task(policy, deps)
            tasks.append(task)
            policy_keys[policy] = task.key
        for policy, pkey in policy_keys.items():
            for env_id, episodes in self._eval_envs(policy):
                config = self.eval_config(policy, env_id, episodes)
                deps = (pkey,)
                in_lab = self.lab is not None and env_id == LAB_ENV_ID  # eval_config names the lab
                if not in_lab and policy.variant is not None and stage_keys:  # its own variant, grounded on this lab
                    config["inputs"], inputs = self._grounding_inputs(policy.variant, stage_keys)
                    deps = (pkey, *inputs)
                tasks.append(self.eval_task(policy, env_id, episodes, config, deps))
        for policy, sim_variant in self.mixture_policies():
            pkey = policy_keys[policy]
            config = {
                "policy": dataclasses.asdict(policy),
                "sim_variant": sim_variant,
                "episodes": self.mixture_episodes,
                "neighbors": self.mixture_neighbors,
                "env_kwargs": dict(self.eval_env_kwargs),
                "attribution_version": ATTRIBUTION_VERSION,
            }
            if self.lab is not None:
                config["lab"] = self.lab.to_config()
            deps = (pkey, data_keys["real"], data_keys[sim_variant])
            tasks.append(Task.of("mixture", config, deps, label=f"mixture {policy_label(policy)}"))
        if self.arms:
            tasks += self._arm_tasks(data_keys, stage_keys)
        if self.interventions:
            tasks += self._intervention_tasks(policy_keys)
        return tasks

    def mixture_policies(self) -> list[tuple[PolicySpec, str]]:
        """``(policy, sim variant its actions are compared with)`` for the mixture analysis."""
        variant = self.sweep_variant or (self.variants[-1] if self.variants else None)
        if variant is None or variant not in self.variants:
            return []
        out = []
        for seed in self.sweep_seed_list():
            for method in self.mixture_methods:
                policy = PolicySpec(
                    method=method, variant=variant, real_fraction=self.rule_fraction(variant), seed=seed
                )
                out.append((policy, variant))
            # References: the single-domain policies, which can only act like their own data.
            if self.sweep_variant is not None:
                for rf in (0.0, 1.0):
                    if rf in self.sweep_values():
                        ref = self.sweep_policy(SINGLE_DOMAIN_METHOD, rf, seed)
                        if ref is not None:
                            out.append((ref, variant))
        return list(dict.fromkeys(out))

    # ------------------------------------------------------------------ the interventions' tasks
    def intervention_policies(self) -> list[PolicySpec]:
        """The policies each intervention evaluates again in the lab: the four-variant table's (real-only and every
        co-trained variant at the rule's real_fraction, each method and seed), then, when the sweep has real_fraction
        0, its sim-only policies (the sweep's seeds)."""
        out = self.table_policies()
        if 0.0 in self.sweep_values():
            for seed in self.sweep_seed_list():
                spec = self.sweep_policy(SINGLE_DOMAIN_METHOD, 0.0, seed)
                if spec is not None:
                    out.append(spec)
        return list(dict.fromkeys(out))

    def intervention_config(self, policy: PolicySpec, condition: str) -> dict[str, Any]:
        """The config of ``policy``'s lab evaluation under the intervention ``condition``: its nominal lab
        evaluation's (:meth:`eval_config`) with the condition, at :func:`.interventions.intervention_episodes`."""
        episodes = intervention_episodes(self.lab_episodes, self.eval_split)
        return {**self.eval_config(policy, LAB_ENV_ID, episodes), "condition": condition}

    def _intervention_tasks(self, policy_keys: Mapping[PolicySpec, str]) -> list[Task]:
        """Per intervention, per policy of :meth:`intervention_policies`, its lab evaluation under that condition,
        depending on the policy's training task alone (the policy the table's evaluations use)."""
        tasks = []
        for condition in self.interventions:
            for policy in self.intervention_policies():
                config = self.intervention_config(policy, condition)
                label = f"eval {policy_label(policy)} in {LAB_ENV_ID} under {condition}"
                batch = min(self.eval_batch, config["episodes"])
                tasks.append(Task.of("eval", config, (policy_keys[policy],), label=label, batch=batch))
        return tasks

    # ------------------------------------------------------------------ the control arms' tasks
    def arm_data_spec(self, cell: str) -> DataSpec:
        """The dataset of a control arm's cell (:mod:`~r2s2r_envs.ablation.arms`): its base variant's recipe (a
        canonical dataset's recipe when the design reads the canonical dataset), with what the arm changes."""
        spec = self.sim_spec(arm_cells(self.arms)[cell])
        if spec.canonical is not None:
            spec = canonical_recipe(spec.canonical, spec.episodes, spec.label)
        generate_kwargs = dict(spec.generate_kwargs)
        env_kwargs = dict(spec.env_kwargs)
        if cell in ("untuned-planner", "lab-sensing", "slowed-planner"):
            # Named, the planner gets no settings of the env's (WorldGrounded's re-tune): its defaults, or the pace's.
            generate_kwargs["demonstrator"] = "scripted"
        elif cell == "generator-planner-pace":
            generate_kwargs["demonstrator"] = "humanlike"
        if cell == "lab-sensing" and self.lab is None:
            env_kwargs["world"] = self._default_sensing()
        suffix = "matched" if cell in MATCHED_CELLS.values() else cell
        return dataclasses.replace(
            spec, label=f"{spec.label}-{suffix}", env_kwargs=env_kwargs, generate_kwargs=generate_kwargs, recipe_of=None
        )

    def _default_sensing(self) -> dict[str, Any]:
        """The sensing of the grounding the design's WorldGrounded data use (without ``--lab``: a shipped file)."""
        from r2s2r_envs.grounding.result import DEFAULT_GROUNDING, load_grounding

        grounding = self.sim_spec("WorldGrounded").env_kwargs.get("grounding", DEFAULT_GROUNDING)
        return sensing_world(load_grounding(grounding).world)

    def _arm_data_task(self, cell: str, data_keys: Mapping[str, str], stage_keys: Mapping[str, str]) -> Task:
        base = arm_cells(self.arms)[cell]
        spec = self.arm_data_spec(cell)
        config = spec.to_dict()
        deps: list[str] = []
        arm: dict[str, Any] = {"cell": cell}
        if cell in MATCHED_CELLS.values():
            config = {**config, "episodes": None, "seed": None}  # a cut of the variants' data: made, not generated
            arm["match"] = {"variant": base, "variants": list(VARIANTS)}
            deps = [data_keys[v] for v in VARIANTS]
        elif cell == "lab-sensing":
            if stage_keys:
                arm["sensing_of"] = {"kind": "sysid", "key": stage_keys["sysid"]}
                deps.append(stage_keys["sysid"])
        elif stage_keys and base != "Ungrounded":
            config["inputs"], inputs = self._grounding_inputs(base, stage_keys)
            deps += inputs
        if cell in ("slowed-planner", "generator-planner-pace"):
            target = "real" if cell == "slowed-planner" else "Ungrounded"
            source = self.real if target == "real" else self.sim_spec(target)
            arm["pace"] = {
                "demonstrator": spec.generate_kwargs["demonstrator"],
                "target": {"data": source.label, "key": data_keys[target]},
                "episodes": calibration_episodes(spec.episodes),  # attempts per calibration round
                "rounds": CALIBRATION_ROUNDS,
            }
            deps.append(data_keys[target])
        config["arm"] = arm
        return Task.of("data", config, tuple(deps), label=f"data {spec.label}")

    def _arm_tasks(self, data_keys: Mapping[str, str], stage_keys: Mapping[str, str]) -> list[Task]:
        """The arms' tasks: each cell's data, then per seed and method its co-trained policy, then their lab
        evaluations (the four-variant table's recipe, seeds and lab episodes)."""
        cells = arm_cells(self.arms)
        tasks = [self._arm_data_task(cell, data_keys, stage_keys) for cell in cells]
        cell_data = {cell: t.key for cell, t in zip(cells, tasks, strict=True)}
        trained: list[tuple[PolicySpec, str]] = []
        for seed in self.seeds:
            for method in self.methods:
                for cell, base in cells.items():
                    policy = PolicySpec(method=method, variant=cell, real_fraction=self.rule_fraction(base), seed=seed)
                    task = self.train_task(policy, (data_keys["real"], cell_data[cell]))
                    tasks.append(task)
                    trained.append((policy, task.key))
        for policy, pkey in trained:
            config = self.eval_config(policy, LAB_ENV_ID, self.lab_episodes)
            tasks.append(self.eval_task(policy, LAB_ENV_ID, self.lab_episodes, config, (pkey,)))
        return tasks

    def _grounding_inputs(
        self, variant: str, stage_keys: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], tuple[str, ...]]:
        """``({env argument: {"kind", "key"}}, keys)`` of the chain outputs ``variant``'s env takes."""
        world, behavior = VARIANT_AXES[variant]
        inputs = {}
        for axis, grounded in (("world", world), ("behavior", behavior)):
            if grounded:
                argument, kind = AXIS_INPUTS[axis]
                inputs[argument] = {"kind": kind, "key": stage_keys[kind]}
        return inputs, tuple(v["key"] for v in inputs.values())

    def _sim_variants_used(self) -> list[str]:
        used = list(self.variants)
        if self.sweep_variant is not None and self.sweep_variant not in used:
            used.append(self.sweep_variant)
        used += arm_reads(self.arms)  # the variants the control arms' data are made from
        return [v for v in VARIANTS if v in used]

    def _sim_deps(self, policy: PolicySpec) -> list[str]:
        return [policy.variant] if policy.variant is not None and policy.real_fraction < 1 else []

    def train_task(self, policy: PolicySpec, deps: tuple[str, ...]) -> Task:
        """The task that trains ``policy`` on the data tasks ``deps``."""
        config = self._train_config(policy)
        return Task.of("train", config, deps, num_gpus=self.train_gpus, label=f"train {policy_label(policy)}")

    def eval_config(self, policy: PolicySpec, env_id: str, episodes: int) -> dict[str, Any]:
        """The config of ``policy``'s evaluation in ``env_id`` (the lab's identity when it is this design's lab)."""
        config: dict[str, Any] = {
            "env_id": env_id,
            "episodes": episodes,
            "env_kwargs": dict(self.eval_env_kwargs),
            "policy": dataclasses.asdict(policy),
        }
        if self.eval_split is not None:
            config["split"] = self.eval_split
        if self.lab is not None and env_id == LAB_ENV_ID:
            config["lab"] = self.lab.to_config()
        return config

    def eval_task(
        self, policy: PolicySpec, env_id: str, episodes: int, config: dict[str, Any], deps: tuple[str, ...]
    ) -> Task:
        """The task that evaluates ``policy`` in ``env_id`` with ``config`` (:meth:`eval_config`, maybe extended)."""
        label = f"eval {policy_label(policy)} in {env_id}"
        return Task.of("eval", config, deps, label=label, batch=min(self.eval_batch, episodes))

    def _train_config(self, policy: PolicySpec) -> dict[str, Any]:
        from r2s2r_envs.policies.config import DEFAULT_RECIPE, RECIPES

        # Resolved: every value the recipe supplies is part of the key, so editing a recipe re-runs its tasks.
        recipe = self.train.get("recipe", DEFAULT_RECIPE)
        return {
            **RECIPES.get(recipe, {}),
            **dict(self.train),
            "recipe": recipe,
            "method": policy.method,
            "real_fraction": policy.real_fraction,
            "seed": policy.seed,
            "demos": "success",
        }

    def _eval_envs(self, policy: PolicySpec) -> list[tuple[str, int]]:
        envs = [(LAB_ENV_ID, self.lab_episodes)]
        if policy.variant is not None:
            envs.append((env_id_of(policy.variant), self.sim_episodes))
        return envs
