"""A Unity game (a build, or the Editor's Play button) as a `BaseEnv`.

The trainer hosts a gRPC server on ``base_port + worker_id`` (the game is the client; see
`envs.unity.rpc`), launches the build with ML-Agents' command-line flags (``--mlagents-port``,
``-nographics -batchmode``, ``-logFile``) or, with no build path, waits for the Editor.

Handshake (ML-Agents' order): the game's first call carries its
UnityRLInitializationOutputProto (communication version, package version, capabilities);
the trainer replies with its own versions, capabilities and seed; the game's second call is
empty; the trainer answers it with RESET plus the queued side channel messages (engine
configuration, environment parameters). From then on every `step()` answers the game's
pending call with the actions and waits for its next output.

Version rule (ML-Agents'): a major version of 0 must match major and minor; otherwise the
majors must match, and a different minor only warns. We speak API 1.5.0; a game of API 1.0
to 1.4 works (vector_actions instead of continuous/discrete actions when the game lacks the
hybridActions capability).

Behavior names are reported as the game sends them: ``Name?team=N`` from every Unity
package since ML-Agents 0.14 (``BehaviorParameters.FullyQualifiedBehaviorName``), as
ML-Agents' own low-level API reports them; the trainer maps them onto config sections,
results folders and model names with `envs.base_env.BehaviorId` (the team id is kept for
self-play).

Mapping to our API: for each behavior, agents whose info says ``done`` are `TerminalSteps`
(``interrupted`` = ``max_step_reached``), the others `DecisionSteps`, in the order Unity
sent them (Unity applies the actions in that order). Unity keeps an agent's id across
episodes; our API gives a new episode a new id, so ids are remapped (an id that ended an
episode gets a fresh one when it next asks for a decision). Visual observations (PNG or
float, ``(H, W, C)`` or ML-Agents 2.0's ``(C, H, W)``) become ``(H, W, C)`` in [0, 1] (the
`.demo` reader's decoding; a grayscale camera arrives as an RGB PNG, Unity's CameraSensor
encoding, and its colours are averaged as ML-Agents' ``process_pixels`` does). Not
supported (a clear `EnvError`): rank-2 observations that are not a BufferSensor's
(dimension properties other than ``(VARIABLE_SIZE, NONE)``); a BufferSensor's arrive as
entity observations (`ObservationKind.ENTITIES`). Multi-agent groups
(AgentInfoProto's ``group_id`` and ``group_reward``, API 1.5.0's ``multiAgentGroups``) arrive
in the steps' ``group_id`` / ``group_reward``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import (
    ActionTuple,
    BaseEnv,
    BehaviorSpec,
    DecisionSteps,
    TerminalSteps,
)
from envs.demo import demonstration_pb2 as demo_pb
# The .demo reader decodes the same messages, with the same helpers.
from envs.demo.messages import (
    BrainError,
    ObsPlan,
    RecordError,
    action_spec_from_brain,
    decode_image,
    plan_observations,
)
from envs.exceptions import EnvError, EnvWorkerError
from envs.unity import communicator_pb2 as pb
from envs.unity.rpc import ExchangeServer, UnityDisconnected, UnityTimeout
from envs.unity.side_channels import (
    EngineConfigurationChannel,
    EnvironmentParametersChannel,
    SideChannel,
    SideChannelError,
    SideChannelManager,
    StatsSideChannel,
    StringLogChannel,
)

#: The communication API version we speak (ML-Agents release_18+).
API_VERSION = "1.5.0"
#: Port of the Editor when no build is given (ML-Agents' default), and of builds.
DEFAULT_EDITOR_PORT = 5004
DEFAULT_BASE_PORT = 5005
PORT_FLAG = "--mlagents-port"


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("trainer-learn")
    except Exception:  # not installed (tests from a checkout)
        return "0.0.0"


def trainer_capabilities() -> pb.UnityRLCapabilitiesProto:
    """What we support: ML-Agents 2.x features except analytics; BufferSensor's
    variable-length observations (entities, `ObservationKind.ENTITIES`); groups
    (``group_id`` / ``group_reward`` in the steps) since communication API 1.5.0."""
    return pb.UnityRLCapabilitiesProto(
        baseRLCapabilities=True,
        concatenatedPngObservations=True,
        compressedChannelMapping=True,
        hybridActions=True,
        trainingAnalytics=False,
        variableLengthObservation=True,
        multiAgentGroups=True,
    )


def _version_tuple(text: str) -> Optional[Tuple[int, ...]]:
    try:
        parts = tuple(int(p) for p in text.strip().split("."))
    except ValueError:
        return None
    return parts if len(parts) >= 2 else None


def check_communication_version(unity_version: str, ours: str = API_VERSION) -> Optional[str]:
    """ML-Agents' compatibility rule.

    Returns:
        None when compatible, or a warning line when only the minor versions differ.

    Raises:
        EnvError: incompatible (or unreadable) version.
    """
    theirs, mine = _version_tuple(unity_version), _version_tuple(ours)
    assert mine is not None
    if theirs is None:
        raise EnvError(
            f"the Unity environment reports communication API version {unity_version!r}, which is not "
            f"a version; this trainer speaks {ours} (ML-Agents release_18 or later, or 1.x packages)"
        )
    if theirs[0] == 0:
        compatible = theirs[:2] == mine[:2]
    else:
        compatible = theirs[0] == mine[0]
    if not compatible:
        raise EnvError(
            f"the Unity environment speaks communication API {unity_version} and this trainer {ours}: "
            f"incompatible (the major versions must match); use an ML-Agents Unity package of "
            f"release_1 or later (com.unity.ml-agents 1.0+)"
        )
    if theirs[1] != mine[1]:
        return (
            f"[WARNING] the Unity environment speaks communication API {unity_version} and this trainer "
            f"{ours}: features newer than the older of the two are unavailable"
        )
    return None


def find_executable(path: str) -> str:
    """The file to run for a build path, as ML-Agents resolves it (suffixes, ``.app`` bundles)."""
    candidates = [path]
    stem = path
    for suffix in (".x86_64", ".x86", ".exe", ".app"):
        if path.lower().endswith(suffix):
            stem = path[: -len(suffix)]
    candidates += [stem + s for s in (".x86_64", ".x86", ".exe", ".app")]
    for candidate in candidates:
        if os.path.isdir(candidate) and candidate.endswith(".app"):
            macos = os.path.join(candidate, "Contents", "MacOS")
            if os.path.isdir(macos):
                for name in sorted(os.listdir(macos)):
                    full = os.path.join(macos, name)
                    if os.path.isfile(full):
                        return full
        if os.path.isfile(candidate):
            return candidate
    raise EnvError(f"Unity build {path!r} not found (looked for {', '.join(dict.fromkeys(candidates))})")


@dataclass(frozen=True)
class EngineConfig:
    """Engine settings sent through the engine configuration channel (None = Unity's own).

    ML-Agents' defaults for training: 84x84, quality 5, time scale 20, target frame rate
    -1, capture frame rate 60.
    """

    width: Optional[int] = 84
    height: Optional[int] = 84
    quality_level: Optional[int] = 5
    time_scale: Optional[float] = 20.0
    target_frame_rate: Optional[int] = -1
    capture_frame_rate: Optional[int] = 60
    no_graphics: bool = False
    """Every build runs with ``-nographics -batchmode``."""
    no_graphics_monitor: bool = False
    """Worker 0 renders, the others run with ``-nographics -batchmode`` (ML-Agents R22's
    ``no_graphics_monitor``: watch one game while the rest train headless)."""

    def no_graphics_for(self, worker_id: int) -> bool:
        """Whether worker ``worker_id``'s build starts without graphics (ML-Agents'
        ``no_graphics or no_graphics_monitor and worker_id != 0``)."""
        return self.no_graphics or (self.no_graphics_monitor and worker_id != 0)


@dataclass
class _Behavior:
    spec: BehaviorSpec
    plans: List[ObsPlan]
    n_proto_obs: int
    decision: DecisionSteps
    terminal: TerminalSteps
    unity_ids: List[int]  # Unity ids of the deciding agents, in Unity's order
    id_map: Dict[int, int]  # Unity id -> our id for agents in an episode


def _kill(proc: Optional[subprocess.Popen], grace_s: float) -> None:
    """Wait ``grace_s`` for the build to exit after the quit message, then kill it."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        try:
            if hasattr(os, "killpg"):
                os.killpg(proc.pid, signal.SIGKILL)
            else:  # pragma: no cover - Windows
                proc.kill()
        except (ProcessLookupError, PermissionError, OSError):
            proc.kill()
        proc.wait(5.0)


class UnityEnv(BaseEnv):
    """One Unity game: a build this object launches, or the Editor."""

    def __init__(
        self,
        file_name: Optional[str] = None,
        worker_id: int = 0,
        base_port: Optional[int] = None,
        seed: int = 0,
        timeout_wait: float = 60.0,
        engine: Optional[EngineConfig] = None,
        env_parameters: Optional[Mapping[str, Any]] = None,
        additional_args: Sequence[str] = (),
        log_folder: Optional[str] = None,
        side_channels: Sequence[SideChannel] = (),
        host: str = "localhost",
        log: Callable[[str], None] = lambda s: print(s, flush=True),
        num_areas: int = 1,
        abort: Optional[threading.Event] = None,
    ) -> None:
        """
        Args:
            file_name: path to the build; None = wait for the Editor's Play button.
            worker_id: this env's index; the port is ``base_port + worker_id``.
            base_port: first port; default 5005 for builds, 5004 for the Editor.
            seed: sent to the game in the handshake.
            timeout_wait: seconds for the game to connect, and for each of its answers.
            engine: engine settings (None: ML-Agents' training defaults).
            env_parameters: environment parameters (name -> number or
                `envs.parameters.ParameterValue`), sent with the first reset.
            additional_args: more command-line arguments for the build.
            log_folder: the build writes its player log to ``<log_folder>/Player-<worker>.log``.
            side_channels: extra channels (besides engine, parameters, stats, string log).
            host: interface the server listens on (loopback by default).
            log: where info lines go.
            num_areas: training areas the game instantiates, sent in the initialization input
                (``UnityRLInitializationInputProto.num_areas``, read by the
                ``TrainingAreaReplicator`` of com.unity.ml-agents 2.2+; older packages ignore
                the field). ML-Agents' default is 1: the scene's own area.
            abort: set by another thread to give up waiting for the game (Ctrl-C while
                games start in threads); checked about every 0.25 s.
        """
        if file_name is None and worker_id != 0:
            raise EnvError("the Unity Editor is one environment: use num_envs 1 without a build path")
        if isinstance(num_areas, bool) or not isinstance(num_areas, (int, np.integer)) or num_areas < 1:
            raise EnvError(f"env_settings.num_areas: expected an integer >= 1, got {num_areas!r}")
        self._closed = False
        self._proc: Optional[subprocess.Popen] = None
        self._server: Optional[ExchangeServer] = None
        self._file_name = file_name
        self._timeout = float(timeout_wait)
        self._abort = abort
        self._log = log
        if base_port is None:
            base_port = DEFAULT_BASE_PORT if file_name else DEFAULT_EDITOR_PORT
        self.port = int(base_port) + int(worker_id)
        self._where = f"Unity build {file_name!r} on port {self.port}" if file_name else f"the Unity Editor on port {self.port}"
        engine = engine or EngineConfig()
        self.engine_channel = EngineConfigurationChannel()
        self.engine_channel.set_configuration(
            engine.width, engine.height, engine.quality_level, engine.time_scale,
            engine.target_frame_rate, engine.capture_frame_rate,
        )
        self.parameters_channel = EnvironmentParametersChannel()
        for key, value in (env_parameters or {}).items():
            self.parameters_channel.set_parameter(key, value)
        self.stats_channel = StatsSideChannel()
        self.log_channel = StringLogChannel()
        self._channels = SideChannelManager(
            [self.engine_channel, self.parameters_channel, self.stats_channel, self.log_channel, *side_channels],
            warn=log,
        )
        self._behaviors: Dict[str, _Behavior] = {}
        self._actions: Dict[str, ActionTuple] = {}
        self._next_id = 0
        self._warned_new: set = set()
        self._reset_pending = False
        try:
            try:
                self._server = ExchangeServer(self.port, host)
            except OSError as e:
                raise EnvError(
                    f"cannot listen on port {self.port} for {self._where.split(' on port')[0]}: {e}; "
                    f"another run may hold it (choose another with --base-port)"
                ) from None
            if file_name is not None:
                self._proc = self._launch(
                    file_name, int(worker_id), engine.no_graphics_for(int(worker_id)), additional_args, log_folder
                )
            else:
                log(
                    f"[INFO] Listening on port {self.port}. Start training by pressing the Play button in the "
                    "Unity Editor."
                )
            self._finalizer = weakref.finalize(self, _cleanup, self._server, self._proc)
            self._handshake(int(seed), int(num_areas))
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ start
    def _launch(
        self, file_name: str, worker_id: int, no_graphics: bool, extra: Sequence[str], log_folder: Optional[str]
    ) -> subprocess.Popen:
        exe = find_executable(file_name)
        args = [exe]
        if no_graphics:
            args += ["-nographics", "-batchmode"]
        args += [PORT_FLAG, str(self.port)]
        if log_folder:
            os.makedirs(log_folder, exist_ok=True)
            args += ["-logFile", os.path.join(os.path.abspath(log_folder), f"Player-{worker_id}.log")]
        args += [str(a) for a in extra]
        try:
            # Own session: Ctrl-C reaches the trainer, which quits the game itself.
            return subprocess.Popen(args, start_new_session=True, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise EnvError(f"Unity build {file_name!r} could not be started: {e}") from None

    def _alive(self) -> Optional[str]:
        if self._abort is not None and self._abort.is_set():
            return "the start was cancelled"
        if self._proc is not None and self._proc.poll() is not None:
            return f"the Unity process exited with code {self._proc.returncode}"
        return None

    def _receive_first(self) -> pb.UnityMessageProto:
        assert self._server is not None
        try:
            return self._server.receive(self._timeout, self._alive)
        except UnityTimeout:
            if self._file_name is not None:
                raise EnvError(
                    f"Unity build {self._file_name!r} did not connect on port {self.port} within "
                    f"{self._timeout:g} s (is it an ML-Agents build? raise --timeout-wait if it starts slowly)"
                ) from None
            raise EnvError(
                f"no Unity Editor connected on port {self.port} within {self._timeout:g} s "
                f"(press Play in the Editor, or raise --timeout-wait)"
            ) from None
        except UnityDisconnected as e:
            raise EnvError(f"{self._where}: {e} before connecting").with_traceback(None) from None

    def _handshake(self, seed: int, num_areas: int) -> None:
        assert self._server is not None
        first = self._receive_first()
        init = first.unity_output.rl_initialization_output
        warning = check_communication_version(init.communication_version)
        if warning:
            self._log(warning)
        self.unity_version = init.communication_version
        self.unity_package_version = init.package_version
        self.unity_capabilities = pb.UnityRLCapabilitiesProto()
        self.unity_capabilities.CopyFrom(init.capabilities)
        if not init.HasField("capabilities") or not init.capabilities.baseRLCapabilities:
            self._log(
                f"[INFO] Connected to a Unity environment of communication API {init.communication_version or '?'} "
                "without base capabilities (ML-Agents 1.0): vector actions only"
            )
        else:
            self._log(
                f"[INFO] Connected to Unity environment with package version {init.package_version} and "
                f"communication version {init.communication_version} (port {self.port})"
            )
        reply = pb.UnityMessageProto()
        reply.header.status = 200
        ri = reply.unity_input.rl_initialization_input
        ri.seed = seed
        ri.communication_version = API_VERSION
        ri.package_version = _package_version()
        ri.capabilities.CopyFrom(trainer_capabilities())
        ri.num_areas = num_areas
        self._server.reply(reply)
        self._receive()  # the game's second call carries nothing
        output = self._exchange(self._command_input(pb.COMMAND_RESET))
        self._add_behaviors(output, first.unity_output)
        if not self._behaviors:
            raise EnvError(f"{self._where}: the environment has no agents (no behavior sent any agent info)")
        self._update(output)
        self._reset_pending = True  # the first reset() returns these steps

    # ------------------------------------------------------------------ exchanges
    def _receive(self) -> pb.UnityMessageProto:
        assert self._server is not None
        try:
            return self._server.receive(self._timeout, self._alive)
        except UnityTimeout:
            raise EnvWorkerError(f"{self._where} did not answer within {self._timeout:g} s") from None
        except UnityDisconnected as e:
            raise EnvWorkerError(f"{self._where} disconnected: {e}") from None

    def send(self, unity_input: pb.UnityInputProto) -> None:
        """First half of an exchange: answer the game's pending call (lets N games step at once)."""
        assert self._server is not None
        message = pb.UnityMessageProto()
        message.header.status = 200
        message.unity_input.CopyFrom(unity_input)
        self._server.reply(message)

    def _exchange(self, unity_input: pb.UnityInputProto) -> pb.UnityOutputProto:
        self.send(unity_input)
        return self._receive().unity_output

    def _command_input(self, command: pb.CommandProto) -> pb.UnityInputProto:
        unity_input = pb.UnityInputProto()
        unity_input.rl_input.command = command
        unity_input.rl_input.side_channel = self._channels.outgoing()
        return unity_input

    # ------------------------------------------------------------------ specs
    def _add_behaviors(self, output: pb.UnityOutputProto, first: pb.UnityOutputProto) -> None:
        brains = list(first.rl_initialization_output.brain_parameters) + list(
            output.rl_initialization_output.brain_parameters
        )
        for brain in brains:
            name = brain.brain_name
            if name in self._behaviors:
                continue
            infos = output.rl_output.agentInfos[name].value if name in output.rl_output.agentInfos else []
            if not infos:
                self._log(f"[WARNING] behavior {name} sent no agent at the first reset; it is not trained")
                continue
            self._behaviors[name] = self._behavior_from_proto(brain, infos[0])

    def _behavior_from_proto(self, brain: demo_pb.BrainParametersProto, info: demo_pb.AgentInfoProto) -> _Behavior:
        name = brain.brain_name
        try:
            action_spec = action_spec_from_brain(brain)
        except BrainError as e:
            raise EnvError(f"behavior {name}: {e}") from None
        try:
            plans = plan_observations(info.observations)
        except RecordError as e:  # e.g. a 2-D observation that is not a BufferSensor's
            raise EnvError(f"behavior {name}: {e}") from None
        if not plans:
            raise EnvError(f"behavior {name}: its agents send no observations")
        spec = BehaviorSpec(tuple(p.spec for p in plans), action_spec)
        return _Behavior(spec, plans, len(info.observations), DecisionSteps.empty(spec), TerminalSteps.empty(spec),
                         [], {})

    # ------------------------------------------------------------------ steps
    def _update(self, output: pb.UnityOutputProto) -> None:
        """New Decision/TerminalSteps for every behavior; stats and logs from side channels."""
        try:
            self._channels.dispatch(output.rl_output.side_channel)
        except SideChannelError as e:
            raise EnvError(f"{self._where}: bad side channel data ({e})") from None
        agent_infos = output.rl_output.agentInfos
        for name in agent_infos:
            if name not in self._behaviors and name not in self._warned_new and len(agent_infos[name].value):
                self._warned_new.add(name)
                self._log(f"[WARNING] behavior {name} appeared after the first reset; its agents are ignored")
        for name, b in self._behaviors.items():
            infos = list(agent_infos[name].value) if name in agent_infos else []
            self._steps_from_infos(name, b, infos)

    def _obs(self, name: str, b: _Behavior, infos: List[demo_pb.AgentInfoProto]) -> List[np.ndarray]:
        out = []
        n = len(infos)
        for plan in b.plans:
            shape = plan.spec.shape
            array = np.empty((n,) + shape, np.float32)
            for row, info in enumerate(infos):
                if len(info.observations) != b.n_proto_obs:
                    raise EnvError(
                        f"behavior {name}: agent {info.id} sent {len(info.observations)} observations, "
                        f"expected {b.n_proto_obs}"
                    )
                o = info.observations[plan.index]
                if o.compression_type == demo_pb.COMPRESSION_TYPE_PNG:
                    try:
                        array[row] = decode_image(o.compressed_data, o.compressed_channel_mapping, shape, plan.index)
                    except RecordError as e:
                        raise EnvError(f"behavior {name}: {e}") from None
                    continue
                data = o.float_data.data
                size = array[row].size
                if len(data) != size:
                    raise EnvError(
                        f"behavior {name}: agent {info.id} observation {plan.index} has {len(data)} values, "
                        f"expected {size} (shape {list(plan.proto_shape)})"
                    )
                values = np.fromiter(data, np.float32, size)
                if plan.channels_first:
                    values = values.reshape(plan.proto_shape).transpose(1, 2, 0)
                array[row] = values.reshape(shape)
            out.append(array)
        return out

    def _steps_from_infos(self, name: str, b: _Behavior, infos: List[demo_pb.AgentInfoProto]) -> None:
        terminal = [i for i in infos if i.done]
        deciding = [i for i in infos if not i.done]
        # Terminal first: an id that ends an episode and asks again in the same output
        # starts a new episode (a new id in our API).
        t_ids = np.empty(len(terminal), np.int32)
        for row, info in enumerate(terminal):
            ours = b.id_map.pop(info.id, None)
            if ours is None:
                ours = self._new_id()
            t_ids[row] = ours
        d_ids = np.empty(len(deciding), np.int32)
        for row, info in enumerate(deciding):
            ours = b.id_map.get(info.id)
            if ours is None:
                ours = b.id_map[info.id] = self._new_id()
            d_ids[row] = ours
        b.terminal = TerminalSteps(
            self._obs(name, b, terminal),
            np.fromiter((i.reward for i in terminal), np.float32, len(terminal)),
            np.fromiter((i.max_step_reached for i in terminal), bool, len(terminal)),
            t_ids,
            *self._groups(name, terminal),
        )
        b.decision = DecisionSteps(
            self._obs(name, b, deciding),
            np.fromiter((i.reward for i in deciding), np.float32, len(deciding)),
            d_ids,
            self._masks(name, b, deciding),
            *self._groups(name, deciding),
        )
        b.unity_ids = [i.id for i in deciding]

    @staticmethod
    def _groups(name: str, infos: List[demo_pb.AgentInfoProto]) -> Tuple[np.ndarray, np.ndarray]:
        """``group_id`` ``[n]`` int32 and ``group_reward`` ``[n]`` float32 of AgentInfoProto
        fields 14 and 15 (communication API 1.5.0's multiAgentGroups; an older game sends
        neither: zeros), as ML-Agents' ``steps_from_proto`` reads them, which also refuses a
        NaN or infinite group reward."""
        n = len(infos)
        group_id = np.fromiter((i.group_id for i in infos), np.int32, n)
        group_reward = np.fromiter((i.group_reward for i in infos), np.float32, n)
        if n and not np.isfinite(group_reward).all():
            bad = next(i for i in infos if not np.isfinite(i.group_reward))
            raise EnvError(
                f"behavior {name}: agent {bad.id} sent a group reward of {bad.group_reward}, expected a finite number"
            )
        return group_id, group_reward

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    @staticmethod
    def _masks(name: str, b: _Behavior, infos: List[demo_pb.AgentInfoProto]) -> Optional[List[np.ndarray]]:
        branches = b.spec.action_spec.discrete_branches
        width = sum(branches)
        if not branches or not any(len(i.action_mask) for i in infos):
            return None
        mask = np.zeros((len(infos), width), bool)  # True = unavailable, as Unity sends it
        for row, info in enumerate(infos):
            if len(info.action_mask) == 0:
                continue
            if len(info.action_mask) != width:
                raise EnvError(
                    f"behavior {name}: agent {info.id} sent an action mask of {len(info.action_mask)} entries, "
                    f"expected {width} (branches {list(branches)})"
                )
            mask[row] = np.fromiter(info.action_mask, bool, width)
        return np.split(mask, np.cumsum(branches)[:-1], axis=1)

    # ------------------------------------------------------------------ BaseEnv
    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return {name: b.spec for name, b in self._behaviors.items()}

    def reset(self) -> None:
        self._check_open()
        self._actions.clear()
        if self._reset_pending:  # the handshake's reset already started every episode
            self._reset_pending = False
            return
        self.receive_into(self._exchange(self._command_input(pb.COMMAND_RESET)))

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        b = self._behaviors[behavior_name]
        return b.decision, b.terminal

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        if behavior_name not in self._behaviors:
            raise ValueError(f"unknown behavior {behavior_name!r}; behaviors: {list(self._behaviors)}")
        self._actions[behavior_name] = action

    def step(self) -> None:
        self._check_open()
        self._reset_pending = False
        self.send(self.step_input())
        self.receive_into(self._receive().unity_output)

    def step_input(self) -> pb.UnityInputProto:
        """The STEP input with the actions set (zeros for agents left without) and side channels."""
        unity_input = self._command_input(pb.COMMAND_STEP)
        hybrid = self.unity_capabilities.hybridActions
        agent_actions = unity_input.rl_input.agent_actions
        for name, b in self._behaviors.items():
            n = len(b.unity_ids)
            if n == 0:
                continue
            spec = b.spec.action_spec
            action = self._actions.get(name) or spec.empty_action(n)
            cont = np.asarray(action.continuous, np.float32).reshape(n, spec.continuous_size) if spec.continuous_size \
                else np.zeros((n, 0), np.float32)
            disc = np.asarray(action.discrete, np.int32).reshape(n, spec.discrete_size) if spec.discrete_size \
                else np.zeros((n, 0), np.int32)
            values = agent_actions[name].value
            for row in range(n):
                proto = values.add()
                if hybrid:
                    proto.continuous_actions.extend(cont[row].tolist())
                    proto.discrete_actions.extend(disc[row].tolist())
                else:  # API < 1.3: one float vector (continuous, else discrete indices)
                    proto.vector_actions.extend(cont[row].tolist() + disc[row].astype(np.float32).tolist())
        self._actions.clear()
        return unity_input

    def receive_into(self, output: pb.UnityOutputProto) -> None:
        """Second half of an exchange: the game's output becomes the current steps."""
        self._update(output)

    def receive_output(self) -> pb.UnityOutputProto:
        """Wait for the game's next output (after `send`)."""
        return self._receive().unity_output

    def drain_stats(self) -> Dict[str, List[Tuple[float, int]]]:
        """Stats the game recorded (StatsRecorder) since the last call: key -> [(value, aggregation)]."""
        return self.stats_channel.drain()

    def set_float_parameter(self, key: str, value: float) -> None:
        """An environment parameter, sent with the next exchange."""
        self.parameters_channel.set_float_parameter(key, value)

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """Environment parameters (constants and samplers), sent with the next exchange (a
        step, or the reset that follows): the game takes any name and reads what it knows."""
        for key, value in values.items():
            self.parameters_channel.set_parameter(key, value)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()
        else:
            _cleanup(self._server, self._proc)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self._where}: the environment is closed")

    @property
    def process(self) -> Optional[subprocess.Popen]:
        """The build's process (None for the Editor)."""
        return self._proc


def _cleanup(server: Optional[ExchangeServer], proc: Optional[subprocess.Popen]) -> None:
    """Quit message to the game, stop the server, make sure the build exits."""
    if server is not None:
        try:
            server.close()
        except Exception:
            pass
    _kill(proc, grace_s=3.0)
