"""ML-Agents side channels: small messages riding on every exchange, both ways.

Wire format (the ``side_channel`` bytes of UnityRLInputProto / UnityRLOutputProto): a
sequence of ``[16-byte channel UUID (little-endian GUID layout, as C#'s Guid.ToByteArray)]
[int32 little-endian payload length][payload]``. Payloads are written with ML-Agents'
message primitives: bool (1 byte), int32 / float32 (little-endian), string (int32 byte
length + ASCII), float list (int32 count + float32s).

Channels implemented here (UUIDs are ML-Agents'):

* `EngineConfigurationChannel` (trainer -> Unity): resolution, quality level, time scale,
  target and capture frame rate.
* `EnvironmentParametersChannel` (trainer -> Unity): environment parameters, floats and
  samplers, read in C# by ``Academy.Instance.EnvironmentParameters.GetWithDefault``.
* `StatsSideChannel` (Unity -> trainer): ``Academy.Instance.StatsRecorder.Add`` values,
  which the trainer writes to TensorBoard with the other stats.
* `StringLogChannel` (both ways): UTF-8/ASCII strings; the game's strings are printed with
  a ``[Unity]`` prefix (the channel of ML-Agents' custom side channel example).

Never imports ``trainers``: stats leave through `StatsSideChannel.drain`.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from envs.parameters import Constant, Gaussian, MultiRangeUniform, Uniform

_T = TypeVar("_T")

#: ML-Agents' StatsAggregationMethod: AVERAGE, MOST_RECENT, SUM, HISTOGRAM.
STATS_AVERAGE, STATS_MOST_RECENT, STATS_SUM, STATS_HISTOGRAM = 0, 1, 2, 3


class SideChannelError(ValueError):
    """Side channel bytes that do not follow the wire format."""


class IncomingMessage:
    """Reads ML-Agents' message primitives from one payload."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.offset = 0

    def _take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.offset + size > len(self.data):
            raise SideChannelError(f"side channel message truncated at byte {self.offset}")
        out = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += size
        return out

    def read_bool(self) -> bool:
        return bool(self._take("<?")[0])

    def read_int32(self) -> int:
        return int(self._take("<i")[0])

    def read_float32(self) -> float:
        return float(self._take("<f")[0])

    def read_float32_list(self) -> List[float]:
        n = self.read_int32()
        return list(self._take(f"<{n}f")) if n > 0 else []

    def read_string(self) -> str:
        n = self.read_int32()
        if n < 0 or self.offset + n > len(self.data):
            raise SideChannelError(f"side channel string of {n} bytes runs past the message")
        text = self.data[self.offset:self.offset + n].decode("utf-8", errors="replace")
        self.offset += n
        return text


class OutgoingMessage:
    """Writes ML-Agents' message primitives into one payload."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write_bool(self, value: bool) -> None:
        self.buffer += struct.pack("<?", bool(value))

    def write_int32(self, value: int) -> None:
        self.buffer += struct.pack("<i", int(value))

    def write_float32(self, value: float) -> None:
        self.buffer += struct.pack("<f", float(value))

    def write_float32_list(self, values: Sequence[float]) -> None:
        self.write_int32(len(values))
        self.buffer += struct.pack(f"<{len(values)}f", *values)

    def write_string(self, text: str) -> None:
        data = text.encode("ascii", errors="replace")  # C# reads ASCII
        self.write_int32(len(data))
        self.buffer += data


class SideChannel:
    """One channel: a UUID, messages queued for Unity, a handler for Unity's messages."""

    def __init__(self, channel_id: uuid.UUID) -> None:
        self.channel_id = channel_id
        self._outgoing: List[bytes] = []

    def queue_message(self, message: OutgoingMessage) -> None:
        """Sent with the next exchange."""
        self._outgoing.append(bytes(message.buffer))

    def take_outgoing(self) -> List[bytes]:
        out, self._outgoing = self._outgoing, []
        return out

    def on_message(self, message: IncomingMessage) -> None:
        """A message from Unity on this channel. Default: ignore."""


def encode_side_channels(channels: Sequence[SideChannel]) -> bytes:
    """Every queued message of ``channels``, framed for UnityRLInputProto.side_channel."""
    out = bytearray()
    for channel in channels:
        for payload in channel.take_outgoing():
            out += channel.channel_id.bytes_le
            out += struct.pack("<i", len(payload))
            out += payload
    return bytes(out)


def split_side_channels(data: bytes) -> List[Tuple[uuid.UUID, bytes]]:
    """``(channel id, payload)`` of each message in UnityRLOutputProto.side_channel bytes."""
    out: List[Tuple[uuid.UUID, bytes]] = []
    offset = 0
    n = len(data)
    while offset < n:
        if offset + 20 > n:
            raise SideChannelError(f"side channel header truncated at byte {offset} of {n}")
        channel_id = uuid.UUID(bytes_le=bytes(data[offset:offset + 16]))
        (length,) = struct.unpack_from("<i", data, offset + 16)
        offset += 20
        if length < 0 or offset + length > n:
            raise SideChannelError(
                f"side channel {channel_id} message of {length} bytes runs past the {n} bytes received"
            )
        out.append((channel_id, bytes(data[offset:offset + length])))
        offset += length
    return out


class SideChannelManager:
    """Routes Unity's messages to channels by UUID; gathers the trainer's messages."""

    def __init__(self, channels: Sequence[SideChannel], warn: Callable[[str], None] = print) -> None:
        self.channels: Dict[uuid.UUID, SideChannel] = {}
        for channel in channels:
            if channel.channel_id in self.channels:
                raise ValueError(f"two side channels share the id {channel.channel_id}")
            self.channels[channel.channel_id] = channel
        self._warn = warn
        self._unknown_warned: set = set()

    def outgoing(self) -> bytes:
        return encode_side_channels(list(self.channels.values()))

    def dispatch(self, data: bytes) -> None:
        for channel_id, payload in split_side_channels(data):
            channel = self.channels.get(channel_id)
            if channel is None:
                if channel_id not in self._unknown_warned:  # as ML-Agents: warn once, go on
                    self._unknown_warned.add(channel_id)
                    self._warn(f"[WARNING] Unity sent a message on side channel {channel_id}, which is not registered")
                continue
            channel.on_message(IncomingMessage(payload))


# ---------------------------------------------------------------------------- channels
class EngineConfigurationChannel(SideChannel):
    """Trainer -> Unity engine settings (ML-Agents' EngineConfigurationChannel)."""

    CHANNEL_ID = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
    SCREEN_RESOLUTION, QUALITY_LEVEL, TIME_SCALE, TARGET_FRAME_RATE, CAPTURE_FRAME_RATE = range(5)

    def __init__(self) -> None:
        super().__init__(self.CHANNEL_ID)

    def set_configuration(
        self,
        width: Optional[int] = None,
        height: Optional[int] = None,
        quality_level: Optional[int] = None,
        time_scale: Optional[float] = None,
        target_frame_rate: Optional[int] = None,
        capture_frame_rate: Optional[int] = None,
    ) -> None:
        """Queues one message per setting given (None = leave Unity's value)."""
        if width is not None or height is not None:
            if width is None or height is None:
                raise ValueError("width and height go together")
            msg = OutgoingMessage()
            msg.write_int32(self.SCREEN_RESOLUTION)
            msg.write_int32(width)
            msg.write_int32(height)
            self.queue_message(msg)
        self._queue_setting(self.QUALITY_LEVEL, quality_level, OutgoingMessage.write_int32)
        self._queue_setting(self.TIME_SCALE, time_scale, OutgoingMessage.write_float32)
        self._queue_setting(self.TARGET_FRAME_RATE, target_frame_rate, OutgoingMessage.write_int32)
        self._queue_setting(self.CAPTURE_FRAME_RATE, capture_frame_rate, OutgoingMessage.write_int32)

    def _queue_setting(self, kind: int, value: Optional[_T], write: Callable[[OutgoingMessage, _T], None]) -> None:
        """Queues ``[kind][value]`` (written by ``write``) unless ``value`` is None."""
        if value is not None:
            msg = OutgoingMessage()
            msg.write_int32(kind)
            write(msg, value)
            self.queue_message(msg)


class EnvironmentParametersChannel(SideChannel):
    """Trainer -> Unity environment parameters: floats, and samplers the game draws from
    each time it reads the parameter (ML-Agents' ``EnvironmentParametersChannel``, the same
    bytes). A message: ``[string key][int32 type]``, then for ``FLOAT`` a float32; for
    ``SAMPLER`` ``[int32 seed][int32 sampler type]`` and the sampler's float32s (uniform:
    min, max; gaussian: mean, st_dev; multi-range uniform: a float list of the flattened
    intervals)."""

    CHANNEL_ID = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
    FLOAT, SAMPLER = 0, 1  # C#'s EnvironmentDataTypes
    UNIFORM, GAUSSIAN, MULTIRANGEUNIFORM = 0, 1, 2  # C#'s SamplerType

    def __init__(self) -> None:
        super().__init__(self.CHANNEL_ID)

    def set_float_parameter(self, key: str, value: float) -> None:
        msg = OutgoingMessage()
        msg.write_string(key)
        msg.write_int32(self.FLOAT)
        msg.write_float32(value)
        self.queue_message(msg)

    def _sampler(self, key: str, seed: int, sampler_type: int) -> OutgoingMessage:
        msg = OutgoingMessage()
        msg.write_string(key)
        msg.write_int32(self.SAMPLER)
        msg.write_int32(seed)
        msg.write_int32(sampler_type)
        return msg

    def set_uniform_sampler_parameters(self, key: str, min_value: float, max_value: float, seed: int) -> None:
        msg = self._sampler(key, seed, self.UNIFORM)
        msg.write_float32(min_value)
        msg.write_float32(max_value)
        self.queue_message(msg)

    def set_gaussian_sampler_parameters(self, key: str, mean: float, st_dev: float, seed: int) -> None:
        msg = self._sampler(key, seed, self.GAUSSIAN)
        msg.write_float32(mean)
        msg.write_float32(st_dev)
        self.queue_message(msg)

    def set_multirangeuniform_sampler_parameters(
        self, key: str, intervals: Sequence[Tuple[float, float]], seed: int
    ) -> None:
        msg = self._sampler(key, seed, self.MULTIRANGEUNIFORM)
        msg.write_float32_list([bound for interval in intervals for bound in interval])
        self.queue_message(msg)

    def set_parameter(self, key: str, value: Any) -> None:
        """An `envs.parameters.ParameterValue` (or a plain number), as ML-Agents' settings'
        ``apply`` sends it."""
        if isinstance(value, Constant):
            self.set_float_parameter(key, value.value)
        elif isinstance(value, Uniform):
            self.set_uniform_sampler_parameters(key, value.min_value, value.max_value, value.seed)
        elif isinstance(value, Gaussian):
            self.set_gaussian_sampler_parameters(key, value.mean, value.st_dev, value.seed)
        elif isinstance(value, MultiRangeUniform):
            self.set_multirangeuniform_sampler_parameters(key, value.intervals, value.seed)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.set_float_parameter(key, float(value))
        else:
            raise TypeError(f"environment parameter {key!r}: expected a number or a sampler, got {value!r}")


class StatsSideChannel(SideChannel):
    """Unity -> trainer stats: ``key -> [(value, aggregation)]`` until drained."""

    CHANNEL_ID = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")

    def __init__(self) -> None:
        super().__init__(self.CHANNEL_ID)
        self._stats: Dict[str, List[Tuple[float, int]]] = {}

    def on_message(self, message: IncomingMessage) -> None:
        key = message.read_string()
        value = message.read_float32()
        aggregation = message.read_int32()
        self._stats.setdefault(key, []).append((value, aggregation))

    def drain(self) -> Dict[str, List[Tuple[float, int]]]:
        """The stats received since the last call."""
        out, self._stats = self._stats, {}
        return out


class StringLogChannel(SideChannel):
    """Strings both ways; Unity's are handed to ``log`` (printed by default)."""

    CHANNEL_ID = uuid.UUID("621f0a70-4f87-11ea-a6bf-784f4387d1f7")

    def __init__(self, log: Callable[[str], None] = lambda s: print(f"[Unity] {s}", flush=True)) -> None:
        super().__init__(self.CHANNEL_ID)
        self._log = log

    def send_string(self, text: str) -> None:
        msg = OutgoingMessage()
        msg.write_string(text)
        self.queue_message(msg)

    def on_message(self, message: IncomingMessage) -> None:
        self._log(message.read_string())
