"""Read Unity ML-Agents `.demo` files (every era) into typed numpy arrays.

File layout: see `envs.demo.framing`. Three record eras:

* ``"legacy"`` (ML-Agents up to 0.11): each record is an ``AgentInfoProto``; the behavior
  parameters give the vector size, the stacking, the cameras and the action space.
* ``"pair"`` (0.12 onward): each record is an ``AgentInfoActionPairProto``; observation
  shapes come from the first record.
* ``"pair+action_spec"`` (ML-Agents 2.0): as ``"pair"``, and the behavior parameters carry
  an ``ActionSpecProto`` (continuous and/or discrete, i.e. hybrid actions); actions are in
  ``continuous_actions`` / ``discrete_actions``, with ``vector_actions`` as the fallback
  when both are empty.

**Which action goes with which observation.** In every era Unity writes a record *before*
the agent decides: the action stored in a record is the action the agent took at its
*previous* decision (Unity's ``storedActions``; a new agent or episode stores zeros). So
the action taken on the observation of record ``t`` is the action stored in the next record
of the same agent, ``t + 1``. (This is the documented rule for the legacy era; the real
files show the same for the later eras: in the 2020 3DBall recording the platform rotation
between records ``t`` and ``t + 1`` follows the action stored in ``t + 1`` exactly. The
ML-Agents Python loader of 0.12+ pairs an observation with the action of its own record,
i.e. one decision late; we do not.)

A `Demonstration` therefore has one row per pair of consecutive records of one agent
(agent id), in file order, agents in order of first appearance::

    row = (observation of record t, action stored in record t+1,
           reward, done, max_step_reached of record t+1, action mask of record t)

i.e. a transition ``(s_t, a_t, r_{t+1}, done_{t+1})``. The **last record of each agent**
contributes only its stored action, reward and done flag to the row before it; its own
observation is dropped, because the action taken on it was never recorded. A file of ``N``
records and ``A`` agent ids gives ``N - A`` rows (later Unity releases give each episode a
new agent id, so there ``A`` is the number of episodes; older files keep one id, and their
``done`` record already shows the next episode's first observation).

**Episodes.** A row whose next record is ``done`` ends an episode; every agent's rows start
a new episode. The episode count is the number of done rows plus the agents whose last
row is not done (an episode still running when the recording stopped): this is what Unity
writes as ``number_episodes``.

**Groups.** A record's ``group_id`` and ``group_reward`` (AgentInfoProto fields 14 and 15,
multi-agent games) are ignored: ``rewards`` is each agent's own reward, as in ML-Agents'
demonstration loader, whose buffer keeps no group reward either.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from google.protobuf.message import DecodeError

from envs.base_env import ActionTuple, BehaviorId, BehaviorSpec, ObservationKind, ObservationSpec
from envs.demo import demonstration_pb2 as pb
from envs.demo.framing import (
    BRAIN_PARAMETERS_OFFSET,
    META_RESERVED_BYTES,
    FramingError,
    read_delimited,
    top_level_field_numbers,
)
from envs.demo.messages import (
    BrainError,
    ObsPlan,
    RecordError,
    action_spec_from_brain,
    decode_image,
    format_action_spec,
    format_behavior_spec,
    plan_observations,
)
from envs.exceptions import DemoError

PathLike = Union[str, "os.PathLike[str]"]

RECORD_FORMATS = ("legacy", "pair", "pair+action_spec")
DEMO_SUFFIX = ".demo"



@dataclass(frozen=True)
class DemoInfo:
    """What a `.demo` file says about itself.

    Attributes:
        name: the demonstration name of the metadata.
        api_version: the metadata's API version (1 for every Unity release so far).
        number_steps: records read (the metadata's ``number_steps``; all records up to
            the end of the file when that is 0).
        number_episodes: the metadata's episode count (computed from the records when the
            metadata was never finalised).
        mean_reward: the metadata's mean reward per episode (Unity: sum of all record
            rewards / number_episodes).
        record_format: ``"legacy"``, ``"pair"`` or ``"pair+action_spec"`` (``"mixed"`` for
            a directory of files of several eras).
        behavior_name: the brain / behavior name of the behavior parameters, exactly as
            recorded: Unity's DemonstrationRecorder writes ``FullyQualifiedBehaviorName``,
            ``Name?team=N`` since ML-Agents 0.14 (see `behavior_id`).
        path: the file (or directory) read.
    """

    name: str
    api_version: int
    number_steps: int
    number_episodes: int
    mean_reward: float
    record_format: str
    behavior_name: str = ""
    path: str = ""

    @property
    def behavior_id(self) -> BehaviorId:
        """`behavior_name` split as ML-Agents splits it: ``.name`` is the config section a
        recording of ``3DBall?team=0`` belongs to (``3DBall``), ``.team`` its team."""
        return BehaviorId.parse(self.behavior_name)


@dataclass
class Demonstration:
    """Expert transitions, one row per decision (see the module docstring for the rules).

    Attributes:
        info: the file's metadata.
        behavior_spec: observation specs (visual ones ``[H, W, C]``) and action spec.
        obs: one ``[T, *shape]`` float32 array per observation spec; visual in [0, 1].
        continuous_actions: ``[T, continuous_size]`` float32.
        discrete_actions: ``[T, num_branches]`` int32.
        rewards: ``[T]`` float32, the reward that followed the action.
        done: ``[T]`` bool, the episode ended after this row's action.
        interrupted: ``[T]`` bool, it ended by reaching the max step (only where done).
        action_masks: ``[T, sum(branches)]`` bool, True = action unavailable; None when the
            file has no masks.
        agent_ids: ``[T]`` int32, the agent id of the row's observation.
        episode_ids: ``[T]`` int32, 0-based episode index, contiguous per episode.
    """

    info: DemoInfo
    behavior_spec: BehaviorSpec
    obs: List[np.ndarray]
    continuous_actions: np.ndarray
    discrete_actions: np.ndarray
    rewards: np.ndarray
    done: np.ndarray
    interrupted: np.ndarray
    action_masks: Optional[np.ndarray]
    agent_ids: np.ndarray
    episode_ids: np.ndarray

    def __len__(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def actions(self) -> ActionTuple:
        """Both action parts as an `ActionTuple` (``[T, c]`` and ``[T, b]``)."""
        return ActionTuple(continuous=self.continuous_actions, discrete=self.discrete_actions)

    @property
    def episode_count(self) -> int:
        """Episodes in the rows: finished ones plus those still running at the end."""
        return int(np.unique(self.episode_ids).size)

    @property
    def episode_returns(self) -> np.ndarray:
        """``[episode_count]`` float64, the sum of rewards of each episode."""
        if len(self) == 0:
            return np.zeros(0, np.float64)
        _, index = np.unique(self.episode_ids, return_inverse=True)
        return np.bincount(index, weights=self.rewards.astype(np.float64))

    @property
    def mean_return(self) -> float:
        """Mean of `episode_returns` (0.0 without rows)."""
        returns = self.episode_returns
        return float(returns.mean()) if returns.size else 0.0


# --------------------------------------------------------------------------- errors
def _fail(path: PathLike, offset: int, message: str) -> DemoError:
    text = " ".join(str(message).split())  # one line, whatever protobuf or PIL said
    return DemoError(f"{os.fspath(path)}: byte {offset}: {text}")


# --------------------------------------------------------------------------- specs
def _spec_key(spec: BehaviorSpec) -> Tuple[object, ...]:
    obs = tuple((tuple(o.shape), o.kind) for o in spec.observation_specs)
    return obs, spec.action_spec.continuous_size, tuple(spec.action_spec.discrete_branches)


def check_demo_spec(demo: Demonstration, behavior_name: str, spec: BehaviorSpec) -> None:
    """Raise `DemoError` unless ``demo`` was recorded with ``spec`` (names are ignored).

    Observation shapes and kinds must match in order; the action spec must be equal.
    """
    if _spec_key(demo.behavior_spec) == _spec_key(spec):
        return
    where = []
    ours, theirs = demo.behavior_spec, spec
    if len(ours.observation_specs) != len(theirs.observation_specs):
        where.append(f"{len(ours.observation_specs)} vs {len(theirs.observation_specs)} observations")
    else:
        for i, (a, b) in enumerate(zip(ours.observation_specs, theirs.observation_specs)):
            if (a.shape, a.kind) != (b.shape, b.kind):
                where.append(f"observation {i} differs")
    if ours.action_spec != theirs.action_spec:
        where.append("actions differ")
    demo_name = demo.info.behavior_name or demo.info.name
    raise DemoError(
        f"demonstration {demo.info.path or demo_name!r} ({demo_name}) does not match behavior "
        f"{behavior_name!r} ({'; '.join(where)}): demo has {format_behavior_spec(ours)}; "
        f"{behavior_name} has {format_behavior_spec(theirs)}"
    )


# --------------------------------------------------------------------------- loading
def load_demonstration(path: PathLike) -> Demonstration:
    """Read a `.demo` file, or every ``*.demo`` file of a directory merged (sorted by name).

    Files of a directory must share one behavior spec; their rows are concatenated,
    episode ids renumbered so that they stay distinct.

    Raises:
        DemoError: missing, empty, truncated or corrupt file (the message names the file
            and the byte offset), an empty directory, or files with different specs.
    """
    p = Path(os.fspath(path))
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix == DEMO_SUFFIX and f.is_file())
        if not files:
            raise DemoError(f"{p}: directory holds no {DEMO_SUFFIX} files")
        demos = [_load_file(f) for f in files]
        return _merge(p, files, demos)
    return _load_file(p)


def _merge(directory: Path, files: Sequence[Path], demos: Sequence[Demonstration]) -> Demonstration:
    first = demos[0]
    for f, d in zip(files[1:], demos[1:]):
        if _spec_key(d.behavior_spec) != _spec_key(first.behavior_spec):
            raise DemoError(
                f"{directory}: {f.name} and {files[0].name} have different behavior specs: "
                f"{format_behavior_spec(d.behavior_spec)} vs {format_behavior_spec(first.behavior_spec)}"
            )
    if len(demos) == 1:
        return first
    episode_ids = []
    offset = 0
    for d in demos:
        episode_ids.append(d.episode_ids + offset)
        if len(d):
            offset += int(d.episode_ids.max()) + 1
    formats = {d.info.record_format for d in demos}
    episodes = sum(d.info.number_episodes for d in demos)
    total_reward = sum(d.info.mean_reward * d.info.number_episodes for d in demos)
    masks = None
    if any(d.action_masks is not None for d in demos):
        width = sum(first.behavior_spec.action_spec.discrete_branches)
        masks = np.concatenate(
            [d.action_masks if d.action_masks is not None else np.zeros((len(d), width), bool) for d in demos]
        )
    info = DemoInfo(
        name=",".join(d.info.name for d in demos),
        api_version=max(d.info.api_version for d in demos),
        number_steps=sum(d.info.number_steps for d in demos),
        number_episodes=episodes,
        mean_reward=float(total_reward / episodes) if episodes else 0.0,
        record_format=formats.pop() if len(formats) == 1 else "mixed",
        behavior_name=first.info.behavior_name,
        path=str(directory),
    )
    return Demonstration(
        info=info,
        behavior_spec=first.behavior_spec,
        obs=[np.concatenate([d.obs[i] for d in demos]) for i in range(len(first.obs))],
        continuous_actions=np.concatenate([d.continuous_actions for d in demos]),
        discrete_actions=np.concatenate([d.discrete_actions for d in demos]),
        rewards=np.concatenate([d.rewards for d in demos]),
        done=np.concatenate([d.done for d in demos]),
        interrupted=np.concatenate([d.interrupted for d in demos]),
        action_masks=masks,
        agent_ids=np.concatenate([d.agent_ids for d in demos]),
        episode_ids=np.concatenate(episode_ids).astype(np.int32),
    )


def _read_bytes(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise DemoError(f"{path}: demonstration file not found") from None
    except IsADirectoryError:
        raise DemoError(f"{path}: is a directory") from None
    except OSError as e:
        raise DemoError(f"{path}: cannot read demonstration file ({e.strerror or e})") from None


def _load_file(path: Path) -> Demonstration:
    data = _read_bytes(path)
    if not data:
        raise _fail(path, 0, "empty file, not a demonstration")

    # -- metadata at offset 0, inside the reserved bytes
    try:
        meta_bytes, meta_end = read_delimited(data, 0, "the metadata")
    except FramingError as e:
        raise _fail(path, e.offset, f"{'truncated' if e.truncated else 'corrupt'} file: {e.message}") from None
    if meta_end > BRAIN_PARAMETERS_OFFSET:
        raise _fail(
            path, 0, f"corrupt metadata: {len(meta_bytes)} bytes, more than the {META_RESERVED_BYTES} reserved"
        )
    try:
        meta = pb.DemonstrationMetaProto.FromString(meta_bytes)
    except DecodeError as e:
        raise _fail(path, 0, f"corrupt metadata ({e})") from None
    if meta.number_steps < 0 or meta.number_episodes < 0:
        raise _fail(path, 0, f"corrupt metadata: {meta.number_steps} steps, {meta.number_episodes} episodes")

    # -- behavior parameters at offset 33
    if len(data) <= BRAIN_PARAMETERS_OFFSET:
        raise _fail(path, len(data), "truncated file: it ends before the behavior parameters at byte "
                    f"{BRAIN_PARAMETERS_OFFSET}")
    try:
        brain_bytes, pos = read_delimited(data, BRAIN_PARAMETERS_OFFSET, "the behavior parameters")
        brain = pb.BrainParametersProto.FromString(brain_bytes)
    except FramingError as e:
        raise _fail(path, e.offset, f"{'truncated' if e.truncated else 'corrupt'} file: {e.message}") from None
    except DecodeError as e:
        raise _fail(path, BRAIN_PARAMETERS_OFFSET, f"corrupt behavior parameters ({e})") from None

    # -- the records: number_steps of them, or up to the end when that is 0
    expected = meta.number_steps
    records: List[Tuple[int, bytes]] = []
    while (expected and len(records) < expected) or (not expected and pos < len(data)):
        what = f"record {len(records)}" + (f" of {expected}" if expected else "")
        if pos >= len(data):
            raise _fail(path, pos, f"truncated file: it ends after {len(records)} of {expected} records")
        try:
            body, end = read_delimited(data, pos, what)
        except FramingError as e:
            raise _fail(path, e.offset, f"{'truncated' if e.truncated else 'corrupt'} file: {e.message}") from None
        records.append((pos, body))
        pos = end
    if not records:
        raise _fail(path, pos, "the file holds no records")

    record_format = _detect_format(brain, records[0][1])
    try:
        decoder = _Decoder.build(record_format, brain, records[0][1])
    except RecordError as e:
        raise _fail(path, records[0][0], f"record 0: {e}") from None
    except BrainError as e:
        raise _fail(path, BRAIN_PARAMETERS_OFFSET, f"behavior parameters: {e}") from None

    steps = []
    for k, (offset, body) in enumerate(records):
        try:
            steps.append(decoder.decode(body))
        except DecodeError as e:
            raise _fail(path, offset, f"corrupt record {k} ({record_format} format): {e}") from None
        except RecordError as e:
            raise _fail(path, offset, f"record {k}: {e}") from None

    demo = _build_rows(decoder, steps)
    if expected:
        episodes, mean_reward = int(meta.number_episodes), float(meta.mean_reward)
    else:  # never finalised (number_steps 0): count the Unity way from the records
        episodes = demo.episode_count
        mean_reward = float(sum(s.reward for s in steps) / episodes) if episodes else 0.0
    demo.info = DemoInfo(
        name=meta.demonstration_name,
        api_version=int(meta.api_version),
        number_steps=len(records),
        number_episodes=episodes,
        mean_reward=mean_reward,
        record_format=record_format,
        behavior_name=brain.brain_name,
        path=str(path),
    )
    return demo


def _detect_format(brain: "pb.BrainParametersProto", first: bytes) -> str:
    """The record era: the behavior parameters' action_spec, else the first record's shape.

    A pair record has only fields 1 and 2 at its top level and its agent info carries
    observations (field 13); a legacy record has reward, id, actions... at the top.
    """
    if brain.HasField("action_spec"):
        return "pair+action_spec"
    try:
        fields = set(top_level_field_numbers(first))
    except ValueError:
        return "legacy"
    if fields and fields <= {1, 2}:
        try:
            pair = pb.AgentInfoActionPairProto.FromString(first)
        except DecodeError:
            return "legacy"
        if len(pair.agent_info.observations) > 0:
            return "pair"
    return "legacy"


@dataclass
class _Step:
    obs: List[np.ndarray]
    continuous: np.ndarray
    discrete: np.ndarray
    reward: float
    done: bool
    max_step: bool
    agent_id: int
    mask: Optional[np.ndarray]


class _Decoder:
    """Turns one record into a `_Step`, for one file's era and spec."""

    def __init__(self, record_format: str, spec: BehaviorSpec, plans: List[ObsPlan], n_record_obs: int,
                 legacy_vector: int, legacy_cameras: int) -> None:
        self.record_format = record_format
        self.spec = spec
        self.plans = plans
        self.n_record_obs = n_record_obs
        self.legacy_vector = legacy_vector
        self.legacy_cameras = legacy_cameras
        self.mask_width = sum(spec.action_spec.discrete_branches)

    # -- construction: the spec
    @staticmethod
    def build(record_format: str, brain: "pb.BrainParametersProto", first: bytes) -> "_Decoder":
        action_spec = action_spec_from_brain(brain)
        if record_format == "legacy":
            specs: List[ObservationSpec] = []
            plans: List[ObsPlan] = []
            for i, cam in enumerate(brain.camera_resolutions):
                if cam.width <= 0 or cam.height <= 0:
                    raise BrainError(f"camera {i} has resolution {cam.width}x{cam.height}")
                shape = (int(cam.height), int(cam.width), 1 if cam.gray_scale else 3)
                s = ObservationSpec(shape, f"visual_observation_{i}", ObservationKind.VISUAL)
                plans.append(ObsPlan(i, shape, s, False))
                specs.append(s)
            stack = max(1, int(brain.num_stacked_vector_observations))
            vector = int(brain.vector_observation_size) * stack
            if vector < 0:
                raise BrainError(f"vector observation size {brain.vector_observation_size}")
            if vector:
                s = ObservationSpec((vector,), "vector_observation", ObservationKind.VECTOR)
                plans.append(ObsPlan(-1, (vector,), s, False))
                specs.append(s)
            # ML-Agents 0.11 wrote a legacy record's images as compressed observations
            # (field 13) and took their shapes from the first record, whatever the behavior
            # parameters declared (often no camera at all): so do we.
            try:
                compressed = pb.AgentInfoProto.FromString(first).observations
            except DecodeError as e:
                raise RecordError(f"corrupt first record ({e})") from None
            from_record = [replace(p, in_observations=True) for p in plan_observations(compressed)]
            if from_record:
                plans = from_record + [p for p in plans if p.index < 0]
                specs = [p.spec for p in plans]
            if not specs:
                raise BrainError("no observations declared (no vector size, no camera) and none in the first record")
            spec = BehaviorSpec(tuple(specs), action_spec)
            cameras = 0 if from_record else len(brain.camera_resolutions)
            return _Decoder(record_format, spec, plans, len(compressed) if from_record else 0, vector, cameras)

        try:
            pair = pb.AgentInfoActionPairProto.FromString(first)
        except DecodeError as e:
            raise RecordError(f"corrupt first record ({e})") from None
        observations = pair.agent_info.observations
        # Shapes come from the first record. A file whose records carry no observation data
        # at all (ExpertGrid of 0.12: only an empty sensor, its camera never recorded) has no
        # observations; ML-Agents read it as a zero-width vector observation.
        plans = plan_observations(observations)
        spec = BehaviorSpec(tuple(p.spec for p in plans), action_spec)
        return _Decoder(record_format, spec, plans, len(observations), 0, 0)

    # -- one record
    def decode(self, body: bytes) -> _Step:
        if self.record_format == "legacy":
            info = pb.AgentInfoProto.FromString(body)
            obs = self._legacy_obs(info)
            action_values = np.asarray(info.stored_vector_actions, dtype=np.float64)
            continuous, discrete = self._split_vector_actions(action_values)
        else:
            pair = pb.AgentInfoActionPairProto.FromString(body)
            info = pair.agent_info
            obs = self._pair_obs(info)
            continuous, discrete = self._pair_actions(pair.action_info)
        mask = None
        if len(info.action_mask):
            if len(info.action_mask) != self.mask_width:
                raise RecordError(f"action mask has {len(info.action_mask)} entries, expected {self.mask_width}")
            mask = np.asarray(info.action_mask, dtype=bool)
        return _Step(obs, continuous, discrete, float(info.reward), bool(info.done), bool(info.max_step_reached),
                     int(info.id), mask)

    def _legacy_obs(self, info: "pb.AgentInfoProto") -> List[np.ndarray]:
        n_vec = len(info.stacked_vector_observation)
        if n_vec != self.legacy_vector:
            raise RecordError(
                f"{n_vec} vector observation values, the behavior parameters declare {self.legacy_vector}"
            )
        if len(info.visual_observations) != self.legacy_cameras:
            raise RecordError(
                f"{len(info.visual_observations)} visual observations, the behavior parameters declare "
                f"{self.legacy_cameras} cameras"
            )
        if any(p.in_observations for p in self.plans):
            self._check_observation_count(info)
        out = []
        for plan in self.plans:
            if plan.in_observations:
                out.append(self._observation(info.observations[plan.index], plan))
            elif plan.index < 0:
                out.append(np.asarray(info.stacked_vector_observation, dtype=np.float32))
            else:
                out.append(decode_image(info.visual_observations[plan.index], (), plan.spec.shape, plan.index))
        return out

    def _check_observation_count(self, info: "pb.AgentInfoProto") -> None:
        if len(info.observations) != self.n_record_obs:
            raise RecordError(f"{len(info.observations)} observations, the first record has {self.n_record_obs}")

    def _pair_obs(self, info: "pb.AgentInfoProto") -> List[np.ndarray]:
        self._check_observation_count(info)
        return [self._observation(info.observations[plan.index], plan) for plan in self.plans]

    @staticmethod
    def _observation(o: "pb.ObservationProto", plan: ObsPlan) -> np.ndarray:
        """One ``ObservationProto`` -> its spec-shaped float32 array."""
        shape = tuple(o.shape)
        if shape != plan.proto_shape:
            raise RecordError(
                f"observation {plan.index} has shape {list(shape)}, the first record {list(plan.proto_shape)}"
            )
        if o.compression_type == pb.COMPRESSION_TYPE_PNG:
            if plan.spec.kind != ObservationKind.VISUAL:
                raise RecordError(f"observation {plan.index} is a PNG but has shape {list(shape)}")
            return decode_image(o.compressed_data, o.compressed_channel_mapping, plan.spec.shape, plan.index)
        if o.compression_type == pb.COMPRESSION_TYPE_NONE:
            values = np.asarray(o.float_data.data, dtype=np.float32)
            if values.size != int(np.prod(shape)):
                raise RecordError(f"observation {plan.index} has {values.size} values for shape {list(shape)}")
            values = values.reshape(shape)
            if plan.spec.kind == ObservationKind.VISUAL and plan.channels_first:
                values = values.transpose(1, 2, 0)
            return np.ascontiguousarray(values)
        raise RecordError(f"observation {plan.index} has unknown compression type {int(o.compression_type)}")

    def _pair_actions(self, action: "pb.AgentActionProto") -> Tuple[np.ndarray, np.ndarray]:
        a = self.spec.action_spec
        if len(action.continuous_actions) or len(action.discrete_actions):
            cont = np.asarray(action.continuous_actions, dtype=np.float32)
            disc = np.asarray(action.discrete_actions, dtype=np.int64)
            if cont.size == 0 and a.continuous_size:
                cont = np.zeros(a.continuous_size, np.float32)
            if disc.size == 0 and a.discrete_size:
                disc = np.zeros(a.discrete_size, np.int64)
            if cont.size != a.continuous_size or disc.size != a.discrete_size:
                raise RecordError(
                    f"action has {cont.size} continuous and {disc.size} discrete values, expected "
                    f"{format_action_spec(a)}"
                )
            return cont, self._check_discrete(disc)
        return self._split_vector_actions(np.asarray(action.vector_actions, dtype=np.float64))

    def _split_vector_actions(self, values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``vector_actions``: continuous values then discrete branch indices (as floats)."""
        a = self.spec.action_spec
        total = a.continuous_size + a.discrete_size
        if values.size == 0:  # no previous action (first step of an agent)
            values = np.zeros(total)
        if values.size != total:
            raise RecordError(f"action has {values.size} values, expected {total} ({format_action_spec(a)})")
        cont = values[: a.continuous_size].astype(np.float32)
        disc = np.rint(values[a.continuous_size:]).astype(np.int64)
        return cont, self._check_discrete(disc)

    def _check_discrete(self, disc: np.ndarray) -> np.ndarray:
        branches = self.spec.action_spec.discrete_branches
        for i, (v, b) in enumerate(zip(disc.tolist(), branches)):
            if not 0 <= v < b:
                raise RecordError(f"discrete action {v} out of range for branch {i} of size {b}")
        return disc.astype(np.int32)


def _build_rows(decoder: _Decoder, steps: List[_Step]) -> Demonstration:
    """Pair each record with the next record of the same agent (see the module docstring)."""
    spec = decoder.spec
    by_agent: Dict[int, List[int]] = {}
    for i, s in enumerate(steps):
        by_agent.setdefault(s.agent_id, []).append(i)
    obs_index: List[int] = []
    next_index: List[int] = []
    episode_ids: List[int] = []
    episode = -1
    for indices in by_agent.values():
        if len(indices) < 2:
            continue
        episode += 1
        pairs = list(zip(indices[:-1], indices[1:]))
        for k, (a, b) in enumerate(pairs):
            obs_index.append(a)
            next_index.append(b)
            episode_ids.append(episode)
            if steps[b].done and k + 1 < len(pairs):
                episode += 1
    t = len(obs_index)
    obs = []
    for j, o in enumerate(spec.observation_specs):
        if t:
            obs.append(np.stack([steps[i].obs[j] for i in obs_index]).astype(np.float32, copy=False))
        else:
            obs.append(np.zeros((0,) + tuple(o.shape), np.float32))
    action_spec = spec.action_spec
    cont = np.asarray([steps[i].continuous for i in next_index], np.float32).reshape(t, action_spec.continuous_size)
    disc = np.asarray([steps[i].discrete for i in next_index], np.int32).reshape(t, action_spec.discrete_size)
    done = np.asarray([steps[i].done for i in next_index], bool).reshape(t)
    interrupted = done & np.asarray([steps[i].max_step for i in next_index], bool).reshape(t)
    masks = None
    if any(steps[i].mask is not None for i in obs_index):
        masks = np.zeros((t, decoder.mask_width), bool)
        for r, i in enumerate(obs_index):
            if steps[i].mask is not None:
                masks[r] = steps[i].mask
    return Demonstration(
        info=DemoInfo("", 0, 0, 0, 0.0, decoder.record_format),
        behavior_spec=spec,
        obs=obs,
        continuous_actions=cont,
        discrete_actions=disc,
        rewards=np.asarray([steps[i].reward for i in next_index], np.float32).reshape(t),
        done=done,
        interrupted=interrupted,
        action_masks=masks,
        agent_ids=np.asarray([steps[i].agent_id for i in obs_index], np.int32).reshape(t),
        episode_ids=np.asarray(episode_ids, np.int32).reshape(t),
    )
