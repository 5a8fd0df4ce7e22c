"""The LSTM of recurrent policies and critics, written over ``get_variable`` (no Keras).

Memory layout (ML-Agents / TF-era ``LSTMStateTuple(c, h)``): one vector
``memory = concat(c, h)`` of ``memory_size`` floats, so ``memory_size`` is even and the
LSTM has ``memory_size // 2`` units; its output (the encoding the heads read) is ``h``.

Three ways to run the same weights:

* `lstm_sequences`: training. Rows ``[S * L, in]`` are ``S`` sequences of ``L`` (static)
  consecutive steps; ``memory_in`` ``[S, memory_size]`` is each sequence's initial memory.
  Unrolled in Python (``L`` cell copies), so there is no loop op in the graph. With a
  ``step_mask`` ``[S * L]`` (0 on the left padding of an episode's first sequence, as BC's
  demo sequences have), a masked step leaves the state unchanged: the first real step then
  starts from exactly the given memory. With ``reset`` ``[S * L]``
  the update buffer's packed sequences (several trajectories back to back in one
  sequence): ``memory_in`` is then per row ``[S * L, memory_size]`` (the memory each step
  acted from) and a step with ``reset`` 1 (a trajectory's first step; every sequence's
  first step implicitly) starts from its row's memory instead of the carried state.
* the same with ``L = 1``: inference (one step per agent, ``S`` = agents). This is what is
  exported (no loop op for tf2onnx).
* `lstm_trajectory`: one trajectory of dynamic length ``T`` from one memory (one fused op),
  returning every intermediate memory: the critic's value estimates of a trajectory and
  the critic memory at each step in one run.

The cell (forget-gate bias initialised to 1)::

    i, f, g, o = split(x W_x + h W_h + b)
    c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h' = sigmoid(o) * tanh(c')
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Tuple

import numpy as np

from trainers.tf import tf


# Gradients of the unrolled cell's elementwise ops whose operands all have one shape.
# TF's own gradients for Mul, AddV2 and SelectV2 reduce over broadcast axes, and with a
# dynamic batch axis (the update's sequence count) that is four extra ops per operand
# (Shape, BroadcastGradientArgs, Sum, Reshape): about half of the update's ops with an
# LSTM (3,000 of 5,600 for sequence_length 64). In the cell every operand of these ops has
# the output's shape (a select's condition broadcasts, but has no gradient), so nothing
# needs reducing.
@tf.RegisterGradient("TrainerSameShapeMul")
def _same_shape_mul_grad(op: tf.Operation, grad: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    return grad * op.inputs[1], grad * op.inputs[0]


@tf.RegisterGradient("TrainerSameShapeAdd")
def _same_shape_add_grad(op: tf.Operation, grad: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    return grad, grad


@tf.RegisterGradient("TrainerSameShapeSelect")
def _same_shape_select_grad(op: tf.Operation, grad: tf.Tensor) -> Tuple[None, tf.Tensor, tf.Tensor]:
    zeros = tf.zeros([], grad.dtype)
    condition = op.inputs[0]
    return None, tf.where_v2(condition, grad, zeros), tf.where_v2(condition, zeros, grad)


@contextlib.contextmanager
def _same_shape_gradients() -> Iterator[None]:
    """Ops built inside use the gradients above (only for the unrolled cell, whose
    operands are known to share the output's shape)."""
    with tf.get_default_graph().gradient_override_map(
        {"Mul": "TrainerSameShapeMul", "AddV2": "TrainerSameShapeAdd", "SelectV2": "TrainerSameShapeSelect"}
    ):
        yield


def _weights(in_size: int, units: int, name: str) -> Tuple[tf.Variable, tf.Variable, tf.Variable]:
    with tf.variable_scope(name):
        kernel_x = tf.get_variable(
            "kernel_x", [in_size, 4 * units], tf.float32, tf.glorot_uniform_initializer()
        )
        kernel_h = tf.get_variable("kernel_h", [units, 4 * units], tf.float32, tf.orthogonal_initializer())
        bias_init = np.zeros(4 * units, np.float32)
        bias_init[units : 2 * units] = 1.0  # forget gate: remember by default
        bias = tf.get_variable("bias", [4 * units], tf.float32, tf.constant_initializer(bias_init))
    return kernel_x, kernel_h, bias


def _cell(xw: tf.Tensor, c: tf.Tensor, h: tf.Tensor, kernel_h: tf.Tensor, units: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """One step from the precomputed input projection ``xw`` ``[B, 4u]``: -> (c', h').
    With a leading network axis (``[N, B, 4u]``, ``kernel_h`` ``[N, u, 4u]``) it steps N
    LSTMs at once (`LSTMPartner`)."""
    gates = xw + tf.matmul(h, kernel_h)
    i, f, g, o = tf.split(gates, 4, axis=gates.shape.ndims - 1)  # static axis: plain for tf2onnx
    c_new = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    h_new = tf.sigmoid(o) * tf.tanh(c_new)
    return c_new, h_new


def _first_units(memory: tf.Tensor, units: int) -> tf.Tensor:
    """``c`` of ``concat(c, h)`` on the last axis (plain 2-D/3-D slices, no ellipsis)."""
    if memory.shape.ndims == 2:
        return memory[:, :units]
    return memory[:, :, :units] if memory.shape.ndims == 3 else memory[:, :, :, :units]


def _last_units(memory: tf.Tensor, units: int) -> tf.Tensor:
    """``h`` of ``concat(c, h)`` on the last axis."""
    if memory.shape.ndims == 2:
        return memory[:, units:]
    return memory[:, :, units:] if memory.shape.ndims == 3 else memory[:, :, :, units:]


class LSTMPartner:
    """A second LSTM over the same rows (another network's encoding, its own weights and
    memories, the same resets) that the next `lstm_sequences` call steps in the same ops.

    Why: the update's cost is the unrolled loop's op count, not its arithmetic (4
    sequences per minibatch), and PPO's actor and critic each unroll an LSTM over the same
    rows; stepping both in one batched cell halves the ops per step.

    Build it inside the partner network's variable scope (its weights are created there,
    under ``name``); after that call, ``output`` ``[S * L, memory_size // 2]`` and
    ``memory_out`` ``[S, memory_size]`` hold its results.
    """

    def __init__(self, x: tf.Tensor, memory_in: tf.Tensor, memory_size: int, name: str) -> None:
        units = memory_size // 2
        kernel_x, self.kernel_h, bias = _weights(int(x.shape[-1]), units, name)
        self.xw = tf.matmul(x, kernel_x) + bias
        self.memory_in = memory_in
        self.memory_size = memory_size
        self.output: Optional[tf.Tensor] = None
        self.memory_out: Optional[tf.Tensor] = None


def lstm_sequences(
    x: tf.Tensor,
    memory_in: tf.Tensor,
    sequence_length: int,
    memory_size: int,
    name: str,
    step_mask: Optional[tf.Tensor] = None,
    reset: Optional[tf.Tensor] = None,
    partner: Optional[LSTMPartner] = None,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Runs ``S`` sequences of ``L`` steps.

    Args:
        x: ``[S * L, in]`` inputs, sequence-major (rows ``s * L .. s * L + L - 1``).
        memory_in: ``[S, memory_size]`` initial ``concat(c, h)`` per sequence; with
            ``reset``, ``[S * L, memory_size]``: the memory each row's step started from.
        sequence_length: ``L`` (static).
        memory_size: even.
        name: variable scope of the weights.
        step_mask: optional ``[S * L]`` float, 0 where a step must not change the state.
        reset: optional ``[S * L]`` float, 1 where a step starts from its row of
            ``memory_in`` (a trajectory start inside a packed sequence), else 0.
        partner: another LSTM stepped in the same ops (same rows, masks and resets; its
            results are set on it).
    Returns:
        ``([S * L, memory_size // 2]`` outputs ``h``, ``[S, memory_size]`` final memories).
    """
    units = memory_size // 2
    in_size = int(x.shape[-1])
    kernel_x, kernel_h, bias = _weights(in_size, units, name)
    length = int(sequence_length)
    xw = tf.matmul(x, kernel_x) + bias
    # With a partner every tensor gets a leading network axis of 2 (this LSTM, then the
    # partner); without, the graph is plain 2-D (what export and the runtimes see).
    lead: list = []
    if partner is not None:
        if partner.memory_size != memory_size:
            raise ValueError("an LSTM partner needs the same memory_size")
        lead = [2]
        xw = tf.stack([xw, partner.xw])
        kernel_h = tf.stack([kernel_h, partner.kernel_h])
        memory_in = tf.stack([memory_in, partner.memory_in])
    time_axis = len(lead) + 1
    flag_shape = [1] * len(lead) + [-1, length, 1]
    # Per-step inputs by one unstack each, not a strided slice per step: the gradient of
    # an unstack is one stack, while each slice's gradient writes a whole [S, L, 4u] tensor
    # of zeros around its step (L of them, summed).
    xw = tf.unstack(tf.reshape(xw, lead + [-1, length, 4 * units]), length, axis=time_axis)
    # Resets and masks select (tf.where: one op forward, exact) rather than blend.
    masks = None if step_mask is None else tf.unstack(tf.reshape(step_mask > 0.0, flag_shape), length, axis=time_axis)
    rows_c = rows_h = resets = None
    if reset is not None:
        rows_memory = tf.reshape(memory_in, lead + [-1, length, memory_size])
        rows_c = tf.unstack(_first_units(rows_memory, units), length, axis=time_axis)
        rows_h = tf.unstack(_last_units(rows_memory, units), length, axis=time_axis)
        resets = tf.unstack(tf.reshape(reset > 0.0, flag_shape), length, axis=time_axis)
        c, h = rows_c[0], rows_h[0]  # a sequence always starts from its first row's memory
    else:
        c, h = _first_units(memory_in, units), _last_units(memory_in, units)
    outputs = []
    # Training unrolls (L > 1) get the cheap gradients; the one-step graph that is
    # exported stays plain.
    with _same_shape_gradients() if length > 1 else contextlib.nullcontext():
        for t in range(length):
            if resets is not None and t > 0:
                # A trajectory starts here: the stored memory it acted from.
                c = tf.where_v2(resets[t], rows_c[t], c)
                h = tf.where_v2(resets[t], rows_h[t], h)
            c_new, h_new = _cell(xw[t], c, h, kernel_h, units)
            if masks is not None:
                c_new = tf.where_v2(masks[t], c_new, c)
                h_new = tf.where_v2(masks[t], h_new, h)
            c, h = c_new, h_new
            outputs.append(h)
    out = tf.reshape(tf.stack(outputs, axis=time_axis), lead + [-1, units]) if length > 1 else outputs[0]
    final = tf.concat([c, h], axis=len(lead) + 1)
    if partner is not None:
        partner.output, partner.memory_out = out[1], final[1]
        return out[0], final[0]
    return out, final


def lstm_trajectory(x: tf.Tensor, memory_in: tf.Tensor, memory_size: int, name: str) -> Tuple[tf.Tensor, tf.Tensor]:
    """One trajectory of dynamic length from one memory.

    One fused ``BlockLSTMV2`` op runs every step: it has this cell's gate layout (i, f,
    g, o: IFCO) and no forget bias of its own, so it takes the weights as they are
    (``[x, h] @ concat(W_x, W_h) + b``), and it returns every intermediate ``c`` and ``h``.
    A ``tf.scan`` of the cell cost ~10 ops per step in a while loop: 0.6 ms a call for
    the Memory benchmark's trajectories. Used for value estimates only (no gradient, not
    exported).

    Args:
        x: ``[T, in]``; memory_in: ``[1, memory_size]``.
    Returns:
        ``([T, memory_size // 2]`` outputs ``h``, ``[T, memory_size]`` the memory *after*
        each step).
    """
    units = memory_size // 2
    kernel_x, kernel_h, bias = _weights(int(x.shape[-1]), units, name)
    no_peephole = tf.zeros([units], tf.float32)
    outputs = tf.raw_ops.BlockLSTMV2(
        seq_len_max=tf.cast(tf.shape(x)[0], tf.int64),
        x=x[:, None, :],
        cs_prev=memory_in[:, :units],
        h_prev=memory_in[:, units:],
        w=tf.concat([kernel_x, kernel_h], axis=0),
        wci=no_peephole,
        wcf=no_peephole,
        wco=no_peephole,
        b=bias,
        cell_clip=0.0,  # no clipping
        use_peephole=False,
    )
    c, h = outputs.cs[:, 0, :], outputs.h[:, 0, :]
    return h, tf.concat([c, h], axis=1)
