"""Rollout workers on a Ray cluster (``env_settings.ray``, ``--ray`` / ``--ray-workers``).

Each worker is a Ray actor (`RolloutWorker`) that owns ``envs_per_worker`` environments
(built by `envs.managers.make_env_manager` on its own node: built-in, Gymnasium, or Unity
builds with ports of their own) and, per behavior, an inference-only copy of the actor
(`trainers.policy.Policy` in a graph of its own, built from the behavior's spec and
settings as the learner's is). The learner's side is `RayRolloutManager`, a
`trainers.loop.remote.RemoteActingManager`: to the controller it is one more env manager
whose env ``i`` is env ``i % envs_per_worker`` of worker ``i // envs_per_worker``.

One step of the loop (the controller's order, kept exactly):

1. the learner sends every worker what changed in the acting weights since the last step
   (after an update: every actor variable; else, with ``normalize``, the normalizer
   statistics when they moved; one ``ray.put``, read by every worker), then "act and step";
2. each worker acts on the decisions it returned last, with those weights (one inference
   call per behavior for all of its envs' agents), steps its envs, and returns the new
   steps with the actions it took (`trainers.loop.remote.ActedEnvStep`);
3. meanwhile the learner does the bookkeeping of the previous steps, its updates,
   summaries and checkpoints, as while local env workers step; then it records the
   returned actions into the agents' trajectories.

So PPO acts with the weights of the current update and SAC with those of its last update,
as in the local loop (threaded PPO: the acting copy, swapped after each update, as locally).
With one worker and a fixed seed the trajectories equal the local loop's: worker ``k``'s
graph is seeded with ``seed + k`` and built in the learner's order, and its envs are seeded
``seed + i`` for their global index ``i``. Value estimates, critic memories, reward
signals and the normalizer's updates stay with the learner.

Faults: a worker that dies (its process or its node; `ray.exceptions.RayActorError`) or
does not answer within ``timeout_wait`` is reported in one line and replaced by a new
actor (its envs reset; the learner drops its agents' unfinished trajectories, as after an
env reset), up to ``max_lifetime_restarts`` over the run; then `EnvWorkerError`, after
which the controller saves a checkpoint. `close` ends every actor (their envs with them)
and shuts Ray down when this process started it.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionTuple, BehaviorSpec, allowed_mask
from envs.exceptions import EnvError, EnvInterrupted, EnvWorkerError
from envs.managers.base import STOP_POLL_S, EnvStep, common_specs
from trainers.config import RaySettings, TrainerSettings
from trainers.exceptions import ConfigError
from trainers.loop.remote import ActedEnvStep, RemoteActingManager, RemoteBehavior
from trainers.policy import ACTING_SCOPE, ActionInfo, Policy

#: Seconds `RayRolloutManager.close` gives the workers to close their envs before killing them.
CLOSE_TIMEOUT_S = 10.0
#: Seconds a worker has to start (its node found, TensorFlow imported, its envs built).
START_TIMEOUT_S = 120.0

_INSTALL = 'pip install -e ".[ray]" (or pip install "ray>=2")'


def import_ray() -> Any:
    """The ``ray`` module, or one `ConfigError` line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"env_settings.ray: Ray is not installed; install it with {_INSTALL}") from None
    return ray


def _short(exc: BaseException, limit: int = 160) -> str:
    """An exception's first line, shortened (Ray's messages run over many lines)."""
    text = " ".join(str(exc).split("\n", 1)[0].split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------- worker side


class _WorkerActor:
    """A behavior's acting copy in a worker: the `Policy` in a graph of its own (seeded as
    the learner's, built in the same order, so its sampling ops draw the same numbers), and
    one assign per variable fed from the learner's arrays."""

    def __init__(self, name: str, spec: BehaviorSpec, settings: TrainerSettings, seed: int) -> None:
        from trainers.graph import BehaviorGraph
        from trainers.tf import tf

        # Inference only: no acting copy of its own (the learner sends the acting weights).
        settings = dataclasses.replace(settings, threaded=False)
        self.graph = BehaviorGraph(settings, spec, seed, cpu_only=True)
        self.policy = Policy(name, spec, settings, self.graph)
        with self.graph.graph.as_default():
            variables = [v for v in tf.global_variables() if v is not self.graph.global_step]
            #: Each variable's name in the learner's graph (``policy/...``, ``normalizer_<i>/...``).
            self.names: List[str] = [v.op.name for v in variables]
            with tf.name_scope("remote_load"):
                self._inputs = [tf.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
                self._assigns = [v.assign(x) for v, x in zip(variables, self._inputs)]
        self.graph.finalize()

    def load(self, weights: Mapping[int, np.ndarray]) -> None:
        """Variables ``i`` <- ``weights[i]``, in one run. Every variable (an update's weights,
        not the normalizer statistics alone): with ``use_sde``, new noise matrices, as the
        learner's after its update."""
        self.policy.session.run(
            [self._assigns[i] for i in weights], feed_dict={self._inputs[i]: w for i, w in weights.items()}
        )
        if len(weights) == len(self._assigns):
            self.policy.resample_exploration()

    def close(self) -> None:
        self.policy.close()


def _rows(info: ActionInfo, rows: slice) -> ActionInfo:
    return ActionInfo(
        info.env_continuous[rows], info.raw_continuous[rows], info.discrete[rows], info.log_probs[rows],
        info.memory[rows] if info.memory is not None else None,
        info.prev_action[rows] if info.prev_action is not None else None,
    )


class RolloutWorker:
    """One Ray actor: envs ``first_env .. first_env + num_envs - 1`` and the acting copies
    (see the module docstring). Its steps carry global env indices as worker ids."""

    def __init__(
        self, index: int, first_env: int, env_id: Optional[str], env_args: Optional[Mapping[str, Any]],
        num_envs: int, agents_per_env: int, seed: int, unity: Optional[Any], step_timeout: Optional[float],
        env_parameters: Optional[Mapping[str, Any]],
    ) -> None:
        from envs.managers import make_env_manager

        self.index, self.first, self.seed = index, first_env, seed
        if unity is not None and first_env:  # Unity builds on one node need ports of their own
            unity = dataclasses.replace(unity, base_port=(unity.base_port or 5005) + first_env)
        self.env = make_env_manager(
            env_id, env_args, num_envs, agents_per_env, seed + first_env, unity=unity,
            step_timeout=step_timeout, env_parameters=env_parameters,
        )
        self.actors: Dict[str, _WorkerActor] = {}
        self.ids: Dict[str, Tuple[str, ...]] = {}
        self.deterministic = False
        self.steps: List[EnvStep] = []

    def describe(self) -> Tuple[Dict[str, BehaviorSpec], int, str]:
        """The envs' behavior specs, this process's id and its node's id."""
        import ray

        return dict(self.env.behavior_specs), os.getpid(), ray.get_runtime_context().get_node_id()

    def build(self, behaviors: Mapping[str, Tuple[TrainerSettings, Tuple[str, ...]]], deterministic: bool) -> Dict[str, List[str]]:
        """An acting copy per behavior (graph seed ``seed + worker index``); each one's
        variable names, in the order `step` / `reset` take weights."""
        specs = self.env.behavior_specs
        for name, (settings, ids) in behaviors.items():
            self.actors[name] = _WorkerActor(name, specs[ids[0]], settings, self.seed + self.index)
            self.ids[name] = tuple(ids)
        self.deterministic = deterministic
        return {name: actor.names for name, actor in self.actors.items()}

    def _load(self, weights: Optional[Mapping[str, Mapping[int, np.ndarray]]]) -> None:
        for name, arrays in (weights or {}).items():
            self.actors[name].load(arrays)

    def _globalize(self, steps: Sequence[EnvStep], acted: Optional[List[Dict[str, ActionInfo]]] = None) -> List[ActedEnvStep]:
        self.steps = [EnvStep(self.first + s.worker_id, s.steps, s.env_stats) for s in steps]
        return [
            ActedEnvStep(s.worker_id, s.steps, s.env_stats, acted=acted[j] if acted is not None else {})
            for j, s in enumerate(self.steps)
        ]

    def reset(self, weights: Optional[Mapping[str, Mapping[int, np.ndarray]]]) -> List[ActedEnvStep]:
        """New episodes everywhere (memories forgotten)."""
        self._load(weights)
        for actor in self.actors.values():
            actor.policy.forget_agents(list(actor.policy._memories) + list(actor.policy._prev_actions))
            actor.policy.resample_exploration()
        return self._globalize(self.env.reset())

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        self.env.set_env_parameters(values)

    def step(self, weights: Optional[Mapping[str, Mapping[int, np.ndarray]]], count: int = 1) -> List[List[ActedEnvStep]]:
        """With ``weights`` applied, ``count`` times: acts on the last steps, steps the envs."""
        self._load(weights)
        out = []
        for _ in range(count):
            actions, acted = self._act()
            out.append(self._globalize(self.env.step(actions), acted))
        return out

    def _act(self) -> Tuple[List[Dict[str, ActionTuple]], List[Dict[str, ActionInfo]]]:
        """As `trainers.loop.controller.TrainerController._act`, for this worker's envs: one
        inference call per behavior, rows in env order, then the behavior's ids."""
        actions: List[Dict[str, ActionTuple]] = [{} for _ in self.steps]
        acted: List[Dict[str, ActionInfo]] = [{} for _ in self.steps]
        for name, actor in self.actors.items():
            policy = actor.policy
            parts = [(j, s, bid) for j, s in enumerate(self.steps) for bid in self.ids[name]]
            decisions, rows, total = [], [], 0
            for _, s, bid in parts:
                decision, terminal = s.steps[bid]
                if (policy.use_recurrent or policy.state_dependent) and len(terminal):  # the next episode starts anew
                    policy.forget_agents([(s.worker_id, a) for a in terminal.agent_id.tolist()])
                decisions.append(decision)
                rows.append(slice(total, total + len(decision)))
                total += len(decision)
            if total == 0:
                continue
            branches = policy.spec.action_spec.discrete_branches
            masks = [allowed_mask(d.action_mask, len(d), branches, shared=True) for d in decisions]
            if len(decisions) == 1:
                obs, mask = list(decisions[0].obs), masks[0]
            else:
                obs = [np.concatenate([d.obs[i] for d in decisions]) for i in range(len(decisions[0].obs))]
                mask = np.concatenate([m for m in masks if m is not None]) if branches else None
            keys = (
                [(s.worker_id, a) for (_, s, _), d in zip(parts, decisions) for a in d.agent_id.tolist()]
                if policy.use_recurrent or policy.state_dependent else None
            )
            info = policy.act(obs, mask, deterministic=self.deterministic, agent_keys=keys)
            for (j, _, bid), part in zip(parts, rows):
                mine = _rows(info, part)
                acted[j][bid] = mine
                actions[j][bid] = ActionTuple.trusted(mine.env_continuous, mine.discrete)
        return actions, acted

    def close(self) -> None:
        try:
            self.env.close()
        finally:
            for actor in self.actors.values():
                actor.close()


# ---------------------------------------------------------------------- learner side


class _WeightSource:
    """A behavior's acting weights in the learner's graph, by the worker's variable names:
    the acting copy's (``acting/...``) for threaded trainers, else the trained ones."""

    def __init__(self, name: str, policy: Policy, names: Sequence[str]) -> None:
        from trainers.tf import tf

        with policy.graph.as_default():
            trained = {v.op.name: v for v in tf.global_variables()}
            acting = {v.op.name: v for v in tf.local_variables() if v.op.name.startswith(ACTING_SCOPE + "/")}
        self.policy = policy
        self.sources = [acting.get(f"{ACTING_SCOPE}/{n}", trained.get(n)) for n in names]
        missing = [n for n, s in zip(names, self.sources) if s is None]
        if missing:
            raise ValueError(f"{name}: the Ray workers' variables {missing} have no twin in the learner's graph")
        #: The normalizer statistics' indices: they move with every trajectory, not only at updates.
        self.normalizer = [i for i, n in enumerate(names) if n.startswith("normalizer_")]
        self.sent: Optional[List[np.ndarray]] = None  # the normalizer arrays last sent

    def read(self, indices: Sequence[int]) -> List[np.ndarray]:
        return list(self.policy.session.run([self.sources[i] for i in indices]))


class RayRolloutManager(RemoteActingManager):
    """The learner's side of the Ray rollout workers (see the module docstring)."""

    def __init__(
        self,
        env_id: Optional[str],
        env_args: Optional[Mapping[str, Any]],
        agents_per_env: int,
        seed: int,
        settings: RaySettings,
        unity: Optional[Any] = None,
        step_timeout: Optional[float] = None,
        env_parameters: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """``seed``: resolved (not -1); env ``i`` uses ``seed + i``. ``step_timeout``:
        seconds a worker has to answer a step before it counts as dead (None: no limit)."""
        self._ray = ray = import_ray()
        self.settings = settings
        self._seed = int(seed)
        self._closed = False
        self._owns_ray = False
        self._actors: List[Any] = []
        self.pids: List[int] = []  # each worker's process id (tests check they are gone)
        self.nodes: List[str] = []  # each worker's node id
        self._pending: Optional[List[Any]] = None  # the workers' calls in flight
        # Steps returned and not yet handed out (steps_per_call > 1): one list per env step.
        self._buffer: List[List[EnvStep]] = []
        self._stepping = False  # between step_async and wait_all
        self._restarts = 0
        self._timeout = step_timeout
        self._env_parameters = dict(env_parameters or {})
        self._behaviors: Dict[str, RemoteBehavior] = {}
        self._sources: Dict[str, _WeightSource] = {}
        self._version: Callable[[], int] = lambda: 0
        self._sent_version: Optional[int] = None
        self._deterministic = False
        if not ray.is_initialized():
            address = None if settings.address in (None, "local") else settings.address
            try:
                ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
            except Exception as exc:  # ConnectionError, ValueError, RuntimeError: one line
                where = "a local Ray instance" if address is None else f"Ray at {address!r}"
                raise EnvError(f"env_settings.ray.address: cannot start or join {where} ({_short(exc)})") from None
            self._owns_ray = True
        resources = dict(settings.resources)
        self._options = {
            "num_cpus": resources.pop("CPU", 1.0),
            "num_gpus": resources.pop("GPU", 0.0),
            "resources": resources,
            "scheduling_strategy": "SPREAD",  # one node per worker while there are nodes
            "max_restarts": 0,  # restarts are ours: counted, logged, and the agents dropped
        }
        self._args = (env_id, dict(env_args or {}), settings.envs_per_worker, agents_per_env, self._seed, unity, step_timeout)
        try:
            self._actors = [self._start(k) for k in range(settings.num_workers)]
            described = self._get_all([a.describe.remote() for a in self._actors], START_TIMEOUT_S, "start")
            self.pids = [d[1] for d in described]
            self.nodes = [d[2] for d in described]
            self._specs = common_specs(str(env_id), [d[0] for d in described])
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ EnvManager

    @property
    def behavior_specs(self) -> Dict[str, BehaviorSpec]:
        return dict(self._specs)

    @property
    def num_workers(self) -> int:
        """Environments over every Ray worker (the controller's env workers)."""
        return self.settings.num_envs

    @property
    def seed(self) -> Optional[int]:
        return self._seed

    @property
    def restarts(self) -> int:
        """Workers restarted so far."""
        return self._restarts

    def attach(self, behaviors: Mapping[str, RemoteBehavior], deterministic: bool, version: Callable[[], int]) -> None:
        for name, b in behaviors.items():
            if not isinstance(b.actor, Policy):
                raise ConfigError(
                    f"env_settings.ray: behavior {name} acts through {type(b.actor).__name__}; Ray rollout "
                    "workers act with a trained policy's weights (not --model)"
                )
            if b.settings.self_play is not None:
                raise ConfigError(f"behaviors.{name}.self_play: not supported with Ray rollout workers (env_settings.ray)")
        self._behaviors = dict(behaviors)
        self._deterministic = deterministic
        self._version = version
        names = self._get_all([self._build(a) for a in self._actors], START_TIMEOUT_S, "build its actors")
        self._sources = {
            name: _WeightSource(name, b.actor, names[0][name])  # type: ignore[arg-type]  # checked above
            for name, b in self._behaviors.items()
        }
        self._sent_version = None

    def reset(self) -> List[EnvStep]:
        if self._pending is not None:  # steps in flight are dropped with their episodes
            self._wait(self._pending)
            self._pending = None
        self._buffer = []
        self._stepping = False
        weights = self._weights()
        results = self._wait([a.reset.remote(weights) for a in self._actors])
        return self._collect([r if isinstance(r, _Dead) else [r] for r in results])[0]

    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        self.step_async(actions)
        return self.wait_all()

    def step_async(self, actions: Sequence[Mapping[str, ActionTuple]]) -> None:
        """Every worker acts and steps (``actions`` are ignored: the workers choose them);
        with ``steps_per_call`` > 1 the next of the steps already returned, if any."""
        if self._stepping:
            raise RuntimeError("step_async(): the last step_async() has not been waited for (call wait_all())")
        self._stepping = True
        if not self._buffer and self._pending is None:
            self._pending = self._send()

    def wait_all(self) -> List[EnvStep]:
        """The next step of every worker (a worker that was replaced: none until its
        replacement's first step, its reset, has been handed out)."""
        if not self._stepping:
            raise RuntimeError("wait_all(): no step is running (call step_async() first)")
        self._stepping = False
        if not self._buffer:
            assert self._pending is not None
            pending, self._pending = self._pending, None
            self._buffer = self._collect(self._wait(pending))
            if self.settings.steps_per_call > 1:  # the workers go on while these are recorded
                self._pending = self._send()
        return self._buffer.pop(0)

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """Sent to every worker; Ray runs it after the step in flight (each actor runs its
        calls in order). Kept for workers started later."""
        self._env_parameters = dict(values)
        for actor in self._actors:
            actor.set_env_parameters.remote(self._env_parameters)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        actors, self._actors = self._actors, []
        try:
            if actors:
                try:
                    ray.wait([a.close.remote() for a in actors], num_returns=len(actors), timeout=CLOSE_TIMEOUT_S)
                except Exception:  # a dead worker: nothing to close
                    pass
                for actor in actors:
                    try:
                        ray.kill(actor, no_restart=True)
                    except Exception:
                        pass
        finally:
            if self._owns_ray and ray.is_initialized():
                ray.shutdown()

    # ------------------------------------------------------------------ internals

    def _start(self, k: int) -> Any:
        env_id, env_args, per_worker, agents, seed, unity, timeout = self._args
        worker = self._ray.remote(RolloutWorker).options(**self._options)
        return worker.remote(
            k, k * per_worker, env_id, env_args, per_worker, agents, seed, unity, timeout, self._env_parameters
        )

    def _send(self) -> List[Any]:
        weights = self._weights()
        return [a.step.remote(weights, self.settings.steps_per_call) for a in self._actors]

    def _build(self, actor: Any) -> Any:
        spec = {name: (b.settings, b.ids) for name, b in self._behaviors.items()}
        return actor.build.remote(spec, self._deterministic)

    def _weights(self, full: bool = False) -> Any:
        """What changed in the acting weights since the last call, ``ray.put`` once (None:
        nothing). Every variable after an update (or the first time, or ``full``); the
        normalizer statistics when they moved."""
        payload: Dict[str, Dict[int, np.ndarray]] = {}
        if full:  # a new worker: the others keep what they were sent
            for name, source in self._sources.items():
                payload[name] = dict(enumerate(source.read(range(len(source.sources)))))
            return self._ray.put(payload) if payload else None
        version = self._version()
        everything = version != self._sent_version
        for name, source in self._sources.items():
            if everything:
                arrays = source.read(range(len(source.sources)))
                payload[name] = dict(enumerate(arrays))
                source.sent = [arrays[i] for i in source.normalizer]
            elif source.normalizer:
                arrays = source.read(source.normalizer)
                if source.sent is None or any(not np.array_equal(a, b) for a, b in zip(arrays, source.sent)):
                    payload[name] = dict(zip(source.normalizer, arrays))
                    source.sent = arrays
        self._sent_version = version
        return self._ray.put(payload) if payload else None

    def _get_all(
        self, refs: List[Any], timeout: float, what: str, workers: Optional[Sequence[int]] = None
    ) -> List[Any]:
        """Results of calls that must all succeed (start-up): one line otherwise."""
        workers = range(len(refs)) if workers is None else workers
        results = self._wait(refs, timeout, workers)
        for k, r in zip(workers, results):
            if isinstance(r, _Dead):
                raise EnvWorkerError(f"Ray rollout worker {k} could not {what}: {r.reason}")
        return results

    def _wait(self, refs: List[Any], timeout: Optional[float] = None, workers: Optional[Sequence[int]] = None) -> List[Any]:
        """Every call's result (``refs[j]``: a call to worker ``workers[j]``, by default
        worker ``j``), or `_Dead` for a worker that died or did not answer in ``timeout``
        (default: the step timeout); a stop request ends the wait (`EnvInterrupted`); an
        error raised inside a worker is one `EnvWorkerError` line."""
        ray = self._ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        limit = self._timeout if timeout is None else timeout
        waited = 0.0
        remaining = list(refs)
        while remaining:
            ready, remaining = ray.wait(remaining, num_returns=len(remaining), timeout=STOP_POLL_S)
            if remaining and self._stop_requested():
                raise EnvInterrupted("stopped while waiting for the Ray rollout workers")
            if ready:
                continue
            waited += STOP_POLL_S
            if limit is not None and waited >= limit:
                break
        results: List[Any] = []
        for k, ref in zip(range(len(refs)) if workers is None else workers, refs):
            if ref in remaining:
                ray.kill(self._actors[k], no_restart=True)
                results.append(_Dead(f"no answer within {limit:g} s"))
                continue
            try:
                results.append(ray.get(ref))
            except RayActorError as exc:
                results.append(_Dead(_short(exc)))
            except GetTimeoutError:  # pragma: no cover - ready refs do not time out
                results.append(_Dead("no answer"))
            except RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                text = _short(cause if isinstance(cause, BaseException) else exc)
                raise EnvWorkerError(f"Ray rollout worker {k}: {text}") from None
        return results

    def _collect(self, results: List[Any]) -> List[List[EnvStep]]:
        """Per env step, the workers' steps in env order (each result: a worker's list of
        steps, one list of `ActedEnvStep` per env step). A dead worker is replaced: its
        replacement's reset comes with the first step, and it is absent from the others."""
        chunks = [[self._restart(k, r.reason)] if isinstance(r, _Dead) else r for k, r in enumerate(results)]
        return [
            [s for chunk in chunks if i < len(chunk) for s in chunk[i]]
            for i in range(max(len(chunk) for chunk in chunks))
        ]

    def _restart(self, k: int, reason: str) -> List[ActedEnvStep]:
        limit = self.settings.max_lifetime_restarts
        self._restarts += 1
        if self._restarts > limit:
            raise EnvWorkerError(
                f"Ray rollout worker {k} died ({reason}); no restart left "
                f"(env_settings.max_lifetime_restarts: {limit})"
            )
        print(
            f"[WARNING] Ray rollout worker {k} died ({reason}); restarting it "
            f"(restart {self._restarts} of at most {limit})",
            flush=True,
        )
        try:
            self._ray.kill(self._actors[k], no_restart=True)
        except Exception:
            pass
        actor = self._actors[k] = self._start(k)
        described = self._get_all([actor.describe.remote()], START_TIMEOUT_S, "restart", [k])[0]
        self.pids[k], self.nodes[k] = described[1], described[2]
        if self._behaviors:
            self._get_all([self._build(actor)], START_TIMEOUT_S, "build its actors", [k])
        steps = self._get_all([actor.reset.remote(self._weights(full=True))], START_TIMEOUT_S, "reset", [k])[0]
        for s in steps:
            s.restarted = True
        return list(steps)


class _Dead:
    """A worker that died (or hung and was killed), with the reason in a few words."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
