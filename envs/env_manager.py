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
  `step_some()` / `wait_some()` step workers out of lockstep instead (each one again as
  soon as it has its next actions, the others still stepping), as ML-Agents'
  SubprocessEnvManager does; threaded runs use it (`trainers.controller`).
  Workers import ``envs`` only (Gymnasium only for ``gym:`` ids), never TensorFlow.
  Note that ``spawn`` re-imports the parent's ``__main__`` module in each worker (as
  ``__mp_main__``): an entry-point script should not import TensorFlow at module level,
  or every worker pays for it at start-up. Steps and actions cross through one
  preallocated shared-memory segment per worker (numpy views at fixed offsets); the pipe
  carries a one-byte command or reply. A step with more agents than the segment holds
  goes through the pipe in a compact binary layout and the worker gets a bigger segment
  (see "shared memory" below). The arrays the parent receives are fresh and writable, as
  in-process ones are.
  Both sides wait for the other *spinning* first (polling the pipe without blocking and
  yielding the CPU, for up to `SPIN_S`) while the other has been answering quickly, then
  blocking: waking a process blocked on a pipe costs ~100 us on this 2-core VM, which was
  most of a fast env's step round trip (`_Waiter`).

Failures: an env that raises, a worker that dies, or a worker that does not answer within
``step_timeout`` seconds makes the manager shut every worker down and raise
`EnvWorkerError` with one line naming the env id, the worker index and the cause (the
worker's traceback is on ``error.worker_traceback``). An `EnvError` raised while a worker
builds its env (bad env_args, unknown Gymnasium id) is re-raised as is; one raised while it
steps (the env's own report, e.g. a NaN observation from `envs.gym`) keeps its words:
"env <id> worker <i>: <the env's line>" rather than "... raised EnvError: ...".

Stopping: the training loop's SIGINT/SIGTERM handlers only set a flag, and a blocked wait
would not look at it (Python retries an interrupted ``poll``), so a hung worker used to
keep Ctrl-C from doing anything until the step timeout. `EnvManager.set_stop_check` gives
the manager a callable; `SubprocessEnvManager` waits in slices of at most `STOP_POLL_S`
and raises `EnvInterrupted` as soon as it returns True (`make_env_manager` takes the step
timeout for every env kind). Workers ignore SIGINT from the moment they exist (Ctrl-C
reaches the whole process group; the parent decides when to close them: they are started
with SIGINT blocked, so one arriving while they import cannot print a traceback).

Lifetime: a worker exits when its parent disappears, even in the middle of a step that
hangs: a watchdog thread blocks on a pipe that only the parent holds open, and when the
parent dies (``kill -9`` included) it stops the worker's main thread with SIGTERM (the
worker then closes its env), or ends the process if that does not work within
`PARENT_EXIT_GRACE_S`. With the workers gone, multiprocessing's resource tracker (whose
pipe they share) exits too. `close()` is idempotent, waits a few seconds at most, and then
terminates and kills; it also runs when the manager is garbage collected or at
interpreter exit, so no worker outlives its manager. It is interrupt-safe: a Ctrl-C that
arrives while it runs (the second Ctrl-C of an impatient user) makes it stop waiting for
the workers and kill them at once, and is delivered to the previous handler only once
every worker is gone. Shared-memory segments are unlinked as soon as their worker has
mapped them, so a killed worker or parent leaves nothing in ``/dev/shm``.

For tests, ``builtin:_Crash`` (`envs.builtin.crash`) is an env that raises, exits or hangs
on a chosen step.
"""
from __future__ import annotations

import contextlib
import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import secrets
import select
import signal
import struct
import threading
import time
import traceback
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from multiprocessing.shared_memory import SharedMemory
from typing import Any, Callable, Dict, Iterator, List, Mapping, NoReturn, Optional, Sequence, Tuple, TypeVar

import numpy as np

from envs.base_env import ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps, TerminalSteps, all_steps
from envs.exceptions import EnvError, EnvInterrupted, EnvWorkerError
from envs.registry import make_env, parse_env_id, validate_env

StepDict = Dict[str, Tuple[DecisionSteps, TerminalSteps]]
_Manager = TypeVar("_Manager", bound="EnvManager")

#: How long the parent (waiting for step replies) and a worker (waiting for its next
#: command) may poll their pipes without blocking, yielding the CPU between polls, before
#: they block. A blocked process is woken in ~100 us here (a bare pipe ping-pong between
#: two Python processes: 106 us blocking, 10 us spinning).
SPIN_S = 1e-3

#: Longest a wait for workers blocks before it calls the stop check again (when one is
#: set): how late, at most, a Ctrl-C or SIGTERM is noticed while a worker hangs.
STOP_POLL_S = 0.1

#: Seconds a worker whose parent died gives its main thread to close the env after
#: SIGTERM, before the watchdog ends the process without it.
PARENT_EXIT_GRACE_S = 5.0

#: Step timeout of worker processes when none is given (`make_env_manager`'s default).
DEFAULT_STEP_TIMEOUT_S = 600.0

#: Upper bounds that refuse absurd sizes up front, before processes or arrays are made:
#: 10k worker processes or a billion Gymnasium copies never train, they exhaust the machine.
MAX_NUM_ENVS = 1024
MAX_AGENTS_PER_ENV = 1_000_000


class _Waiter:
    """Spin-then-block waiting on a ``select.poll`` object, spinning only while the recent
    waits were short (their moving average below half of `SPIN_S`).

    Why adaptive: where the other side answers within the spin, spinning saves the
    wake-up; where it takes longer (a slow env, a long update) a spin only burns a core
    that the env or a threaded update needs (benchmark_slow_env.py, threaded with 2 envs:
    937 steps/s spinning always, against 1088 never).
    """

    def __init__(self, poller: Any) -> None:
        self.poller = poller
        self.can_spin = hasattr(os, "sched_yield")
        self.recent_s = 0.0  # moving average of how long waits took

    def poll(self, timeout: Optional[float]) -> list:
        """The events of ``poller.poll``, after at most ``timeout`` seconds (None: no limit)."""
        start = time.perf_counter()
        events = self.poller.poll(0)
        if not events and self.can_spin and self.recent_s < 0.5 * SPIN_S:
            end = start + SPIN_S
            while not events and time.perf_counter() < end:
                os.sched_yield()
                events = self.poller.poll(0)
        if not events:
            elapsed = time.perf_counter() - start
            ms = None if timeout is None else int(np.ceil(max(0.0, timeout - elapsed) * 1000))
            events = self.poller.poll(ms)
        self.recent_s = 0.9 * self.recent_s + 0.1 * (time.perf_counter() - start)
        return events


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

    #: Whether the envs step elsewhere (worker processes) while the caller goes on between
    #: `step_async` and `wait_all` (or `step_some` and `wait_some`); False: they step in
    #: the caller's thread, inside `wait_all` / `wait_some`, so there is nothing to overlap.
    steps_in_background = False

    #: The callable given to `set_stop_check` (None: waits are never cut short).
    _stop_check: Optional[Callable[[], bool]] = None

    def set_stop_check(self, check: Optional[Callable[[], bool]]) -> None:
        """Makes waits for workers end early when ``check()`` returns True.

        The training loop passes ``lambda: stop_flag_is_set`` (its SIGINT/SIGTERM handlers
        only set a flag). A manager whose envs run in other processes then calls ``check``
        at least every `STOP_POLL_S` seconds while it waits for them (`reset`, `step`,
        `wait_all`, `wait_some`) and raises `EnvInterrupted` once it returns True, instead
        of waiting up to the step timeout for a worker that hangs; the manager is unusable
        afterwards (close it). A manager that steps its envs in the caller's thread
        (`InProcessEnvManager`) has nothing to wait on: an env that hangs there holds the
        caller itself, so only an exception raised by a signal handler can end it.

        Args:
            check: cheap, side-effect free, callable from the thread that steps; None
                removes it.
        """
        if check is not None and not callable(check):
            raise TypeError(f"set_stop_check() needs a callable or None, got {type(check).__name__}")
        self._stop_check = check

    def _stop_requested(self) -> bool:
        check = self._stop_check
        return check is not None and bool(check())

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

    def step_async(self, actions: Sequence[Mapping[str, ActionTuple]]) -> None:
        """`step` in two halves, so the caller can work while the workers step (the
        training loop's bookkeeping): this starts every worker's step (``actions`` as in
        `step`), `wait_all` returns the steps. (This default steps in `wait_all`.)"""
        if "_async_actions" in self.__dict__:
            raise RuntimeError("step_async(): the last step_async() has not been waited for (call wait_all())")
        self._async_actions = actions

    def wait_all(self) -> List[EnvStep]:
        """The steps started by `step_async`, once every worker has answered; one `EnvStep`
        per worker, in worker order."""
        actions = self.__dict__.pop("_async_actions", None)
        if actions is None:
            raise RuntimeError("wait_all(): no step is running (call step_async() first)")
        return self.step(actions)

    def step_some(self, actions: Mapping[int, Mapping[str, ActionTuple]]) -> None:
        """Starts stepping the workers named in ``actions`` (worker index -> behavior name
        -> `ActionTuple`, each mapping as in `step`) without waiting; `wait_some` returns
        their steps. Each worker named must have returned its last step.

        Out of lockstep (`SubprocessEnvManager`): a worker steps again as soon as it has
        its next actions, whatever the others are doing, so a slow worker never holds the
        others back; which workers answer together then depends on timing, so a run is
        not reproducible (threaded runs only, see `trainers.controller`).

        This default keeps lockstep: it holds the actions until every worker has some,
        and `wait_some` then steps them all with `step`.
        """
        held = self.__dict__.setdefault("_held_actions", {})
        for i, mapping in actions.items():
            if not 0 <= int(i) < self.num_workers:
                raise ValueError(f"step_some(): no worker {i} (workers 0..{self.num_workers - 1})")
            held[int(i)] = mapping

    def wait_some(self) -> List[EnvStep]:
        """The steps of workers started by `step_some`: at least one, with every other that
        has answered by then, in worker order. (This default: all of them, once every
        worker has been started.)"""
        held = self.__dict__.setdefault("_held_actions", {})
        if len(held) != self.num_workers:
            raise RuntimeError(
                f"wait_some(): this manager steps its workers in lockstep; step_some() started "
                f"{sorted(held)} of {self.num_workers}"
            )
        actions = [held.pop(i) for i in range(self.num_workers)]
        return self.step(actions)

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
    limits = (("num_envs", num_envs, MAX_NUM_ENVS), ("agents_per_env", agents_per_env, MAX_AGENTS_PER_ENV))
    for key, value, most in limits:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise EnvError(f"env_settings.{key} must be an integer >= 1, got {value!r}")
        if value > most:
            raise EnvError(f"env_settings.{key} must be at most {most:,}, got {value:,}")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _env_error_line(env_id: str, i: int, text: str) -> str:
    """The line for an `EnvError` an env raised while stepping: the env and worker first,
    then the env's own words (without the env id when they start with it)."""
    text = _one_line(text)
    prefix = f"{env_id}: "
    if text.startswith(prefix):
        text = text[len(prefix):]
    return f"env {env_id!r} worker {i}: {text}"


@contextlib.contextmanager
def _signals_deferred(redeliver: bool) -> Iterator[threading.Event]:
    """Holds back SIGINT and SIGTERM (where Python handles them) for the duration.

    Yields an event that is set when one arrives: cleanup that waits (for worker processes
    to exit) should then stop waiting and kill. On exit the previous handlers come back,
    and a signal that arrived is handed to its previous handler when ``redeliver`` (the
    default SIGINT handler then raises KeyboardInterrupt, outside the cleanup). Without
    ``redeliver`` (garbage collection, interpreter exit: an exception there is only
    printed as "Exception ignored") it only hurried the cleanup.

    Why: a KeyboardInterrupt raised inside ``close()`` (a second Ctrl-C while the workers
    are being joined) used to abandon the shutdown half-way, with a traceback, and leave
    workers behind. Signal handlers only run in the main thread, so elsewhere nothing can
    interrupt the cleanup and this does nothing.
    """
    hurry = threading.Event()
    received: List[int] = []
    previous: Dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():

        def hold(signum: int, frame: Any) -> None:
            received.append(signum)
            hurry.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(signum)
            if callable(handler):  # SIG_DFL / SIG_IGN / not set from Python: leave them be
                try:
                    signal.signal(signum, hold)
                except (ValueError, OSError):  # pragma: no cover - not the main interpreter
                    continue
                previous[signum] = handler
    try:
        yield hurry
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if redeliver:
            for signum in dict.fromkeys(received):  # once per signal, in order
                previous[signum](signum, None)


def _check_actions(
    actions: Sequence[Mapping[str, ActionTuple]], num_workers: int, specs: Mapping[str, BehaviorSpec]
) -> None:
    if len(actions) != num_workers:
        raise ValueError(f"step() needs one action mapping per worker ({num_workers}), got {len(actions)}")
    for i, mapping in enumerate(actions):
        _check_worker_actions(i, mapping, specs)


def _check_worker_actions(i: int, mapping: Mapping[str, ActionTuple], specs: Mapping[str, BehaviorSpec]) -> None:
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
        """Closes every env once; a Ctrl-C meanwhile is delivered after the last one."""
        self._closed = True
        with _signals_deferred(redeliver=True):
            # Envs still open are taken one at a time, so a close() that is cut short
            # (an exception other than a signal) is finished by the next one.
            while self._to_close:
                env = self._to_close.pop(0)
                try:
                    env.close()
                except Exception:  # close every env even if one fails
                    pass

    @property
    def _to_close(self) -> List[BaseEnv]:
        if "_open_envs" not in self.__dict__:
            self._open_envs: List[BaseEnv] = list(self._envs)
        return self._open_envs

    def _worker_error(self, i: int, e: Exception) -> EnvWorkerError:
        """Like a crashed worker process: close every env; later calls raise the same error."""
        if isinstance(e, EnvWorkerError):
            err = e
        else:
            if isinstance(e, EnvError):  # the env's own one-line report (e.g. a NaN observation)
                line = _env_error_line(self._env_id, i, str(e))
            else:
                line = f"env {self._env_id!r} worker {i} raised {type(e).__name__}: {_one_line(str(e))}"
            err = EnvWorkerError(line)
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


# --------------------------------------------------------------------------- shared memory
# Each worker owns one segment of shared memory, created by the parent, that holds the
# worker's actions and step results at fixed offsets (`_Layout`); the pipe only carries a
# one-byte command or reply. The segment is sized for `capacity` agents per behavior
# (``agents_per_env`` at first). A step with more agents than that (an env whose agent
# count grows, e.g. Unity agents spawning, or ``env_args.num_agents`` above
# ``agents_per_env``) is not lost: it crosses the pipe in the packed format above, and the
# parent then gives that worker a bigger segment (twice the capacity, or the count seen)
# before the next step. The parent unlinks every segment as soon as its worker has mapped
# it, so nothing is left in /dev/shm even if a process is killed later.
_SHM_PREFIX = "trl_"
_HEADER_INTS = 8  # per behavior: n_decision, n_terminal, has_mask, action_present, cont_rows, disc_rows, -, -


class _BehaviorViews:
    """Numpy views over one behavior's part of a segment (see `_Layout`)."""

    __slots__ = ("cont", "disc", "d_obs", "d_reward", "d_id", "d_mask", "t_obs", "t_reward", "t_interrupted", "t_id")

    def __init__(self, take: Any, spec: BehaviorSpec, cap: int) -> None:
        a = spec.action_spec
        shapes = [(cap,) + o.shape for o in spec.observation_specs]
        self.cont: np.ndarray = take(_F32, (cap, a.continuous_size))
        self.disc: np.ndarray = take(_I32, (cap, a.discrete_size))
        self.d_obs: List[np.ndarray] = [take(_F32, s) for s in shapes]
        self.d_reward: np.ndarray = take(_F32, (cap,))
        self.d_id: np.ndarray = take(_I32, (cap,))
        self.d_mask: List[np.ndarray] = [take(_BOOL, (cap, b)) for b in a.discrete_branches]
        self.t_obs: List[np.ndarray] = [take(_F32, s) for s in shapes]
        self.t_reward: np.ndarray = take(_F32, (cap,))
        self.t_interrupted: np.ndarray = take(_BOOL, (cap,))
        self.t_id: np.ndarray = take(_I32, (cap,))


class _Layout:
    """Where every array of one worker's segment lies, for given per-behavior capacities.

    The segment starts with ``[n_behaviors, 8]`` int64 header rows
    ``[n_decision, n_terminal, has_mask, action_present, continuous_rows, discrete_rows, 0, 0]``;
    then, per behavior in order: actions (continuous ``[cap, c]`` float32, discrete
    ``[cap, b]`` int32), decision steps (obs ``[cap, *shape]`` float32 per spec, reward
    ``[cap]``, agent_id ``[cap]`` int32, one ``[cap, branch]`` bool mask per branch) and
    terminal steps (obs, reward, interrupted ``[cap]`` bool, agent_id). Every array starts
    on an 8-byte boundary. Parent and worker compute the same layout from the specs.
    """

    def __init__(self, names: Sequence[str], specs: Mapping[str, BehaviorSpec], caps: Mapping[str, int]) -> None:
        self.names = list(names)
        self.specs = specs
        self.caps = {name: int(caps[name]) for name in self.names}
        self.size = max(self._walk(None)[0], _ALIGN)

    def _walk(self, buf: Optional[Any]) -> Tuple[int, List[_BehaviorViews]]:
        offset = _ALIGN * _HEADER_INTS * len(self.names)

        def take(dtype: np.dtype, shape: Tuple[int, ...]) -> np.ndarray:
            nonlocal offset
            count = int(np.prod(shape))
            out = np.ndarray(shape, dtype, buf, offset) if buf is not None else np.empty(0, dtype)
            offset += count * dtype.itemsize + (-count * dtype.itemsize % _ALIGN)
            return out

        views = [_BehaviorViews(take, self.specs[n], self.caps[n]) for n in self.names]
        return offset, views

    def views(self, buf: Any) -> Tuple[np.ndarray, List[_BehaviorViews]]:
        header = np.ndarray((len(self.names), _HEADER_INTS), np.int64, buf, 0)
        return header, self._walk(buf)[1]


class _Channel:
    """One worker's segment seen through a `_Layout`: the parent writes actions and reads
    steps, the worker reads actions and writes steps. Only one side touches the segment at
    a time (the pipe's command/reply alternation orders them)."""

    def __init__(self, shm: SharedMemory, layout: _Layout) -> None:
        self.shm = shm
        self.layout = layout
        self.names = layout.names
        self.caps = [layout.caps[n] for n in self.names]
        header, self.views = layout.views(shm.buf)
        # Scalar header access through a memoryview costs a fraction of numpy item access.
        self.header: Optional[memoryview] = memoryview(header).cast("B").cast("q")
        self._empty_terminal = [TerminalSteps.empty(layout.specs[n]) for n in self.names]

    def release(self) -> None:
        """Drops the views, then unmaps (the segment itself is unlinked by the parent)."""
        if self.header is not None:
            self.header.release()
        self.header, self.views = None, []
        try:
            self.shm.close()
        except BufferError:  # an array still points into it; unmapped when that goes
            pass

    def __del__(self) -> None:
        self.release()

    # parent side
    def write_actions(self, actions: Mapping[str, ActionTuple]) -> bool:
        """Actions into the segment; False (nothing to rely on) if they do not fit the layout."""
        header = self.header
        assert header is not None
        for b, name in enumerate(self.names):
            action = actions.get(name)
            h = b * _HEADER_INTS
            if action is None:
                header[h + 3] = 0
                continue
            v = self.views[b]
            cont, disc = np.asarray(action.continuous), np.asarray(action.discrete)
            if (
                cont.ndim != 2 or disc.ndim != 2 or cont.shape[0] > v.cont.shape[0] or disc.shape[0] > v.disc.shape[0]
                or cont.shape[1] != v.cont.shape[1] or disc.shape[1] != v.disc.shape[1]
            ):
                return False  # the packed format keeps odd shapes, so the env reports them as it would
            v.cont[: cont.shape[0]] = cont
            v.disc[: disc.shape[0]] = disc
            header[h + 3] = 1
            header[h + 4] = cont.shape[0]
            header[h + 5] = disc.shape[0]
        return True

    def read_steps(self) -> StepDict:
        """Fresh, writable copies of the steps the worker wrote."""
        header = self.header
        assert header is not None
        out: StepDict = {}
        for b, name in enumerate(self.names):
            h = b * _HEADER_INTS
            n_d, n_t, has_mask = header[h], header[h + 1], header[h + 2]
            v = self.views[b]
            decision = DecisionSteps(
                [o[:n_d].copy() for o in v.d_obs],
                v.d_reward[:n_d].copy(),
                v.d_id[:n_d].copy(),
                [m[:n_d].copy() for m in v.d_mask] if has_mask else None,
            )
            if n_t:
                terminal = TerminalSteps(
                    [o[:n_t].copy() for o in v.t_obs],
                    v.t_reward[:n_t].copy(),
                    v.t_interrupted[:n_t].copy(),
                    v.t_id[:n_t].copy(),
                )
            else:
                terminal = self._empty_terminal[b]  # zero-size arrays: nothing to overwrite
            out[name] = (decision, terminal)
        return out

    # worker side
    def read_actions(self) -> Dict[str, ActionTuple]:
        header = self.header
        assert header is not None
        out: Dict[str, ActionTuple] = {}
        for b, name in enumerate(self.names):
            h = b * _HEADER_INTS
            if header[h + 3]:
                c_rows, d_rows = header[h + 4], header[h + 5]
                v = self.views[b]
                out[name] = ActionTuple(v.cont[:c_rows].copy(), v.disc[:d_rows].copy())
        return out

    def write_steps(self, steps: StepDict) -> bool:
        """Steps into the segment; False if some behavior has more agents than its capacity."""
        header = self.header
        assert header is not None
        counts = []
        for b, name in enumerate(self.names):
            decision, terminal = steps[name]
            n_d, n_t = len(decision), len(terminal)
            if n_d > self.caps[b] or n_t > self.caps[b]:
                return False
            counts.append((n_d, n_t))
        for b, name in enumerate(self.names):
            decision, terminal = steps[name]
            v = self.views[b]
            n_d, n_t = counts[b]
            for dst, src in zip(v.d_obs, decision.obs):
                dst[:n_d] = src
            v.d_reward[:n_d] = decision.reward
            v.d_id[:n_d] = decision.agent_id
            mask = decision.action_mask
            if mask is not None:
                for dst, src in zip(v.d_mask, mask):
                    dst[:n_d] = src
            if n_t:
                for dst, src in zip(v.t_obs, terminal.obs):
                    dst[:n_t] = src
                v.t_reward[:n_t] = terminal.reward
                v.t_interrupted[:n_t] = terminal.interrupted
                v.t_id[:n_t] = terminal.agent_id
            h = b * _HEADER_INTS
            header[h] = n_d
            header[h + 1] = n_t
            header[h + 2] = mask is not None
        return True


def _needed_caps(layout: _Layout, steps: StepDict) -> Optional[Dict[str, int]]:
    """Bigger capacities if ``steps`` (which came through the pipe) overflowed ``layout``."""
    caps = dict(layout.caps)
    grow = False
    for name, (decision, terminal) in steps.items():
        needed = max(len(decision), len(terminal))
        if needed > caps[name]:
            caps[name] = max(needed, 2 * caps[name])
            grow = True
    return caps if grow else None


# --------------------------------------------------------------------------- subprocess
# Messages: parent -> worker b"S" (actions in shared memory) | b"s" + packed actions |
# b"R" | b"M" + pickled (segment name, capacities) | b"C";
# worker -> parent b"Y" + pickled specs (once) | b"K" (steps in shared memory) |
# b"k" + packed steps | b"A" (segment mapped) | b"E" + pickled error info.
_STEP, _STEP_PACKED, _RESET, _MAP, _CLOSE = b"S", b"s", b"R", b"M", b"C"
_READY, _OK, _OK_PACKED, _MAPPED, _ERROR = b"Y", b"K", b"k", b"A", b"E"


class _Terminated(BaseException):
    """SIGTERM in a worker: raised in its main thread so that the env is closed on the way
    out (`_Workers.shutdown` of a hung worker, or the watchdog after the parent died)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


def _watch_parent(alive: Any, main_ident: int, done: threading.Event) -> None:
    """Worker thread: ends the worker when its parent is gone, even mid-step.

    ``alive`` is the read end of a pipe whose only write end the parent holds and never
    writes to, so the read returns EOF exactly when the parent has exited, however it
    died (``kill -9`` included). The main thread notices on its own when it is waiting
    for a command (its pipe closes too); when it is inside a step that hangs it does not,
    so it gets SIGTERM (`_Terminated`: the env is closed), and if it still has not
    finished after `PARENT_EXIT_GRACE_S` (stuck in native code) the process ends here.
    """
    try:
        while True:
            alive.recv_bytes()  # the parent never writes; only EOF ends this
    except (EOFError, OSError):
        pass
    if done.wait(0.5):  # the main thread saw its own pipe close and is leaving
        return
    try:
        signal.pthread_kill(main_ident, signal.SIGTERM)
    except (AttributeError, OSError, ValueError):  # pragma: no cover - no pthread_kill
        pass
    if not done.wait(PARENT_EXIT_GRACE_S):
        os._exit(1)


def _worker_main(
    conn: Any,
    env_id: str,
    env_args: Optional[Dict[str, Any]],
    seed: int,
    agents_per_env: int,
    alive: Any = None,
) -> None:
    """Body of a worker process: build the env, then serve reset/step/map/close commands.

    Replies: ready (pickled specs) once, then one reply per command; on an exception an
    error ``(type name, one-line message, is EnvError, traceback)`` and exit. ``alive``:
    the read end of the parent's lifeline pipe (see `_watch_parent`).
    """
    # Ctrl-C reaches the whole process group; the parent decides when workers close. The
    # parent started us with SIGINT blocked so that one arriving while this process was
    # still importing could not raise KeyboardInterrupt here: ignoring it discards any
    # that is pending, then it can be unblocked (for processes the env may start).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    done = threading.Event()
    env: Optional[BaseEnv] = None
    channel: Optional[_Channel] = None
    terminated = False
    try:
        try:
            signal.signal(signal.SIGTERM, _raise_terminated)
            if alive is not None:
                threading.Thread(
                    target=_watch_parent, args=(alive, threading.get_ident(), done), name="parent-watchdog",
                    daemon=True,
                ).start()
            env = make_env(env_id, env_args, seed, agents_per_env)
            specs = dict(env.behavior_specs)
            names = list(specs)
            _send_message(conn, _READY + pickle.dumps(specs, pickle.HIGHEST_PROTOCOL))
            waiter = None
            if hasattr(select, "poll"):
                waiter = _Waiter(select.poll())
                waiter.poller.register(conn.fileno(), select.POLLIN)
            while True:
                if waiter is not None:
                    waiter.poll(None)  # the next command (or EOF) is there
                try:
                    message = _recv_message(conn)
                except (EOFError, OSError):
                    return  # the parent is gone
                cmd = message[:1]
                if cmd == _STEP or cmd == _STEP_PACKED:
                    if cmd == _STEP:
                        assert channel is not None
                        actions = channel.read_actions()
                    else:
                        actions = _unpack_actions(names, message[1:])
                    for name, action in actions.items():
                        env.set_actions(name, action)
                    env.step()
                elif cmd == _RESET:
                    env.reset()
                elif cmd == _MAP:
                    segment, caps = pickle.loads(message[1:])
                    if channel is not None:
                        channel.release()
                    channel = _Channel(SharedMemory(name=segment), _Layout(names, specs, caps))
                    _send_message(conn, _MAPPED)
                    continue
                else:  # _CLOSE
                    return
                steps = {name: env.get_steps(name) for name in names}
                if channel is not None and channel.write_steps(steps):
                    _send_message(conn, _OK)
                else:
                    _send_message(conn, _OK_PACKED + _pack_steps(names, steps))
        except (BrokenPipeError, ConnectionResetError):
            return  # the parent is gone
        except _Terminated:
            terminated = True  # nobody waits for an answer: close the env and go
        except BaseException as e:
            info = (type(e).__name__, _one_line(str(e)), isinstance(e, EnvError), traceback.format_exc())
            try:
                _send_message(conn, _ERROR + pickle.dumps(info))
            except _Terminated:
                terminated = True
            except Exception:
                pass
    finally:
        try:
            if channel is not None:
                channel.release()
            if env is not None:
                try:
                    env.close()
                except Exception:
                    pass
            conn.close()
        except _Terminated:  # a second SIGTERM while closing: stop closing
            terminated = True
        done.set()
    if terminated:
        # End as the signal would have ended us, so the parent's report of a worker killed
        # by SIGTERM (e.g. sent to the whole process group) reads as before.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _check_timeout(key: str, value: Optional[float]) -> Optional[float]:
    """``value`` as seconds (a finite number > 0) or None (no limit); `EnvError` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
        math.isfinite(value) and value > 0
    ):
        raise EnvError(f"{key} must be a number of seconds > 0, got {value!r}")
    return float(value)


def _unlink(segments: List[SharedMemory]) -> None:
    """Unlinks segments no worker has confirmed yet (the others are unlinked already)."""
    while segments:
        shm = segments.pop()
        try:
            shm.unlink()
        except FileNotFoundError:
            pass
        try:
            shm.close()
        except BufferError:
            pass


class _Workers:
    """A manager's worker processes, their pipes and its segments not yet unlinked, with
    the one shutdown that ends them (held by the manager's finalizer, not the manager)."""

    def __init__(self) -> None:
        self.procs: List[Any] = []
        self.conns: List[Any] = []
        self.lifelines: List[Any] = []  # write ends of the workers' `_watch_parent` pipes
        self.segments: List[SharedMemory] = []  # created, not yet unlinked
        self.done = False

    def shutdown(self, grace_s: float, redeliver: bool = True, stuck: Sequence[int] = ()) -> None:
        """Ask workers to close, then terminate, then kill; never waits much longer than
        ``grace_s`` (plus 1 s per stage that a worker resists). Also unlinks any segment
        still named in /dev/shm. ``stuck``: workers that are busy with a step nobody waits
        for any more (they would read "close" only once it ends): terminated at once.

        Idempotent and interrupt-safe: it runs to the end once; SIGINT/SIGTERM meanwhile
        cut the waiting short and are delivered afterwards (see `_signals_deferred`); if
        anything else cuts it short, the next call finishes the work.
        """
        if self.done:
            return
        with _signals_deferred(redeliver) as hurry:
            _unlink(self.segments)
            started = [(conn, proc) for conn, proc in zip(self.conns, self.procs) if proc.pid is not None]
            for conn, proc in started:
                if proc.is_alive():
                    try:
                        conn.send_bytes(_CLOSE)
                    except Exception:
                        pass
            for i in stuck:
                if self.procs[i].pid is not None and self.procs[i].is_alive():
                    self.procs[i].terminate()  # SIGTERM: it closes its env and exits
            procs = [proc for _, proc in started]
            _join_all(procs, grace_s, hurry)
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
            # After SIGTERM they close their env and exit: a second or so, a moment if hurried.
            _join_all(procs, 0.2, None) if hurry.is_set() else _join_all(procs, 1.0, hurry)
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
            _join_all(procs, 1.0, None)
            for conn in self.conns + self.lifelines:
                try:
                    conn.close()
                except Exception:
                    pass
            self.done = True


def _join_all(procs: Sequence[Any], timeout: float, hurry: Optional[threading.Event]) -> None:
    """Waits up to ``timeout`` s for every process in ``procs`` to exit (reaping those that
    did), in short slices so that ``hurry`` being set ends the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in procs if p.is_alive()]  # is_alive() reaps the ones that exited
        left = deadline - time.monotonic()
        if not alive or left <= 0 or (hurry is not None and hurry.is_set()):
            return
        multiprocessing.connection.wait([p.sentinel for p in alive], min(left, STOP_POLL_S))


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while a worker is started: the new process inherits
    the mask across ``exec`` and keeps SIGINT blocked until `_worker_main` ignores it, so
    a Ctrl-C during its start-up cannot print a KeyboardInterrupt traceback from it. One
    that arrives meanwhile is delivered to this process when the block ends (not lost)."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class SubprocessEnvManager(EnvManager):
    """One worker process per env, stepped in parallel (see the module docstring)."""

    steps_in_background = True

    def __init__(
        self,
        env_id: str,
        env_args: Optional[Mapping[str, Any]] = None,
        num_envs: int = 2,
        agents_per_env: int = 1,
        seed: int = 0,
        *,
        start_timeout: float = 120.0,
        step_timeout: Optional[float] = DEFAULT_STEP_TIMEOUT_S,
        start_method: str = "spawn",
        shared_memory: bool = True,
        stop_check: Optional[Callable[[], bool]] = None,
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
            shared_memory: steps and actions cross through shared memory (the default);
                False sends them through the pipes (for comparisons).
            stop_check: as `set_stop_check`, from the start (the workers' start-up
                waits for up to ``start_timeout`` too).
        """
        _check_counts(num_envs, agents_per_env)
        validate_env(env_id, env_args)
        if start_method not in ("spawn", "forkserver"):
            raise ValueError(f"start_method must be 'spawn' or 'forkserver', got {start_method!r}")
        self._step_timeout = _check_timeout("step_timeout", step_timeout)
        start_timeout = _check_timeout("start_timeout", start_timeout)
        self._env_id = env_id
        self._seed = resolve_seed(seed, int(num_envs))
        self._error: Optional[EnvWorkerError] = None
        self._interrupted: Optional[EnvInterrupted] = None
        self._abandoned: List[int] = []  # workers whose step was left unread by a stop
        self._closed = False
        self.set_stop_check(stop_check)
        self._names: List[str] = []
        self._specs: Dict[str, BehaviorSpec] = {}
        ctx: Any = multiprocessing.get_context(start_method)
        self._workers = _Workers()
        self._procs: List[Any] = self._workers.procs
        self._conns: List[Any] = self._workers.conns
        self._channels: List[Optional[_Channel]] = [None] * int(num_envs)
        self._unconfirmed: List[SharedMemory] = self._workers.segments  # created, not yet unlinked
        # Workers told to step and not yet read back: worker -> when it was told (its
        # step_timeout runs from then); out of lockstep, replies that came in while the
        # manager waited for other workers (a segment remap) wait in _early.
        self._stepping: Dict[int, float] = {}
        self._early: Dict[int, bytes] = {}
        self._warned_shm = False
        # The finalizer holds the workers, not self: it runs on garbage collection or at
        # interpreter exit if close() has not run (then it does nothing).
        self._finalizer = weakref.finalize(self, self._workers.shutdown, 5.0, False)
        args = dict(env_args) if env_args is not None else None
        try:
            for i in range(int(num_envs)):
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                lifeline_r, lifeline_w = ctx.Pipe(duplex=False)  # see _watch_parent
                proc = ctx.Process(
                    target=_worker_main,
                    args=(child_conn, env_id, args, self._seed + i, int(agents_per_env), lifeline_r),
                    name=f"env-worker-{i}",
                    daemon=True,
                )
                with _sigint_blocked():
                    self._procs.append(proc)
                    self._conns.append(parent_conn)
                    self._workers.lifelines.append(lifeline_w)
                    proc.start()
                child_conn.close()  # so the parent sees EOF when the worker dies
                lifeline_r.close()  # only the worker may read it, only the parent hold it open
            self._poller = _Poller(self._conns, self._procs)
            replies = self._gather(start_timeout, starting=True)
            self._specs = _common_specs(env_id, [pickle.loads(r[1:]) for r in replies.values()])
            self._names = list(self._specs)
            if shared_memory:
                caps = {name: int(agents_per_env) for name in self._names}
                self._map(list(range(int(num_envs))), [caps] * int(num_envs), start_timeout)
        except BaseException:
            self.close()
            raise

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
    def step_timeout(self) -> Optional[float]:
        """Seconds each worker has to answer a reset or a step (None: no limit)."""
        return self._step_timeout

    @property
    def worker_pids(self) -> List[int]:
        """Process ids of the workers (for monitoring and tests)."""
        return [p.pid for p in self._procs]

    @property
    def shared_memory_capacities(self) -> List[Optional[Dict[str, int]]]:
        """Per worker: behavior -> agents its segment holds (None: steps go through the pipe)."""
        return [None if c is None else dict(c.layout.caps) for c in self._channels]

    def reset(self) -> List[EnvStep]:
        self._check_usable()
        self._check_idle()
        for i in range(len(self._conns)):
            self._send(i, _RESET)
        return self._steps_from(self._gather(self._step_timeout))

    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        self.step_async(actions)
        return self.wait_all()

    def step_async(self, actions: Sequence[Mapping[str, ActionTuple]]) -> None:
        """Every worker starts its step (see `EnvManager.step_async`)."""
        self._check_usable()
        self._check_idle()
        _check_actions(actions, len(self._conns), self._specs)
        for i, mapping in enumerate(actions):  # every worker starts stepping before we wait
            self._start_step(i, mapping)

    def wait_all(self) -> List[EnvStep]:
        """Every worker's step, once each has answered (see `EnvManager.wait_all`)."""
        self._check_usable()
        if len(self._stepping) != len(self._conns):
            raise RuntimeError(
                f"wait_all(): {len(self._stepping)} of {len(self._conns)} workers are stepping "
                f"(call step_async() first)"
            )
        replies = self._gather(self._step_timeout)
        self._stepping.clear()
        return self._steps_from(replies)

    def step_some(self, actions: Mapping[int, Mapping[str, ActionTuple]]) -> None:
        """Out of lockstep: each worker named starts its next step at once (see
        `EnvManager.step_some`)."""
        self._check_usable()
        for i, mapping in actions.items():
            if not 0 <= int(i) < len(self._conns):
                raise ValueError(f"step_some(): no worker {i} (workers 0..{len(self._conns) - 1})")
            if int(i) in self._stepping:
                raise RuntimeError(f"step_some(): worker {i} is still stepping")
            _check_worker_actions(int(i), mapping, self._specs)
        for i, mapping in actions.items():
            self._start_step(int(i), mapping)

    def wait_some(self) -> List[EnvStep]:
        """The first worker(s) to answer: waits for one, takes every other answer already
        there (see `EnvManager.wait_some`)."""
        self._check_usable()
        if not self._stepping:
            raise RuntimeError("wait_some(): no worker is stepping (call step_some() first)")
        replies = self._gather(self._step_timeout, workers=sorted(self._stepping), any_of=True)
        for i in replies:
            del self._stepping[i]
        return self._steps_from(replies)

    def close(self) -> None:
        """Ends every worker (idempotent; a Ctrl-C meanwhile hurries it, then is delivered)."""
        self._closed = True
        # Workers that are mid-step when the manager closes (an interrupted wait, an
        # exception between step_async and wait_all) answer in milliseconds or hang.
        busy = self._interrupted is not None or bool(self._stepping)
        self._workers.shutdown(1.0 if busy else 5.0, stuck=self._abandoned)
        for channel in self._channels:
            if channel is not None:
                channel.release()

    # ------------------------------------------------------------------ internals
    def _start_step(self, i: int, mapping: Mapping[str, ActionTuple]) -> None:
        channel = self._channels[i]
        self._stepping[i] = time.monotonic()
        if channel is not None and channel.write_actions(mapping):
            self._send(i, _STEP)
        else:
            self._send(i, _STEP_PACKED + _pack_actions(self._names, mapping))

    def _check_idle(self) -> None:
        if self._stepping:
            raise RuntimeError(
                f"workers {sorted(self._stepping)} are still stepping (call wait_some() or wait_all() first)"
            )

    def _steps_from(self, replies: Dict[int, bytes]) -> List[EnvStep]:
        """`EnvStep` per reply (worker -> reply, in worker order)."""
        out = []
        grow: List[int] = []
        caps: List[Dict[str, int]] = []
        for i, reply in replies.items():
            channel = self._channels[i]
            if reply[:1] == _OK:
                assert channel is not None
                steps = channel.read_steps()
            else:
                steps = _unpack_steps(self._names, self._specs, reply[1:])
                bigger = _needed_caps(channel.layout, steps) if channel is not None else None
                if bigger is not None:
                    grow.append(i)
                    caps.append(bigger)
            out.append(EnvStep(i, steps))
        if grow:
            self._map(grow, caps, self._step_timeout)
        return out

    def _map(self, workers: List[int], caps: List[Dict[str, int]], timeout: Optional[float]) -> None:
        """Gives each of ``workers`` a new segment for ``caps``; unlinks it once mapped."""
        fresh = []
        for i, worker_caps in zip(workers, caps):
            layout = _Layout(self._names, self._specs, worker_caps)
            name = f"{_SHM_PREFIX}{os.getpid()}_{i}_{secrets.token_hex(4)}"
            try:
                shm = SharedMemory(name=name, create=True, size=layout.size)
            except OSError as e:  # /dev/shm full or missing: this worker keeps its pipe format
                if not self._warned_shm:
                    self._warned_shm = True
                    print(f"[WARNING] env workers: no shared memory ({_one_line(str(e))}); steps go through pipes",
                          flush=True)
                continue
            self._unconfirmed.append(shm)
            fresh.append((i, shm, layout))
            self._send(i, _MAP + pickle.dumps((shm.name, worker_caps)))
        if not fresh:
            return
        self._gather(timeout, workers=[i for i, _, _ in fresh])
        for i, shm, layout in fresh:
            self._unconfirmed.remove(shm)
            shm.unlink()  # both sides have it mapped; the name is no longer needed
            old = self._channels[i]
            if old is not None:
                old.release()
            self._channels[i] = _Channel(shm, layout)

    def _send(self, i: int, message: bytes) -> None:
        try:
            _send_message(self._conns[i], message)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self._fail(i, self._death_cause(i))

    def _gather(
        self,
        timeout: Optional[float],
        starting: bool = False,
        workers: Optional[List[int]] = None,
        any_of: bool = False,
    ) -> Dict[int, bytes]:
        """Worker -> reply (kind byte + payload) for each of ``workers`` (default all), in
        worker order; raises on error, death or timeout.

        ``any_of``: returns once at least one has answered, with every answer there by
        then. A worker's ``timeout`` runs from when it was told to step (`_stepping`), else
        from this call, so a hung worker is caught even while others keep answering."""
        order = list(range(len(self._conns))) if workers is None else list(workers)
        results: Dict[int, bytes] = {i: self._early.pop(i) for i in order if i in self._early}
        pending = set(order) - set(results)
        start = time.monotonic()

        def oldest() -> Tuple[int, Optional[float]]:  # the pending worker told first, its deadline
            i = min(pending, key=lambda w: self._stepping.get(w, start))
            return i, None if timeout is None else self._stepping.get(i, start) + timeout

        while pending and not (any_of and results):
            _, deadline = oldest()
            wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._stop_check is not None:  # wake up to look at it (see set_stop_check)
                wait_s = STOP_POLL_S if wait_s is None else min(wait_s, STOP_POLL_S)
            for i, is_pipe in self._poller.wait(wait_s):
                if i not in pending:
                    if is_pipe and i in self._stepping and i not in self._early:
                        self._early[i] = self._read(i, starting, is_pipe)  # out of lockstep
                    elif not self._procs[i].is_alive():  # died after answering
                        self._fail(i, self._death_cause(i))
                    continue
                results[i] = self._read(i, starting, is_pipe)
                pending.discard(i)
            # Checked after every wait, not only after an empty one: out of lockstep the
            # other workers' answers would otherwise keep a hung worker's timeout away.
            if pending and not (any_of and results):
                if self._stop_requested():
                    self._interrupt(sorted(pending), results)
                late, deadline = oldest()
                if deadline is not None and time.monotonic() >= deadline:
                    self._fail(late, f"did not answer within {timeout:g} s", kill_first=True)
        return {i: results[i] for i in order if i in results}

    def _interrupt(self, pending: List[int], results: Mapping[int, bytes]) -> NoReturn:
        """Gives up waiting because the stop check said so: the manager is unusable from
        now on (the replies of the workers in flight will never be read); close() ends
        the workers, hung ones included."""
        self._early.update(results)  # not needed any more, but not dropped on the floor
        self._abandoned = list(pending)
        which = ", ".join(str(i) for i in pending)
        err = EnvInterrupted(
            f"env {self._env_id!r}: stopped waiting for worker{'s' if len(pending) > 1 else ''} {which} "
            f"(a stop was requested)"
        )
        self._interrupted = err
        raise err

    def _read(self, i: int, starting: bool, is_pipe: bool) -> bytes:
        """Worker ``i``'s reply, which the poller says is there (``is_pipe``) or that the
        worker exited; raises (after shutting every worker down) on an error or a death."""
        conn = self._conns[i]
        if not is_pipe and not conn.poll(0):  # exited; its pipe has nothing left
            self._fail(i, self._death_cause(i))
        try:
            message = _recv_message(conn)
        except (EOFError, OSError):
            cause = self._death_cause(i)
            if starting:  # e.g. a __main__ without the `if __name__ == "__main__":` guard
                cause += " while starting; its stderr shows why"
            self._fail(i, cause)
        if message[:1] == _ERROR:
            type_name, text, is_env_error, tb = pickle.loads(message[1:])
            if starting and is_env_error:
                self._fail(i, text, as_is=True, worker_traceback=tb)
            if is_env_error:  # the env's own one-line report (e.g. a NaN observation)
                self._fail(i, _env_error_line(self._env_id, i, text), whole_line=True, worker_traceback=tb)
            self._fail(i, f"raised {type_name}: {text}", worker_traceback=tb)
        return message

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
        whole_line: bool = False,
        kill_first: bool = False,
        worker_traceback: Optional[str] = None,
    ) -> NoReturn:
        """Shut every worker down and raise the error for worker ``i``: `EnvWorkerError`
        "env <id> worker <i> <cause>" (``whole_line``: ``cause`` is the whole line), or the
        `EnvError` ``cause`` (``as_is``), or `EnvInterrupted` when a stop was requested."""
        if kill_first and self._procs[i].is_alive():
            self._procs[i].kill()  # a hung worker will not read "close"
        self._closed = True
        self._workers.shutdown(1.0)
        for channel in self._channels:
            if channel is not None:
                channel.release()
        died = not (as_is or whole_line or kill_first) and worker_traceback is None
        if died and self._stop_requested():
            # A stop was requested and then a worker died: most likely of the same
            # SIGTERM sent to the whole process group, so this is the stop, not a failure.
            interrupted = EnvInterrupted(f"env {self._env_id!r}: worker {i} {cause} (a stop was requested)")
            self._interrupted = interrupted
            raise interrupted
        if as_is:
            error = EnvError(cause)
            error.worker_traceback = worker_traceback  # type: ignore[attr-defined]
            raise error
        err = EnvWorkerError(cause if whole_line else f"env {self._env_id!r} worker {i} {cause}")
        err.worker_traceback = worker_traceback  # type: ignore[attr-defined]
        self._error = err
        raise err

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._interrupted is not None:
            raise self._interrupted
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
        self._worker_of: Dict[Any, Tuple[int, bool]] = {}  # fd or handle -> (worker, is its pipe)
        if hasattr(select, "poll"):
            self._poll = select.poll()
            self._waiter = _Waiter(self._poll)
            for i, (conn, proc) in enumerate(zip(conns, procs)):
                for fd, is_pipe in ((conn.fileno(), True), (proc.sentinel, False)):
                    self._poll.register(fd, select.POLLIN)
                    self._worker_of[fd] = (i, is_pipe)
        else:  # pragma: no cover - Windows
            for i, (conn, proc) in enumerate(zip(conns, procs)):
                self._worker_of[conn] = (i, True)
                self._worker_of[proc.sentinel] = (i, False)

    def wait(self, timeout: Optional[float]) -> List[Tuple[int, bool]]:
        """``(worker, is_pipe)`` per event, pipe events first; empty on timeout.

        ``is_pipe``: the worker's pipe has data (or EOF); else its process exited.
        """
        if self._poll is not None:
            events = [self._worker_of[fd] for fd, _ in self._waiter.poll(timeout)]
        else:  # pragma: no cover
            events = [self._worker_of[h] for h in multiprocessing.connection.wait(list(self._worker_of), timeout)]
        events.sort(key=lambda e: (not e[1], e[0]))
        return events


_FRAME = struct.Struct("!i")  # multiprocessing.Connection's length prefix


def _send_message(conn: Any, message: bytes) -> None:
    """``conn.send_bytes(message)`` in one ``write`` (same framing) on POSIX."""
    if os.name != "posix":  # pragma: no cover
        conn.send_bytes(message)
        return
    data = memoryview(_FRAME.pack(len(message)) + message)
    fd = conn.fileno()
    while data:
        data = data[os.write(fd, data):]


def _recv_message(conn: Any) -> bytes:
    """``conn.recv_bytes()`` in one ``read`` for small messages (same framing) on POSIX.

    Only valid when at most one message can be in flight, as in the command/reply
    protocol here: a single read may return everything the other side wrote.
    """
    if os.name != "posix":  # pragma: no cover
        return conn.recv_bytes()
    fd = conn.fileno()
    data = os.read(fd, 65536)
    while 0 < len(data) < _FRAME.size:
        data += os.read(fd, 65536)
    if not data:
        raise EOFError
    (size,) = _FRAME.unpack_from(data)
    total = _FRAME.size + size
    if len(data) < total:
        chunks = [data]
        have = len(data)
        while have < total:
            chunk = os.read(fd, min(total - have, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            have += len(chunk)
        data = b"".join(chunks)
    return data[_FRAME.size: total]


def make_env_manager(
    env_id: Optional[str],
    env_args: Optional[Mapping[str, Any]],
    num_envs: int,
    agents_per_env: int,
    seed: int,
    unity: Optional[Any] = None,
    step_timeout: Optional[float] = None,
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
        step_timeout: seconds every env has to answer a reset or a step, for every env
            kind (``env_settings.timeout_wait`` / ``--timeout-wait``); None: the default
            (`DEFAULT_STEP_TIMEOUT_S` for worker processes, ``unity.timeout_wait`` for
            Unity games). Worker processes that do not answer in time are killed and
            reported; for Unity games it replaces ``unity.timeout_wait``. One env stepped in
            this process (``num_envs == 1``) cannot be timed out: it runs in the caller's
            own thread (see `EnvManager.set_stop_check`).
    """
    _check_counts(num_envs, agents_per_env)
    step_timeout = _check_timeout("env_settings.timeout_wait", step_timeout)
    if env_id is None or parse_env_id(env_id)[0] == "unity":
        import dataclasses

        from envs.unity.manager import UnityEnvManager, unity_args

        if int(agents_per_env) != 1:
            raise EnvError("env_settings.agents_per_env: a Unity game decides its own agents; leave it at 1")
        extra = unity_args(env_args)
        if unity is None:
            from envs.unity.manager import UnityOptions

            unity = UnityOptions()
        if extra:
            unity = dataclasses.replace(unity, additional_args=tuple(unity.additional_args) + extra)
        if step_timeout is not None:
            unity = dataclasses.replace(unity, timeout_wait=step_timeout)
        return UnityEnvManager(env_id, int(num_envs), seed, unity)
    if int(num_envs) == 1:
        return InProcessEnvManager(env_id, env_args, 1, agents_per_env, seed)
    return SubprocessEnvManager(
        env_id, env_args, num_envs, agents_per_env, seed,
        step_timeout=DEFAULT_STEP_TIMEOUT_S if step_timeout is None else step_timeout,
    )
