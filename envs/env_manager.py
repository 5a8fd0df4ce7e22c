"""Env managers: step ``num_envs`` copies of an environment for the trainer.

The trainer sees a list of workers. Worker ``i`` runs ``make_env(env_id, env_args,
seed + i, agents_per_env)``; ``seed == -1`` draws one random base seed in the manager
(`EnvManager.seed` tells which). Every call returns one `EnvStep` per worker, in worker
order, holding ``behavior name -> (DecisionSteps, TerminalSteps)``.

* `InProcessEnvManager` steps its envs one after another in this process (the default for
  ``num_envs == 1``).
* `SubprocessEnvManager` runs one worker process per env (``spawn`` start method: the
  parent may have TensorFlow loaded, which must never be forked). `step()` sends the
  actions to every worker before it reads any result, so workers step in parallel.
  Workers import ``envs`` only (Gymnasium only for ``gym:`` ids), never TensorFlow.
  Note that ``spawn`` re-imports the parent's ``__main__`` module in each worker (as
  ``__mp_main__``): an entry-point script should not import TensorFlow at module level,
  or every worker pays for it at start-up.

Failures: an env that raises, a worker that dies, or a worker that does not answer within
``step_timeout`` seconds makes the manager shut every worker down and raise
`EnvWorkerError` with one line naming the env id, the worker index and the cause (the
worker's traceback is on ``error.worker_traceback``). An `EnvError` raised while a worker
builds its env (bad env_args, unknown Gymnasium id) is re-raised as is. Workers ignore
SIGINT (Ctrl-C reaches the whole process group; the parent decides when to close them)
and exit when the parent disappears. `close()` is idempotent, waits a few seconds at most,
and then terminates and kills; it also runs when the manager is garbage collected or at
interpreter exit, so no worker outlives its manager.

For tests, ``builtin:_Crash`` (`envs.builtin.crash`) is an env that raises, exits or hangs
on a chosen step.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import time
import traceback
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps, TerminalSteps, all_steps
from envs.exceptions import EnvError, EnvWorkerError
from envs.registry import make_env, validate_env

StepDict = Dict[str, Tuple[DecisionSteps, TerminalSteps]]


@dataclass
class EnvStep:
    """What one worker returned.

    Attributes:
        worker_id: the worker's index (its env was seeded with ``seed + worker_id``).
        steps: behavior name -> ``(DecisionSteps, TerminalSteps)``.
    """

    worker_id: int
    steps: Dict[str, Tuple[DecisionSteps, TerminalSteps]]


class EnvManager(ABC):
    """Steps ``num_workers`` environments with the same behaviors."""

    @property
    @abstractmethod
    def behavior_specs(self) -> Dict[str, BehaviorSpec]:
        """Behavior name -> spec (the same for every worker)."""

    @property
    @abstractmethod
    def num_workers(self) -> int:
        """Number of environments."""

    @property
    def seed(self) -> Optional[int]:
        """The base seed actually used (resolved when -1 was asked for); None if unknown."""
        return None

    @abstractmethod
    def reset(self) -> List[EnvStep]:
        """Reset every env; one `EnvStep` per worker, in worker order."""

    @abstractmethod
    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        """Step every env once.

        Args:
            actions: ``actions[i]``: behavior name -> `ActionTuple` for the agents of
                worker i's last `DecisionSteps` of that behavior, in the same order.
                A behavior left out gets zero actions.

        Returns:
            One `EnvStep` per worker, in worker order.
        """

    @abstractmethod
    def close(self) -> None:
        """Release every env / worker. Idempotent; never hangs."""

    def __enter__(self) -> "EnvManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def resolve_seed(seed: int, num_envs: int) -> int:
    """``seed``, or a random base seed when ``seed == -1`` (so ``seed + i`` stays < 2**31)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < -1:
        raise EnvError(f"env_settings.seed must be an integer >= 0, or -1 for a random seed, got {seed!r}")
    if seed == -1:
        return int(np.random.default_rng().integers(0, 2**31 - 1 - num_envs))
    return int(seed)


def _check_counts(num_envs: int, agents_per_env: int) -> None:
    for key, value in (("num_envs", num_envs), ("agents_per_env", agents_per_env)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise EnvError(f"env_settings.{key} must be an integer >= 1, got {value!r}")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _check_actions(actions: Sequence[Mapping[str, ActionTuple]], num_workers: int) -> None:
    if len(actions) != num_workers:
        raise ValueError(f"step() needs one action mapping per worker ({num_workers}), got {len(actions)}")


# --------------------------------------------------------------------------- in-process
class InProcessEnvManager(EnvManager):
    """Steps its envs one after another in this process."""

    def __init__(
        self,
        env_id: str,
        env_args: Optional[Mapping[str, Any]] = None,
        num_envs: int = 1,
        agents_per_env: int = 1,
        seed: int = 0,
    ) -> None:
        """
        Args:
            env_id: ``builtin:<Name>`` or ``gym:<id>`` (see `envs.registry`).
            env_args: kwargs of the env.
            num_envs: number of envs, stepped in sequence.
            agents_per_env: agents per behavior in each env.
            seed: env i uses ``seed + i``; -1 draws a random base seed.
        """
        _check_counts(num_envs, agents_per_env)
        validate_env(env_id, env_args)
        self._env_id = env_id
        self._seed = resolve_seed(seed, int(num_envs))
        self._envs: List[BaseEnv] = []
        self._closed = False
        try:
            for i in range(int(num_envs)):
                self._envs.append(make_env(env_id, env_args, self._seed + i, int(agents_per_env)))
        except BaseException:
            self.close()
            raise
        self._specs = _common_specs(env_id, [dict(e.behavior_specs) for e in self._envs])

    @classmethod
    def from_envs(cls, envs: Sequence[BaseEnv], env_id: str = "custom", seed: int = 0) -> "InProcessEnvManager":
        """A manager over envs built elsewhere (tests, custom envs). Takes ownership."""
        self = cls.__new__(cls)
        self._env_id = env_id
        self._seed = int(seed)
        self._envs = list(envs)
        self._closed = False
        self._specs = _common_specs(env_id, [dict(e.behavior_specs) for e in self._envs])
        return self

    @property
    def behavior_specs(self) -> Dict[str, BehaviorSpec]:
        return self._specs

    @property
    def num_workers(self) -> int:
        return len(self._envs)

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def envs(self) -> Sequence[BaseEnv]:
        """The envs (e.g. for a built-in env's ``expert_action``)."""
        return tuple(self._envs)

    def reset(self) -> List[EnvStep]:
        self._check_open()
        out = []
        for i, env in enumerate(self._envs):
            try:
                env.reset()
                out.append(EnvStep(i, all_steps(env)))
            except Exception as e:
                raise self._worker_error(i, e) from e
        return out

    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        self._check_open()
        _check_actions(actions, len(self._envs))
        out = []
        for i, env in enumerate(self._envs):
            try:
                for name, action in actions[i].items():
                    env.set_actions(name, action)
                env.step()
                out.append(EnvStep(i, all_steps(env)))
            except Exception as e:
                raise self._worker_error(i, e) from e
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for env in self._envs:
            try:
                env.close()
            except Exception:  # close every env even if one fails
                pass

    def _worker_error(self, i: int, e: Exception) -> EnvWorkerError:
        if isinstance(e, EnvWorkerError):
            return e
        err = EnvWorkerError(f"env {self._env_id!r} worker {i} raised {type(e).__name__}: {_one_line(str(e))}")
        err.worker_traceback = traceback.format_exc()  # type: ignore[attr-defined]
        return err

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the env manager is closed")


def _common_specs(env_id: str, specs: Sequence[Dict[str, BehaviorSpec]]) -> Dict[str, BehaviorSpec]:
    for i, s in enumerate(specs[1:], start=1):
        if s != specs[0]:
            raise EnvWorkerError(f"env {env_id!r} worker {i} has behavior specs that differ from worker 0's")
    return dict(specs[0])


# --------------------------------------------------------------------------- subprocess
def _worker_main(conn: Any, env_id: str, env_args: Optional[Dict[str, Any]], seed: int, agents_per_env: int) -> None:
    """Body of a worker process: build the env, then serve reset/step/close commands.

    Replies: ``("ready", specs)`` once, then ``("ok", steps)`` per command; on an exception
    ``("error", (type name, one-line message, is EnvError, traceback))`` and exit.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    env: Optional[BaseEnv] = None
    try:
        try:
            env = make_env(env_id, env_args, seed, agents_per_env)
            names = list(env.behavior_specs)
            conn.send(("ready", dict(env.behavior_specs)))
            while True:
                try:
                    cmd, payload = conn.recv()
                except (EOFError, OSError):
                    return  # the parent is gone
                if cmd == "step":
                    for name, action in payload.items():
                        env.set_actions(name, action)
                    env.step()
                elif cmd == "reset":
                    env.reset()
                else:  # "close"
                    return
                conn.send(("ok", {name: env.get_steps(name) for name in names}))
        except (BrokenPipeError, ConnectionResetError):
            return  # the parent is gone
        except BaseException as e:
            info = (type(e).__name__, _one_line(str(e)), isinstance(e, EnvError), traceback.format_exc())
            try:
                conn.send(("error", info))
            except Exception:
                pass
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:
                pass
        conn.close()


def _shutdown(procs: List[Any], conns: List[Any], grace_s: float) -> None:
    """Ask workers to close, then terminate, then kill; never waits much longer than grace_s."""
    for conn, proc in zip(conns, procs):
        if proc.is_alive():
            try:
                conn.send(("close", None))
            except Exception:
                pass
    deadline = time.monotonic() + grace_s
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(1.0)
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)
    for conn in conns:
        try:
            conn.close()
        except Exception:
            pass


class SubprocessEnvManager(EnvManager):
    """One worker process per env, stepped in parallel (see the module docstring)."""

    def __init__(
        self,
        env_id: str,
        env_args: Optional[Mapping[str, Any]] = None,
        num_envs: int = 2,
        agents_per_env: int = 1,
        seed: int = 0,
        *,
        start_timeout: float = 120.0,
        step_timeout: Optional[float] = 600.0,
        start_method: str = "spawn",
    ) -> None:
        """
        Args:
            env_id: ``builtin:<Name>`` or ``gym:<id>`` (see `envs.registry`).
            env_args: kwargs of the env (must be picklable).
            num_envs: number of worker processes.
            agents_per_env: agents per behavior in each env.
            seed: worker i uses ``seed + i``; -1 draws a random base seed.
            start_timeout: seconds for every worker to build its env.
            step_timeout: seconds for every worker to answer a reset/step; None = no limit
                (a dead worker is still detected at once).
            start_method: ``"spawn"`` or ``"forkserver"``; never ``"fork"``.
        """
        _check_counts(num_envs, agents_per_env)
        validate_env(env_id, env_args)
        if start_method not in ("spawn", "forkserver"):
            raise ValueError(f"start_method must be 'spawn' or 'forkserver', got {start_method!r}")
        self._env_id = env_id
        self._seed = resolve_seed(seed, int(num_envs))
        self._step_timeout = step_timeout
        self._error: Optional[EnvWorkerError] = None
        self._closed = False
        ctx = multiprocessing.get_context(start_method)
        self._procs: List[Any] = []
        self._conns: List[Any] = []
        # The finalizer holds the lists, not self: it runs on close(), on garbage
        # collection and at interpreter exit, whichever comes first.
        self._finalizer = weakref.finalize(self, _shutdown, self._procs, self._conns, 5.0)
        args = dict(env_args) if env_args is not None else None
        try:
            for i in range(int(num_envs)):
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=_worker_main,
                    args=(child_conn, env_id, args, self._seed + i, int(agents_per_env)),
                    name=f"env-worker-{i}",
                    daemon=True,
                )
                proc.start()
                child_conn.close()  # so the parent sees EOF when the worker dies
                self._procs.append(proc)
                self._conns.append(parent_conn)
            specs = self._gather(start_timeout, starting=True)
        except BaseException:
            self.close()
            raise
        self._specs = _common_specs(env_id, specs)

    @property
    def behavior_specs(self) -> Dict[str, BehaviorSpec]:
        return self._specs

    @property
    def num_workers(self) -> int:
        return len(self._procs)

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def worker_pids(self) -> List[int]:
        """Process ids of the workers (for monitoring and tests)."""
        return [p.pid for p in self._procs]

    def reset(self) -> List[EnvStep]:
        self._check_usable()
        for i in range(len(self._conns)):
            self._send(i, ("reset", None))
        return [EnvStep(i, steps) for i, steps in enumerate(self._gather(self._step_timeout))]

    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        self._check_usable()
        _check_actions(actions, len(self._conns))
        for i in range(len(self._conns)):  # all workers start stepping before we wait
            self._send(i, ("step", dict(actions[i])))
        return [EnvStep(i, steps) for i, steps in enumerate(self._gather(self._step_timeout))]

    def close(self) -> None:
        self._closed = True
        self._finalizer()  # runs _shutdown at most once

    # ------------------------------------------------------------------ internals
    def _send(self, i: int, message: Tuple[str, Any]) -> None:
        try:
            self._conns[i].send(message)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self._fail(i, self._death_cause(i))

    def _gather(self, timeout: Optional[float], starting: bool = False) -> List[Any]:
        """One reply per worker, in worker order; raises on error, death or timeout."""
        n = len(self._conns)
        results: List[Any] = [None] * n
        pending = {self._conns[i]: i for i in range(n)}
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending:
            wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
            handles = list(pending) + [self._procs[i].sentinel for i in pending.values()]
            ready = multiprocessing.connection.wait(handles, timeout=wait_s)
            if not ready:
                first = min(pending.values())
                self._fail(first, f"did not answer within {timeout:g} s", kill_first=True)
            for handle in ready:
                if handle in pending:
                    i = pending.pop(handle)
                    try:
                        kind, payload = handle.recv()
                    except (EOFError, OSError):
                        self._fail(i, self._death_cause(i))
                    if kind == "error":
                        type_name, message, is_env_error, tb = payload
                        if starting and is_env_error:
                            self._fail(i, message, as_is=True, worker_traceback=tb)
                        self._fail(i, f"raised {type_name}: {message}", worker_traceback=tb)
                    results[i] = payload
            for i in list(pending.values()):
                conn = self._conns[i]
                # A dead worker whose pipe is not at EOF (a grandchild holds it open).
                if not self._procs[i].is_alive() and not conn.poll(0):
                    self._fail(i, self._death_cause(i))
        return results

    def _death_cause(self, i: int) -> str:
        proc = self._procs[i]
        proc.join(1.0)
        code = proc.exitcode
        if code is None:
            return "closed its pipe unexpectedly"
        if code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = str(-code)
            return f"died (killed by signal {sig})"
        return f"died (exit code {code})"

    def _fail(
        self,
        i: int,
        cause: str,
        *,
        as_is: bool = False,
        kill_first: bool = False,
        worker_traceback: Optional[str] = None,
    ) -> None:
        """Shut every worker down and raise the error for worker ``i``."""
        if kill_first and self._procs[i].is_alive():
            self._procs[i].kill()  # a hung worker will not read "close"
        self._closed = True
        self._finalizer.detach()
        _shutdown(self._procs, self._conns, grace_s=1.0)
        err: EnvWorkerError
        if as_is:
            error = EnvError(cause)
            error.worker_traceback = worker_traceback  # type: ignore[attr-defined]
            raise error
        err = EnvWorkerError(f"env {self._env_id!r} worker {i} {cause}")
        err.worker_traceback = worker_traceback  # type: ignore[attr-defined]
        self._error = err
        raise err

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise RuntimeError("the env manager is closed")


def make_env_manager(
    env_id: str,
    env_args: Optional[Mapping[str, Any]],
    num_envs: int,
    agents_per_env: int,
    seed: int,
) -> EnvManager:
    """The manager for ``env_settings``: in-process for one env, else one process per env.

    Args:
        env_id: ``builtin:<Name>`` or ``gym:<id>``.
        env_args: kwargs of the env.
        num_envs: number of envs (``--num-envs``).
        agents_per_env: agents per behavior in each env.
        seed: env i uses ``seed + i``; -1 draws a random base seed once.
    """
    _check_counts(num_envs, agents_per_env)
    if int(num_envs) == 1:
        return InProcessEnvManager(env_id, env_args, 1, agents_per_env, seed)
    return SubprocessEnvManager(env_id, env_args, num_envs, agents_per_env, seed)
