"""Export, step 1: the actor built again in its own graph with the contract's inputs and
outputs (`trainers.export`), the live weights copied in by variable name and folded to
constants (`freeze_actor`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, cast

import numpy as np

from envs.base_env import BehaviorSpec, ObservationKind
from trainers.exceptions import TrainerError
from trainers.policy import Policy, build_actor
from trainers.tf import names, tf
from trainers.tf.distributions import env_continuous
from trainers.tf.normalizer import CLIP as NORMALIZER_CLIP, Normalizer


class ExportError(TrainerError):
    """A model cannot be exported, or the exported model does not match the training graph."""


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


def _const(constants: Mapping[str, np.ndarray], name: str) -> tf.Tensor:
    """One of the contract's constant outputs (`names.contract_constants`)."""
    return tf.constant(constants[name], name=name)


def _check_exportable(policy: Policy, legacy: bool) -> None:
    if legacy and policy.use_recurrent:
        raise ExportError(
            f"{policy.behavior_name}: recurrent policies (memory) are exported in the ML-Agents 2.0 "
            "form only; export without legacy names"
        )
    if legacy and any(o.kind == ObservationKind.ENTITIES for o in policy.spec.observation_specs):
        raise ExportError(
            f"{policy.behavior_name}: entity (variable-length) observations have no TF-era (version 2) "
            "form; export without legacy names"
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
    constants = names.contract_constants(
        action_spec.continuous_size, action_spec.discrete_branches, policy.memory_size, legacy_names
    )
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
                    assert vector_in is not None  # built above: this spec is in vector_specs
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
        # build_actor only calls ``normalize`` on them: a `_ConstNormalizer` stands in for a `Normalizer`.
        actor = build_actor(
            obs, masks, spec, network, cast(Sequence[Optional[Normalizer]], normalizers), policy.squashed,
            memory_in=memory_in, prev_action=prev_action, state_dependent=policy.state_dependent,
            action_clip=policy.action_clip,
        )

        if legacy_names:
            if action_spec.is_continuous:
                eps = tf.placeholder(tf.float32, [None, action_spec.continuous_size], name=names.LEGACY_EPSILON)
                inputs.append(names.LEGACY_EPSILON)
                gauss = actor.continuous
                assert gauss is not None  # built for a continuous spec
                raw = gauss.mean + tf.exp(gauss.log_std) * eps
                tf.identity(env_continuous(raw, policy.action_clip), name=names.LEGACY_ACTION)
                per_dim = -0.5 * tf.square(eps) - gauss.log_std - 0.5 * float(np.log(2.0 * np.pi))
                tf.identity(per_dim, name=names.LEGACY_ACTION_PROBS)
                shape = action_spec.continuous_size
            else:
                assert actor.discrete is not None  # built for a discrete spec
                log_probs = tf.concat(actor.discrete.log_probs, axis=1)
                tf.identity(log_probs, name=names.LEGACY_ACTION)
                tf.exp(log_probs, name=names.LEGACY_ACTION_PROBS)
                shape = sum(action_spec.discrete_branches)
            for name in (names.VERSION_NUMBER, names.MEMORY_SIZE, names.LEGACY_IS_CONTINUOUS, names.LEGACY_ACTION_OUTPUT_SHAPE):
                _const(constants, name)
            outputs = [
                names.LEGACY_ACTION,
                names.LEGACY_ACTION_PROBS,
                names.VERSION_NUMBER,
                names.MEMORY_SIZE,
                names.LEGACY_IS_CONTINUOUS,
                names.LEGACY_ACTION_OUTPUT_SHAPE,
            ]
        else:
            _const(constants, names.VERSION_NUMBER)
            _const(constants, names.MEMORY_SIZE)
            outputs = [names.VERSION_NUMBER, names.MEMORY_SIZE]
            if actor.continuous is not None:
                tf.identity(actor.continuous.to_env(actor.continuous.sample), name=names.CONTINUOUS_ACTIONS)
                _const(constants, names.CONTINUOUS_ACTION_OUTPUT_SHAPE)
                tf.identity(actor.continuous.to_env(actor.continuous.mean), name=names.DETERMINISTIC_CONTINUOUS_ACTIONS)
                outputs += [
                    names.CONTINUOUS_ACTIONS,
                    names.CONTINUOUS_ACTION_OUTPUT_SHAPE,
                    names.DETERMINISTIC_CONTINUOUS_ACTIONS,
                ]
            if actor.discrete is not None:
                tf.cast(actor.discrete.sample, tf.int64, name=names.DISCRETE_ACTIONS)
                _const(constants, names.DISCRETE_ACTION_OUTPUT_SHAPE)
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
