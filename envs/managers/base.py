"""The API every env manager implements (`EnvManager`, `EnvStep`) and the helpers the
managers share: seed, count and timeout checks, the action check, the behavior specs every
worker must agree on, one-line error text, and holding signals back while closing.

`common_specs` and `check_actions` are public: `envs.managers.unity` builds on them.
"""
from __future__ import annotations

import contextlib
import math
import signal
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar

import numpy as np

from envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from envs.exceptions import EnvError, EnvWorkerError

StepDict = Dict[str, Tuple[DecisionSteps, TerminalSteps]]
_Manager = TypeVar("_Manager", bound="EnvManager")

#: Longest a wait for workers blocks before it calls the stop check again (when one is
#: set): how late, at most, a Ctrl-C or SIGTERM is noticed while a worker hangs.
STOP_POLL_S = 0.1

#: Upper bounds that refuse absurd sizes up front, before processes or arrays are made:
#: 10k worker processes or a billion Gymnasium copies never train, they exhaust the machine.
MAX_NUM_ENVS = 1024
MAX_AGENTS_PER_ENV = 1_000_000


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
        not reproducible (threaded runs only, see `trainers.loop.controller`).

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

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """New environment parameters (name -> `envs.parameters.ParameterValue`) for every
        worker's env, taken from each agent's next episode start (`BaseEnv.set_env_parameters`);
        a step in flight finishes with the old ones. Call `reset` after it to start every
        episode with them (ML-Agents' ``require_reset``). This default: a manager whose envs
        take none."""
        if values:
            raise EnvError(f"{type(self).__name__}: its environments take no environment parameters")

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


def _check_timeout(key: str, value: Optional[float]) -> Optional[float]:
    """``value`` as seconds (a finite number > 0) or None (no limit); `EnvError` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
        math.isfinite(value) and value > 0
    ):
        raise EnvError(f"{key} must be a number of seconds > 0, got {value!r}")
    return float(value)


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

        for sig in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(sig)
            if callable(handler):  # SIG_DFL / SIG_IGN / not set from Python: leave them be
                try:
                    signal.signal(sig, hold)
                except (ValueError, OSError):  # pragma: no cover - not the main interpreter
                    continue
                previous[sig] = handler
    try:
        yield hurry
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if redeliver:
            for signum in dict.fromkeys(received):  # once per signal, in order
                previous[signum](signum, None)


def check_actions(
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


def common_specs(env_id: str, specs: Sequence[Dict[str, BehaviorSpec]]) -> Dict[str, BehaviorSpec]:
    for i, s in enumerate(specs[1:], start=1):
        if s != specs[0]:
            raise EnvWorkerError(f"env {env_id!r} worker {i} has behavior specs that differ from worker 0's")
    return dict(specs[0])
