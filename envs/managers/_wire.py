"""What crosses between `SubprocessEnvManager` and its worker processes, the same code on
both ends: the packed byte format of steps and actions, the shared-memory segment layout
and its channel, the one-byte messages and their framing on the pipe, and the
spin-then-block wait (`_Waiter`). The protocol is explained in `envs.managers.subprocess`.
"""
from __future__ import annotations

import os
import struct
import time
from multiprocessing.shared_memory import SharedMemory
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from envs.managers.base import StepDict

#: How long the parent (waiting for step replies) and a worker (waiting for its next
#: command) may poll their pipes without blocking, yielding the CPU between polls, before
#: they block. Waking a blocked process costs about ten times a spinning one's wait (a
#: bare pipe ping-pong between two Python processes: README, "Figures behind choices in
#: the code").
SPIN_S = 1e-3


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
        arrays += [np.asarray(decision.group_id, np.int32), np.asarray(decision.group_reward, np.float32)]
        arrays += [np.asarray(o, np.float32) for o in terminal.obs]
        arrays += [
            np.asarray(terminal.reward, np.float32),
            np.asarray(terminal.interrupted, bool),
            np.asarray(terminal.agent_id, np.int32),
            np.asarray(terminal.group_id, np.int32),
            np.asarray(terminal.group_reward, np.float32),
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
        decision = DecisionSteps(obs, reward, agent_id, mask, r.take(_I32, (n_d,)), r.take(_F32, (n_d,)))
        t_obs = [r.take(_F32, (n_t,) + o.shape) for o in spec.observation_specs]
        terminal = TerminalSteps(
            t_obs, r.take(_F32, (n_t,)), r.take(_BOOL, (n_t,)), r.take(_I32, (n_t,)),
            r.take(_I32, (n_t,)), r.take(_F32, (n_t,)),
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

    __slots__ = ("cont", "disc", "d_obs", "d_reward", "d_id", "d_mask", "d_group", "d_group_reward", "t_obs",
                 "t_reward", "t_interrupted", "t_id", "t_group", "t_group_reward")

    def __init__(self, take: Any, spec: BehaviorSpec, cap: int) -> None:
        a = spec.action_spec
        shapes = [(cap,) + o.shape for o in spec.observation_specs]
        self.cont: np.ndarray = take(_F32, (cap, a.continuous_size))
        self.disc: np.ndarray = take(_I32, (cap, a.discrete_size))
        self.d_obs: List[np.ndarray] = [take(_F32, s) for s in shapes]
        self.d_reward: np.ndarray = take(_F32, (cap,))
        self.d_id: np.ndarray = take(_I32, (cap,))
        self.d_mask: List[np.ndarray] = [take(_BOOL, (cap, b)) for b in a.discrete_branches]
        self.d_group: np.ndarray = take(_I32, (cap,))
        self.d_group_reward: np.ndarray = take(_F32, (cap,))
        self.t_obs: List[np.ndarray] = [take(_F32, s) for s in shapes]
        self.t_reward: np.ndarray = take(_F32, (cap,))
        self.t_interrupted: np.ndarray = take(_BOOL, (cap,))
        self.t_id: np.ndarray = take(_I32, (cap,))
        self.t_group: np.ndarray = take(_I32, (cap,))
        self.t_group_reward: np.ndarray = take(_F32, (cap,))


class _Layout:
    """Where every array of one worker's segment lies, for given per-behavior capacities.

    The segment starts with ``[n_behaviors, 8]`` int64 header rows
    ``[n_decision, n_terminal, has_mask, action_present, continuous_rows, discrete_rows, 0, 0]``;
    then, per behavior in order: actions (continuous ``[cap, c]`` float32, discrete
    ``[cap, b]`` int32), decision steps (obs ``[cap, *shape]`` float32 per spec, reward
    ``[cap]``, agent_id ``[cap]`` int32, one ``[cap, branch]`` bool mask per branch,
    group_id ``[cap]`` int32, group_reward ``[cap]`` float32) and terminal steps (obs,
    reward, interrupted ``[cap]`` bool, agent_id, group_id, group_reward). Every array starts
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
        # (numpy's stubs declare ndarray.__buffer__ only for Python >= 3.12.)
        self.header: Optional[memoryview] = memoryview(header).cast("B").cast("q")  # type: ignore[arg-type]
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
                v.d_group[:n_d].copy(),
                v.d_group_reward[:n_d].copy(),
            )
            if n_t:
                terminal = TerminalSteps(
                    [o[:n_t].copy() for o in v.t_obs],
                    v.t_reward[:n_t].copy(),
                    v.t_interrupted[:n_t].copy(),
                    v.t_id[:n_t].copy(),
                    v.t_group[:n_t].copy(),
                    v.t_group_reward[:n_t].copy(),
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
            v.d_group[:n_d] = decision.group_id
            v.d_group_reward[:n_d] = decision.group_reward
            if n_t:
                for dst, src in zip(v.t_obs, terminal.obs):
                    dst[:n_t] = src
                v.t_reward[:n_t] = terminal.reward
                v.t_interrupted[:n_t] = terminal.interrupted
                v.t_id[:n_t] = terminal.agent_id
                v.t_group[:n_t] = terminal.group_id
                v.t_group_reward[:n_t] = terminal.group_reward
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


# --------------------------------------------------------------------------- messages
# Messages: parent -> worker b"S" (actions in shared memory) | b"s" + packed actions |
# b"R" | b"M" + pickled (segment name, capacities) | b"C" |
# b"P" + int32 n + n bytes of pickled environment parameters + a step or reset message
# (the parameters ride on the next command, so one message is in flight at a time);
# worker -> parent b"Y" + pickled specs (once) | b"K" (steps in shared memory) |
# b"k" + packed steps | b"A" (segment mapped) | b"E" + pickled error info.
_STEP, _STEP_PACKED, _RESET, _MAP, _CLOSE = b"S", b"s", b"R", b"M", b"C"
_PARAMS = b"P"
_READY, _OK, _OK_PACKED, _MAPPED, _ERROR = b"Y", b"K", b"k", b"A", b"E"


_FRAME = struct.Struct("!i")  # multiprocessing.Connection's length prefix


def _with_parameters(parameters: bytes, message: bytes) -> bytes:
    """A step or reset ``message`` carrying pickled environment ``parameters`` before it."""
    return _PARAMS + _FRAME.pack(len(parameters)) + parameters + message


def _split_parameters(message: bytes) -> Tuple[bytes, bytes]:
    """The inverse of `_with_parameters`: (pickled parameters, the command message)."""
    (size,) = _FRAME.unpack_from(message, 1)
    start = 1 + _FRAME.size
    return message[start:start + size], message[start + size:]


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
