"""TFRecord framing and TensorBoard event files, without TensorFlow.

TensorBoard event files are written with the ``tensorboard`` package's protobufs and our
own TFRecord framing (`_RecordWriter`). (Its ``EventFileWriter`` reaches the file system
through ``tensorboard.compat.tf``, which imports TensorFlow when TensorFlow is installed;
this module must stay importable without it. Its ``RecordWriter`` module sits under
``tensorboard.summary``, whose package import pulls in TensorBoard's TensorFlow stub,
a cost at every process's start-up.)
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from typing import Any, List

from tensorboard.compat.proto import event_pb2


def _crc32c_table() -> List[int]:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one entry per byte value."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C of ``data``, rotated right by 15 bits plus a constant.

    Pure Python, slow per byte, but event records are a few hundred bytes, written once
    per summary period.
    """
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class _RecordWriter:
    """TFRecord framing, what TensorBoard reads: ``uint64 length``, its masked CRC-32C,
    the bytes, their masked CRC-32C (little-endian)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, data: bytes) -> None:
        header = struct.pack("<Q", len(data))
        self._stream.write(
            header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))
        )

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()


class _EventFile:
    """One TensorBoard event file, written synchronously (flushed after each batch)."""

    def __init__(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        # TensorBoard's naming; the zero-padded counter keeps files one process opens in the
        # same second apart and in creation order (readers load a directory sorted by name).
        self.path = os.path.join(
            directory,
            "events.out.tfevents.%010d.%s.%d.%06d"
            % (time.time(), socket.gethostname(), os.getpid(), next(_FILE_COUNTER)),
        )
        self._records = _RecordWriter(open(self.path, "wb"))
        self.write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self.flush()

    def write(self, event: event_pb2.Event) -> None:
        self._records.write(event.SerializeToString())

    def flush(self) -> None:
        self._records.flush()

    def close(self) -> None:
        self._records.close()


# next() of itertools.count is atomic under the GIL.
_FILE_COUNTER = itertools.count(1)
