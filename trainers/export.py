"""Model export: the actor of a `Policy` as a frozen TF graph (``.pb``) and as ONNX.

The exported graph is the actor only (no critic, optimizer or training towers): it is built
again in a separate ``tf.Graph`` with the same builder (`trainers.policy.build_actor`, so
the same variable names), the weights are copied from the live session by variable name,
and the variables are folded to constants (``convert_variables_to_constants``). Export
therefore does not depend on how many towers the optimizer has, and never touches the
(finalized) training graph. The observation normalizer is included, folded to float32
constants (mean and std computed exactly as the training graph does).

ML-Agents 2.0 contract (``version_number`` 3, FACTS section 6), what current Unity
Inference Engine / Sentis loads:

* inputs: ``obs_0`` ... ``obs_{n-1}`` float32, vector ``[batch, size]``, visual
  ``[batch, C, H, W]`` (NCHW; transposed to NHWC inside the graph); ``action_masks``
  float32 ``[batch, sum(branches)]`` (1 = allowed) only with discrete actions.
* outputs, in this order: ``version_number``, ``memory_size``, then with continuous actions
  ``continuous_actions`` (sampled, ``clamp(x, -3, 3) / 3``; SAC's squashed actor: ``tanh(x)``,
  as ML-Agents exports it), ``continuous_action_output_shape``,
  ``deterministic_continuous_actions`` (the clipped or squashed mean), then with discrete actions
  ``discrete_actions`` (sampled, one column per branch), ``discrete_action_output_shape``,
  ``deterministic_discrete_actions`` (argmax). The batch dimension is dynamic (``batch``).

Dtypes (decided from what ML-Agents 2.0's exporter wrote and what Unity's runtime reads):

* ``version_number`` ``[1]``, ``memory_size`` ``[1]``, ``continuous_action_output_shape``
  ``[1]`` and ``discrete_action_output_shape`` ``[1, num_branches]`` are **float32**:
  ML-Agents wrote them as ``torch.Tensor`` parameters, and Unity reads them as
  ``Tensor<float>`` (``(int)((Tensor<float>)t)[0]``; it sums every element of the discrete
  shape). int32 constants would make Unity's cast fail.
* ``continuous_actions`` / ``deterministic_continuous_actions``: float32 ``[batch, c]``.
* ``discrete_actions`` / ``deterministic_discrete_actions``: **int64** ``[batch, branches]``,
  as ``torch.multinomial`` / ``torch.argmax`` produced them; Unity reads them as
  ``Tensor<int>`` (a float output would load and then fail at inference).

Sampling ops: ``RandomStandardNormal`` with the dynamic batch shape becomes ONNX
``RandomNormalLike``, ``Multinomial`` becomes ONNX ``Multinomial``; tf2onnx writes
``seed=0`` on both, which makes every onnxruntime session draw the same numbers, so the
attribute is removed: onnxruntime then seeds per process and draws fresh noise at every
call, and no runtime that honours the attribute repeats one fixed noise sequence.

Visual observations: the convolutions run in NCHW in ONNX and the encoders flatten in
channel-major order (as ML-Agents does), so the exported graph has no Transpose.

TF-era contract (``legacy_names=True``, ``version_number`` 2), for older runtimes: inputs
``vector_observation`` ``[batch, sum of vector sizes]`` (every vector observation
concatenated in spec order), ``visual_observation_<k>`` ``[batch, H, W, C]`` (k counts the
visual observations), ``action_masks`` (discrete), ``epsilon`` ``[batch, c]`` (continuous:
the standard-normal noise, fed by the runtime, as TF-era Unity did; zeros give the mean);
outputs ``action``, ``action_probs``, ``version_number``, ``memory_size``,
``is_continuous_control``, ``action_output_shape``, the constants int32 ``[1]``.
``action`` is ``clamp(mean + std * epsilon, -3, 3) / 3`` for continuous actions and, for
discrete ones, the masked per-branch log-probabilities ``[batch, sum(branches)]`` from which
the TF-era runtime samples; ``action_probs`` is the per-dimension log-density of the raw
continuous action, or the per-branch probabilities. ``action_output_shape`` is the
continuous size or the sum of branch sizes. Hybrid actions have no TF-era form.

Verification (``check=True``): the ONNX model (onnxruntime) and the frozen graph (TF) are
run on a fixed batch of observations and masks, and their deterministic outputs compared
with the live training graph's; a max abs difference above 1e-5 raises `ExportError`.
Sampled outputs are checked for shape, range and masks.

Recurrent policies (``network_settings.memory``): one LSTM step per call. Input
``recurrent_in`` float32 ``[batch, 1, memory_size]`` after ``action_masks`` (and, with
discrete actions, ``prev_action`` int32 ``[batch, branches]``, the TF-era input the
previous action is fed through: 0 at an episode's first step); output ``recurrent_out``
``[batch, 1, memory_size]`` last; ``memory_size`` > 0. The runtime feeds each agent's
``recurrent_out`` back as its next ``recurrent_in`` (zeros at an episode start). The check
runs a 20-step rollout with the memories fed back. No TF-era form.
"""
from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorSpec, ObservationKind
from trainers.exceptions import TrainerError
from trainers.policy import Policy, build_actor
from trainers.tf import names, tf
from trainers.tf.distributions import env_continuous
from trainers.tf.normalizer import CLIP as NORMALIZER_CLIP

FORMATS = ("pb", "onnx")
# Opset 9 is what ML-Agents exports (``SerializationSettings.onnx_opset``) and what every
# Unity runtime imports: Barracuda 1.x-2.x (ML-Agents 1.x-2.x) and Sentis / Inference
# Engine (ML-Agents 3.x). Up to 12 Unsqueeze keeps its axes as an attribute, which is all
# Barracuda before 2.3 reads (13 makes them an input); Sentis reads 7 to 15; 16-18 are for
# onnxruntime. tf2onnx 1.17 converts 9 to 18; below 9 random normal noise of a dynamic
# shape (ConstantOfShape) has no form.
DEFAULT_OPSET = 9
MIN_OPSET = 9
MAX_OPSET = 18
BARRACUDA_MAX_OPSET = 12
SENTIS_MAX_OPSET = 15
# ONNX ops that draw random numbers; their ``seed`` attribute is removed (see `to_onnx`).
RANDOM_OPS = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial")
CHECK_TOLERANCE = 1e-5
CHECK_BATCH = 16


class ExportError(TrainerError):
    """A model cannot be exported, or the exported model does not match the training graph."""


@dataclass
class ExportResult:
    """What `export_policy` wrote and measured.

    Attributes:
        behavior_name: the policy's behavior.
        files: every file written (latest and per-step copies), in writing order.
        onnx_path: ``<out_dir>/<Behavior>.onnx`` (None when not exported).
        pb_path: ``<out_dir>/<Behavior>.pb`` (None when not exported).
        version: the contract's ``version_number`` (3, or 2 with legacy names).
        opset: ONNX opset used.
        input_names: model inputs, in order.
        output_names: model outputs, in order.
        diffs: runtime (``onnx``/``pb``) -> compared output -> max abs difference with the
            live training graph (empty without ``check``).
        seconds: wall time of the export (graph, conversion, writing, check).
    """

    behavior_name: str
    files: List[str] = field(default_factory=list)
    onnx_path: Optional[str] = None
    pb_path: Optional[str] = None
    version: int = names.MODEL_EXPORT_VERSION
    opset: int = DEFAULT_OPSET
    input_names: List[str] = field(default_factory=list)
    output_names: List[str] = field(default_factory=list)
    diffs: Dict[str, Dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def max_diff(self) -> float:
        """Largest measured difference over every runtime and output (0.0 if none)."""
        return max((d for per in self.diffs.values() for d in per.values()), default=0.0)


@dataclass
class FrozenActor:
    """The export graph, frozen.

    Attributes:
        graph_def: the frozen ``GraphDef`` (variables as constants).
        input_names: input tensor names (no ``:0``), in contract order.
        output_names: output tensor names (no ``:0``), in contract order.
        legacy: True for the TF-era (version 2) names.
    """

    graph_def: "tf.GraphDef"
    input_names: List[str]
    output_names: List[str]
    legacy: bool


class _ConstNormalizer:
    """Stands in for a `Normalizer` in the export graph: frozen float32 mean and std.

    ``std`` is computed like the training graph (float64 ``sqrt(m2 / count + 1e-8)``, then
    float32), so the normalised values are bit-identical and no float64 tensor (which Unity's
    runtime cannot hold) reaches the exported model.
    """

    def __init__(self, mean: np.ndarray, std: np.ndarray) -> None:
        self.mean = mean.astype(np.float32)
        self.std = std.astype(np.float32)

    def normalize(self, x: tf.Tensor) -> tf.Tensor:
        mean = tf.constant(self.mean, name="mean")
        std = tf.constant(self.std, name="std")
        return tf.clip_by_value((x - mean) / std, -NORMALIZER_CLIP, NORMALIZER_CLIP)


def _normalizer_constants(policy: Policy) -> List[Optional[_ConstNormalizer]]:
    fetch = {i: (n.count, n.mean, n.m2) for i, n in enumerate(policy.normalizers) if n is not None}
    values = policy.session.run(fetch) if fetch else {}
    out: List[Optional[_ConstNormalizer]] = []
    for i in range(len(policy.normalizers)):
        if i not in values:
            out.append(None)
            continue
        count, mean, m2 = (np.asarray(v, np.float64) for v in values[i])
        out.append(_ConstNormalizer(mean, np.sqrt(m2 / count + 1e-8)))
    return out


def _float_const(value: Sequence, name: str) -> tf.Tensor:
    return tf.constant(np.asarray(value, np.float32), name=name)


def _int_const(value: Sequence, name: str) -> tf.Tensor:
    return tf.constant(np.asarray(value, np.int32), name=name)


def _check_exportable(policy: Policy, legacy: bool) -> None:
    if legacy and policy.use_recurrent:
        raise ExportError(
            f"{policy.behavior_name}: recurrent policies (memory) are exported in the ML-Agents 2.0 "
            "form only; export without legacy names"
        )
    a = policy.spec.action_spec
    if legacy and policy.squashed and a.is_continuous:
        raise ExportError(
            f"{policy.behavior_name}: SAC's tanh-squashed actions have no TF-era (version 2) form; "
            "export without legacy names"
        )
    if legacy and a.is_continuous and a.is_discrete:
        raise ExportError(
            f"{policy.behavior_name}: hybrid (continuous + discrete) actions have no TF-era "
            "(version 2) form; export without legacy names"
        )


def freeze_actor(policy: Policy, legacy_names: bool = False) -> FrozenActor:
    """Builds the actor again in its own graph with the contract's inputs/outputs, copies
    the live weights into it by variable name, and folds them to constants."""
    _check_exportable(policy, legacy_names)
    spec: BehaviorSpec = policy.spec
    action_spec = spec.action_spec
    network = policy.settings.network_settings
    normalizers = _normalizer_constants(policy)
    graph = tf.Graph()
    inputs: List[str] = []
    outputs: List[str] = []
    with graph.as_default():
        obs: List[tf.Tensor] = []
        if legacy_names:
            vector_specs = [(i, o) for i, o in enumerate(spec.observation_specs) if o.kind == ObservationKind.VECTOR]
            vector_in = None
            if vector_specs:
                total = sum(o.shape[0] for _, o in vector_specs)
                vector_in = tf.placeholder(tf.float32, [None, total], name=names.LEGACY_VECTOR_OBSERVATION)
                inputs.append(names.LEGACY_VECTOR_OBSERVATION)
            offset = 0
            visual_index = 0
            for o in spec.observation_specs:
                if o.kind == ObservationKind.VISUAL:
                    name = names.legacy_visual_name(visual_index)
                    visual_index += 1
                    obs.append(tf.placeholder(tf.float32, (None,) + o.shape, name=name))
                    inputs.append(name)
                else:
                    obs.append(vector_in[:, offset : offset + o.shape[0]])
                    offset += o.shape[0]
        else:
            for i, o in enumerate(spec.observation_specs):
                name = names.obs_name(i)
                if o.kind == ObservationKind.VISUAL:
                    h, w, c = o.shape
                    ph = tf.placeholder(tf.float32, [None, c, h, w], name=name)
                    obs.append(tf.transpose(ph, [0, 2, 3, 1]))
                else:
                    ph = tf.placeholder(tf.float32, (None,) + o.shape, name=name)
                    obs.append(ph)
                inputs.append(name)
        masks = None
        if action_spec.is_discrete:
            masks = tf.placeholder(tf.float32, [None, sum(action_spec.discrete_branches)], name=names.ACTION_MASKS)
            inputs.append(names.ACTION_MASKS)
        memory_in = prev_action = None
        if policy.use_recurrent:
            # ML-Agents 2.0: recurrent_in [batch, 1, memory_size] -> recurrent_out, same shape.
            recurrent_in = tf.placeholder(tf.float32, [None, 1, policy.memory_size], name=names.RECURRENT_IN)
            inputs.append(names.RECURRENT_IN)
            memory_in = tf.reshape(recurrent_in, [-1, policy.memory_size])
            if action_spec.is_discrete:
                prev_action = tf.placeholder(tf.int32, [None, action_spec.discrete_size], name=names.PREV_ACTION)
                inputs.append(names.PREV_ACTION)
        actor = build_actor(
            obs, masks, spec, network, normalizers, policy.squashed, memory_in=memory_in, prev_action=prev_action
        )

        if legacy_names:
            if action_spec.is_continuous:
                eps = tf.placeholder(tf.float32, [None, action_spec.continuous_size], name=names.LEGACY_EPSILON)
                inputs.append(names.LEGACY_EPSILON)
                gauss = actor.continuous
                raw = gauss.mean + tf.exp(gauss.log_std) * eps
                tf.identity(env_continuous(raw), name=names.LEGACY_ACTION)
                per_dim = -0.5 * tf.square(eps) - gauss.log_std - 0.5 * float(np.log(2.0 * np.pi))
                tf.identity(per_dim, name=names.LEGACY_ACTION_PROBS)
                shape = action_spec.continuous_size
            else:
                log_probs = tf.concat(actor.discrete.log_probs, axis=1)
                tf.identity(log_probs, name=names.LEGACY_ACTION)
                tf.exp(log_probs, name=names.LEGACY_ACTION_PROBS)
                shape = sum(action_spec.discrete_branches)
            _int_const([names.LEGACY_VERSION], names.VERSION_NUMBER)
            _int_const([0], names.MEMORY_SIZE)
            _int_const([int(action_spec.is_continuous)], names.LEGACY_IS_CONTINUOUS)
            _int_const([shape], names.LEGACY_ACTION_OUTPUT_SHAPE)
            outputs = [
                names.LEGACY_ACTION,
                names.LEGACY_ACTION_PROBS,
                names.VERSION_NUMBER,
                names.MEMORY_SIZE,
                names.LEGACY_IS_CONTINUOUS,
                names.LEGACY_ACTION_OUTPUT_SHAPE,
            ]
        else:
            _float_const([names.MODEL_EXPORT_VERSION], names.VERSION_NUMBER)
            _float_const([policy.memory_size], names.MEMORY_SIZE)
            outputs = [names.VERSION_NUMBER, names.MEMORY_SIZE]
            if actor.continuous is not None:
                tf.identity(actor.continuous.to_env(actor.continuous.sample), name=names.CONTINUOUS_ACTIONS)
                _float_const([action_spec.continuous_size], names.CONTINUOUS_ACTION_OUTPUT_SHAPE)
                tf.identity(actor.continuous.to_env(actor.continuous.mean), name=names.DETERMINISTIC_CONTINUOUS_ACTIONS)
                outputs += [
                    names.CONTINUOUS_ACTIONS,
                    names.CONTINUOUS_ACTION_OUTPUT_SHAPE,
                    names.DETERMINISTIC_CONTINUOUS_ACTIONS,
                ]
            if actor.discrete is not None:
                tf.cast(actor.discrete.sample, tf.int64, name=names.DISCRETE_ACTIONS)
                _float_const([list(action_spec.discrete_branches)], names.DISCRETE_ACTION_OUTPUT_SHAPE)
                tf.cast(actor.discrete.deterministic, tf.int64, name=names.DETERMINISTIC_DISCRETE_ACTIONS)
                outputs += [
                    names.DISCRETE_ACTIONS,
                    names.DISCRETE_ACTION_OUTPUT_SHAPE,
                    names.DETERMINISTIC_DISCRETE_ACTIONS,
                ]
            if actor.memory_out is not None:
                tf.reshape(actor.memory_out, [-1, 1, policy.memory_size], name=names.RECURRENT_OUT)
                outputs.append(names.RECURRENT_OUT)
        export_vars = graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)

    live = {v.op.name: v for v in policy.graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)}
    missing = [v.op.name for v in export_vars if v.op.name not in live]
    if missing:
        raise ExportError(
            f"{policy.behavior_name}: the training graph has no variable {missing[0]!r} "
            "(the policy was built with other network settings)"
        )
    values = policy.session.run([live[v.op.name] for v in export_vars])
    for v, value in zip(export_vars, values):
        expected = tuple(v.shape.as_list())
        if tuple(np.shape(value)) != expected:
            raise ExportError(
                f"{policy.behavior_name}: variable {v.op.name} has shape {np.shape(value)} in the "
                f"training graph but {expected} in the export graph"
            )
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf.Session(graph=graph, config=config) as sess:
        if export_vars:
            sess.run(
                [v.initializer for v in export_vars],
                feed_dict={v.initial_value: value for v, value in zip(export_vars, values)},
            )
        frozen = tf.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), outputs)
    return FrozenActor(frozen, inputs, outputs, legacy_names)


# ----------------------------------------------------------------------- ONNX


def check_opset(opset: int) -> int:
    """The opset as an int; `ExportError` when tf2onnx cannot export this graph at it."""
    try:
        value = int(opset)
    except (TypeError, ValueError):
        raise ExportError(f"opset: expected an integer, got {opset!r}") from None
    if not MIN_OPSET <= value <= MAX_OPSET:
        raise ExportError(
            f"opset {value} is not supported: ONNX export works with opsets {MIN_OPSET} to {MAX_OPSET} "
            f"(Barracuda reads up to {BARRACUDA_MAX_OPSET}, Sentis up to {SENTIS_MAX_OPSET}; "
            f"default {DEFAULT_OPSET}, as ML-Agents)"
        )
    return value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _ErrorCapture(logging.Handler):
    """Keeps the first error tf2onnx logs (it logs conversion failures instead of raising)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.first: Optional[str] = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.first is None:
            message = record.getMessage().strip()
            self.first = message.splitlines()[0] if message else record.levelname


def _constant_outputs_as_nodes(graph, output_names: Sequence[str]) -> None:
    """Outputs that tf2onnx left as bare initializers become ``Constant`` nodes: every
    output is then produced by a node (what Unity's importer and older runtimes expect)."""
    from onnx import helper

    initializers = {t.name: t for t in graph.initializer}
    constants = []
    for name in output_names:
        tensor = initializers.get(name)
        if tensor is None:
            continue
        graph.initializer.remove(tensor)
        value = type(tensor)()
        value.CopyFrom(tensor)
        value.name = name
        constants.append(helper.make_node("Constant", [], [name], name=f"{name}_const", value=value))
    for node in reversed(constants):
        graph.node.insert(0, node)


def to_onnx(frozen: FrozenActor, opset: int = DEFAULT_OPSET, behavior_name: str = "") -> "onnx.ModelProto":
    """Converts the frozen graph with tf2onnx; inputs/outputs renamed without ``:0``, in
    contract order, with the dynamic batch dimension named ``batch``."""
    opset = check_opset(opset)
    try:
        import onnx
        import tf2onnx
    except ImportError as exc:
        raise ExportError(f"ONNX export needs tf2onnx and onnx ({exc}); pip install 'trainer-learn[export]'") from None

    rename = {f"{n}:0": n for n in frozen.input_names + frozen.output_names}
    # tf2onnx logs (with tracebacks) the nodes it cannot convert and carries on with an
    # invalid graph: keep its records, print none, and report the first one.
    capture = _ErrorCapture()
    logger = logging.getLogger("tf2onnx")
    old_level, old_propagate = logger.level, logger.propagate
    tf2onnx.logging.set_level(logging.ERROR)
    logger.addHandler(capture)
    logger.propagate = False
    logger.setLevel(logging.ERROR)
    # tf2onnx numbers the names it makes with a process-wide counter: restart it, so that
    # the same weights give the same file (whatever was exported before in this process).
    tf2onnx.utils.INTERNAL_NAME = 1
    try:
        model, _ = tf2onnx.convert.from_graph_def(
            frozen.graph_def,
            name=behavior_name or None,
            input_names=[f"{n}:0" for n in frozen.input_names],
            output_names=[f"{n}:0" for n in frozen.output_names],
            opset=opset,
            tensors_to_rename=rename,
        )
    except Exception as exc:  # tf2onnx raises many kinds; one line for the user
        raise ExportError(
            f"{behavior_name}: tf2onnx cannot convert the policy at opset {opset}: {capture.first or _first_line(exc)}"
        ) from None
    finally:
        logger.removeHandler(capture)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
    graph = model.graph
    by_name = {o.name: o for o in graph.output}
    if capture.first or set(by_name) != set(frozen.output_names) or [i.name for i in graph.input] != frozen.input_names:
        raise ExportError(
            f"{behavior_name}: tf2onnx cannot convert the policy at opset {opset}: "
            f"{capture.first or 'unexpected inputs/outputs ' + str([i.name for i in graph.input] + list(by_name))}"
        )
    _constant_outputs_as_nodes(graph, frozen.output_names)
    for node in graph.node:
        if node.op_type in RANDOM_OPS:
            kept_attributes = [a for a in node.attribute if a.name != "seed"]
            del node.attribute[:]
            node.attribute.extend(kept_attributes)
    used_domains = {node.domain or "" for node in graph.node}
    kept = [o for o in model.opset_import if (o.domain or "") in used_domains or (o.domain or "") == ""]
    del model.opset_import[:]
    model.opset_import.extend(kept)
    ordered = []
    for n in frozen.output_names:
        value = type(by_name[n])()
        value.CopyFrom(by_name[n])
        ordered.append(value)
    del graph.output[:]
    graph.output.extend(ordered)
    for value in list(graph.input) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = names.ONNX_BATCH_DIM
    model.producer_name = "trainer-learn"
    version = names.LEGACY_VERSION if frozen.legacy else names.MODEL_EXPORT_VERSION
    model.doc_string = f"{behavior_name} actor, ML-Agents model version {version}"
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise ExportError(f"{behavior_name}: the converted ONNX model is invalid at opset {opset}: {_first_line(exc)}") from None
    return model


# --------------------------------------------------------------------- checks


def check_inputs(spec: BehaviorSpec, n: int = CHECK_BATCH, seed: int = 0) -> Tuple[List[np.ndarray], Optional[np.ndarray]]:
    """A fixed batch: observations as the env gives them (visual NHWC in [0, 1]) and masks
    (1 = allowed; the first row all allowed, every branch keeps at least one action)."""
    rng = np.random.default_rng(seed)
    obs = []
    for o in spec.observation_specs:
        if o.kind == ObservationKind.VISUAL:
            obs.append(rng.uniform(0.0, 1.0, (n,) + o.shape).astype(np.float32))
        else:
            obs.append(rng.normal(0.0, 2.0, (n,) + o.shape).astype(np.float32))
    masks = None
    branches = spec.action_spec.discrete_branches
    if branches:
        parts = []
        for size in branches:
            m = (rng.uniform(size=(n, size)) < 0.6).astype(np.float32)
            m[np.arange(n), rng.integers(0, size, n)] = 1.0
            m[0] = 1.0
            parts.append(m)
        masks = np.concatenate(parts, axis=1)
    return obs, masks


def model_feeds(
    frozen_inputs: Sequence[str],
    spec: BehaviorSpec,
    obs: Sequence[np.ndarray],
    masks: Optional[np.ndarray],
    legacy: bool,
    memory: Optional[np.ndarray] = None,
    prev_action: Optional[np.ndarray] = None,
) -> Dict[str, np.ndarray]:
    """Input name -> array for an exported model, from env-layout observations (and, for a
    recurrent model, ``memory`` ``[N, memory_size]`` and ``prev_action`` ``[N, branches]``)."""
    n = obs[0].shape[0]
    feeds: Dict[str, np.ndarray] = {}
    if legacy:
        vectors = [o for o, s in zip(obs, spec.observation_specs) if s.kind == ObservationKind.VECTOR]
        if vectors:
            feeds[names.LEGACY_VECTOR_OBSERVATION] = np.concatenate(vectors, axis=1).astype(np.float32)
        visual = [o for o, s in zip(obs, spec.observation_specs) if s.kind == ObservationKind.VISUAL]
        for k, o in enumerate(visual):
            feeds[names.legacy_visual_name(k)] = o
        if spec.action_spec.is_continuous:
            feeds[names.LEGACY_EPSILON] = np.zeros((n, spec.action_spec.continuous_size), np.float32)
    else:
        for i, (o, s) in enumerate(zip(obs, spec.observation_specs)):
            feeds[names.obs_name(i)] = (
                np.ascontiguousarray(o.transpose(0, 3, 1, 2)) if s.kind == ObservationKind.VISUAL else o
            )
    if masks is not None:
        feeds[names.ACTION_MASKS] = masks
    if memory is not None:
        feeds[names.RECURRENT_IN] = np.asarray(memory, np.float32)[:, None, :]
    if prev_action is not None:
        feeds[names.PREV_ACTION] = np.asarray(prev_action, np.int32)
    assert list(feeds) == list(frozen_inputs), (list(feeds), frozen_inputs)
    return feeds


def _live_reference(
    policy: Policy,
    obs: Sequence[np.ndarray],
    masks: Optional[np.ndarray],
    legacy: bool,
    memory: Optional[np.ndarray] = None,
    prev_action: Optional[np.ndarray] = None,
) -> Dict[str, np.ndarray]:
    """The training graph's deterministic outputs under the exported names (recurrent:
    ``recurrent_out`` too, as ``[N, 1, memory_size]``)."""
    feed = {ph: o for ph, o in zip(policy.obs, obs)}
    if policy.action_masks is not None:
        feed[policy.action_masks] = masks
    fetch: Dict[str, tf.Tensor] = {}
    if memory is not None:
        feed[policy.memory_in] = memory
        fetch[names.RECURRENT_OUT] = policy.memory_out
    if prev_action is not None:
        feed[policy.prev_action] = prev_action
    if legacy:
        if policy.deterministic_continuous is not None:
            fetch[names.LEGACY_ACTION] = policy.deterministic_continuous
        else:
            fetch["discrete_probs"] = policy.actor.discrete.log_probs
            fetch[names.DETERMINISTIC_DISCRETE_ACTIONS] = policy.deterministic_discrete
    else:
        if policy.deterministic_continuous is not None:
            fetch[names.DETERMINISTIC_CONTINUOUS_ACTIONS] = policy.deterministic_continuous
        if policy.deterministic_discrete is not None:
            fetch[names.DETERMINISTIC_DISCRETE_ACTIONS] = policy.deterministic_discrete
    out = policy.session.run(fetch, feed_dict=feed)
    if names.RECURRENT_OUT in out:
        out[names.RECURRENT_OUT] = out[names.RECURRENT_OUT][:, None, :]
    if "discrete_probs" in out:
        out["discrete_probs"] = np.exp(np.concatenate(out["discrete_probs"], axis=1))
    return out


def _legacy_discrete_views(action: np.ndarray, branches: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    """TF-era discrete ``action`` (log-probs) -> (probabilities, argmax per branch)."""
    probs = np.exp(action)
    argmax, offset = [], 0
    for size in branches:
        argmax.append(np.argmax(action[:, offset : offset + size], axis=1))
        offset += size
    return probs, np.stack(argmax, axis=1)


def _compare(
    runtime: str, got: Dict[str, np.ndarray], ref: Dict[str, np.ndarray], spec: BehaviorSpec, legacy: bool, behavior: str
) -> Dict[str, float]:
    diffs: Dict[str, float] = {}
    if legacy and spec.action_spec.is_discrete:
        probs, argmax = _legacy_discrete_views(got[names.LEGACY_ACTION], spec.action_spec.discrete_branches)
        pairs = {
            names.LEGACY_ACTION: (probs, ref["discrete_probs"]),
            "argmax(" + names.LEGACY_ACTION + ")": (argmax, ref[names.DETERMINISTIC_DISCRETE_ACTIONS]),
        }
    else:
        pairs = {k: (got[k], v) for k, v in ref.items()}
    for key, (a, b) in pairs.items():
        a = np.asarray(a)
        b = np.asarray(b)
        if a.shape != b.shape:
            raise ExportError(f"{behavior}: exported {runtime} output {key} has shape {a.shape}, expected {b.shape}")
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
        diffs[key] = diff
        if not diff <= CHECK_TOLERANCE:
            raise ExportError(
                f"{behavior}: exported {runtime} output {key} differs from the training graph by "
                f"{diff:.3g} (tolerance {CHECK_TOLERANCE:g})"
            )
    return diffs


def _check_sampled(
    runtime: str, got: Dict[str, np.ndarray], spec: BehaviorSpec, masks: Optional[np.ndarray], n: int, behavior: str
) -> None:
    """Sampled outputs: shapes, dtypes, range [-1, 1], masked actions never chosen."""
    a = spec.action_spec
    problems = []
    if names.CONTINUOUS_ACTIONS in got:
        c = got[names.CONTINUOUS_ACTIONS]
        if c.shape != (n, a.continuous_size) or c.dtype != np.float32 or not np.all(np.abs(c) <= 1.0):
            problems.append(f"{names.CONTINUOUS_ACTIONS} {c.dtype}{c.shape} outside [-1, 1] or misshaped")
    if names.DISCRETE_ACTIONS in got:
        d = got[names.DISCRETE_ACTIONS]
        if d.shape != (n, a.discrete_size) or d.dtype != np.int64:
            problems.append(f"{names.DISCRETE_ACTIONS} is {d.dtype}{d.shape}, expected int64{(n, a.discrete_size)}")
        else:
            offset = 0
            for b, size in enumerate(a.discrete_branches):
                chosen = d[:, b]
                if np.any((chosen < 0) | (chosen >= size)) or np.any(masks[np.arange(n), offset + chosen] == 0):
                    problems.append(f"{names.DISCRETE_ACTIONS} branch {b} chose a masked or invalid action")
                offset += size
    if problems:
        raise ExportError(f"{behavior}: exported {runtime} model: {problems[0]}")


def expected_constants(spec: BehaviorSpec, legacy: bool, memory_size: int = 0) -> Dict[str, np.ndarray]:
    """The constant outputs an exported model must have, with dtype and shape."""
    a = spec.action_spec
    if legacy:
        shape = a.continuous_size if a.is_continuous else sum(a.discrete_branches)
        return {
            names.VERSION_NUMBER: np.array([names.LEGACY_VERSION], np.int32),
            names.MEMORY_SIZE: np.array([0], np.int32),
            names.LEGACY_IS_CONTINUOUS: np.array([int(a.is_continuous)], np.int32),
            names.LEGACY_ACTION_OUTPUT_SHAPE: np.array([shape], np.int32),
        }
    out = {
        names.VERSION_NUMBER: np.array([names.MODEL_EXPORT_VERSION], np.float32),
        names.MEMORY_SIZE: np.array([memory_size], np.float32),
    }
    if a.is_continuous:
        out[names.CONTINUOUS_ACTION_OUTPUT_SHAPE] = np.array([a.continuous_size], np.float32)
    if a.is_discrete:
        out[names.DISCRETE_ACTION_OUTPUT_SHAPE] = np.array([list(a.discrete_branches)], np.float32)
    return out


def _check_constants(
    runtime: str, got: Dict[str, np.ndarray], spec: BehaviorSpec, legacy: bool, behavior: str, memory_size: int = 0
) -> None:
    for key, want in expected_constants(spec, legacy, memory_size).items():
        value = np.asarray(got[key])
        if value.dtype != want.dtype or value.shape != want.shape or not np.array_equal(value, want):
            raise ExportError(
                f"{behavior}: exported {runtime} constant {key} is {value.dtype}{list(value.shape)} "
                f"{value.tolist()}, expected {want.dtype}{list(want.shape)} {want.tolist()}"
            )


def run_frozen(frozen: FrozenActor, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Runs the frozen graph in a fresh TF graph/session; output name -> value."""
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(frozen.graph_def, name="")
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf.Session(graph=graph, config=config) as sess:
        values = sess.run(
            [f"{n}:0" for n in frozen.output_names], feed_dict={f"{k}:0": v for k, v in feeds.items()}
        )
    return dict(zip(frozen.output_names, values))


def onnx_session(model_bytes_or_path, threads: int = 1):
    """An onnxruntime CPU session with small thread pools (the networks are tiny)."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ExportError(f"checking an ONNX export needs onnxruntime ({exc}); pip install 'trainer-learn[export]'") from None

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model_bytes_or_path, options, providers=["CPUExecutionProvider"])


def run_onnx(model_bytes: bytes, output_names: Sequence[str], feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    session = onnx_session(model_bytes)
    values = session.run(list(output_names), feeds)
    return dict(zip(output_names, values))


#: Steps of the recurrent check's rollout (memories fed back at every step).
RECURRENT_CHECK_STEPS = 20


def verify(
    policy: Policy, frozen: FrozenActor, onnx_bytes: Optional[bytes], run_pb: bool = True
) -> Dict[str, Dict[str, float]]:
    """Compares the exported model(s) with the live graph; raises `ExportError` on mismatch.

    A recurrent model is checked over a `RECURRENT_CHECK_STEPS`-step rollout: every runtime
    (live graph, ONNX, frozen graph) is fed back its own ``recurrent_out`` (and its own
    deterministic discrete actions as ``prev_action``), and the outputs, memories included,
    are compared at every step (the reported difference is the maximum over the steps).
    """
    spec = policy.spec
    behavior = policy.behavior_name
    obs, masks = check_inputs(spec)
    n = obs[0].shape[0]
    recurrent = policy.use_recurrent and not frozen.legacy
    steps = RECURRENT_CHECK_STEPS if recurrent else 1
    runtimes = (["onnx"] if onnx_bytes is not None else []) + (["pb"] if run_pb else [])
    session = onnx_session(onnx_bytes) if onnx_bytes is not None else None
    memory = {r: np.zeros((n, policy.memory_size), np.float32) for r in ["live"] + runtimes}
    with_prev = recurrent and policy.prev_action is not None
    prev = {r: np.zeros((n, spec.action_spec.discrete_size), np.int32) for r in memory}
    diffs: Dict[str, Dict[str, float]] = {r: {} for r in runtimes}
    for t in range(steps):
        if t:
            obs, masks = check_inputs(spec, seed=t)
        ref = _live_reference(
            policy, obs, masks, frozen.legacy,
            memory["live"] if recurrent else None, prev["live"] if with_prev else None,
        )
        for runtime in runtimes:
            feeds = model_feeds(
                frozen.input_names, spec, obs, masks, frozen.legacy,
                memory[runtime] if recurrent else None, prev[runtime] if with_prev else None,
            )
            if runtime == "onnx":
                got = dict(zip(frozen.output_names, session.run(list(frozen.output_names), feeds)))
            else:
                got = run_frozen(frozen, feeds)
            if t == 0:
                _check_constants(runtime, got, spec, frozen.legacy, behavior, policy.memory_size if recurrent else 0)
                if not frozen.legacy:
                    _check_sampled(runtime, got, spec, masks, n, behavior)
            for key, diff in _compare(runtime, got, ref, spec, frozen.legacy, behavior).items():
                diffs[runtime][key] = max(diff, diffs[runtime].get(key, 0.0))
            if recurrent:
                memory[runtime] = got[names.RECURRENT_OUT][:, 0, :]
                if with_prev:
                    prev[runtime] = got[names.DETERMINISTIC_DISCRETE_ACTIONS].astype(np.int32)
        if recurrent:
            memory["live"] = ref[names.RECURRENT_OUT][:, 0, :]
            if with_prev:
                prev["live"] = ref[names.DETERMINISTIC_DISCRETE_ACTIONS].astype(np.int32)
    return diffs


# --------------------------------------------------------------------- export


def _write_atomic(path: str, data: bytes) -> None:
    directory = os.path.dirname(path) or "."
    descriptor, temporary = tempfile.mkstemp(prefix=".export.", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def export_policy(
    policy: Policy,
    out_dir: str,
    step: Optional[int] = None,
    formats: Sequence[str] = FORMATS,
    opset: int = DEFAULT_OPSET,
    legacy_names: bool = False,
    check: bool = True,
    file_stem: Optional[str] = None,
) -> ExportResult:
    """Exports the actor of ``policy`` to ``out_dir``.

    Writes ``<stem>.pb`` / ``<stem>.onnx`` and, when ``step`` is given, also
    ``<stem>-<step>.pb`` / ``<stem>-<step>.onnx`` (stem: the behavior name unless
    ``file_stem``). Files are written atomically (a temporary file, then a rename), so a
    runtime watching the directory never reads half a model.

    Args:
        policy: the live policy (its graph may be finalized; it is only read).
        out_dir: created if missing.
        step: the trainer step, for the per-step copies.
        formats: any of ``pb``, ``onnx``.
        opset: ONNX opset (MIN_OPSET..MAX_OPSET).
        legacy_names: TF-era (version 2) names instead of ML-Agents 2.0's.
        check: run the exported model(s) and compare with the live graph (ExportError above
            1e-5).

    Raises:
        ExportError: unknown format, unsupported opset, recurrent policy, conversion failure,
            or a mismatch found by the check.
    """
    start = time.perf_counter()
    formats = tuple(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ExportError(f"unknown export format {unknown[0] if unknown else '(none)'!r}; expected pb, onnx or both")
    if "onnx" in formats:
        opset = check_opset(opset)
    frozen = freeze_actor(policy, legacy_names)
    stem = file_stem or policy.behavior_name
    result = ExportResult(
        behavior_name=policy.behavior_name,
        version=names.LEGACY_VERSION if legacy_names else names.MODEL_EXPORT_VERSION,
        opset=opset,
        input_names=list(frozen.input_names),
        output_names=list(frozen.output_names),
    )
    payloads: Dict[str, bytes] = {}
    if "pb" in formats:
        payloads["pb"] = frozen.graph_def.SerializeToString()
    if "onnx" in formats:
        payloads["onnx"] = to_onnx(frozen, opset, policy.behavior_name).SerializeToString()
    if check:
        result.diffs = verify(policy, frozen, payloads.get("onnx"), run_pb=True)
    os.makedirs(out_dir, exist_ok=True)
    for ext in FORMATS:
        if ext not in payloads:
            continue
        path = os.path.join(out_dir, f"{stem}.{ext}")
        _write_atomic(path, payloads[ext])
        result.files.append(path)
        if ext == "onnx":
            result.onnx_path = path
        else:
            result.pb_path = path
        if step is not None:
            step_path = os.path.join(out_dir, f"{stem}-{int(step)}.{ext}")
            _write_atomic(step_path, payloads[ext])
            result.files.append(step_path)
    result.seconds = time.perf_counter() - start
    return result


def format_diffs(result: ExportResult) -> List[str]:
    """Human-readable lines of the check: one per runtime and compared output."""
    lines = []
    for runtime, per in result.diffs.items():
        for key, diff in per.items():
            lines.append(f"{result.behavior_name}: {runtime:4s} {key}: max abs diff {diff:.3g}")
    return lines


__all__ = [
    "ExportError",
    "ExportResult",
    "FrozenActor",
    "export_policy",
    "freeze_actor",
    "to_onnx",
    "verify",
    "check_opset",
    "expected_constants",
    "format_diffs",
    "FORMATS",
    "DEFAULT_OPSET",
    "MIN_OPSET",
    "MAX_OPSET",
]
