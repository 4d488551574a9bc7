"""A trained policy at inference: :class:`TrainedPolicy` and :func:`load_policy` (needs torch).

The policy satisfies the evaluation protocol's ``Policy`` (``reset(seed)``, ``act(obs)``; docs/protocol.md): it
stacks the episode's observations as the training data was stacked, predicts an action chunk through the same
:class:`~r2s2r_envs.policies.pipeline.Pipeline` as training, and executes it in one of two ways: receding horizon
(its first ``execute_steps`` actions, then a new prediction) or temporal ensembling (``temporal_ensemble = k > 0``:
a prediction every step, and the executed action is the average of every still-running chunk's prediction for
this step, weighted ``exp(-k * age)``). Its randomness (the flow's noise) comes from the seed of ``reset``.

Batched (docs/protocol.md#batched-policies): ``reset_batch(seeds, mask)`` and ``act_batch(obs)`` serve B envs at
once, one episode state per row, and predict the chunks of every row that needs one in one forward pass.  Each
row's action is bit-identical to what ``act`` gives for that row's episode alone: the network's linear layers are
evaluated as a batch of one-row products (``torch.bmm``), the same kernel as a single observation's, since a
plain batched matrix product rounds differently (about 1e-6) and would change the episodes.  A CFG policy
(which pairs each observation with its unguided copy inside the model) and an image policy (a batched convolution
rounds differently too) predict row by row, still exactly.

A CFG policy guides its flow toward a domain label: ``"real"`` unless told otherwise. The evaluation protocol
tells a policy which domain the env is (:meth:`TrainedPolicy.set_domain`), so in a simulator it is guided toward
``"sim"``.

A user's method (:class:`~r2s2r_envs.policies.method.Method`, recorded in the checkpoint as ``module:Class``) runs
the same way: its ``predict`` gets a :class:`~r2s2r_envs.policies.method.Batch` whose ``domain`` is the env's, and
``act_batch`` predicts its rows one by one (exactly as ``act``).
"""

from __future__ import annotations

import contextlib
import copy
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from r2s2r_envs.envs.pick_sort import SENSORS as OPT_IN_SENSORS
from r2s2r_envs.policies.checkpoint import WEIGHTS_FILE, CheckpointError, read_checkpoint
from r2s2r_envs.policies.features import PROPRIO_KEYS, ROBOT_SENSOR_KEYS
from r2s2r_envs.policies.method import Batch, Method, MethodError, Spec, import_method, module_digest
from r2s2r_envs.policies.models import REAL, SIM, PolicyModel
from r2s2r_envs.policies.pipeline import FrameStacker, Pipeline
from r2s2r_envs.policies.weights import load_state_dict_file
from r2s2r_envs.policies.zoo import resolve_checkpoint


class TrainedPolicy:
    """A policy trained by ``r2s2r train``.

    Args:
        model: the network (switched to eval mode): a reference method's or a user's ``Method``.
        pipeline: the observation/action pipeline of its training.
        execute_steps: actions executed per predicted chunk.
        flow_steps: Euler steps of the flow.
        cfg_scale: guidance scale toward the real domain (CFG models).
        metadata: what was trained on what (see ``r2s2r_envs.policies.checkpoint.METADATA_KEYS``).
        config: the resolved training config.
    """

    def __init__(
        self,
        model: PolicyModel | Method,
        pipeline: Pipeline,
        *,
        execute_steps: int,
        flow_steps: int,
        cfg_scale: float,
        metadata: dict[str, Any],
        config: dict[str, Any],
        temporal_ensemble: float = 0.0,
        domain: str = "real",
    ) -> None:
        if execute_steps < 1 or execute_steps > pipeline.action_chunk:
            raise ValueError(
                f"execute_steps must be in [1, {pipeline.action_chunk}] (the chunk the policy predicts), "
                f"got {execute_steps}"
            )
        if not temporal_ensemble >= 0:
            raise ValueError(f"temporal_ensemble must be >= 0 (0: off), got {temporal_ensemble}")
        self.model = model.eval()
        self.pipeline = pipeline
        self.execute_steps = int(execute_steps)
        self.flow_steps = int(flow_steps)
        self.cfg_scale = float(cfg_scale)
        self.temporal_ensemble = float(temporal_ensemble)
        self.metadata = dict(metadata)
        self.config = dict(config)
        self.name = f"r2s2r-{self.metadata['method']}"
        self.domain = "real"
        self.set_domain(domain)
        self._stacker = FrameStacker(pipeline)
        self._queue: list[np.ndarray] = []
        self._chunks: list[tuple[int, np.ndarray]] = []  # (step predicted at, chunk) for temporal ensembling
        self._step = 0
        self._generator = torch.Generator().manual_seed(0)
        self._rows: list[TrainedPolicy] = []  # one episode state per row of act_batch

    @property
    def sensors(self) -> tuple[str, ...]:
        """The env's opt-in sensors the policy reads (the evaluation protocol makes its envs with them)."""
        return tuple(k for k in self.pipeline.obs_keys if k in OPT_IN_SENSORS)

    @property
    def image_size(self) -> int | None:
        """The side in pixels of the camera frames the policy reads (the env's ``image_size``); ``None`` without
        cameras."""
        if not self.pipeline.image_keys:
            return None
        return int(self.pipeline.obs_shapes[self.pipeline.image_keys[0]][0])

    @property
    def obs_mode(self) -> str:
        """The PickSort ``obs_mode`` whose observations hold every key the policy reads: ``"state"`` without
        cameras, ``"rgb"`` with cameras and the robot's own keys only, else ``"state+rgb"``."""
        if not self.pipeline.image_keys:
            return "state"
        robot = (*PROPRIO_KEYS, *ROBOT_SENSOR_KEYS)
        return "rgb" if all(k in robot for k in self.pipeline.obs_keys) else "state+rgb"

    @property
    def settings(self) -> dict[str, Any]:
        """What an evaluation result records about this policy (JSON)."""
        return {
            "metadata": self.metadata,
            "execute_steps": self.execute_steps,
            "temporal_ensemble": self.temporal_ensemble,
            "cfg_scale": self.cfg_scale,
            "guided_toward": self.domain if self._guided else None,
        }

    @property
    def _guided(self) -> bool:
        """Whether the network is a reference CFG flow (guided toward the env's domain)."""
        return isinstance(self.model, PolicyModel) and self.model.cfg

    def set_domain(self, domain: str) -> None:
        """Which domain the policy acts in (``"real"`` or ``"sim"``): a CFG policy is guided toward its label.

        Raises:
            ValueError: another domain name.
        """
        if domain not in ("real", "sim"):
            raise ValueError(f"domain must be 'real' or 'sim', got {domain!r}")
        self.domain = domain

    def reset(self, seed: int | None = None) -> None:
        """Starts an episode: forgets the frame stack and the queued actions; the flow's noise comes from ``seed``."""
        self._stacker.reset()
        self._queue = []
        self._chunks = []
        self._step = 0
        self._generator = torch.Generator().manual_seed(0 if seed is None else int(seed))

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The next action (float32, the env's action shape) for an observation of the env.

        Raises:
            PipelineError: the observation lacks a key the policy was trained on, has another shape, or is not
                finite.
        """
        stacked = self._stacker.push(obs)
        if self.temporal_ensemble > 0:
            return self._ensembled(stacked)
        if not self._queue:
            self._queue = list(self.predict_chunk(stacked)[0, : self.execute_steps])
        return self._queue.pop(0).copy()

    def _ensembled(self, stacked: dict[str, np.ndarray], chunk: np.ndarray | None = None) -> np.ndarray:
        horizon = self.pipeline.action_chunk
        self._chunks = [(t, c) for t, c in self._chunks if self._step - t < horizon]
        self._chunks.append((self._step, self.predict_chunk(stacked)[0] if chunk is None else chunk))
        ages = np.array([self._step - t for t, _ in self._chunks], dtype=np.float64)
        weights = np.exp(-self.temporal_ensemble * ages)
        actions = np.stack([c[self._step - t] for t, c in self._chunks])
        self._step += 1
        return (weights[:, None] * actions).sum(axis=0).astype(np.float32) / np.float32(weights.sum())

    def predict_chunk(self, stacked: dict[str, np.ndarray]) -> np.ndarray:
        """Action chunks ``(B, H, A)`` in env units for stacked raw observations ``{key: (B, F, ...)}``."""
        inputs = {k: torch.from_numpy(v) for k, v in self.pipeline.encode_obs(stacked).items()}
        toward = REAL if self.domain == "real" else SIM
        if isinstance(self.model, Method):
            batch = Batch(inputs=inputs, domain=torch.full((len(inputs["state"]),), toward), generator=self._generator)
            with torch.no_grad():
                flat = self.model.predict(batch)
            return self.pipeline.decode_actions(flat.detach().numpy())
        flat = self.model.predict(
            inputs, self._generator, flow_steps=self.flow_steps, cfg_scale=self.cfg_scale, toward=toward
        )
        return self.pipeline.decode_actions(flat.numpy())

    # ------------------------------------------------------------------ batched (docs/protocol.md#batched-policies)
    def reset_batch(self, seeds: Sequence[int | None], mask: Sequence[bool] | None = None) -> None:
        """Starts an episode in every row of a batch of ``len(seeds)`` envs (only the rows where ``mask`` is true):
        row ``i`` as ``reset(seeds[i])`` would start it.  A batch of another size starts every row.

        Sets torch to one intra-op thread, as an evaluation worker does: a batch runs beside the vector env's physics
        threads, and with two torch threads 16 lab episodes of 100 steps at batch 16 ran 7x slower on the loaded 2-core
        machine (39 s against 5.6 s).
        """
        torch.set_num_threads(1)
        if len(self._rows) != len(seeds):
            self._rows = [self._row_state() for _ in seeds]
            mask = None
        for row, seed, on in zip(self._rows, seeds, [True] * len(seeds) if mask is None else mask):
            if on:
                row.domain = self.domain
                row.reset(seed)

    def act_batch(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Actions ``(B, A)`` float32 for observations ``{key: (B, ...)}`` of the B rows of ``reset_batch``: row
        ``i`` is bit-identical to ``act`` of that row's episode alone.

        Raises:
            RuntimeError: ``act_batch`` before ``reset_batch``, or a batch of another size.
            PipelineError: an observation row the policy cannot read (as ``act``).
        """
        n = len(next(iter(obs.values())))
        if len(self._rows) != n:
            raise RuntimeError(f"act_batch got {n} rows but reset_batch started {len(self._rows)}: call reset_batch")
        stacks = [row._stacker.push({k: v[i] for k, v in obs.items()}) for i, row in enumerate(self._rows)]
        ensemble = self.temporal_ensemble > 0
        need = [i for i, row in enumerate(self._rows) if ensemble or not row._queue]
        chunks = dict(zip(need, self._predict_rows([stacks[i] for i in need], [self._rows[i] for i in need])))
        actions = []
        for i, row in enumerate(self._rows):
            if ensemble:
                actions.append(row._ensembled(stacks[i], chunks[i]))
                continue
            if i in chunks:
                row._queue = list(chunks[i][: self.execute_steps])
            actions.append(row._queue.pop(0).copy())
        return np.stack(actions)

    def _row_state(self) -> TrainedPolicy:
        # A policy sharing this one's model and settings, holding one row's episode (stack, queue, generator);
        # not copy.copy, which would run __setstate__.
        row = object.__new__(TrainedPolicy)
        row.__dict__.update(self.__dict__)
        row._stacker = FrameStacker(self.pipeline)
        row._rows = []
        row.reset(None)
        return row

    def _predict_rows(self, stacks: list[dict[str, np.ndarray]], rows: list[TrainedPolicy]) -> list[np.ndarray]:
        """The chunk ``(H, A)`` of each row, from its stack and its own generator, in one forward pass."""
        if not stacks:
            return []
        # A user's method, guidance (which pairs each row with its unguided copy inside the model) or cameras (a
        # batched convolution rounds differently): row by row.
        if not isinstance(self.model, PolicyModel) or self.model.cfg or self.model.encoder.image_keys:
            return [row.predict_chunk(s)[0] for row, s in zip(rows, stacks)]
        batch = {k: np.concatenate([s[k] for s in stacks]) for k in stacks[0]}
        inputs = {k: torch.from_numpy(v) for k, v in self.pipeline.encode_obs(batch).items()}
        model = self.model
        with torch.no_grad(), _one_row_products(model):
            features = model.encoder(inputs)
            if not model.generative:
                flat = model.regress(features)
            else:  # PolicyModel.predict, with each row's noise from its own generator
                like = {"dtype": features.dtype, "device": features.device}
                x = torch.cat([torch.randn((1, model.chunk_dim), generator=r._generator, **like) for r in rows])
                toward = REAL if self.domain == "real" else SIM
                dt = 1.0 / self.flow_steps
                for k in range(self.flow_steps):
                    t = torch.full((len(rows),), k * dt, **like)
                    x = x + dt * model.guided_velocity(x, t, features, self.cfg_scale, toward)
                flat = x
        return list(self.pipeline.decode_actions(flat.numpy()))

    # Sent to evaluation workers as weights, not as a live generator; a worker process runs single-threaded.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_generator"] = None
        state["_queue"] = []
        state["_chunks"] = []
        state["_rows"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._generator = torch.Generator().manual_seed(0)
        torch.set_num_threads(1)

    def __repr__(self) -> str:
        return f"TrainedPolicy(method={self.metadata['method']!r}, real_fraction={self.metadata['real_fraction']})"


@contextlib.contextmanager
def _one_row_products(model: torch.nn.Module) -> Iterator[None]:
    """Evaluates every ``nn.Linear`` of ``model`` on a (B, K) input as B one-row products, so each row rounds as
    a single observation's would (a (B, K) matrix product takes another kernel)."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]

    def one_row(layer: torch.nn.Linear) -> Any:
        def forward(x: torch.Tensor) -> torch.Tensor:
            if x.dim() != 2:
                return torch.nn.functional.linear(x, layer.weight, layer.bias)
            b = len(x)
            w = layer.weight.T.expand(b, *layer.weight.T.shape)
            out = torch.bmm(x[:, None, :], w)[:, 0]
            return out if layer.bias is None else out + layer.bias

        return forward

    for layer in linears:
        layer.forward = one_row(layer)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for layer in linears:
            del layer.forward  # back to the class's forward


def build_model(model_config: dict[str, Any]) -> PolicyModel:
    """A :class:`PolicyModel` from the ``model`` section of a checkpoint config."""
    return PolicyModel(**copy.deepcopy(model_config))


def build_network(model_config: dict[str, Any], metadata: dict[str, Any], root: Any) -> PolicyModel | Method:
    """The network of a checkpoint's ``model`` section: a reference :class:`PolicyModel`, or a user's method
    (``{"method_class": "module:Class", "spec": {...}}``), imported and built from its recorded spec.

    Raises:
        CheckpointError: the method class cannot be imported here or is not a usable ``Method`` (naming the class
            and how to make it importable).
    """
    if "method_class" not in model_config:
        return build_model(model_config)
    path = model_config["method_class"]
    try:
        cls = import_method(path)
    except MethodError as exc:
        raise CheckpointError(
            f"{root} was trained with the method class {path}, which cannot be loaded: {exc}"
        ) from None
    recorded = metadata.get("method_source_sha256")
    if recorded and module_digest(path) not in (None, recorded):
        warnings.warn(
            f"{root}: the module of {path} is not the file it was trained with (sha256 {recorded[:16]}... then, "
            f"{str(module_digest(path))[:16]}... now); its code changed since",
            stacklevel=3,
        )
    return cls(Spec.from_dict(model_config["spec"]))


def load_policy(
    path: str | os.PathLike[str],
    *,
    execute_steps: int | None = None,
    temporal_ensemble: float | None = None,
) -> TrainedPolicy:
    """Loads a policy written by ``r2s2r train --out DIR``.

    Args:
        path: the checkpoint directory, or ``zoo:NAME`` (a shipped reference checkpoint).
        execute_steps: actions executed per chunk, instead of the training config's.
        temporal_ensemble: temporal ensembling weight ``k`` instead of the training config's (0: receding horizon).

    Returns:
        A :class:`TrainedPolicy` with ``reset(seed)``, ``act(obs)`` and ``metadata``.

    Raises:
        FileNotFoundError: the directory does not exist.
        CheckpointError: not a checkpoint, another checkpoint version, or weights that do not fit the config.
    """
    data = read_checkpoint(path)
    root = resolve_checkpoint(path)
    try:
        state = load_state_dict_file(root / WEIGHTS_FILE)  # float32, whatever the storage (policies.weights)
    except Exception as exc:  # a truncated or foreign file: torch raises several types
        # Never relay torch's advice to retry with weights_only=False: that would run code from the file.
        reason = "not a plain state_dict of tensors" if "weights_only" in str(exc) else str(exc).splitlines()[0]
        raise CheckpointError(
            f"{root / WEIGHTS_FILE} cannot be read as policy weights ({type(exc).__name__}: {reason}); a checkpoint "
            "holds the state_dict `r2s2r train` wrote: restore the file or train again"
        ) from None
    try:
        model = build_network(data["model"], data["metadata"], root)
        model.load_state_dict(state)
        pipeline = Pipeline.from_dict(data["pipeline"])
    except (RuntimeError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{root}: the weights do not fit the model in {root / 'config.json'} ({exc})") from None
    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    bad += [f"pipeline statistics {n}" for n, s in pipeline.stats.items() if not np.all(np.isfinite(s.mean))]
    if bad:
        raise CheckpointError(f"{root}: not finite: {bad[:5]}; the training diverged or the file is damaged")
    config = data["config"]
    chunk = pipeline.action_chunk
    stored = config.get("execute_steps")
    if not isinstance(stored, int) or isinstance(stored, bool) or not 1 <= stored <= chunk:
        raise CheckpointError(f"{root}: execute_steps {stored!r} in config.json is not in [1, {chunk}]")
    return TrainedPolicy(
        model,
        pipeline,
        execute_steps=config["execute_steps"] if execute_steps is None else execute_steps,
        flow_steps=config["flow_steps"],
        cfg_scale=config["cfg_scale"],
        temporal_ensemble=config.get("temporal_ensemble", 0.0) if temporal_ensemble is None else temporal_ensemble,
        metadata=data["metadata"],
        config=config,
    )
