"""The Real2Sim2Real chain of one lab as ablation tasks (``r2s2r ablation --lab LAB``, docs/ablation.md#any-lab).

Two task kinds join the ablation's graph when a design names a lab (:class:`LabRef`) and the chain's settings
(:class:`ChainSpec`):

* **sysid**: log the lab and identify its world, with the scripted demonstrator tuned in the identified world
  (:func:`r2s2r_envs.grounding.sysid.run_sysid`, what ``r2s2r sysid --lab LAB`` runs); its output is a grounding
  file, the physics of that lab's ``PickSort-WorldGrounded-v0`` and ``PickSort-FullyGrounded-v0``.
* **behavior**: fit the human-like generator to the lab's demonstrations (the design's real data task, made by the
  lab's own teleoperator; :func:`r2s2r_envs.behavior.fit.fit_behavior`, what ``r2s2r fit-behavior`` runs); its
  output is the model of that lab's ``PickSort-BehaviorGrounded-v0`` and ``PickSort-FullyGrounded-v0``.

Both see the lab only as a black box: ``sysid`` steps ``PickSort-Real-v0`` through the grounding package's logging
protocols, ``behavior`` reads a lab dataset. Nothing here imports the lab or reads its parameters: a lab is known
by the name and config hash its env discloses (``provenance()["lab"]``), and a lab file given by the user is
checked by making that env (the lab config's own validation names a bad field) and copied, as bytes, into the run
directory so that every task of the run reads the same file.

A stage that ran and cannot deliver (a world field the logs did not identify, too few usable grasps) raises
:class:`StageError`: the runner records it without retrying (the same inputs give the same answer) and skips, with
the reason, every task that needs the stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from r2s2r_envs.mappings import check_keys

#: The lab's env id.
LAB_ENV_ID = "PickSort-Real-v0"
#: Where, in a run directory, a lab file given by the user is copied (``lab/<first 16 hex of its config hash>.json``).
LAB_FOLDER = "lab"
#: The grounding file of a finished sysid task (in its task directory).
GROUNDING_FILE = "grounding.json"
#: The behavior model of a finished behavior task (in its task directory).
MODEL_FILE = "behavior_model.json"


#: How a drawn lab is named wherever a lab is accepted (``gym.make("PickSort-Real-v0", lab="draw:7")``); the same
#: prefix as the lab package's, which this package does not import. A later draw version adds its number
#: (``"draw2:7"``, docs/lab.md#drawn-labs).
DRAW_PREFIX = "draw:"
_DRAWN = re.compile(r"draw(\d*):(\d+)")


class LabError(ValueError):
    """A lab the ablation cannot use (unknown name, missing file, a field unknown or out of range)."""


class StageError(RuntimeError):
    """A chain stage that ran and cannot deliver what the tasks after it need (deterministic: not retried)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabRef:
    """A lab as the ablation knows it: what its env discloses, and how to make it.

    Attributes:
        name: the lab's name (``provenance()["lab"]["name"]``).
        config_sha256: its config hash (``provenance()["lab"]["config_sha256"]``).
        file: for a lab given as a file, its copy in the run directory, relative to it
            (``lab/<hash>.json``); ``None`` for a shipped lab, which is made by its name.
        origin: what the user gave (a shipped name, a path or ``draw:SEED``); not part of any config hash.
        draw: the seed of a drawn lab (``--lab draw:SEED``, made by that name: the ablation never holds its
            parameters), else ``None``.
        draw_version: the draw version of a drawn lab (``--lab draw2:SEED``: 2); 1 for ``draw:SEED``.
    """

    name: str
    config_sha256: str
    file: str | None = None
    origin: str = ""
    draw: int | None = None
    draw_version: int = 1

    def to_config(self) -> dict[str, Any]:
        """The lab in a task's configuration (and so in its config hash): name, config hash, file (and a drawn
        lab's seed)."""
        config: dict[str, Any] = {"name": self.name, "config_sha256": self.config_sha256, "file": self.file}
        if self.draw is not None:
            config["draw"] = self.draw
            if self.draw_version != 1:  # version-1 labs keep their keys
                config["draw_version"] = self.draw_version
        return config

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the manifest's)."""
        return dataclasses.asdict(self)

    def short(self) -> str:
        """``"name (config 1a2b3c4d5e6f)"``: how reports and messages name the lab."""
        return f"{self.name} (config {self.config_sha256[:12]})"


def lab_identity(lab: str | Path) -> dict[str, str]:
    """The name and config hash that lab ``lab`` discloses (its env's ``provenance()["lab"]``).

    Raises:
        LabError: an unknown shipped name, a missing file, or a config the lab refuses (unknown or out-of-range
            field, named in the message by the lab config's own validation).
    """
    from r2s2r_envs.grounding.sysid import lab_identity as disclosed

    try:
        identity = disclosed(lab)
    except KeyError as exc:  # an unknown field: KeyError's text is its one argument
        raise LabError(f"--lab {lab}: {exc.args[0] if exc.args else exc}") from None
    except (FileNotFoundError, ValueError, TypeError) as exc:
        raise LabError(f"--lab {lab}: {exc}") from None
    return {"name": str(identity["name"]), "config_sha256": str(identity["config_sha256"])}


def resolve_lab(lab: str | Path) -> LabRef:
    """Checks ``lab`` (a shipped lab name or a lab JSON file) by making its env, and names it.

    Raises:
        LabError: as :func:`lab_identity`.
    """
    identity = lab_identity(lab)
    drawn = _DRAWN.fullmatch(str(lab))
    if drawn:  # checked by lab_identity: the lab made it
        version = int(drawn.group(1) or 1)
        return LabRef(**identity, origin=str(lab), draw=int(drawn.group(2)), draw_version=version)
    path = Path(lab)
    is_file = path.suffix == ".json" or path.is_file()
    file = f"{LAB_FOLDER}/{identity['config_sha256'][:16]}.json" if is_file else None
    return LabRef(name=identity["name"], config_sha256=identity["config_sha256"], file=file, origin=str(lab))


def install_lab(lab: LabRef, root: str | Path) -> None:
    """Copies a lab file into the run directory (``lab.file``), unless the same lab is there already."""
    if lab.file is None:
        return
    dest = Path(root) / lab.file
    if dest.is_file():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.copyfile(lab.origin, tmp)
    tmp.replace(dest)


def lab_argument(lab: Mapping[str, Any], root: str | Path) -> str:
    """What ``gym.make("PickSort-Real-v0", lab=...)`` gets for a task's lab config: the shipped name, the
    absolute path of the run directory's copy, or ``draw:SEED``."""
    if lab.get("file"):
        return str((Path(root) / lab["file"]).resolve())
    if lab.get("draw") is not None:
        version = int(lab.get("draw_version", 1))
        return f"draw{version if version != 1 else ''}:{lab['draw']}"
    return str(lab["name"])


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChainSpec:
    """How the chain's stages run.

    Attributes:
        sysid_quick: ``r2s2r sysid --quick``: fewer, shorter logging runs and a reduced fit.
        sysid_seed: base seed of the logging session.
        tune_episodes: episodes per grid point of the scripted demonstrator's tuning in the identified world
            (``None``: the sysid default, 40, 10 with ``sysid_quick``; 0: no tuning).
        tune_grid: the tuning grid, ``{PlannerConfig field: values}`` (``None``: ``grounding.tuning.DEFAULT_GRID``).
        require_identified: world fields the stage must identify, else it fails and the world-grounded variants
            are skipped (``None``: every field the identification is designed to identify, i.e. all but those it
            keeps at their datasheet value, ``grounding.identify.KEPT_NOMINAL``).
        sysid_workers: threads and processes of the sysid stage (declared to Ray as its CPUs; not in its hash).
        sysid_protocols: the excitation protocols the sysid stage logs (``grounding.excitation.PROTOCOLS``;
            ``None``: all); a field none of them exposes is then not required.
        fit_min_grasps: fewest usable grasps per category the behavior fit needs (``--min-grasps``).
        fit_max_sources: most grasps the model keeps (``None``: the fit's default).
        fit_seed: seed of the choice of sources.
        sysid_visual: the sysid stage also logs the lab's visual protocols (camera calibration set-ups, appearance
            frames) and fits the cameras and look into the grounding's ``appearance`` section, which the grounded
            variants render (``r2s2r sysid --lab LAB --visual``); the image track's chains set it.
    """

    sysid_quick: bool = False
    sysid_seed: int = 0
    tune_episodes: int | None = None
    tune_grid: Mapping[str, tuple[float, ...]] | None = None
    require_identified: tuple[str, ...] | None = None
    sysid_workers: int = 1
    sysid_protocols: tuple[str, ...] | None = None
    fit_min_grasps: int = 3
    fit_max_sources: int | None = None
    fit_seed: int = 0
    sysid_visual: bool = False

    def required_fields(self) -> list[str]:
        """The resolved ``require_identified`` (sorted)."""
        if self.require_identified is not None:
            return sorted(self.require_identified)
        from r2s2r_envs.grounding.excitation import PROTOCOLS
        from r2s2r_envs.grounding.identify import KEPT_NOMINAL
        from r2s2r_envs.world.params import WorldParams

        fields = [f for f in WorldParams.field_names() if f not in KEPT_NOMINAL]
        if self.sysid_protocols is not None:  # only what the logged protocols expose
            exposed = {f for p in self.sysid_protocols for f in PROTOCOLS.get(p, ())}
            fields = [f for f in fields if f in exposed]
        return sorted(fields)

    def sysid_config(self, lab: LabRef) -> dict[str, Any]:
        """The sysid task's configuration."""
        grid = None if self.tune_grid is None else {k: list(v) for k, v in sorted(self.tune_grid.items())}
        config = {
            "lab": lab.to_config(),
            "quick": self.sysid_quick,
            "seed": self.sysid_seed,
            "tune_episodes": self.tune_episodes,
            "tune_grid": grid,
            "require_identified": self.required_fields(),
        }
        if self.sysid_protocols is not None:  # absent otherwise: the keys of chains logging every protocol stay
            config["protocols"] = sorted(self.sysid_protocols)
        if self.sysid_visual:  # likewise: a chain without cameras keeps its key
            config["visual"] = True
        return config

    def behavior_config(self, lab: LabRef) -> dict[str, Any]:
        """The behavior task's configuration."""
        return {
            "lab": lab.to_config(),
            "min_grasps": self.fit_min_grasps,
            "max_sources": self.fit_max_sources,
            "seed": self.fit_seed,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        d = dataclasses.asdict(self)
        d["tune_grid"] = None if self.tune_grid is None else {k: list(v) for k, v in self.tune_grid.items()}
        d["require_identified"] = None if self.require_identified is None else list(self.require_identified)
        d["sysid_protocols"] = None if self.sysid_protocols is None else list(self.sysid_protocols)
        if not self.sysid_visual:  # as before the field existed
            del d["sysid_visual"]
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChainSpec:
        """Reads :meth:`to_dict` output."""
        kw = dict(data)
        if kw.get("tune_grid") is not None:
            kw["tune_grid"] = {k: tuple(v) for k, v in kw["tune_grid"].items()}
        if kw.get("require_identified") is not None:
            kw["require_identified"] = tuple(kw["require_identified"])
        if kw.get("sysid_protocols") is not None:
            kw["sysid_protocols"] = tuple(kw["sysid_protocols"])
        return cls(**kw)

    def check(self) -> None:
        """Checks the numbers and names (before any work).

        Raises:
            ValueError: naming the setting and what is accepted.
        """
        from r2s2r_envs.grounding.tuning import check_grid
        from r2s2r_envs.world.params import WorldParams

        for name in ("sysid_seed", "fit_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"chain {name} must be an integer >= 0, got {value!r}")
        for name in ("sysid_workers", "fit_min_grasps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"chain {name} must be an integer >= 1, got {value!r}")
        if self.tune_episodes is not None and (
            isinstance(self.tune_episodes, bool) or not isinstance(self.tune_episodes, int) or self.tune_episodes < 0
        ):
            raise ValueError(f"chain tune_episodes must be an integer >= 0 or None, got {self.tune_episodes!r}")
        if self.fit_max_sources is not None and (
            isinstance(self.fit_max_sources, bool)
            or not isinstance(self.fit_max_sources, int)
            or self.fit_max_sources < 1
        ):
            raise ValueError(f"chain fit_max_sources must be an integer >= 1 or None, got {self.fit_max_sources!r}")
        check_keys(
            self.require_identified or (),
            WorldParams.field_names(),
            what="world field",
            where="chain require_identified",
            error=ValueError,
        )
        if self.tune_grid is not None:
            check_grid({k: list(v) for k, v in self.tune_grid.items()})
        if self.sysid_protocols is not None:
            from r2s2r_envs.grounding.excitation import PROTOCOLS, check_protocols

            if isinstance(self.sysid_protocols, str):
                raise ValueError(
                    f"chain sysid_protocols: unknown protocol(s) {self.sysid_protocols!r} given as a string; give a "
                    f"tuple of protocols from {list(PROTOCOLS)}, or None for all"
                )
            try:
                check_protocols(self.sysid_protocols)
            except ValueError as e:
                raise ValueError(f"chain sysid_protocols: {e}, or None for all") from None


# ---------------------------------------------------------------------- the tasks
def run_sysid_task(task: Mapping[str, Any], root: Path, out: Path) -> dict[str, Any]:
    """The sysid task: log the lab into ``out/logs``, identify, validate, tune, write ``out/grounding.json``.

    Raises:
        StageError: a required world field was not identified (named, with the reason the fit gives), or the logs
            the lab produced are not fit for identification.
    """
    from r2s2r_envs.grounding.identify import inert_fields
    from r2s2r_envs.grounding.logs import LogError

    run_sysid = sysid_entry()
    config = task["config"]
    lab = lab_argument(config["lab"], root)
    grid = None if config["tune_grid"] is None else {k: tuple(v) for k, v in config["tune_grid"].items()}
    log_dir = out / "logs"
    if log_dir.exists():
        shutil.rmtree(log_dir)  # an earlier attempt's partial logs
    try:
        result = run_sysid(
            out / GROUNDING_FILE,
            lab=lab,
            log_dir=log_dir,
            seed=config["seed"],
            quick=config["quick"],
            protocols=config.get("protocols"),
            workers=int(task.get("num_cpus") or 1),
            tune_episodes=config["tune_episodes"],
            tune_grid=grid,
            visual=bool(config.get("visual")),
        )
    except LogError as exc:
        raise StageError(f"sysid of lab {_named(config['lab'])}: the logs cannot be fitted: {exc}") from None
    grounding = result.grounding
    # A field without effect in the identified world needs no estimate (a steady belt has no fluctuation time).
    required = set(config["require_identified"]) - inert_fields(grounding.world)
    missing = {ref: reason for ref, reason in grounding.not_identifiable.items() if ref.split("[", 1)[0] in required}
    if missing:
        listed = "; ".join(f"{ref}: {reason}" for ref, reason in sorted(missing.items()))
        raise StageError(
            f"sysid of lab {_named(config['lab'])} could not identify {sorted(missing)} ({listed}); the world-grounded "
            "variants need them (ChainSpec.require_identified lists the fields a grounding must identify)"
        )
    nrmse = grounding.validation.get("nrmse", {})
    demonstrator = grounding.demonstrator or {}
    return {
        "grounding": str(out / GROUNDING_FILE),
        # The written file's bytes, content_sha256 included: what datasets made with it record (env_kwarg_files).
        "sha256": hashlib.sha256((out / GROUNDING_FILE).read_bytes()).hexdigest(),
        "lab": dict(grounding.provenance.get("lab", {})),
        "identified": list(grounding.identified),
        "not_identifiable": dict(grounding.not_identifiable),
        "reduction_percent": {g: v.get("reduction_percent") for g, v in nrmse.items() if isinstance(v, Mapping)},
        "demonstrator": dict(demonstrator.get("settings") or {}),
        "logs": {"runs": len(result.logs.runs), "fit": len(result.logs.fit), "heldout": len(result.logs.heldout)},
        # With the visual protocols: the visual gap per camera on held-out set-ups, spec sheet and as identified.
        "visual_gap": grounding.validation.get("visual_gap"),
        "stage_time_s": {k: round(float(v), 3) for k, v in result.wall_time_s.items()},
    }


def sysid_entry() -> Any:
    """``run_sysid``: the library function ``r2s2r sysid`` calls."""
    from r2s2r_envs.grounding.sysid import run_sysid

    return run_sysid


def run_behavior_task(task: Mapping[str, Any], demos: str, out: Path) -> dict[str, Any]:
    """The behavior task: fit the generator to the lab's demos (``demos``, an HDF5 file), write the model.

    Raises:
        StageError: the demos cannot be fitted (too few usable grasps of a category, no successful episode, ...).
    """
    from r2s2r_envs.behavior.fit import FitSettings, fit_behavior, save_model
    from r2s2r_envs.behavior.segments import BehaviorDataError

    config = task["config"]
    defaults = FitSettings()
    settings = FitSettings(
        max_sources=defaults.max_sources if config["max_sources"] is None else config["max_sources"],
        seed=config["seed"],
        min_grasps_per_category=config["min_grasps"],
    )
    try:
        model = fit_behavior(demos, settings=settings)
    except BehaviorDataError as exc:
        raise StageError(f"behavior fit to the demos of lab {_named(config['lab'])}: {exc}") from None
    path = save_model(model, out / MODEL_FILE)
    record = model["provenance"]["demos"]
    return {
        "model": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "sources": len(model["sources"]),
        "demos": {k: record[k] for k in ("episodes", "successes", "grasps") if k in record},
    }


def _named(lab: Mapping[str, Any]) -> str:
    return f"{lab['name']} (config {str(lab['config_sha256'])[:12]})"
