"""`SubprocessEnvManager`, the parent's side of the env worker processes (the worker's side
is `envs.managers._worker`; what crosses between them, `envs.managers._wire`).

`SubprocessEnvManager` runs one worker process per env (``spawn`` start method: the
parent may have TensorFlow loaded, which must never be forked). `step()` sends the
actions to every worker before it reads any result, so workers step in parallel.
`step_some()` / `wait_some()` step workers out of lockstep instead (each one again as
soon as it has its next actions, the others still stepping), as ML-Agents'
SubprocessEnvManager does; threaded runs use it (`trainers.loop.controller`).
Workers import ``envs`` only (Gymnasium only for ``gym:`` ids), never TensorFlow.
Note that ``spawn`` re-imports the parent's ``__main__`` module in each worker (as
``__mp_main__``): an entry-point script should not import TensorFlow at module level,
or every worker pays for it at start-up. Steps and actions cross through one
preallocated shared-memory segment per worker (numpy views at fixed offsets); the pipe
carries a one-byte command or reply. A step with more agents than the segment holds
goes through the pipe in a compact binary layout and the worker gets a bigger segment
(see "shared memory" in `envs.managers._wire`). The arrays the parent receives are fresh
and writable, as in-process ones are.
Both sides wait for the other *spinning* first (polling the pipe without blocking and
yielding the CPU, for up to `SPIN_S`) while the other has been answering quickly, then
blocking: waking a process blocked on a pipe was most of a fast env's step round trip
(README, "Environments"; `_Waiter`).

Environment parameters (`set_env_parameters`) ride on each worker's next step or reset
command (one message: the worker applies them, then runs the command), so one message is
in flight per worker as the single-read framing of `envs.managers._wire` needs.

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
import multiprocessing
import multiprocessing.connection
import os
import pickle
import secrets
import select
import signal
import threading
import time
import weakref
from multiprocessing.shared_memory import SharedMemory
from typing import Any, Callable, Dict, Iterator, List, Mapping, NoReturn, Optional, Sequence, Tuple

from envs.base_env import ActionTuple, BehaviorSpec
from envs.exceptions import EnvError, EnvInterrupted, EnvWorkerError
from envs.managers._wire import (
    _CLOSE,
    _ERROR,
    _MAP,
    _OK,
    _RESET,
    _SHM_PREFIX,
    _STEP,
    _STEP_PACKED,
    _Channel,
    _Layout,
    _needed_caps,
    _pack_actions,
    _recv_message,
    _send_message,
    _unpack_steps,
    _Waiter,
    _with_parameters,
)
from envs.managers._worker import _worker_main
from envs.managers.base import (
    STOP_POLL_S,
    EnvManager,
    EnvStep,
    _check_counts,
    _check_timeout,
    _check_worker_actions,
    _env_error_line,
    _one_line,
    _signals_deferred,
    check_actions,
    common_specs,
    resolve_seed,
)
from envs.registry import validate_env

#: Step timeout of worker processes when none is given (`make_env_manager`'s default).
DEFAULT_STEP_TIMEOUT_S = 600.0


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
        env_parameters: Optional[Mapping[str, Any]] = None,
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
            env_parameters: environment parameters every env starts with (must be
                picklable; later ones: `set_env_parameters`).
        """
        _check_counts(num_envs, agents_per_env)
        validate_env(env_id, env_args, env_parameters)
        if start_method not in ("spawn", "forkserver"):
            raise ValueError(f"start_method must be 'spawn' or 'forkserver', got {start_method!r}")
        self._step_timeout = _check_timeout("step_timeout", step_timeout)
        start_limit = _check_timeout("start_timeout", start_timeout)
        self._env_id = env_id
        self._env_args = dict(env_args) if env_args is not None else None
        self._parameters_due: Dict[int, Dict[str, Any]] = {}  # worker -> parameters for its next command
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
                    args=(child_conn, env_id, args, self._seed + i, int(agents_per_env), lifeline_r,
                          dict(env_parameters) if env_parameters else None),
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
            replies = self._gather(start_limit, starting=True)
            self._specs = common_specs(env_id, [pickle.loads(r[1:]) for r in replies.values()])
            self._names = list(self._specs)
            if shared_memory:
                caps = {name: int(agents_per_env) for name in self._names}
                self._map(list(range(int(num_envs))), [caps] * int(num_envs), start_limit)
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

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """Checked here, then sent to every worker with its next step or reset command (a
        worker that is stepping finishes that step with the old ones; see
        `EnvManager.set_env_parameters`)."""
        self._check_usable()
        validate_env(self._env_id, self._env_args, values)
        for i in range(len(self._conns)):
            self._parameters_due[i] = {**self._parameters_due.get(i, {}), **values}

    def _command(self, i: int, message: bytes) -> None:
        """Sends a step or reset command to worker ``i``, with parameters it has not had."""
        due = self._parameters_due.pop(i, None)
        if due:
            message = _with_parameters(pickle.dumps(due, pickle.HIGHEST_PROTOCOL), message)
        self._send(i, message)

    def reset(self) -> List[EnvStep]:
        """Resets every env. Out of lockstep, the steps of workers still stepping are
        waited for and dropped first (a reset starts every episode anew)."""
        self._check_usable()
        if self._stepping:
            self._gather(self._step_timeout, workers=sorted(self._stepping))
            self._stepping.clear()
        self._early.clear()
        for i in range(len(self._conns)):
            self._command(i, _RESET)
        return self._steps_from(self._gather(self._step_timeout))

    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        self.step_async(actions)
        return self.wait_all()

    def step_async(self, actions: Sequence[Mapping[str, ActionTuple]]) -> None:
        """Every worker starts its step (see `EnvManager.step_async`)."""
        self._check_usable()
        self._check_idle()
        check_actions(actions, len(self._conns), self._specs)
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
            self._command(i, _STEP)
        else:
            self._command(i, _STEP_PACKED + _pack_actions(self._names, mapping))

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

        def overdue() -> None:  # fails the oldest pending worker once past its deadline
            if pending:
                late, deadline = oldest()
                if deadline is not None and time.monotonic() >= deadline:
                    self._fail(late, f"did not answer within {timeout:g} s", kill_first=True)

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
            if pending and not (any_of and results) and self._stop_requested():
                self._interrupt(sorted(pending), results)
            overdue()
        # Checked after every wait, whether or not others answered, and once more for the
        # answers already there (`_early`): out of lockstep the other workers' answers
        # would otherwise keep a hung worker's timeout away for as long as they come first.
        overdue()
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
