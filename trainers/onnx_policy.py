"""Runs an exported ONNX model (ML-Agents 2.0 contract, version 3) with onnxruntime.

`OnnxPolicy` is what ``trainer-learn --inference --model=<file.onnx>`` plugs in place of the
TF policy: same ``act()`` signature and `ActionInfo` result, no TensorFlow session. The
model's inputs and outputs are validated against the env's `BehaviorSpec` when it is
loaded; a mismatch is one `ModelError` line naming the file and what differs.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

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
            raise self._fail("recurrent models (recurrent_in) are not supported yet")
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
            want = sum(action.discrete_branches)
            if got != [want] and not (len(got) == 1 and not isinstance(got[0], int)):
                raise self._fail(f"input {names.ACTION_MASKS} has shape {got}, but the branches {list(action.discrete_branches)} need [{want}]")

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
        values = self.session.run(wanted, self._feeds(self._zeros(1), None))
        return dict(zip(wanted, (np.asarray(v) for v in values)))

    def _validate_outputs(self, constants: Dict[str, np.ndarray]) -> None:
        action = self.spec.action_spec
        if self.version != names.MODEL_EXPORT_VERSION:
            raise self._fail(f"model version {self.version}; only version {names.MODEL_EXPORT_VERSION} (ML-Agents 2.0) is supported")
        memory = int(constants[names.MEMORY_SIZE].reshape(-1)[0])
        if memory:
            raise self._fail(f"memory_size {memory}: recurrent models are not supported yet")
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

    def act(
        self, obs: Sequence[np.ndarray], action_masks: Optional[np.ndarray] = None, deterministic: bool = True
    ) -> ActionInfo:
        """One onnxruntime call for all agents: ``obs[i]`` ``[N, *shape_i]`` (visual NHWC, as
        envs give them) -> actions.

        Args:
            obs: one float32 array per observation spec.
            action_masks: ``[N, sum(branches)]`` float32, 1 = allowed (all ones if None).
            deterministic: the model's deterministic outputs (distribution modes) instead of
                its sampled ones.

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
        values = iter(self.session.run(fetch, self._feeds(obs, action_masks)))
        cont = next(values).astype(np.float32) if action.is_continuous else np.zeros((n, 0), np.float32)
        disc = next(values).astype(np.int32) if action.is_discrete else np.zeros((n, 0), np.int32)
        return ActionInfo(cont, cont, disc, np.zeros(n, np.float32))

    # Interface parity with `Policy` for the controller in inference mode.
    normalize = False

    def update_normalization(self, obs: Sequence[np.ndarray]) -> None:  # pragma: no cover - inference only
        """Nothing to update: the normalizer is frozen into the model."""

    def close(self) -> None:
        self.session.close()
