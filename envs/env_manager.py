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
  or every worker pays for it at start-up. Steps and actions cross the pipes in a compact
  binary layout (not pickled dataclasses); the arrays the parent receives are fresh and
  writable, as in-process ones are.

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
import pickle
import select
import signal
import time
import traceback
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, NoReturn, Optional, Sequence, Tuple, TypeVar

import numpy as np

from envs.base_env import ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps, TerminalSteps, all_steps
from envs.exceptions import EnvError, EnvWorkerError
from envs.registry import make_env, parse_env_id, validate_env

StepDict = Dict[str, Tuple[DecisionSteps, TerminalSteps]]
_Manager = TypeVar("_Manager", bound="EnvManager")


@dataclass
class EnvStep:
    """What one worker returned.

    Attributes:
        worker_id: the worker's index (its env was seeded with ``seed + worker_id``).
        steps: behavior name -> ``(DecisionSteps, TerminalSteps)``.
        env_stats: stats the environment itself recorded since the last step (Unity's
            StatsRecorder): key -> ``[(value, aggregation)]``, aggregation as ML-Agents'
            StatsAggregationMethod (0 average, 1 most recent, 2 sum, 3 histogram).
    """

    worker_id: int
    steps: Dict[str, Tuple[DecisionSteps, TerminalSteps]]
    env_stats: Dict[str, List[Tuple[float, int]]] = field(default_factory=dict)


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

    def __enter__(self: _Manager) -> _Manager:
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


def _check_actions(
    actions: Sequence[Mapping[str, ActionTuple]], num_workers: int, specs: Mapping[str, BehaviorSpec]
) -> None:
    if len(actions) != num_workers:
        raise ValueError(f"step() needs one action mapping per worker ({num_workers}), got {len(actions)}")
    for i, mapping in enumerate(actions):
        for name in mapping:
            if name not in specs:
                raise ValueError(f"actions[{i}] names unknown behavior {name!r}; behaviors: {list(specs)}")


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
        self._error: Optional[EnvWorkerError] = None
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
        if not envs:
            raise ValueError("from_envs() needs at least one env")
        self = cls.__new__(cls)
        self._env_id = env_id
        self._seed = int(seed)
        self._envs = list(envs)
        self._closed = False
        self._error = None
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
        _check_actions(actions, len(self._envs), self._specs)
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
        """Like a crashed worker process: close every env; later calls raise the same error."""
        if isinstance(e, EnvWorkerError):
            err = e
        else:
            err = EnvWorkerError(f"env {self._env_id!r} worker {i} raised {type(e).__name__}: {_one_line(str(e))}")
            err.worker_traceback = traceback.format_exc()  # type: ignore[attr-defined]
        self._error = err
        self.close()
        return err

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise RuntimeError("the env manager is closed")


def _common_specs(env_id: str, specs: Sequence[Dict[str, BehaviorSpec]]) -> Dict[str, BehaviorSpec]:
    for i, s in enumerate(specs[1:], start=1):
        if s != specs[0]:
            raise EnvWorkerError(f"env {env_id!r} worker {i} has behavior specs that differ from worker 0's")
    return dict(specs[0])


# --------------------------------------------------------------------------- wire format
# Steps and actions cross the pipe as one flat byte string instead of pickled
# dataclasses: pickling a dozen small arrays per step cost more than stepping CartPole.
# Both sides know the behavior specs, so only the agent counts travel in a header.
_ALIGN = 8


def _pack(header: List[int], arrays: List[np.ndarray]) -> bytes:
    """``[n_header int64][header][array bytes, each padded to 8 bytes]...``."""
    parts = [np.array([len(header)] + header, np.int64).tobytes()]
    for a in arrays:
        raw = a.tobytes()
        parts.append(raw)
        pad = -len(raw) % _ALIGN
        if pad:
            parts.append(b"\0" * pad)
    return b"".join(parts)


_F32, _I32, _BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(bool)


class _Reader:
    """Reads what `_pack` wrote; arrays are views of one private writable buffer."""

    def __init__(self, data: bytes) -> None:
        self.buf = bytearray(data)  # one copy makes every array writable, like in-process ones
        n = int(np.frombuffer(self.buf, np.int64, 1)[0])
        self.header: List[int] = np.frombuffer(self.buf, np.int64, n, 8).tolist()
        self.offset = 8 * (n + 1)

    def take(self, dtype: np.dtype, shape: Tuple[int, ...]) -> np.ndarray:
        count = 1
        for d in shape:
            count *= d
        out = np.frombuffer(self.buf, dtype, count, self.offset)
        if len(shape) != 1:
            out = out.reshape(shape)
        nbytes = count * dtype.itemsize
        self.offset += nbytes + (-nbytes % _ALIGN)
        return out


def _pack_steps(names: Sequence[str], steps: StepDict) -> bytes:
    """Header per behavior: ``[n_decision, n_terminal, has_mask]``."""
    header: List[int] = []
    arrays: List[np.ndarray] = []
    for name in names:
        decision, terminal = steps[name]
        mask = decision.action_mask
        header += [len(decision), len(terminal), int(mask is not None)]
        arrays += [np.asarray(o, np.float32) for o in decision.obs]
        arrays += [np.asarray(decision.reward, np.float32), np.asarray(decision.agent_id, np.int32)]
        if mask is not None:
            arrays += [np.asarray(m, bool) for m in mask]
        arrays += [np.asarray(o, np.float32) for o in terminal.obs]
        arrays += [
            np.asarray(terminal.reward, np.float32),
            np.asarray(terminal.interrupted, bool),
            np.asarray(terminal.agent_id, np.int32),
        ]
    return _pack(header, arrays)


def _unpack_steps(names: Sequence[str], specs: Mapping[str, BehaviorSpec], data: bytes) -> StepDict:
    r = _Reader(data)
    out: StepDict = {}
    for i, name in enumerate(names):
        n_d, n_t, has_mask = r.header[3 * i: 3 * i + 3]
        spec = specs[name]
        obs = [r.take(_F32, (n_d,) + o.shape) for o in spec.observation_specs]
        reward = r.take(_F32, (n_d,))
        agent_id = r.take(_I32, (n_d,))
        mask = [r.take(_BOOL, (n_d, b)) for b in spec.action_spec.discrete_branches] if has_mask else None
        decision = DecisionSteps(obs, reward, agent_id, mask)
        t_obs = [r.take(_F32, (n_t,) + o.shape) for o in spec.observation_specs]
        terminal = TerminalSteps(
            t_obs, r.take(_F32, (n_t,)), r.take(_BOOL, (n_t,)), r.take(_I32, (n_t,))
        )
        out[name] = (decision, terminal)
    return out


def _pack_actions(names: Sequence[str], actions: Mapping[str, ActionTuple]) -> bytes:
    """Header per behavior: ``[present, continuous rows, cols, discrete rows, cols]``."""
    header: List[int] = []
    arrays: List[np.ndarray] = []
    for name in names:
        action = actions.get(name)
        if action is None:
            header += [0, 0, 0, 0, 0]
            continue
        cont = np.asarray(action.continuous, np.float32)
        disc = np.asarray(action.discrete, np.int32)
        if cont.ndim != 2 or disc.ndim != 2:
            raise ValueError(f"{name}: ActionTuple arrays must be 2-D [n_agents, size]")
        header += [1, cont.shape[0], cont.shape[1], disc.shape[0], disc.shape[1]]
        arrays += [cont, disc]
    return _pack(header, arrays)


def _unpack_actions(names: Sequence[str], data: bytes) -> Dict[str, ActionTuple]:
    r = _Reader(data)
    out: Dict[str, ActionTuple] = {}
    for i, name in enumerate(names):
        present, c_rows, c_cols, d_rows, d_cols = r.header[5 * i: 5 * i + 5]
        if present:
            out[name] = ActionTuple(r.take(_F32, (c_rows, c_cols)), r.take(_I32, (d_rows, d_cols)))
    return out


# --------------------------------------------------------------------------- subprocess
# Messages: parent -> worker b"S" + packed actions | b"R" | b"C";
# worker -> parent b"Y" + pickled specs (once) | b"K" + packed steps | b"E" + pickled error info.
_STEP, _RESET, _CLOSE, _READY, _OK, _ERROR = b"S", b"R", b"C", b"Y", b"K", b"E"


def _worker_main(conn: Any, env_id: str, env_args: Optional[Dict[str, Any]], seed: int, agents_per_env: int) -> None:
    """Body of a worker process: build the env, then serve reset/step/close commands.

    Replies: ready (pickled specs) once, then packed steps per command; on an exception an
    error ``(type name, one-line message, is EnvError, traceback)`` and exit.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    env: Optional[BaseEnv] = None
    try:
        try:
            env = make_env(env_id, env_args, seed, agents_per_env)
            names = list(env.behavior_specs)
            conn.send_bytes(_READY + pickle.dumps(dict(env.behavior_specs), pickle.HIGHEST_PROTOCOL))
            while True:
                try:
                    message = conn.recv_bytes()
                except (EOFError, OSError):
                    return  # the parent is gone
                cmd = message[:1]
                if cmd == _STEP:
                    for name, action in _unpack_actions(names, message[1:]).items():
                        env.set_actions(name, action)
                    env.step()
                elif cmd == _RESET:
                    env.reset()
                else:  # _CLOSE
                    return
                conn.send_bytes(_OK + _pack_steps(names, {name: env.get_steps(name) for name in names}))
        except (BrokenPipeError, ConnectionResetError):
            return  # the parent is gone
        except BaseException as e:
            info = (type(e).__name__, _one_line(str(e)), isinstance(e, EnvError), traceback.format_exc())
            try:
                conn.send_bytes(_ERROR + pickle.dumps(info))
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
                conn.send_bytes(_CLOSE)
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
        self._names: List[str] = []
        self._specs: Dict[str, BehaviorSpec] = {}
        ctx: Any = multiprocessing.get_context(start_method)
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
            self._poller = _Poller(self._conns, self._procs)
            replies = self._gather(start_timeout, starting=True)
            self._specs = _common_specs(env_id, [pickle.loads(r) for r in replies])
        except BaseException:
            self.close()
            raise
        self._names = list(self._specs)

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
            self._send(i, _RESET)
        return self._steps_from(self._gather(self._step_timeout))

    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        self._check_usable()
        _check_actions(actions, len(self._conns), self._specs)
        messages = [_STEP + _pack_actions(self._names, a) for a in actions]
        for i, message in enumerate(messages):  # every worker starts stepping before we wait
            self._send(i, message)
        return self._steps_from(self._gather(self._step_timeout))

    def close(self) -> None:
        self._closed = True
        self._finalizer()  # runs _shutdown at most once

    # ------------------------------------------------------------------ internals
    def _steps_from(self, replies: List[bytes]) -> List[EnvStep]:
        return [EnvStep(i, _unpack_steps(self._names, self._specs, r)) for i, r in enumerate(replies)]

    def _send(self, i: int, message: bytes) -> None:
        try:
            self._conns[i].send_bytes(message)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self._fail(i, self._death_cause(i))

    def _gather(self, timeout: Optional[float], starting: bool = False) -> List[bytes]:
        """One reply payload per worker, in worker order; raises on error, death or timeout."""
        n = len(self._conns)
        results: List[bytes] = [b""] * n
        pending = set(range(n))
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending:
            wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = self._poller.wait(wait_s)
            if not ready:
                if deadline is not None and time.monotonic() >= deadline:
                    self._fail(min(pending), f"did not answer within {timeout:g} s", kill_first=True)
                continue
            for i in sorted(ready):
                conn = self._conns[i]
                if i not in pending:
                    if not self._procs[i].is_alive():  # died after answering
                        self._fail(i, self._death_cause(i))
                    continue
                if not conn.poll(0):
                    if not self._procs[i].is_alive():  # dead, pipe held open elsewhere
                        self._fail(i, self._death_cause(i))
                    continue
                try:
                    message = conn.recv_bytes()
                except (EOFError, OSError):
                    cause = self._death_cause(i)
                    if starting:  # e.g. a __main__ without the `if __name__ == "__main__":` guard
                        cause += " while starting; its stderr shows why"
                    self._fail(i, cause)
                kind, payload = message[:1], message[1:]
                if kind == _ERROR:
                    type_name, text, is_env_error, tb = pickle.loads(payload)
                    if starting and is_env_error:
                        self._fail(i, text, as_is=True, worker_traceback=tb)
                    self._fail(i, f"raised {type_name}: {text}", worker_traceback=tb)
                results[i] = payload
                pending.discard(i)
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
    ) -> NoReturn:
        """Shut every worker down and raise the error for worker ``i``."""
        if kill_first and self._procs[i].is_alive():
            self._procs[i].kill()  # a hung worker will not read "close"
        self._closed = True
        self._finalizer.detach()
        _shutdown(self._procs, self._conns, grace_s=1.0)
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


class _Poller:
    """Waits until worker pipes have data or worker processes exit.

    Uses one long-lived ``select.poll`` object where available (building a selector per
    wait, as ``multiprocessing.connection.wait`` does, costs tens of microseconds per
    step), else ``multiprocessing.connection.wait``.
    """

    def __init__(self, conns: Sequence[Any], procs: Sequence[Any]) -> None:
        self._conns = list(conns)
        self._procs = list(procs)
        self._poll: Optional[Any] = None
        self._worker_of: Dict[Any, int] = {}
        if hasattr(select, "poll"):
            self._poll = select.poll()
            for i, (conn, proc) in enumerate(zip(conns, procs)):
                for fd in (conn.fileno(), proc.sentinel):
                    self._poll.register(fd, select.POLLIN)
                    self._worker_of[fd] = i
        else:  # pragma: no cover - Windows
            for i, (conn, proc) in enumerate(zip(conns, procs)):
                self._worker_of[conn] = i
                self._worker_of[proc.sentinel] = i

    def wait(self, timeout: Optional[float]) -> set:
        """Indices of workers with an event, empty on timeout."""
        if self._poll is not None:
            ms = None if timeout is None else int(np.ceil(timeout * 1000))
            events = self._poll.poll(ms)
            return {self._worker_of[fd] for fd, _ in events}
        ready = multiprocessing.connection.wait(list(self._worker_of), timeout)  # pragma: no cover
        return {self._worker_of[h] for h in ready}  # pragma: no cover


def make_env_manager(
    env_id: Optional[str],
    env_args: Optional[Mapping[str, Any]],
    num_envs: int,
    agents_per_env: int,
    seed: int,
    unity: Optional[Any] = None,
) -> EnvManager:
    """The manager for ``env_settings``: in-process for one env, else one process per env;
    Unity games (a build path, or None for the Editor) in a `envs.unity.manager.UnityEnvManager`.

    Args:
        env_id: ``builtin:<Name>`` or ``gym:<id>``.
        env_args: kwargs of the env.
        num_envs: number of envs (``--num-envs``).
        agents_per_env: agents per behavior in each env.
        seed: env i uses ``seed + i``; -1 draws a random base seed once.
        unity: `envs.unity.manager.UnityOptions` for Unity games (None: defaults).
    """
    _check_counts(num_envs, agents_per_env)
    if env_id is None or parse_env_id(env_id)[0] == "unity":
        from envs.unity.manager import UnityEnvManager, unity_args

        if int(agents_per_env) != 1:
            raise EnvError("env_settings.agents_per_env: a Unity game decides its own agents; leave it at 1")
        extra = unity_args(env_args)
        if unity is None:
            from envs.unity.manager import UnityOptions

            unity = UnityOptions()
        if extra:
            import dataclasses

            unity = dataclasses.replace(unity, additional_args=tuple(unity.additional_args) + extra)
        return UnityEnvManager(env_id, int(num_envs), seed, unity)
    if int(num_envs) == 1:
        return InProcessEnvManager(env_id, env_args, 1, agents_per_env, seed)
    return SubprocessEnvManager(env_id, env_args, num_envs, agents_per_env, seed)
