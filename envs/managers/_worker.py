"""The worker process's side of `SubprocessEnvManager` (see `envs.managers.subprocess`):
`_worker_main` builds the env and serves the parent's commands; `_watch_parent` ends the
worker when its parent is gone.

``spawn`` imports this module by name in every worker (`_worker_main` is the process
target): it and what it imports stay light (``envs`` only, never TensorFlow).
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import traceback
from multiprocessing.shared_memory import SharedMemory
from typing import Any, Dict, Optional

from envs.base_env import BaseEnv
from envs.exceptions import EnvError
from envs.managers._wire import (
    _ERROR,
    _MAP,
    _MAPPED,
    _OK,
    _OK_PACKED,
    _PARAMS,
    _READY,
    _RESET,
    _STEP,
    _STEP_PACKED,
    _Channel,
    _Layout,
    _pack_steps,
    _split_parameters,
    _recv_message,
    _send_message,
    _unpack_actions,
    _Waiter,
)
from envs.managers.base import _one_line
from envs.registry import make_env

#: Seconds a worker whose parent died gives its main thread to close the env after
#: SIGTERM, before the watchdog ends the process without it.
PARENT_EXIT_GRACE_S = 5.0


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
    env_parameters: Optional[Dict[str, Any]] = None,
) -> None:
    """Body of a worker process: build the env, then serve reset/step/map/close commands
    (and environment parameters, which get no reply).

    Replies: ready (pickled specs) once, then one reply per command; on an exception an
    error ``(type name, one-line message, is EnvError, traceback)`` and exit. ``alive``:
    the read end of the parent's lifeline pipe (see `_watch_parent`). ``env_parameters``:
    those the env starts with.
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
            env = make_env(env_id, env_args, seed, agents_per_env, env_parameters)
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
                if message[:1] == _PARAMS:  # new environment parameters, then the command
                    parameters, message = _split_parameters(message)
                    env.set_env_parameters(pickle.loads(parameters))
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
