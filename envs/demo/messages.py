"""The ML-Agents messages a `.demo` file and Unity's communicator share, decoded into
specs and arrays: the behavior parameters' action spec, the observation plan (vector or
visual, HWC or ML-Agents 2.0's CHW) and PNG-compressed visual observations. The `.demo`
reader (`envs.demo.reader`) and the Unity environment (`envs.unity.environment`) both
decode with these; each adds its own context (file and byte, or behavior) to the errors.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from envs.demo import demonstration_pb2 as pb
from envs.demo.png import PNG_SIGNATURE, PngError, decode_png, split_pngs

# DimensionPropertyProto values Unity writes in ObservationProto.dimension_properties.
_DIM_NONE = 1
_DIM_TRANSLATIONAL = 2
_DIM_VARIABLE_SIZE = 4
#: A BufferSensor's (rank-2) dimension properties: ML-Agents' only variable-length layout.
ENTITY_DIMENSION_PROPERTIES = (_DIM_VARIABLE_SIZE, _DIM_NONE)


class RecordError(Exception):
    """A problem inside one record; the caller adds file, record and offset."""


class BrainError(Exception):
    """The behavior parameters are unusable."""


def format_behavior_spec(spec: BehaviorSpec) -> str:
    """One line: ``observations [(84, 84, 3) visual, (1,) vector]; actions continuous 3 + discrete [2]``."""
    obs = ", ".join(f"{tuple(o.shape)} {o.kind.value}" for o in spec.observation_specs)
    return f"observations [{obs}]; actions {format_action_spec(spec.action_spec)}"


def format_action_spec(spec: ActionSpec) -> str:
    """``continuous 2``, ``discrete [3, 3]`` or ``continuous 3 + discrete [2]``."""
    parts = []
    if spec.continuous_size:
        parts.append(f"continuous {spec.continuous_size}")
    if spec.discrete_branches:
        parts.append(f"discrete {list(spec.discrete_branches)}")
    return " + ".join(parts) if parts else "none"


@dataclass(frozen=True)
class ObsPlan:
    """How to turn observation ``index`` of a record into a spec-shaped array."""

    index: int
    proto_shape: Tuple[int, ...]
    spec: ObservationSpec
    channels_first: bool  # proto shape is (C, H, W)
    #: Legacy records only: the observation is ``observations[index]`` (field 13, the
    #: compressed observations of ML-Agents 0.11) rather than a field-2 PNG or the vector.
    in_observations: bool = False


def action_spec_from_brain(brain: "pb.BrainParametersProto") -> ActionSpec:
    if brain.HasField("action_spec"):
        a = brain.action_spec
        branches = tuple(int(b) for b in a.discrete_branch_sizes)
        if a.num_discrete_actions != len(branches):
            raise BrainError(
                f"action spec declares {a.num_discrete_actions} discrete branches but lists {len(branches)} sizes"
            )
        spec = ActionSpec(int(a.num_continuous_actions), branches)
    else:
        sizes = tuple(int(s) for s in brain.vector_action_size)
        space = int(brain.vector_action_space_type)
        if space == pb.SPACE_TYPE_CONTINUOUS:
            if len(sizes) != 1:
                raise BrainError(f"continuous action space with sizes {list(sizes)} (expected one size)")
            spec = ActionSpec(sizes[0], ())
        elif space == pb.SPACE_TYPE_DISCRETE:
            spec = ActionSpec(0, sizes)
        else:
            raise BrainError(f"unknown action space type {space}")
    if spec.continuous_size < 0 or any(b <= 0 for b in spec.discrete_branches):
        raise BrainError(f"invalid action sizes ({format_action_spec(spec)})")
    if spec.continuous_size == 0 and not spec.discrete_branches:
        raise BrainError("no actions declared")
    return spec


def plan_observations(observations: Sequence["pb.ObservationProto"]) -> List[ObsPlan]:
    """Specs of one agent's observations (ML-Agents 0.12+ records; also the Unity
    communicator's agent infos): vector (1-D), entities (2-D ``[max_entities, entity_size]``,
    a BufferSensor's, dimension properties ``(VARIABLE_SIZE, NONE)``) or visual (3-D, HWC
    or ML-Agents 2.0's CHW); empty sensors are skipped.

    Raises:
        RecordError: a negative or unsupported (not 1-D, 2-D entities or 3-D) shape.
    """
    plans: List[ObsPlan] = []
    for i, o in enumerate(observations):
        shape = tuple(int(s) for s in o.shape)
        if any(s < 0 for s in shape):
            raise RecordError(f"observation {i} has shape {list(shape)}")
        if int(np.prod(shape)) == 0:
            continue  # an empty sensor (e.g. a vector sensor of size 0) carries nothing
        name = o.name or f"obs_{i}"
        if len(shape) == 1:
            plans.append(ObsPlan(i, shape, ObservationSpec(shape, name, ObservationKind.VECTOR), False))
        elif len(shape) == 2:
            # ML-Agents encodes a rank-2 observation only as entities (its
            # VALID_VAR_LEN_PROP); any other layout is an unsupported sensor there too.
            dims = tuple(int(d) for d in o.dimension_properties)
            if dims != ENTITY_DIMENSION_PROPERTIES:
                raise RecordError(
                    f"observation {i} ({o.name or 'unnamed'}) has shape {list(shape)} with dimension properties "
                    f"{list(dims)}: a 2-D observation must be a BufferSensor's, dimension properties "
                    f"{list(ENTITY_DIMENSION_PROPERTIES)} (VARIABLE_SIZE, NONE)"
                )
            plans.append(ObsPlan(i, shape, ObservationSpec(shape, name, ObservationKind.ENTITIES), False))
        elif len(shape) == 3:
            png = o.compressed_data if o.compression_type == pb.COMPRESSION_TYPE_PNG else b""
            channels_first = is_channels_first(shape, list(o.dimension_properties), png)
            c, h, w = shape if channels_first else (shape[2], shape[0], shape[1])
            spec_i = ObservationSpec((h, w, c), name, ObservationKind.VISUAL)
            plans.append(ObsPlan(i, shape, spec_i, channels_first))
        else:
            raise RecordError(
                f"observation {i} ({o.name or 'unnamed'}) has shape {list(shape)}: only vector (1-D), "
                "entity (2-D, BufferSensor) and visual (3-D) observations are supported"
            )
    return plans


def is_channels_first(shape: Tuple[int, ...], dims: List[int], png: bytes = b"") -> bool:
    """Whether a 3-D proto shape is (C, H, W) (ML-Agents 2.0) rather than (H, W, C).

    The first PNG's size decides when it fits only one layout; otherwise
    ``dimension_properties`` (ML-Agents 1.9+: channels are the dimension without
    translational equivariance); files without either are (H, W, C), as before 2.0.
    """
    size = png_size(png)
    if size is not None:
        hwc, chw = size == (shape[0], shape[1]), size == (shape[1], shape[2])
        if hwc != chw:
            return chw
    if len(dims) == 3:
        if dims[0] == _DIM_NONE and dims[1] == dims[2] == _DIM_TRANSLATIONAL:
            return True
        if dims[2] == _DIM_NONE and dims[0] == dims[1] == _DIM_TRANSLATIONAL:
            return False
    return False


def png_size(data: bytes) -> Optional[Tuple[int, int]]:
    """``(height, width)`` from a PNG's IHDR, or None when ``data`` is not a PNG."""
    if len(data) < 24 or data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(height), int(width)


def decode_image(data: bytes, mapping: Sequence[int], shape: Tuple[int, ...], index: int) -> np.ndarray:
    """PNG bytes (possibly several concatenated) -> ``shape`` = (H, W, C) float32 in [0, 1].

    With a channel mapping, image channel ``i`` (over the concatenated images) feeds
    observation channel ``mapping[i]``; channels mapped to one target are averaged, ``-1``
    is padding. Without one, a 1-channel observation is the mean of the colour channels
    and alpha channels are dropped.
    """
    h, w, c = shape
    try:
        images = [decode_png(part) for part in split_pngs(data)]
    except PngError as e:
        raise RecordError(f"visual observation {index}: {e}") from None
    for img in images:
        if img.shape[:2] != (h, w):
            raise RecordError(f"visual observation {index} is {img.shape[1]}x{img.shape[0]} pixels, expected {w}x{h}")
    mapping = [int(m) for m in mapping]
    if mapping:
        stacked = np.concatenate(images, axis=2).astype(np.float32)
        if len(mapping) != stacked.shape[2]:
            raise RecordError(
                f"visual observation {index}: channel mapping has {len(mapping)} entries for "
                f"{stacked.shape[2]} image channels"
            )
        out = np.empty((h, w, c), np.float32)
        for ch in range(c):
            sources = [i for i, m in enumerate(mapping) if m == ch]
            if not sources:
                raise RecordError(f"visual observation {index}: channel mapping fills no data into channel {ch}")
            out[:, :, ch] = stacked[:, :, sources].mean(axis=2)
        return out / 255.0
    colour = [img if img.shape[2] in (1, 3) else img[:, :, : img.shape[2] - 1] for img in images]  # drop alpha
    stacked = np.concatenate(colour, axis=2).astype(np.float32)
    if c == 1 and stacked.shape[2] == 3:
        stacked = stacked.mean(axis=2, keepdims=True)
    elif c == 3 and stacked.shape[2] == 1:
        stacked = np.repeat(stacked, 3, axis=2)
    if stacked.shape[2] < c:
        raise RecordError(f"visual observation {index} has {stacked.shape[2]} channels, expected {c}")
    return stacked[:, :, :c] / 255.0
