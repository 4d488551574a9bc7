"""One demonstration: the rollout a generation run records, its settings and the provenance written with it.

Attempt ``i`` of a run with base seed ``S`` resets the env with ``env_seed`` and the demonstrator with
``demonstrator_seed`` from the suite's one seeding convention (:mod:`r2s2r_envs.envs.seeding`, docs/architecture.md,
"Seeding"): ``(env_seed, demonstrator_seed) = SeedSequence(S, spawn_key=(i,)).generate_state(2, uint32)``
(:func:`run_attempt`); :func:`rollout` runs the episode and records it.  :func:`r2s2r_envs.datasets.generate.generate`
runs the attempts (in parallel, resumably) and writes them.

A dataset is data, never code: envs are made only from registered Gymnasium ids and demonstrators only from
registered names (:func:`r2s2r_envs.behavior.demonstrator_names`) or a factory passed in Python; nothing read from a
file is imported or called.  For the lab only its name and config hash are recorded (:func:`build_provenance`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.env_values import FILES_KEY
from r2s2r_envs.datasets.writer import Episode
from r2s2r_envs.envs.observations import OBS_MODES as OBS_MODES  # the env's modes, re-exported for generate
from r2s2r_envs.envs.registration import EnvArgumentError, UnknownEnvError, make_env
from r2s2r_envs.envs.seeding import SEEDING_CONVENTION, episode_seeds
from r2s2r_envs.provenance import versions
from r2s2r_envs.world.constants import HAND_JOINTS

if TYPE_CHECKING:
    from r2s2r_envs.datasets.replay import SimulatedEnv

#: The demonstrator used unless another is named: ``None``, the env's own (``env.unwrapped.demonstrator``).
DEFAULT_DEMONSTRATOR: str | None = None
#: ``gymnasium.make`` arguments that are not env arguments. ``max_episode_steps`` would add Gymnasium's outer
#: TimeLimit, which cuts episodes without giving pending objects an outcome; the env's ``episode_steps`` is the
#: one time limit.
GYM_MAKE_ARGUMENTS: tuple[str, ...] = ("max_episode_steps", "disable_env_checker")

#: A demonstrator: a registered name, ``None`` (the env's own), or a factory ``f(env) -> demonstrator``.
DemonstratorSpec = str | None | Callable[[gym.Env], Any]

# An env without a time limit must still end; past this many steps the rollout is abandoned.
_MAX_STEPS_WITHOUT_LIMIT = 100_000
# Second entropy word of the action-noise generator (its seed is [demonstrator seed, this]).
_NOISE_STREAM = 0xDA27


class GenerationError(RuntimeError):
    """Generation could not proceed (a worker failed, settings conflict with an existing file, ...)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """Everything that determines a dataset's content (stored in the file as ``generation``).

    Attributes:
        env_id: a registered Gymnasium id.
        env_kwargs: keyword arguments of the env (JSON-able), including ``episode_steps`` when overridden.
        obs_mode: observation mode the dataset stores: ``"state"``, ``"rgb"`` or ``"state+rgb"``.
        obs_keys: store only these observation keys (default: all keys of ``obs_mode``).
        seed: base seed.
        successes_only: keep only successful episodes.
        demonstrator: a registered demonstrator name, ``None`` for the env's own, or a factory ``f(env)``.
        valid_fraction: share of demos in the ``valid`` filter key.
        action_noise: standard deviation of the Gaussian noise added to the arm part of every demonstrator
            action before it is executed, in normalized action units (0: none).  Noise injection in the manner of
            DART: the demonstrator corrects the disturbance it meets, so the data covers the states a learned
            policy drifts into and shows how to recover from them.  The executed (noisy) action is recorded as
            ``actions`` and the demonstrator's own, clean one as ``action_labels`` (the label to learn).
        env_kwarg_files: for each env argument given as a file path and recorded by value (its JSON object is in
            ``env_kwargs``), the file's name and the SHA-256 of its bytes (``datasets.env_values``).
    """

    env_id: str
    env_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    obs_mode: str = "state"
    obs_keys: tuple[str, ...] | None = None
    seed: int = 0
    successes_only: bool = False
    demonstrator: DemonstratorSpec = DEFAULT_DEMONSTRATOR
    valid_fraction: float = 0.1
    action_noise: float = 0.0
    env_kwarg_files: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)

    @property
    def env_name(self) -> str:
        """The env id."""
        return self.env_id

    @property
    def env_obs_mode(self) -> str:
        """The mode the env runs in: demonstrators need the state keys, so image-only datasets run ``state+rgb``."""
        return self.obs_mode if "state" in self.obs_mode else f"state+{self.obs_mode}"

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-able form, compared when a run resumes."""
        return {
            "env_id": self.env_id,
            "env_kwargs": dict(self.env_kwargs),
            "obs_mode": self.obs_mode,
            "obs_keys": None if self.obs_keys is None else list(self.obs_keys),
            "seed": int(self.seed),
            "successes_only": bool(self.successes_only),
            "demonstrator": demonstrator_record(self.demonstrator),
            "valid_fraction": float(self.valid_fraction),
            "seeding": SEEDING_CONVENTION,
            # Only when used, so files made without noise keep their content (and hash).
            **({"action_noise": float(self.action_noise)} if self.action_noise else {}),
            # Likewise only when a file was recorded by value.
            **({FILES_KEY: {k: dict(v) for k, v in self.env_kwarg_files.items()}} if self.env_kwarg_files else {}),
        }


def demonstrator_record(demonstrator: DemonstratorSpec) -> str | dict[str, str] | None:
    """How a demonstrator choice is recorded in the generation settings (a description, never imported).

    A registered name or ``None`` as is; a factory as ``{"callable": "<module>.<qualified name>"}``.
    """
    if demonstrator is None or isinstance(demonstrator, str):
        return demonstrator
    module = getattr(demonstrator, "__module__", None) or "?"
    name = getattr(demonstrator, "__qualname__", None) or type(demonstrator).__qualname__
    return {"callable": f"{module}.{name}"}


def check_demonstrator(demonstrator: DemonstratorSpec) -> None:
    """Checks a demonstrator choice before anything runs.

    Raises:
        ValueError: a string that is not a registered demonstrator name (the message lists them).
        TypeError: neither a name, ``None`` nor a callable.
    """
    if demonstrator is None or callable(demonstrator):
        return
    if not isinstance(demonstrator, str):
        raise TypeError(
            f"demonstrator must be a registered name, None (the env's own) or a callable f(env), got {demonstrator!r}"
        )
    from r2s2r_envs.envs.demonstrators import demonstrator_names

    names = demonstrator_names()
    if demonstrator in names:
        return
    hint = ""
    if ":" in demonstrator:
        hint = (
            " Demonstrators are named, not imported: 'module:function' is not accepted. Register yours with "
            "r2s2r_envs.behavior.register_demonstrator(name, factory), or pass the factory itself in Python."
        )
    raise ValueError(f"unknown demonstrator {demonstrator!r}; registered names: {names}.{hint}")


def make_demonstrator_for(env: gym.Env, demonstrator: DemonstratorSpec) -> Any:
    """Builds the demonstrator for ``env``: a registered name, ``None`` (the env's own) or a factory ``f(env)``.

    Raises:
        GenerationError: the env names no registered demonstrator of its own.
    """
    check_demonstrator(demonstrator)
    if callable(demonstrator):
        return demonstrator(env)
    from r2s2r_envs.envs.demonstrators import demonstrator_names, make_demonstrator

    if demonstrator is None:
        own = getattr(env.unwrapped, "demonstrator", None)
        if own not in demonstrator_names():
            raise GenerationError(
                f"env {_env_id_of(env)!r} names no registered demonstrator of its own (env.unwrapped.demonstrator "
                f"is {own!r}); pass demonstrator=<one of {demonstrator_names()}> or a factory f(env)"
            )
    return make_demonstrator(env, demonstrator)


@contextlib.contextmanager
def as_generation_error() -> Iterator[None]:
    """The registry's refusals (``r2s2r_envs.envs.check_env_id`` / ``make_env``) as a :class:`GenerationError`."""
    try:
        yield
    except (UnknownEnvError, EnvArgumentError) as exc:
        raise GenerationError(str(exc)) from exc


def check_env_kwargs(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Checks that ``env_kwargs`` holds env arguments only, JSON-able; returns a copy.

    Raises:
        ValueError: a ``gymnasium.make`` argument (e.g. ``max_episode_steps``: use ``episode_steps``) or a value
            JSON cannot hold.
    """
    kwargs = dict(env_kwargs)
    wrong = sorted(k for k in kwargs if k in GYM_MAKE_ARGUMENTS)
    if wrong:
        raise ValueError(
            f"env_kwargs {wrong} are gymnasium.make arguments, not env arguments; the env's own episode_steps is the "
            "one time limit (pass episode_steps=N, or --episode-steps N)"
        )
    try:
        schema.to_json(kwargs)
    except TypeError as exc:
        raise ValueError(f"env_kwargs must be JSON-able (they are stored in the file): {exc}") from None
    return kwargs


def make_config_env(
    config: GenerationConfig, *, obs_mode: str | None = None, render_mode: str | None = None
) -> gym.Env:
    """Makes the env of a generation config (in ``config.env_obs_mode`` unless ``obs_mode`` is given).

    Raises:
        GenerationError: the id is not registered or the env cannot be made with these arguments.
    """
    kwargs = dict(config.env_kwargs)
    kwargs["obs_mode"] = obs_mode or config.env_obs_mode
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    with as_generation_error():
        return make_env(config.env_id, kwargs, picksort_only=False)


def rollout(
    env: gym.Env,
    demonstrator: Any,
    *,
    env_seed: int,
    demonstrator_seed: int,
    obs_keys: Sequence[str],
    attempt: int = 0,
    action_noise: float = 0.0,
) -> Episode:
    """Runs one episode of ``demonstrator`` in ``env`` and records it.

    The simulator state before every step is recorded for simulated envs only: a lab env (``env.unwrapped.domain
    == "real"``) is a black box whose state is never read (docs/concepts.md, "Honesty rules").

    A demonstrator with an ``executed_action()`` method only labels: ``act(obs)`` returns the label and
    ``executed_action()`` then the action executed in that state (DAgger: the learner's; docs/baselines.md#dagger).

    Args:
        env: the env (its observations must include the state keys the demonstrator reads).
        demonstrator: object with ``reset(seed)`` and ``act(obs) -> action``.
        env_seed: seed for ``env.reset``.
        demonstrator_seed: seed for ``demonstrator.reset``.
        obs_keys: observation keys to record.
        attempt: attempt index, stored with the episode.
        action_noise: standard deviation of the noise added to the arm part of each action before it is executed
            (``GenerationConfig.action_noise``); drawn from a generator seeded by ``demonstrator_seed``, so an
            attempt is reproducible.  The executed action is recorded as ``actions``, the demonstrator's own (before
            the noise) as ``action_labels``.

    Returns:
        The recorded episode.
    """
    unwrapped = cast("SimulatedEnv", env.unwrapped)  # get_state() is read for simulated envs only
    record_states = str(getattr(unwrapped, "domain", "sim")) != "real"
    obs, info = env.reset(seed=env_seed)
    demonstrator.reset(seed=demonstrator_seed)
    observations: dict[str, list[np.ndarray]] = {k: [np.array(obs[k], copy=True)] for k in obs_keys}
    actions: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    rewards: list[float] = []
    states: list[np.ndarray] = []
    success_any = False
    unstable = False
    terminated = truncated = False
    steps = 0
    # The envs act in a Box (_ActionNoise clips to its bounds).
    perturb = (
        _ActionNoise(cast(gym.spaces.Box, env.action_space), action_noise, demonstrator_seed)
        if action_noise > 0
        else None
    )
    # The optional ``executed(action)`` hook (r2s2r_envs.envs.demonstrators): a demonstrator that integrates its own
    # commands is told what was executed when it differs from what it returned. The shipped ones are closed loop
    # (they read the measured hand) and have none.
    executed = getattr(demonstrator, "executed", None) if perturb is not None else None
    if not callable(executed):
        executed = None
    # A labelling demonstrator (DAgger's expert with a learner at the wheel) labels the state with ``act`` and says
    # what is executed instead with ``executed_action()``.
    driver = getattr(demonstrator, "executed_action", None)
    if not callable(driver):
        driver = None
    while not (terminated or truncated):
        if record_states:
            states.append(np.array(unwrapped.get_state(), dtype=np.float64, copy=True))
        action = np.asarray(demonstrator.act(obs), dtype=np.float32)
        # The demonstrator's own action, before noise injection: the label for the state it saw (DART).
        labels.append(np.array(action, copy=True))
        if driver is not None:
            action = np.asarray(driver(), dtype=np.float32)
        if perturb is not None:
            action = perturb(action)
            if executed is not None:
                executed(action)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        rewards.append(float(reward))
        for k in obs_keys:
            observations[k].append(np.array(obs[k], copy=True))
        success_any |= bool(info.get("is_success", False))
        unstable |= bool(info.get("unstable", False))
        steps += 1
        if steps >= _MAX_STEPS_WITHOUT_LIMIT:
            raise GenerationError(f"episode did not end after {steps} steps; give the env a time limit (episode_steps)")
    return Episode(
        observations={k: np.stack(v) for k, v in observations.items()},
        actions=np.stack(actions),
        action_labels=np.stack(labels),
        rewards=np.asarray(rewards, dtype=np.float32),
        states=np.stack(states) if record_states else None,
        terminated=bool(terminated),
        truncated=bool(truncated),
        seed=env_seed,
        demonstrator_seed=demonstrator_seed,
        attempt=attempt,
        success=bool(info.get("is_success", False)),
        success_any_step=success_any,
        failure_cause=info.get("failure_cause"),
        time_to_sort=info.get("time_to_sort"),
        unstable=unstable,
        object_outcomes=[str(o) for o in info.get("object_outcomes", [])],
    )


def run_attempt(
    env: gym.Env, demonstrator: Any, config: GenerationConfig, obs_keys: Sequence[str], attempt: int
) -> Episode:
    """Attempt ``attempt`` of a generation run: :func:`rollout` with the attempt's seeds
    (``episode_seeds(config.seed, attempt)``) and the run's ``action_noise``."""
    env_seed, demo_seed = episode_seeds(config.seed, attempt)
    return rollout(
        env,
        demonstrator,
        env_seed=env_seed,
        demonstrator_seed=demo_seed,
        obs_keys=obs_keys,
        attempt=attempt,
        action_noise=config.action_noise,
    )


class _ActionNoise:
    """Adds Gaussian noise to the arm part of an action (everything before the 16 finger targets) and clips the
    result to the action space (``GenerationConfig.action_noise``)."""

    def __init__(self, space: gym.spaces.Box, sigma: float, seed: int) -> None:
        self.low = np.asarray(space.low, dtype=np.float32)
        self.high = np.asarray(space.high, dtype=np.float32)
        self.arm = int(np.prod(space.shape)) - len(HAND_JOINTS)
        self.sigma = float(sigma)
        # Its own stream, derived from the demonstrator's seed: the demonstrator's own draws are unchanged.
        self.rng = np.random.default_rng([int(seed), _NOISE_STREAM])

    def __call__(self, action: np.ndarray) -> np.ndarray:
        noisy = action.copy()
        noisy[: self.arm] += self.rng.normal(0.0, self.sigma, self.arm).astype(np.float32)
        return np.clip(noisy, self.low, self.high)


LAB_WITHHELD = "withheld: an inline lab config holds the lab's hidden parameters"


def withhold_inline_labs(record: Any) -> Any:
    """Copy of a JSON-able record in which every inline lab config (a mapping under a ``"lab"`` key) is replaced
    by a note.

    A lab made with ``lab={...}`` carries its physics in its constructor arguments, which would otherwise reach the
    dataset through the env spec, ``env_args`` and the generation settings; grounding code reads datasets and must
    see the lab only as a black box.  Shipped lab names and file paths are kept: they name a lab, they are not it.
    """
    if isinstance(record, Mapping):
        return {
            k: LAB_WITHHELD if k == "lab" and isinstance(v, Mapping) else withhold_inline_labs(v)
            for k, v in record.items()
        }
    if isinstance(record, (list, tuple)):
        return [withhold_inline_labs(v) for v in record]
    return record


def lab_record(world: Mapping[str, Any], env_id: str) -> dict[str, Any]:
    """What a lab dataset says about its lab: its name and config hash, nothing else (docs/concepts.md).

    Args:
        world: the lab env's ``provenance()``; its ``"lab"`` is the lab's name (str) or
            ``{"name": str, "config_sha256": str}``. Every other field is dropped.
        env_id: the env, for error messages.

    Raises:
        GenerationError: the record names no lab.
    """
    lab = world.get("lab")
    if isinstance(lab, str):
        name, config_hash = lab, None
    elif isinstance(lab, Mapping) and isinstance(lab.get("name"), str):
        name, config_hash = lab["name"], lab.get("config_sha256")
        if config_hash is not None and not isinstance(config_hash, str):
            raise GenerationError(f"env {env_id!r}: provenance()['lab']['config_sha256'] must be a str or None")
    else:
        raise GenerationError(
            f"env {env_id!r} reports domain 'real' but its provenance() names no lab: expected 'lab' to be a name "
            f"or {{'name': str, 'config_sha256': str}}, got {lab!r}"
        )
    return {"domain": "real", "lab": {"name": name, "config_sha256": config_hash}}


def build_provenance(
    env: gym.Env, demonstrator: Any, config: GenerationConfig, obs_keys: Sequence[str]
) -> dict[str, Any]:
    """The provenance record of a dataset made by ``demonstrator`` in ``env``.

    For the lab (domain ``"real"``) the world record is the lab's name and config hash only, inline lab configs in
    the env spec are withheld, and the operator's settings are withheld: grounding code reads datasets and must see
    the lab only as a black box (docs/concepts.md, "Honesty rules"). The recorded env spec is a description; it is
    never used to make an env.
    """
    unwrapped = env.unwrapped
    domain = str(getattr(unwrapped, "domain", "sim"))
    if domain not in schema.DOMAINS:
        raise GenerationError(f"env reports domain {domain!r}; expected one of {schema.DOMAINS}")
    spec = env.spec
    try:
        spec_json: Any = json.loads(spec.to_json()) if spec is not None else None
    except (ValueError, TypeError) as exc:  # kwargs that JSON cannot hold
        spec_json = {"id": spec.id if spec else config.env_name, "unserializable": str(exc)}
    if config.env_kwarg_files and isinstance(spec_json, dict) and isinstance(spec_json.get("kwargs"), dict):
        # A file read by value is in generation's env_kwargs (and env_args); the spec names it instead of a third copy.
        spec_json["kwargs"] = {
            k: {"recorded_by_value": dict(config.env_kwarg_files[k])} if k in config.env_kwarg_files else v
            for k, v in spec_json["kwargs"].items()
        }
    world = unwrapped.provenance() if hasattr(unwrapped, "provenance") else {}
    demo_record: dict[str, Any] = {"name": str(getattr(demonstrator, "name", type(demonstrator).__name__))}
    if domain == "real":
        world = lab_record(world, config.env_name)
        spec_json = withhold_inline_labs(spec_json)
        demo_record["settings"] = None
        demo_record["settings_withheld"] = "the lab's operator is a black box to grounding code"
    else:
        demo_record["settings"] = getattr(demonstrator, "settings", {})

    return {
        "schema_version": schema.SCHEMA_VERSION,
        "env_id": spec.id if spec is not None else config.env_name,
        "env_version": spec.version if spec is not None else None,
        "env_spec": spec_json,
        "domain": domain,
        "world": world,
        "demonstrator": demo_record,
        "obs_mode": config.obs_mode,
        "obs_keys": list(obs_keys),
        "seed": int(config.seed),
        "seeding": SEEDING_CONVENTION,
        "successes_only": bool(config.successes_only),
        "versions": versions("r2s2r_envs", "mujoco", "gymnasium", "numpy", "h5py", "python"),
    }


def _env_id_of(env: gym.Env) -> str:
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__
