"""PNG images as Unity writes them into `.demo` files: split, decode, encode.

Unity stores a visual observation as one PNG, or, when the observation has more than three
channels (stacked frames), as several PNGs concatenated into one byte string. `split_pngs`
finds the boundaries, `decode_png` turns one PNG into ``[H, W, C]`` uint8, and
`encode_png` writes an 8-bit RGB or grayscale PNG.

Decoding uses Pillow when it is importable (it ships with TensorBoard) and falls back to a
small zlib decoder of our own (8-bit, non-interlaced: every PNG Unity writes).
"""
from __future__ import annotations

import io
import struct
import zlib
from typing import List, Optional

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Colour type -> samples per pixel (PNG spec, section 11.2.2).
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


class PngError(ValueError):
    """The bytes are not a PNG this module can decode; the message says why."""


def split_pngs(data: bytes) -> List[bytes]:
    """The PNG files concatenated in ``data``, in order.

    Raises:
        PngError: ``data`` does not start with a PNG signature, or a chunk runs past the
            end (truncated), or bytes follow the last IEND that are not another PNG.
    """
    out: List[bytes] = []
    pos = 0
    n = len(data)
    while pos < n:
        start = pos
        if data[pos:pos + 8] != PNG_SIGNATURE:
            raise PngError(f"no PNG signature at image byte {pos}")
        pos += 8
        while True:
            if pos + 12 > n:
                raise PngError(f"PNG chunk header truncated at image byte {pos}")
            (length,) = struct.unpack_from(">I", data, pos)
            kind = bytes(data[pos + 4:pos + 8])
            pos += 12 + length
            if pos > n:
                raise PngError(f"PNG chunk {kind!r} truncated at image byte {pos - 12 - length}")
            if kind == b"IEND":
                break
        out.append(bytes(data[start:pos]))
    if not out:
        raise PngError("no image data")
    return out


def decode_png(data: bytes) -> np.ndarray:
    """One PNG as ``[H, W, C]`` uint8 (C = 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA).

    Palette images are expanded to RGB. Raises `PngError` on anything undecodable.
    """
    image = _decode_with_pillow(data)
    if image is None:
        image = decode_png_zlib(data)
    return image


def _decode_with_pillow(data: bytes) -> Optional[np.ndarray]:
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow ships with TensorBoard
        return None
    try:
        with Image.open(io.BytesIO(data)) as opened:
            if opened.format != "PNG":
                raise PngError(f"not a PNG ({opened.format})")
            img: Image.Image = opened
            if img.mode == "P":
                img = img.convert("RGBA" if "transparency" in img.info else "RGB")
            elif img.mode not in ("L", "LA", "RGB", "RGBA"):
                img = img.convert("RGB")
            arr = np.asarray(img, dtype=np.uint8)
    except PngError:
        raise
    except Exception as e:  # Pillow raises many types for bad data
        raise PngError(f"undecodable PNG ({type(e).__name__}: {e})") from None
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return arr


def decode_png_zlib(data: bytes) -> np.ndarray:
    """`decode_png` without Pillow: 8-bit (or 16-bit, scaled), non-interlaced PNGs."""
    if data[:8] != PNG_SIGNATURE:
        raise PngError("no PNG signature")
    pos = 8
    header = None
    palette = None
    idat = bytearray()
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kind = bytes(data[pos + 4:pos + 8])
        body = bytes(data[pos + 8:pos + 8 + length])
        if len(body) != length:
            raise PngError(f"PNG chunk {kind!r} truncated")
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = np.frombuffer(body, dtype=np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    if header is None:
        raise PngError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if colour not in _CHANNELS or depth not in (8, 16) or interlace != 0:
        raise PngError(f"unsupported PNG (bit depth {depth}, colour type {colour}, interlace {interlace})")
    channels = _CHANNELS[colour]
    bpp = channels * depth // 8
    stride = width * bpp
    try:
        raw = zlib.decompress(bytes(idat))
    except zlib.error as e:
        raise PngError(f"corrupt PNG image data ({e})") from None
    if len(raw) != height * (stride + 1):
        raise PngError(f"PNG image data has {len(raw)} bytes, expected {height * (stride + 1)}")
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        filt, line = int(rows[y, 0]), rows[y, 1:]
        if filt == 0:
            cur = line.copy()
        elif filt == 1:  # Sub: running sum of each byte lane, modulo 256
            cur = (np.cumsum(line.reshape(width, bpp).astype(np.int64), axis=0) & 0xFF).astype(np.uint8).reshape(-1)
        elif filt == 2:  # Up
            cur = line + prev
        elif filt in (3, 4):  # Average, Paeth: sequential within the row
            cur = _unfilter_sequential(filt, line, prev, bpp)
        else:
            raise PngError(f"unknown PNG filter type {filt} in row {y}")
        out[y] = cur
        prev = cur
    if depth == 16:
        image = out.reshape(height, width * channels, 2)[:, :, 0].reshape(height, width, channels)
    else:
        image = out.reshape(height, width, channels)
    if colour == 3:
        if palette is None:
            raise PngError("palette PNG without PLTE")
        image = palette[image[:, :, 0]]
    return image


def _unfilter_sequential(kind: int, line: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    x = line.tolist()
    b = prev.tolist()
    cur = [0] * len(x)
    for i in range(len(x)):
        a = cur[i - bpp] if i >= bpp else 0
        if kind == 3:
            cur[i] = (x[i] + ((a + b[i]) >> 1)) & 0xFF
        else:
            c = b[i - bpp] if i >= bpp else 0
            p = a + b[i] - c
            pa, pb, pc = abs(p - a), abs(p - b[i]), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b[i] if pb <= pc else c)
            cur[i] = (x[i] + pred) & 0xFF
    return np.array(cur, dtype=np.uint8)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def encode_png(image: np.ndarray, level: int = 6) -> bytes:
    """``[H, W, 1 | 3]`` uint8 -> an 8-bit grayscale or RGB PNG (no row filters)."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (1, 3):
        raise ValueError(f"encode_png needs [H, W, 1|3] uint8, got {image.dtype} {image.shape}")
    height, width, channels = image.shape
    colour = 0 if channels == 1 else 2
    rows = np.zeros((height, width * channels + 1), dtype=np.uint8)  # filter byte 0 per row
    rows[:, 1:] = image.reshape(height, width * channels)
    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), level))
        + _chunk(b"IEND", b"")
    )
