"""Towers: one training graph replicated over devices, gradients and statistics averaged.

A tower is the output of one builder function called under ``tf.device(device)`` on its
shard of the minibatch; variables are shared (``AUTO_REUSE``) and live on one variable
device. One device is simply one tower: there is no second code path.

**Split rule.** The minibatch holds ``S`` whole sequences of ``L`` rows (``L`` = 1 without
memory). Tower ``i`` of ``N`` gets ``S // N`` sequences, plus one more for the first
``S % N`` towers; a sequence never crosses towers. A tower may be empty when ``S < N``.

**Averaging rule.** Every tower computes its losses as masked means over its own valid rows
(the ``masks`` field; padded LSTM rows are 0) and reports its valid-row count ``n_i``. The
applied gradient of every optimizer group is ``sum_i (n_i / sum_j n_j) * grad_i``, and
every statistic is averaged with the same weights. This equals the gradient of the mean
over the whole minibatch, so 1 tower and N towers give the same update even when the split
is uneven (tests prove it to float32 round-off). A tower left without rows (fewer
sequences than towers) has weight 0 and contributes exactly nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from trainers.tf import tf

VARIABLE_OPS = frozenset({"VariableV2", "VarHandleOp", "Variable", "VarIsInitializedOp"})


@dataclass(frozen=True)
class TowerOutput:
    """What one tower contributes.

    Attributes:
        losses: optimizer-group name -> scalar loss (masked mean over the tower's rows).
        stats: stat name -> scalar (mean over the tower's rows).
        weight: scalar float32, the tower's number of valid rows.
    """

    losses: Mapping[str, tf.Tensor]
    stats: Mapping[str, tf.Tensor]
    weight: tf.Tensor


@dataclass(frozen=True)
class OptimizerGroup:
    """One network trained by one optimizer: the trainable variables under ``scopes``.

    ``joint``: groups with the same non-empty key are always run together and their losses
    read each other's variables; every apply among them waits for all their gradients.
    """

    name: str
    optimizer: tf.train.Optimizer
    scopes: Tuple[str, ...]
    joint: str = ""
    max_grad_norm: Optional[float] = None
    """Clip the group's averaged gradient to this global norm (None: no clipping)."""


@dataclass(frozen=True)
class TowerGraph:
    """The averaged result of all towers.

    Attributes:
        apply_ops: group name -> the op applying that group's averaged gradients.
        gradients: group name -> list of (averaged gradient, variable).
        stats: stat name -> weighted mean over towers.
        tower_stats: per tower, stat name -> scalar (for placement/debug checks).
        devices: the tower devices, in order.
    """

    apply_ops: Mapping[str, tf.Operation]
    gradients: Mapping[str, List[Tuple[tf.Tensor, tf.Variable]]]
    stats: Mapping[str, tf.Tensor]
    tower_stats: Sequence[Mapping[str, tf.Tensor]]
    devices: Tuple[str, ...]


def split_sizes(num_sequences: tf.Tensor, num_towers: int) -> tf.Tensor:
    """``[num_towers]`` int32: sequences per tower by the split rule above."""
    base = num_sequences // num_towers
    extra = num_sequences % num_towers
    return base + tf.cast(tf.range(num_towers) < extra, tf.int32)


def split_by_sequence(
    batch: Mapping[str, tf.Tensor],
    num_towers: int,
    sequence_length: int,
    sequence_keys: Sequence[str] = (),
) -> List[Dict[str, tf.Tensor]]:
    """Splits every tensor of ``batch`` into ``num_towers`` shards of whole sequences.

    Args:
        batch: name -> tensor; row tensors are ``[S * L, ...]``, tensors named in
            ``sequence_keys`` hold one row per sequence ``[S, ...]`` (initial memories).
        num_towers: N.
        sequence_length: L.
    Returns:
        N dicts with the same keys.
    """
    if num_towers == 1:
        return [dict(batch)]
    row_key = next(k for k in batch if k not in sequence_keys)
    num_rows = tf.shape(batch[row_key])[0]
    seq_sizes = split_sizes(num_rows // sequence_length, num_towers)
    row_sizes = seq_sizes * sequence_length
    shards: List[Dict[str, tf.Tensor]] = [{} for _ in range(num_towers)]
    for key, tensor in batch.items():
        sizes = seq_sizes if key in sequence_keys else row_sizes
        for i, part in enumerate(tf.split(tensor, sizes, num=num_towers, axis=0)):
            shards[i][key] = part
    return shards


def _device_function(tower_device: str, variable_device: str) -> Callable[[tf.Operation], str]:
    """Places variables on ``variable_device`` and every other op on ``tower_device``."""

    def place(op: tf.Operation) -> str:
        op_type = op.type if hasattr(op, "type") else op.op  # Operation or NodeDef
        return variable_device if op_type in VARIABLE_OPS else tower_device

    return place


def _group_variables(scopes: Sequence[str]) -> List[tf.Variable]:
    return [
        v for v in tf.trainable_variables() if any(v.op.name.startswith(s) for s in scopes)
    ]


def build_towers(
    builder: Callable[[Dict[str, tf.Tensor]], TowerOutput],
    batch: Mapping[str, tf.Tensor],
    groups: Sequence[OptimizerGroup],
    devices: Sequence[str],
    sequence_length: int = 1,
    sequence_keys: Sequence[str] = (),
    variable_device: Optional[str] = None,
) -> TowerGraph:
    """Builds one tower per device, averages gradients per group and applies them once.

    Args:
        builder: shard (name -> tensor) -> TowerOutput; creates or reuses variables by name.
        batch: the whole minibatch, name -> tensor (usually placeholders).
        groups: optimizer groups; every loss name of the builder must be a group name.
        devices: tower devices, e.g. ``("/cpu:0", "/cpu:1")``.
        sequence_length: rows per sequence (split unit).
        sequence_keys: batch keys with one row per sequence.
        variable_device: where variables live (default: the first tower device; for
            cluster towers, on ``/job:...`` devices, no device: the distributed master
            places them on its own task, the chief).
    """
    devices = tuple(devices)
    if variable_device is None:
        variable_device = "" if devices[0].startswith("/job:") else devices[0]
    var_device = variable_device
    shards = split_by_sequence(batch, len(devices), sequence_length, sequence_keys)
    outputs: List[TowerOutput] = []
    tower_grads: List[Dict[str, List[Optional[tf.Tensor]]]] = []
    group_vars: Dict[str, List[tf.Variable]] = {}
    for i, device in enumerate(devices):
        with tf.device(_device_function(device, var_device)), tf.name_scope(f"tower_{i}"):
            out = builder(shards[i])
            if not group_vars:
                for g in groups:
                    group_vars[g.name] = _group_variables(g.scopes)
                    if not group_vars[g.name]:
                        raise ValueError(f"optimizer group {g.name!r} has no variables under {g.scopes}")
            grads = {
                g.name: tf.gradients(out.losses[g.name], group_vars[g.name], colocate_gradients_with_ops=True)
                for g in groups
            }
        outputs.append(out)
        tower_grads.append(grads)

    with tf.device(var_device), tf.name_scope("tower_average"):
        total = tf.add_n([o.weight for o in outputs]) if len(outputs) > 1 else outputs[0].weight
        # With one tower the weight is exactly 1 and nothing is rescaled.
        weights: Optional[List[tf.Tensor]] = (
            [o.weight / tf.maximum(total, 1.0) for o in outputs] if len(outputs) > 1 else None
        )

        def average(values: Sequence[Optional[tf.Tensor]], like: tf.Tensor) -> tf.Tensor:
            if weights is None:
                return values[0] if values[0] is not None else tf.zeros_like(like)
            # An empty tower (weight 0) contributes exactly nothing, even if a mean over
            # its zero rows produced NaN.
            terms = [
                tf.where_v2(w > 0, tf.cast(w, v.dtype) * v, tf.zeros_like(v))
                for w, v in zip(weights, values)
                if v is not None
            ]
            return tf.add_n(terms) if terms else tf.zeros_like(like)

        averaged: Dict[str, List[Tuple[tf.Tensor, tf.Variable]]] = {}
        for g in groups:
            averaged[g.name] = [
                (average([tg[g.name][j] for tg in tower_grads], var), var)
                for j, var in enumerate(group_vars[g.name])
            ]
            if g.max_grad_norm is not None:
                # After averaging: the norm of the whole minibatch's gradient, as with one
                # tower, whatever the number of towers.
                clipped, _ = tf.clip_by_global_norm([t for t, _ in averaged[g.name]], g.max_grad_norm)
                averaged[g.name] = [(t, v) for t, (_, v) in zip(clipped, averaged[g.name])]
        stats = {
            name: average([tf.cast(o.stats[name], tf.float32) for o in outputs], outputs[0].stats[name])
            for name in outputs[0].stats
        }
        # Groups that share a ``joint`` key read each other's variables (SAC's policy loss
        # reads both Q networks): each of their applies waits for all of their gradients,
        # or an apply could update a network before another loss read it and the run would
        # mix old and new weights at random (seen: SAC's policy loss moved by 1e-4 between
        # identical runs). Other groups stay independent: a run may fetch one of them alone.
        apply_ops: Dict[str, tf.Operation] = {}
        for g in groups:
            joint = [t for h in groups if g.joint and h.joint == g.joint for t, _ in averaged[h.name]]
            with tf.control_dependencies(joint):
                apply_ops[g.name] = g.optimizer.apply_gradients(averaged[g.name], name=f"apply_{g.name}")
    return TowerGraph(apply_ops, averaged, stats, [o.stats for o in outputs], devices)


def masked_mean(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Mean of ``x`` ``[B]`` over rows where ``mask`` ``[B]`` is 1; 0 for an empty tower."""
    return tf.reduce_sum(x * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)
