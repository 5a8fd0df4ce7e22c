"""Write `.demo` files in the ML-Agents 2.0 format (pair records + ActionSpecProto).

What Unity's own recorder writes, so that our reader and ML-Agents' loaders accept it:

* metadata at offset 0 inside the 32 reserved bytes, rewritten by `DemoWriter.close` with
  the step and episode counts and the mean reward per episode;
* behavior parameters at offset 33: the behavior name and an ``ActionSpecProto``;
* one ``AgentInfoActionPairProto`` per `DemoWriter.add_step`: vector observations as
  ``float_data``, entity observations too (row-major, ``dimension_properties``
  ``(VARIABLE_SIZE, NONE)``, as Unity's BufferSensor), visual ones as PNG with the ML-Agents 2.0 shape ``(C, H, W)`` and
  ``dimension_properties`` ``(NONE, TRANSLATIONAL, TRANSLATIONAL)``; more than three
  channels are split into several PNGs with a ``compressed_channel_mapping``.

Like Unity, a record stores the action the agent took at its *previous* step (zeros at its
first step); the reader pairs it back with the right observation. Visual observations
are quantised to 8 bits (PNG), so they come back within 1/510 of what was written.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Set, Union

import numpy as np

from envs.base_env import BehaviorSpec, ObservationKind
from envs.demo import demonstration_pb2 as pb
from envs.demo.framing import BRAIN_PARAMETERS_OFFSET, encode_varint32
from envs.demo.png import encode_png
from envs.exceptions import DemoError

#: The metadata API version every Unity release writes.
API_VERSION = 1
#: Unity truncates demonstration names to this many characters; we cap UTF-8 bytes.
MAX_NAME_BYTES = 16

_DIM_NONE = 1
_DIM_TRANSLATIONAL = 2
_DIM_VARIABLE_SIZE = 4

ArrayLike = Union[np.ndarray, Sequence[float], Sequence[int]]


def _truncate_utf8(text: str, max_bytes: int) -> str:
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


class DemoWriter:
    """Streams demonstration records to ``path``; `close` finalises the metadata.

    Use as a context manager or call `close`. A file whose writer never closed still
    loads: its metadata says 0 steps, which means "read records to the end".

    Args:
        path: the `.demo` file to create (overwritten).
        demonstration_name: stored in the metadata (at most 16 UTF-8 bytes, like Unity;
            longer names are cut).
        behavior_name: the behavior (brain) name stored in the behavior parameters.
        behavior_spec: what every step must match.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], demonstration_name: str, behavior_name: str,
                 behavior_spec: BehaviorSpec) -> None:
        self.path = os.fspath(path)
        self.behavior_name = str(behavior_name)
        self.behavior_spec = behavior_spec
        self.demonstration_name = _truncate_utf8(str(demonstration_name), MAX_NAME_BYTES)
        self._action_spec = behavior_spec.action_spec
        self._mask_width = sum(self._action_spec.discrete_branches)
        if not behavior_spec.observation_specs:
            raise DemoError(f"{self.path}: a behavior spec without observations cannot be recorded")
        if self._action_spec.continuous_size == 0 and not self._action_spec.discrete_branches:
            raise DemoError(f"{self.path}: a behavior spec without actions cannot be recorded")
        self._previous: Dict[int, pb.AgentActionProto] = {}
        self._open_agents: Set[int] = set()
        self.steps = 0
        self.done_steps = 0
        self._total_reward = 0.0
        try:
            self._file = open(self.path, "wb")
        except OSError as e:
            raise DemoError(f"{self.path}: cannot create demonstration file ({e.strerror or e})") from None
        self._closed = False
        self._write_meta()
        brain = pb.BrainParametersProto(brain_name=self.behavior_name, is_training=False)
        brain.action_spec.num_continuous_actions = self._action_spec.continuous_size
        brain.action_spec.num_discrete_actions = self._action_spec.discrete_size
        brain.action_spec.discrete_branch_sizes.extend(self._action_spec.discrete_branches)
        self._write_delimited(brain.SerializeToString())

    # ------------------------------------------------------------------ public
    @property
    def episodes(self) -> int:
        """Finished episodes plus agents with an episode still running (Unity's count)."""
        return self.done_steps + len(self._open_agents)

    @property
    def mean_reward(self) -> float:
        """Sum of all step rewards / `episodes` (what Unity stores), 0.0 without episodes."""
        return self._total_reward / self.episodes if self.episodes else 0.0

    def add_step(
        self,
        obs: Sequence[np.ndarray],
        continuous_action: Optional[ArrayLike] = None,
        discrete_action: Optional[ArrayLike] = None,
        reward: float = 0.0,
        done: bool = False,
        interrupted: bool = False,
        agent_id: int = 0,
        action_mask: Optional[Union[ArrayLike, Sequence[ArrayLike]]] = None,
    ) -> None:
        """Record one step of one agent.

        Args:
            obs: one array per observation spec for this agent, in spec order (vector
                ``[size]``, visual ``[H, W, C]`` in [0, 1]).
            continuous_action: ``[continuous_size]``, the action the agent takes on
                ``obs`` (None when the spec has no continuous part).
            discrete_action: ``[num_branches]`` branch indices (None when not discrete).
            reward: the reward received on reaching ``obs`` (since the agent's last step).
            done: ``obs`` ends the episode (a terminal step); its action is not used.
                Like the env API, a new episode must use a new ``agent_id`` or follow
                this done step.
            interrupted: the episode ended by a time limit (only meaningful with done).
            agent_id: which agent; steps of several agents may be interleaved.
            action_mask: None, ``[sum(branches)]`` bool, or one ``[branch_size]`` bool
                array per branch; True = action unavailable.
        """
        if self._closed:
            raise DemoError(f"{self.path}: add_step after close")
        agent_id = int(agent_id)
        info = pb.AgentInfoProto(
            reward=float(reward),
            done=bool(done),
            max_step_reached=bool(done) and bool(interrupted),
            id=agent_id,
        )
        info.observations.extend(self._observations(obs))
        mask = self._mask(action_mask)
        if mask is not None:
            info.action_mask.extend(mask)
        current = self._action(continuous_action, discrete_action)
        previous = self._previous.get(agent_id)
        if previous is None:
            previous = self._action(None, None, zeros=True)
        record = pb.AgentInfoActionPairProto(agent_info=info, action_info=previous)
        self._write_delimited(record.SerializeToString())
        self.steps += 1
        self._total_reward += float(reward)
        if done:
            self.done_steps += 1
            self._previous.pop(agent_id, None)
            self._open_agents.discard(agent_id)
        else:
            self._previous[agent_id] = current
            self._open_agents.add(agent_id)

    def close(self) -> None:
        """Rewrite the metadata with the final counts and close the file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._file.seek(0)
            self._write_meta(final=True)
        finally:
            self._file.close()

    def __enter__(self) -> "DemoWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _write_delimited(self, body: bytes) -> None:
        self._file.write(encode_varint32(len(body)))
        self._file.write(body)

    def _write_meta(self, final: bool = False) -> None:
        """Metadata + zero padding up to byte 33 (where the behavior parameters start)."""
        name = self.demonstration_name
        while True:
            meta = pb.DemonstrationMetaProto(api_version=API_VERSION, demonstration_name=name)
            if final:
                meta.number_steps = self.steps
                meta.number_episodes = self.episodes
                meta.mean_reward = self.mean_reward
            body = meta.SerializeToString()
            framed = encode_varint32(len(body)) + body
            if len(framed) <= BRAIN_PARAMETERS_OFFSET:
                break
            name = _truncate_utf8(name, len(name.encode("utf-8")) - 1)  # huge counts: give up name bytes
        self._file.write(framed + b"\x00" * (BRAIN_PARAMETERS_OFFSET - len(framed)))

    def _action(self, continuous: Optional[ArrayLike], discrete: Optional[ArrayLike],
                zeros: bool = False) -> pb.AgentActionProto:
        a = self._action_spec
        out = pb.AgentActionProto()
        if a.continuous_size:
            if continuous is None and not zeros:
                raise DemoError(f"{self.path}: the behavior has {a.continuous_size} continuous actions; none given")
            values = np.zeros(a.continuous_size) if zeros else np.asarray(continuous, np.float64).reshape(-1)
            if values.size != a.continuous_size:
                raise DemoError(
                    f"{self.path}: continuous action has {values.size} values, expected {a.continuous_size}"
                )
            out.continuous_actions.extend(values.tolist())
        if a.discrete_branches:
            if discrete is None and not zeros:
                raise DemoError(
                    f"{self.path}: the behavior has discrete branches {list(a.discrete_branches)}; no action given"
                )
            values = np.zeros(a.discrete_size, np.int64) if zeros else np.asarray(discrete).reshape(-1)
            if values.size != a.discrete_size:
                raise DemoError(f"{self.path}: discrete action has {values.size} values, expected {a.discrete_size}")
            ints = [int(v) for v in values.tolist()]
            for i, (v, b) in enumerate(zip(ints, a.discrete_branches)):
                if not 0 <= v < b:
                    raise DemoError(f"{self.path}: discrete action {v} out of range for branch {i} of size {b}")
            out.discrete_actions.extend(ints)
        return out

    def _mask(self, mask: Optional[Union[ArrayLike, Sequence[ArrayLike]]]) -> Optional[List[bool]]:
        if mask is None or not self._mask_width:
            return None
        if isinstance(mask, (list, tuple)) and mask and not np.isscalar(mask[0]):
            flat = np.concatenate([np.asarray(m, bool).reshape(-1) for m in mask])
        else:
            flat = np.asarray(mask, bool).reshape(-1)
        if flat.size != self._mask_width:
            raise DemoError(f"{self.path}: action mask has {flat.size} entries, expected {self._mask_width}")
        return [bool(v) for v in flat]

    def _observations(self, obs: Sequence[np.ndarray]) -> List[pb.ObservationProto]:
        specs = self.behavior_spec.observation_specs
        if len(obs) != len(specs):
            raise DemoError(f"{self.path}: {len(obs)} observations given, the behavior has {len(specs)}")
        out = []
        for i, (value, spec) in enumerate(zip(obs, specs)):
            arr = np.asarray(value, dtype=np.float32)
            if arr.shape != tuple(spec.shape):
                raise DemoError(f"{self.path}: observation {i} has shape {arr.shape}, expected {tuple(spec.shape)}")
            proto = pb.ObservationProto(name=spec.name)
            if spec.kind in (ObservationKind.VECTOR, ObservationKind.ENTITIES):
                proto.shape.extend(spec.shape)
                if spec.kind == ObservationKind.VECTOR:
                    proto.dimension_properties.append(_DIM_NONE)
                else:  # a BufferSensor's: rows of entities, zero rows absent
                    proto.dimension_properties.extend((_DIM_VARIABLE_SIZE, _DIM_NONE))
                proto.compression_type = pb.COMPRESSION_TYPE_NONE
                proto.float_data.data.extend(arr.ravel().tolist())
            else:
                h, w, c = spec.shape
                proto.shape.extend((c, h, w))
                proto.dimension_properties.extend((_DIM_NONE, _DIM_TRANSLATIONAL, _DIM_TRANSLATIONAL))
                proto.compression_type = pb.COMPRESSION_TYPE_PNG
                pixels = np.rint(np.clip(arr, 0.0, 1.0) * 255.0).astype(np.uint8)
                if c in (1, 3):  # one image; gray is written as RGB, as Unity's cameras do
                    image = pixels if c == 3 else np.repeat(pixels, 3, axis=2)
                    proto.compressed_data = encode_png(image)
                else:  # groups of three channels, the last padded; -1 marks padding
                    pad = (-c) % 3
                    padded = np.concatenate([pixels, np.zeros((h, w, pad), np.uint8)], axis=2)
                    proto.compressed_data = b"".join(
                        encode_png(padded[:, :, k:k + 3]) for k in range(0, c + pad, 3)
                    )
                    proto.compressed_channel_mapping.extend(list(range(c)) + [-1] * pad)
            out.append(proto)
        return out
