"""Length-delimited framing of `.demo` files: varint32 length, then the message bytes.

Layout (every era)::

    offset 0    varint length + DemonstrationMetaProto   (at most 32 message bytes)
    offset 33   varint length + BrainParametersProto
    then        varint length + record, repeated         (trailing bytes may follow)

Unity reserves the first 33 bytes so that it can rewrite the metadata in place when it
closes the file; the gap between the end of the metadata and byte 33 is zero padding.
"""
from __future__ import annotations

from typing import Tuple

#: Bytes Unity reserves for the metadata message (its length varint comes before them).
META_RESERVED_BYTES = 32
#: Where the BrainParametersProto's length varint starts.
BRAIN_PARAMETERS_OFFSET = META_RESERVED_BYTES + 1
#: A varint32 never needs more than 5 bytes.
_MAX_VARINT32_BYTES = 5


class FramingError(Exception):
    """A framing problem at ``offset``; ``truncated`` tells a short file from a bad one."""

    def __init__(self, message: str, offset: int, truncated: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.truncated = truncated


def read_varint32(data: bytes, pos: int) -> Tuple[int, int]:
    """Decode the varint at ``pos``; returns ``(value, position after it)``.

    Raises:
        FramingError: the data ends inside the varint (truncated) or it is longer than 5
            bytes (corrupt).
    """
    result = 0
    shift = 0
    start = pos
    n = len(data)
    while True:
        if pos >= n:
            raise FramingError("length prefix cut off by the end of the file", start, truncated=True)
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFFFFFF, pos
        shift += 7
        if pos - start >= _MAX_VARINT32_BYTES:
            raise FramingError("corrupt length prefix (longer than 5 bytes)", start)


def encode_varint32(value: int) -> bytes:
    """The varint encoding of an unsigned 32-bit ``value``."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"varint32 out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_delimited(data: bytes, pos: int, what: str) -> Tuple[bytes, int]:
    """The length-delimited message at ``pos``: ``(message bytes, position after it)``.

    ``what`` names the message in errors ("record 12 of 57").
    """
    length, body = read_varint32(data, pos)
    end = body + length
    if end > len(data):
        raise FramingError(
            f"{what} is cut off: it needs {length} bytes, {len(data) - body} remain", pos, truncated=True
        )
    return bytes(data[body:end]), end


def top_level_field_numbers(message: bytes) -> Tuple[int, ...]:
    """Field numbers at the top level of a serialised message, in order (wire scan).

    Used to tell a legacy record (fields 1-11 at the top) from an AgentInfoActionPair
    (fields 1 and 2 only). Raises `ValueError` on malformed wire data.
    """
    numbers = []
    pos = 0
    n = len(message)
    while pos < n:
        key, pos = _varint64(message, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint64(message, pos)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length, pos = _varint64(message, pos)
            pos += length
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")
        if pos > n or field == 0:
            raise ValueError("malformed message")
        numbers.append(field)
    return tuple(numbers)


def _varint64(data: bytes, pos: int) -> Tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("bad varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
