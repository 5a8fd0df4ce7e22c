"""Helpers of the .demo tests (no tests here): where the real Unity files are, and an independent decoder.

The wire decoder here shares no code with `envs.demo`, so the spot checks against real
files are not circular.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Dict, List, Optional, Tuple


_HERE = Path(__file__).resolve()


def demo_dir() -> Optional[Path]:
    """The folder of real Unity `.demo` files: the copy in tests/data/demos (taken from
    the public ML-Agents repository, Apache-2.0, see its MANIFEST), or $TRAINER_LEARN_DEMO_DIR."""
    candidates = []
    if os.environ.get("TRAINER_LEARN_DEMO_DIR"):
        candidates.append(Path(os.environ["TRAINER_LEARN_DEMO_DIR"]))
    candidates.append(_HERE.parent.parent / "data" / "demos")
    for c in candidates:
        if (c / "MANIFEST.md").is_file():
            return c
    return None


def real_demo(name: str) -> Path:
    d = demo_dir()
    assert d is not None, "tests/data/demos (the real Unity recordings) is missing"
    return d / name


# --------------------------------------------------------------------- wire decoding
def varint(buf: bytes, pos: int) -> Tuple[int, int]:
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def fields(msg: bytes) -> Dict[int, List[object]]:
    """Field number -> raw values (int for varints, bytes otherwise), in order."""
    out: Dict[int, List[object]] = {}
    pos = 0
    while pos < len(msg):
        key, pos = varint(msg, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = varint(msg, pos)
        elif wire == 1:
            val, pos = msg[pos:pos + 8], pos + 8
        elif wire == 5:
            val, pos = msg[pos:pos + 4], pos + 4
        elif wire == 2:
            n, pos = varint(msg, pos)
            val, pos = msg[pos:pos + n], pos + n
        else:
            raise ValueError(wire)
        out.setdefault(num, []).append(val)
    return out


def packed_floats(raw: bytes) -> List[float]:
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def packed_varints(raw: bytes) -> List[int]:
    out, pos = [], 0
    while pos < len(raw):
        v, pos = varint(raw, pos)
        out.append(v - (1 << 64) if v >= 1 << 63 else v)
    return out


def framed(path: Path) -> Tuple[bytes, List[Tuple[int, bytes]], int]:
    """``(meta bytes, [(offset, record bytes)] up to number_steps, end offset)``."""
    data = path.read_bytes()
    n, p = varint(data, 0)
    meta = data[p:p + n]
    steps = int(fields(meta).get(3, [0])[0])
    pos = 33
    n, p = varint(data, pos)
    pos = p + n  # skip the behavior parameters
    records = []
    for _ in range(steps):
        n, p = varint(data, pos)
        records.append((pos, data[p:p + n]))
        pos = p + n
    return meta, records, pos
