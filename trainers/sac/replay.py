"""SAC's replay buffer: whole sequences in preallocated ring storage, bounded in memory.

Plain numpy. The unit of storage is a *sequence* of ``L`` rows (``L = 1`` without memory;
the LSTM's ``sequence_length`` with it): a trajectory is left-padded to a multiple of ``L``
(`trainers.buffer.pad_trajectory`, as ML-Agents' ``resequence_and_append``: padded rows
have ``masks`` 0, zeros, ones in ``action_mask`` and the first real row's memories, so a
sequence's first row holds the memory its first real step started from) and cut into
sequences, each written into one slot of a ring of ``capacity // L`` slots, the oldest
overwritten first. Sampling draws whole sequences, so recurrent SAC reads each sequence's
initial memories from its first row. Every field is allocated once, at its first
trajectory, for the whole capacity: memory is ``capacity x bytes_per_step`` and never grows.

Saved with ``save`` (``np.savez`` into a temporary file, then ``os.replace``: a crash leaves
the previous file whole) and restored with ``load``.
"""
from __future__ import annotations

import os
from typing import Dict, Mapping, Optional

import numpy as np

from trainers.buffer import pad_front, pad_trajectory
from trainers.exceptions import ConfigError
from trainers.fields import MASKS


def available_memory() -> Optional[int]:
    """Bytes of memory available to new allocations (Linux's MemAvailable); None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


class ReplayBuffer:
    """Ring storage of ``capacity // sequence_length`` sequences.

    Args:
        capacity: rows (experiences) the buffer holds at most (``buffer_size``).
        sequence_length: rows per stored sequence.
    """

    def __init__(self, capacity: int, sequence_length: int = 1, where: str = "hyperparameters.buffer_size") -> None:
        if capacity < sequence_length:
            raise ValueError(f"replay capacity {capacity} is smaller than one sequence ({sequence_length})")
        self.sequence_length = sequence_length
        self.num_slots = capacity // sequence_length
        self._where = where  # the config key named when the buffer cannot fit in memory
        self._fields: Dict[str, np.ndarray] = {}  # name -> [slots, L, ...]
        self._next = 0  # slot written next
        self._size = 0  # filled slots
        self.rows_added = 0  # real rows ever added (over resumes when loaded)

    # ----------------------------------------------------------------- writing

    def _allocate(self, fields: Mapping[str, np.ndarray]) -> None:
        L = self.sequence_length
        row = sum(int(np.prod(v.shape[1:], dtype=np.int64)) * v.dtype.itemsize for v in fields.values()) + 4
        need = self.num_slots * L * row
        available = available_memory()
        # np.zeros only reserves pages: a buffer larger than memory would allocate and then
        # get the process killed once it fills, hours into the run. Refuse it now instead.
        if available is not None and need > available:
            raise ConfigError(
                f"{self._where}: {self.num_slots * L} experiences of {row} bytes need "
                f"{need / 2**30:.1f} GiB; {available / 2**30:.1f} GiB of memory is available"
            )
        for key, value in fields.items():
            self._fields[key] = np.zeros((self.num_slots, L) + value.shape[1:], value.dtype)
        self._fields[MASKS] = np.zeros((self.num_slots, L), np.float32)

    def add(self, fields: Mapping[str, np.ndarray]) -> None:
        """Appends a trajectory: every field ``[T, ...]`` with the same ``T``."""
        if not self._fields:
            self._allocate(fields)
        elif set(fields) | {MASKS} != set(self._fields):
            raise ValueError(f"replay fields changed: {sorted(fields)} vs {sorted(self._fields)}")
        L = self.sequence_length
        n = len(next(iter(fields.values())))
        masks = pad_front(np.ones(n, np.float32), L)
        num_seq = len(masks) // L
        fields = pad_trajectory(fields, L)
        if num_seq > self.num_slots:  # longer than the whole buffer: keep its end
            skip = num_seq - self.num_slots
            masks = masks[skip * L :]
            fields = {k: v[skip * L :] for k, v in fields.items()}
            num_seq = self.num_slots
        slots = (self._next + np.arange(num_seq)) % self.num_slots
        for key, value in fields.items():
            self._fields[key][slots] = value.reshape((num_seq, L) + value.shape[1:])
        self._fields[MASKS][slots] = masks.reshape(num_seq, L)
        self._next = int((self._next + num_seq) % self.num_slots)
        self._size = min(self._size + num_seq, self.num_slots)
        self.rows_added += n

    # ----------------------------------------------------------------- reading

    @property
    def num_sequences(self) -> int:
        return self._size

    @property
    def num_experiences(self) -> int:
        """Rows stored, padding included (``num_sequences x sequence_length``)."""
        return self._size * self.sequence_length

    def keys(self):
        return list(self._fields)

    def sample(self, num_sequences: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
        """``num_sequences`` sequences drawn uniformly with replacement, as rows
        ``[num_sequences x L, ...]`` (each sequence contiguous)."""
        idx = rng.integers(0, self._size, size=num_sequences)
        L = self.sequence_length
        return {
            k: v[idx].reshape((num_sequences * L,) + v.shape[2:]) for k, v in self._fields.items()
        }

    @property
    def bytes_per_step(self) -> int:
        """Bytes one stored row takes over every field (masks included); 0 before any add."""
        return int(sum(v.itemsize * int(np.prod(v.shape[2:], dtype=np.int64)) for v in self._fields.values()))

    @property
    def nbytes(self) -> int:
        """Bytes allocated (the bound: ``capacity x bytes_per_step``)."""
        return int(sum(v.nbytes for v in self._fields.values()))

    # ------------------------------------------------------------ persistence

    def save(self, path: str, step: int = -1) -> None:
        """Writes the filled part atomically to ``path`` (an ``.npz`` file), with the
        trainer step it belongs to (``load`` returns it)."""
        order = (self._next - self._size + np.arange(self._size)) % self.num_slots  # oldest first
        arrays = {f"field/{k}": v[order] for k, v in self._fields.items()}
        meta = np.array([self.sequence_length, self.rows_added, step], np.int64)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            # numpy's stub types **kwargs as its own allow_pickle: bool; they are arrays here.
            np.savez(f, __meta__=meta, **arrays)  # type: ignore[arg-type]
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load(self, path: str) -> int:
        """Replaces the contents with a file written by `save` (oldest sequences dropped
        when it holds more than this buffer's capacity); returns the saved step."""
        with np.load(path) as data:
            meta = data["__meta__"]
            if int(meta[0]) != self.sequence_length:
                raise ValueError(
                    f"{path}: saved with sequence length {int(meta[0])}, the buffer uses {self.sequence_length}"
                )
            arrays = {k[len("field/"):]: data[k] for k in data.files if k.startswith("field/")}
        self._fields = {}
        self._next = self._size = 0
        step = int(meta[2]) if len(meta) > 2 else -1
        if not arrays:
            self.rows_added = int(meta[1])
            return step
        count = len(next(iter(arrays.values())))
        keep = min(count, self.num_slots)
        for key, value in arrays.items():
            self._fields[key] = np.zeros((self.num_slots,) + value.shape[1:], value.dtype)
            self._fields[key][:keep] = value[count - keep :]
        self._size = keep
        self._next = keep % self.num_slots
        self.rows_added = int(meta[1])
        return step

    def contents(self) -> Optional[Dict[str, np.ndarray]]:
        """The filled sequences, oldest first (tests compare buffers with it)."""
        if not self._fields:
            return None
        order = (self._next - self._size + np.arange(self._size)) % self.num_slots
        return {k: v[order] for k, v in self._fields.items()}
