"""Runs an exported ONNX model (ML-Agents 2.0 contract, version 3) with onnxruntime.

`OnnxPolicy` is what ``trainer-learn --inference --model=<file.onnx>`` plugs in place of the
TF policy: same ``act()`` signature and `ActionInfo` result, no TensorFlow session. The
model's inputs and outputs are validated against the env's `BehaviorSpec` when it is
loaded; a mismatch is one `ModelError` line naming the file and what differs.
"""
from __future__ import annotations

import os
from typing import Dict, Hashable, List, Optional, Sequence

import numpy as np

from envs.base_env import BehaviorSpec, ObservationKind
from trainers.exceptions import TrainerError
from trainers.policy import ActionInfo
from trainers.tf import names


class ModelError(TrainerError):
    """An exported model cannot be loaded or does not fit the environment's behavior."""


def _dims(value_info) -> List[object]:
    """ONNX value info shape -> list of ints (static) or strings/None (dynamic)."""
    return [d if isinstance(d, (int, str)) or d is None else str(d) for d in value_info.shape]


class _Session:
    """The onnxruntime session, closable like a ``tf.Session`` (``PPOTrainer.close()`` closes
    ``policy.session``, so an `OnnxPolicy` can stand in a trainer's ``policy``)."""

    def __init__(self, session) -> None:
        self._session = session

    def run(self, output_names, feeds):
        if self._session is None:
            raise RuntimeError("the ONNX policy was closed")
        return self._session.run(output_names, feeds)

    def get_inputs(self):
        return self._session.get_inputs()

    def get_outputs(self):
        return self._session.get_outputs()

    def close(self) -> None:
        self._session = None


class OnnxPolicy:
    """A policy read from an exported ``.onnx`` file (batched inference with onnxruntime).

    Attributes:
        path: the model file.
        spec: the behavior it acts for.
        version: the model's ``version_number`` (3).
        input_names / output_names: the model's, in order.
    """

    def __init__(self, path: str, spec: BehaviorSpec, threads: int = 1) -> None:
        self.path = path
        self.spec = spec
        if not os.path.isfile(path):
            raise ModelError(f"{path}: model file not found")
        try:
            import onnxruntime as ort
        except ImportError:  # pragma: no cover - an install without the export extra
            raise ModelError(f"{path}: onnxruntime is not installed (pip install 'trainer-learn[export]')") from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self.session = _Session(ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]))
        except Exception as exc:  # onnxruntime raises its own exception types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{path}: not a loadable ONNX model ({first})") from None
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self._inputs = {i.name: i for i in self.session.get_inputs()}
        self._validate_inputs()
        constants = self._read_constants()
        self.version = int(constants[names.VERSION_NUMBER].reshape(-1)[0])
        self._validate_outputs(constants)
        # Per agent key: the memory after its last action and that action (discrete part).
        self._memories: Dict[Hashable, np.ndarray] = {}
        self._prev_actions: Dict[Hashable, np.ndarray] = {}
        self._det = (names.DETERMINISTIC_CONTINUOUS_ACTIONS, names.DETERMINISTIC_DISCRETE_ACTIONS)
        self._sampled = (names.CONTINUOUS_ACTIONS, names.DISCRETE_ACTIONS)

    # ------------------------------------------------------------ validation

    def _fail(self, message: str) -> "ModelError":
        return ModelError(f"{self.path}: {message}")

    def _validate_inputs(self) -> None:
        specs = self.spec.observation_specs
        action = self.spec.action_spec
        expected = [names.obs_name(i) for i in range(len(specs))]
        if action.is_discrete:
            expected.append(names.ACTION_MASKS)
        if names.LEGACY_VECTOR_OBSERVATION in self._inputs or any(
            n.startswith(names.LEGACY_VISUAL_OBSERVATION_PREFIX) for n in self._inputs
        ):
            raise self._fail(
                "a TF-era model (vector_observation/visual_observation_<i> inputs, version 2); "
                "export it without --legacy-names to run it here"
            )
        if names.RECURRENT_IN in self._inputs:
            # ML-Agents 2.0 recurrent models: recurrent_in [batch, 1, memory_size] (and the
            # previous action for discrete actions, when the model takes it).
            expected.append(names.RECURRENT_IN)
            if names.PREV_ACTION in self._inputs:
                expected.append(names.PREV_ACTION)
        if self.input_names != expected:
            raise self._fail(f"model inputs {self.input_names} do not match the behavior's {expected}")
        for i, o in enumerate(specs):
            want = (o.shape[2], o.shape[0], o.shape[1]) if o.kind == ObservationKind.VISUAL else o.shape
            got = _dims(self._inputs[names.obs_name(i)])[1:]
            layout = " (C, H, W)" if o.kind == ObservationKind.VISUAL else ""
            if len(got) != len(want) or any(isinstance(g, int) and g != w for g, w in zip(got, want)):
                raise self._fail(
                    f"input {names.obs_name(i)} has shape {got}{layout}, but observation {i} "
                    f"({o.name!r}, {o.kind.value}) needs {list(want)}{layout}"
                )
        if action.is_discrete:
            got = _dims(self._inputs[names.ACTION_MASKS])[1:]
            width = sum(action.discrete_branches)
            if got != [width] and not (len(got) == 1 and not isinstance(got[0], int)):
                raise self._fail(f"input {names.ACTION_MASKS} has shape {got}, but the branches {list(action.discrete_branches)} need [{width}]")

    def _read_constants(self) -> Dict[str, np.ndarray]:
        wanted = [
            n
            for n in (
                names.VERSION_NUMBER,
                names.MEMORY_SIZE,
                names.CONTINUOUS_ACTION_OUTPUT_SHAPE,
                names.DISCRETE_ACTION_OUTPUT_SHAPE,
            )
            if n in self.output_names
        ]
        for n in (names.VERSION_NUMBER, names.MEMORY_SIZE):
            if n not in self.output_names:
                raise self._fail(f"output {n} is missing; not an ML-Agents model")
        feeds = self._feeds(self._zeros(1), None)
        if names.RECURRENT_IN in self._inputs:
            size = _dims(self._inputs[names.RECURRENT_IN])[-1]
            feeds[names.RECURRENT_IN] = np.zeros((1, 1, size if isinstance(size, int) else 0), np.float32)
            if names.PREV_ACTION in self._inputs:
                feeds[names.PREV_ACTION] = np.zeros((1, self.spec.action_spec.discrete_size), np.int32)
        values = self.session.run(wanted, feeds)
        return dict(zip(wanted, (np.asarray(v) for v in values)))

    def _validate_outputs(self, constants: Dict[str, np.ndarray]) -> None:
        action = self.spec.action_spec
        if self.version != names.MODEL_EXPORT_VERSION:
            raise self._fail(f"model version {self.version}; only version {names.MODEL_EXPORT_VERSION} (ML-Agents 2.0) is supported")
        memory = int(constants[names.MEMORY_SIZE].reshape(-1)[0])
        has_input = names.RECURRENT_IN in self._inputs
        if bool(memory) != has_input or (memory and names.RECURRENT_OUT not in self.output_names):
            raise self._fail(
                f"memory_size {memory} but the model {'has' if has_input else 'has no'} input {names.RECURRENT_IN}"
                f" and {'has' if names.RECURRENT_OUT in self.output_names else 'has no'} output {names.RECURRENT_OUT}"
            )
        self.memory_size = memory
        has_c = names.CONTINUOUS_ACTION_OUTPUT_SHAPE in constants
        size_c = int(constants[names.CONTINUOUS_ACTION_OUTPUT_SHAPE].reshape(-1)[0]) if has_c else 0
        if size_c != action.continuous_size:
            raise self._fail(f"the model has {size_c} continuous actions, the behavior {action.continuous_size}")
        branches = (
            tuple(int(b) for b in constants[names.DISCRETE_ACTION_OUTPUT_SHAPE].reshape(-1))
            if names.DISCRETE_ACTION_OUTPUT_SHAPE in constants
            else ()
        )
        if branches != action.discrete_branches:
            raise self._fail(f"the model has discrete branches {list(branches)}, the behavior {list(action.discrete_branches)}")
        needed = []
        if action.is_continuous:
            needed += [names.CONTINUOUS_ACTIONS, names.DETERMINISTIC_CONTINUOUS_ACTIONS]
        if action.is_discrete:
            needed += [names.DISCRETE_ACTIONS, names.DETERMINISTIC_DISCRETE_ACTIONS]
        for n in needed:
            if n not in self.output_names:
                raise self._fail(f"output {n} is missing")

    # -------------------------------------------------------------- inference

    def _zeros(self, n: int) -> List[np.ndarray]:
        return [np.zeros((n,) + o.shape, np.float32) for o in self.spec.observation_specs]

    def _feeds(self, obs: Sequence[np.ndarray], action_masks: Optional[np.ndarray]) -> Dict[str, np.ndarray]:
        specs = self.spec.observation_specs
        if len(obs) != len(specs):
            raise ValueError(f"expected {len(specs)} observation arrays, got {len(obs)}")
        n = obs[0].shape[0]
        feeds: Dict[str, np.ndarray] = {}
        for i, (o, s) in enumerate(zip(obs, specs)):
            o = np.asarray(o, np.float32)
            if s.kind == ObservationKind.VISUAL:
                o = np.ascontiguousarray(o.transpose(0, 3, 1, 2))  # env NHWC -> model NCHW
            feeds[names.obs_name(i)] = o
        if self.spec.action_spec.is_discrete:
            if action_masks is None:
                action_masks = np.ones((n, sum(self.spec.action_spec.discrete_branches)), np.float32)
            feeds[names.ACTION_MASKS] = np.asarray(action_masks, np.float32)
        return feeds

    @property
    def use_recurrent(self) -> bool:
        return self.memory_size > 0

    def forget_agents(self, keys: Sequence[Hashable]) -> None:
        """Drops the memories of agents whose episode ended (zeros at the next start)."""
        for k in keys:
            self._memories.pop(k, None)
            self._prev_actions.pop(k, None)

    def act(
        self,
        obs: Sequence[np.ndarray],
        action_masks: Optional[np.ndarray] = None,
        deterministic: bool = True,
        agent_keys: Optional[Sequence[Hashable]] = None,
    ) -> ActionInfo:
        """One onnxruntime call for all agents: ``obs[i]`` ``[N, *shape_i]`` (visual NHWC, as
        envs give them) -> actions.

        Args:
            obs: one float32 array per observation spec.
            action_masks: ``[N, sum(branches)]`` float32, 1 = allowed (all ones if None).
            deterministic: the model's deterministic outputs (distribution modes) instead of
                its sampled ones.
            agent_keys: recurrent models: one key per row; each agent's ``recurrent_out``
                is fed back as its next ``recurrent_in``.

        Returns:
            `ActionInfo`; the model outputs clipped continuous actions only, so
            ``raw_continuous`` equals ``env_continuous``, and ``log_probs`` are zeros.
        """
        action = self.spec.action_spec
        n = obs[0].shape[0]
        fetch = []
        cont_name, disc_name = self._det if deterministic else self._sampled
        if action.is_continuous:
            fetch.append(cont_name)
        if action.is_discrete:
            fetch.append(disc_name)
        feeds = self._feeds(obs, action_masks)
        if self.use_recurrent:
            if agent_keys is None or len(agent_keys) != n:
                raise ValueError("a recurrent model needs one agent key per row")
            zeros = np.zeros(self.memory_size, np.float32)
            feeds[names.RECURRENT_IN] = np.stack([self._memories.get(k, zeros) for k in agent_keys])[:, None, :]
            if names.PREV_ACTION in self._inputs:
                none = np.zeros(action.discrete_size, np.int32)
                feeds[names.PREV_ACTION] = np.stack([self._prev_actions.get(k, none) for k in agent_keys])
            fetch.append(names.RECURRENT_OUT)
        values = iter(self.session.run(fetch, feeds))
        cont = next(values).astype(np.float32) if action.is_continuous else np.zeros((n, 0), np.float32)
        disc = next(values).astype(np.int32) if action.is_discrete else np.zeros((n, 0), np.int32)
        if self.use_recurrent:
            assert agent_keys is not None  # checked above
            memory_out = next(values)[:, 0, :]
            for j, key in enumerate(agent_keys):
                self._memories[key] = memory_out[j]
                self._prev_actions[key] = disc[j]
        return ActionInfo(cont, cont, disc, np.zeros(n, np.float32))

    # Interface parity with `Policy` for the controller in inference mode.
    normalize = False

    def sync_acting_weights(self) -> None:
        """A loaded model's weights never change."""

    def update_normalization(self, obs: Sequence[np.ndarray]) -> None:  # pragma: no cover - inference only
        """Nothing to update: the normalizer is frozen into the model."""

    def close(self) -> None:
        self.session.close()
