"""The LSTM of recurrent policies and critics, written over ``get_variable`` (no Keras).

Memory layout (ML-Agents / TF-era ``LSTMStateTuple(c, h)``): one vector
``memory = concat(c, h)`` of ``memory_size`` floats, so ``memory_size`` is even and the
LSTM has ``memory_size // 2`` units; its output (the encoding the heads read) is ``h``.

Three ways to run the same weights:

* `lstm_sequences`: training. Rows ``[S * L, in]`` are ``S`` sequences of ``L`` (static)
  consecutive steps; ``memory_in`` ``[S, memory_size]`` is each sequence's initial memory.
  Unrolled in Python (``L`` cell copies), so there is no loop op in the graph, with a
  hand-written backward pass through time (`_unroll_with_bptt`). With a
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

The cell (initialised as ML-Agents': `_weights`)::

    i, f, g, o = split(x W_x + h W_h + b)
    c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h' = sigmoid(o) * tanh(c')
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import numpy as np

from trainers.tf import tf


def _weights(in_size: int, units: int, name: str) -> Tuple[tf.Variable, tf.Variable, tf.Variable]:
    """``W_x`` ``[in, 4u]``, ``W_h`` ``[u, 4u]`` and ``b`` ``[4u]``, initialised as ML-Agents'
    LSTM (Release 22's ``lstm_layer``, a ``torch.nn.LSTM``): every gate's block of each
    kernel Xavier-uniform on its own (``[in, u]``: limit ``sqrt(6 / (in + u))``; ``[u,
    u]``: ``sqrt(6 / 2u)``), biases 0 except the forget gate's, 2 (ML-Agents adds its
    ``forget_bias`` 1 to each of torch's two biases). Why: on Memory with ML-Agents'
    recurrent test settings this learns in ~25% fewer steps than the Glorot-over-all-gates
    ``W_x``, orthogonal ``W_h`` and forget bias 1 used before (README, "Memory (LSTM)")."""
    with tf.variable_scope(name):

        def per_gate_block(rows: int) -> Callable[..., tf.Tensor]:
            # The four blocks have the same shape, so one uniform range covers them all.
            limit = float(np.sqrt(6.0 / (rows + units)))
            return tf.random_uniform_initializer(-limit, limit)

        kernel_x = tf.get_variable("kernel_x", [in_size, 4 * units], tf.float32, per_gate_block(in_size))
        kernel_h = tf.get_variable("kernel_h", [units, 4 * units], tf.float32, per_gate_block(units))
        bias_init = np.zeros(4 * units, np.float32)
        bias_init[units : 2 * units] = 2.0  # forget gate: remember by default
        bias = tf.get_variable("bias", [4 * units], tf.float32, tf.constant_initializer(bias_init))
    return kernel_x, kernel_h, bias


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
    rows; stepping both in one batched cell halves the ops per step. (Where the update
    runs on a multi-core CPU pool, two separate unrolls run faster: two chains on two
    cores; see `trainers.ppo.optimizer.critic_lstm_with_actor`.)

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


def _full(flags: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    """Per-row flags ``[..., 1]`` broadcast to the state's ``shape``, once for all steps.

    Why: in the unrolled chain, an elementwise op with a broadcast operand costs several
    times one of the same shape (README, "Figures behind choices in the code")."""
    return tf.broadcast_to(flags, shape)


def _select(condition: tf.Tensor, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """``x`` where ``condition``, else ``y`` (all the same shape).

    The v1 ``Select`` kernel, not ``SelectV2`` (`tf.where_v2`): in a chain of small ops
    on the pool SelectV2 costs more than twice as much a call even with equal shapes, and
    the training unroll runs two per step per LSTM (README, "Figures behind choices in
    the code")."""
    return tf.raw_ops.Select(condition=condition, x=x, y=y)


def _step(
    xw: tf.Tensor, c: tf.Tensor, h: tf.Tensor, kernel_h: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """One step from the input projection ``xw`` ``[*lead, S, 4u]`` and the state ``c``,
    ``h`` ``[*lead, S, u]``: -> (c', h', sigmoid(gates), g = tanh(gates' third quarter),
    tanh(c'))."""
    gates = xw + tf.matmul(h, kernel_h)
    # The sigmoid over all four gates, then one split: 2 ops for i, f and o rather than 4
    # (a split and one op per gate; the sigmoid of g is wasted arithmetic, negligible).
    # g's tanh over its own quarter only, by one slice: ~8% less time for the training
    # unroll's forward and backward than a tanh over all four gates and a second split
    # (the same numbers).
    sigmoid = tf.sigmoid(gates)
    last = gates.shape.ndims - 1  # static axis: plain for tf2onnx
    i, f, _, o = tf.split(sigmoid, 4, axis=last)
    units = int(gates.shape[last]) // 4
    g = tf.tanh(gates[:, 2 * units : 3 * units] if last == 1 else gates[:, :, 2 * units : 3 * units])
    c_new = f * c + i * g
    tanh_c = tf.tanh(c_new)
    return c_new, o * tanh_c, sigmoid, g, tanh_c


def _unroll(
    xw: tf.Tensor,
    kernel_h: tf.Tensor,
    memory: tf.Tensor,
    resets: Optional[tf.Tensor],
    masks: Optional[tf.Tensor],
    units: int,
) -> Tuple[List[tf.Tensor], tf.Tensor, tf.Tensor, dict]:
    """The forward unroll over the time axis (the one after ``lead``, the optional network
    axis of an `LSTMPartner`).

    Args:
        xw: ``[*lead, S, L, 4u]`` input projections.
        kernel_h: ``[*lead, u, 4u]``.
        memory: ``[*lead, S, 2u]`` initial memories, or with ``resets`` ``[*lead, S, L, 2u]``
            the memory each row acted from.
        resets, masks: ``[*lead or 1s, S, L, 1]`` bool, or None.
    Returns:
        (L outputs ``h`` ``[*lead, S, u]``, final ``c``, final ``h``, what the backward pass
        reads: per step ``c`` and ``h`` before it and the gate activations).
    """
    time_axis = xw.shape.ndims - 2
    length = int(xw.shape[time_axis])
    # Per-step tensors by one unstack each, not a strided slice per step.
    steps = tf.unstack(xw, length, axis=time_axis)
    state_shape = tf.concat([tf.shape(xw)[:-1], [units]], axis=0)  # c's and h's
    step_masks = None if masks is None else tf.unstack(_full(masks, state_shape), length, axis=time_axis)
    rows_c = rows_h = step_resets = None
    if resets is not None:
        rows_c = tf.unstack(_first_units(memory, units), length, axis=time_axis)
        rows_h = tf.unstack(_last_units(memory, units), length, axis=time_axis)
        step_resets = tf.unstack(_full(resets, state_shape), length, axis=time_axis)
        c, h = rows_c[0], rows_h[0]  # a sequence always starts from its first row's memory
    else:
        c, h = _first_units(memory, units), _last_units(memory, units)
    saved: dict = {k: [] for k in ("c", "h", "sigmoid", "g", "tanh_c")}
    outputs = []
    for t in range(length):
        if step_resets is not None and t > 0:
            # A trajectory starts here: the stored memory it acted from. (Selects, not
            # blends: one exact op.)
            assert rows_c is not None and rows_h is not None  # unstacked with step_resets
            c = _select(step_resets[t], rows_c[t], c)
            h = _select(step_resets[t], rows_h[t], h)
        c_new, h_new, sigmoid, g, tanh_c = _step(steps[t], c, h, kernel_h)
        for key, value in zip(saved, (c, h, sigmoid, g, tanh_c)):
            saved[key].append(value)
        if step_masks is not None:  # padding leaves the state unchanged
            c_new = _select(step_masks[t], c_new, c)
            h_new = _select(step_masks[t], h_new, h)
        c, h = c_new, h_new
        outputs.append(h)
    return outputs, c, h, saved


def _unroll_with_bptt(
    xw: tf.Tensor,
    kernel_h: tf.Tensor,
    memory: tf.Tensor,
    resets: Optional[tf.Tensor],
    masks: Optional[tf.Tensor],
    units: int,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`_unroll` (L > 1) with a hand-written backward pass through time.

    Why: the update's cost is the unrolled graph's op count (the arithmetic is tiny: 4
    sequences per minibatch), and TensorFlow differentiates each forward op on its own:
    two matmuls per step (one for ``W_h``), a gradient op per activation and product, an
    AddN wherever a tensor is read twice, about 28 ops a step. Here everything that does
    not depend on the incoming gradient (the gates' derivatives) is computed once for all
    steps, the serial part is about 8 ops a step, and ``W_h``'s gradient is one matmul over
    all steps. Same arithmetic (`tests/trainers/test_memory.py` compares every gradient with
    TensorFlow's own, 1e-6).

    Returns ``([*lead, S, L, u]`` outputs ``h``, final ``c``, final ``h`` ``[*lead, S, u]``).
    """
    time_axis = xw.shape.ndims - 2
    length = int(xw.shape[time_axis])

    @tf.custom_gradient
    def unroll(xw: tf.Tensor, kernel_h: tf.Tensor, memory: tf.Tensor) -> Tuple[tuple, Callable]:
        outputs, c_final, h_final, saved = _unroll(xw, kernel_h, memory, resets, masks, units)

        def backward(d_out: tf.Tensor, d_c: Optional[tf.Tensor], d_h: Optional[tf.Tensor]) -> list:
            def time_major(key: str) -> tf.Tensor:  # [L, *lead, S, width]
                return tf.stack(saved[key], axis=0)

            def time_first(flags: tf.Tensor) -> tf.Tensor:  # [*lead or 1s, S, L, 1] -> [L, ..., S, 1]
                rank = flags.shape.ndims
                return tf.transpose(flags, [time_axis] + [a for a in range(rank) if a != time_axis])

            i, f, _, o = tf.split(time_major("sigmoid"), 4, axis=-1)
            g = time_major("g")
            tanh_c = time_major("tanh_c")
            # What does not depend on the incoming gradient, for all steps at once:
            # d(c_t)/d(h_t) through h = o * tanh(c), and the gates' derivatives.
            dc_dh = o * (1.0 - tanh_c * tanh_c)
            gate_factors = [g * i * (1.0 - i), time_major("c") * f * (1.0 - f), i * (1.0 - g * g)]
            do_dh = tanh_c * o * (1.0 - o)
            keep = m = None
            if masks is not None:  # a padded step passes the gradient through unchanged
                m = _full(tf.cast(time_first(masks), tf.float32), tf.shape(f))
                keep = tf.unstack(1.0 - m, length)
                dc_dh, do_dh, m = dc_dh * m, do_dh * m, tf.unstack(m, length)
            f_carried = f
            if resets is not None:
                # Where a trajectory starts (t > 0) the carried state was replaced by the
                # row's memory, so the carried gradient stops there: a factor 0 (folded
                # into the forget gate's for c when there are no masks).
                restarts = tf.cast(time_first(resets)[1:], tf.float32)
                carry = tf.concat([tf.ones_like(restarts[:1]), 1.0 - restarts], axis=0)
                if masks is None:
                    f_carried = f * carry
                carry = tf.unstack(_full(carry, tf.shape(f)), length)
            factors = tf.unstack(tf.concat(gate_factors + [do_dh], axis=-1), length)
            dc_dh, forget = tf.unstack(dc_dh, length), tf.unstack(f_carried, length)
            if d_out is None:
                d_out = tf.zeros_like(xw[..., :units])
            d_steps = tf.unstack(d_out, length, axis=time_axis)
            dh = d_steps[-1] if d_h is None else d_h + d_steps[-1]
            dc = tf.zeros_like(c_final) if d_c is None else d_c
            d_gates: List[tf.Tensor] = [None] * length  # type: ignore[list-item]
            dh_prev: List[tf.Tensor] = [None] * length  # type: ignore[list-item]
            dc_prev: List[tf.Tensor] = [None] * length  # masks only  # type: ignore[list-item]
            dc_cells: List[tf.Tensor] = [None] * length  # type: ignore[list-item]
            # W_h transposed once: oneDNN's matmul with transpose_b costs more a call.
            kernel_h_t = tf.linalg.matrix_transpose(kernel_h)
            for t in reversed(range(length)):  # the serial part: about 8 ops a step
                if t < length - 1:
                    dh = dh + d_steps[t]
                dc_cells[t] = (dc if m is None else dc * m[t]) + dh * dc_dh[t]
                d_gates[t] = tf.concat([dc_cells[t]] * 3 + [dh], axis=-1) * factors[t]
                dh_prev[t] = tf.matmul(d_gates[t], kernel_h_t)
                if keep is None:
                    dc = dc_cells[t] * forget[t]
                else:
                    dh_prev[t] = dh_prev[t] + dh * keep[t]
                    dc_prev[t] = dc = dc_cells[t] * forget[t] + dc * keep[t]
                    if resets is not None and t > 0:
                        dc = dc * carry[t]
                dh = dh_prev[t] if resets is None or t == 0 else dh_prev[t] * carry[t]
            d_xw = tf.stack(d_gates, axis=time_axis)
            h_before = tf.stack(saved["h"], axis=time_axis)
            flat = [-1 if d is None else d for d in kernel_h.shape.as_list()[:-2]]
            d_kernel_h = tf.matmul(
                tf.reshape(h_before, flat + [-1, units]), tf.reshape(d_xw, flat + [-1, 4 * units]), transpose_a=True
            )
            if resets is None:
                d_memory = tf.concat([dc, dh], axis=-1)
            else:
                # Each row's stored memory gets the gradient where it was read: at a reset
                # and at every sequence's first step.
                if keep is None:  # d(c before step t) = dc_cell * f, for all steps at once
                    perm = list(range(1, time_axis + 1)) + [0, time_axis + 1]
                    dc_rows = tf.transpose(tf.stack(dc_cells, axis=0) * f, perm)
                else:
                    dc_rows = tf.stack(dc_prev, axis=time_axis)
                read = tf.concat([tf.ones_like(resets[..., :1, :]), resets[..., 1:, :]], axis=time_axis)
                d_rows = tf.concat([dc_rows, tf.stack(dh_prev, axis=time_axis)], axis=-1)
                d_memory = tf.where_v2(read, d_rows, 0.0)
            return [d_xw, d_kernel_h, d_memory]

        return (tf.stack(outputs, axis=time_axis), c_final, h_final), backward

    return unroll(xw, tf.convert_to_tensor(kernel_h), memory)


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
    flags = [1] * len(lead) + [-1, length, 1]
    resets = None if reset is None else tf.reshape(reset > 0.0, flags)
    masks = None if step_mask is None else tf.reshape(step_mask > 0.0, flags)
    if length == 1 and reset is None and step_mask is None and not lead:
        # Inference: one plain step, the graph that is exported.
        c, out = _step(xw, _first_units(memory_in, units), _last_units(memory_in, units), kernel_h)[:2]
        return out, tf.concat([c, out], axis=1)
    if reset is not None:
        memory_in = tf.reshape(memory_in, lead + [-1, length, memory_size])
    xw = tf.reshape(xw, lead + [-1, length, 4 * units])
    if length > 1:
        # Training: the hand-written backward pass (`_unroll_with_bptt`), about half the
        # ops of TensorFlow's own gradient of the same forward ops.
        stacked, c, h = _unroll_with_bptt(xw, kernel_h, memory_in, resets, masks, units)
        out = tf.reshape(stacked, lead + [-1, units])
    else:
        outputs, c, h, _ = _unroll(xw, kernel_h, memory_in, resets, masks, units)
        out = outputs[0]
    final = tf.concat([c, h], axis=len(lead) + 1)
    if partner is not None:
        # Unstack, not out[0] / out[1]: each strided slice's gradient is a zero-filled
        # [2, S * L, u] tensor, an unstack's is one stack.
        (out, partner.output), (final, partner.memory_out) = tf.unstack(out), tf.unstack(final)
    return out, final


def lstm_trajectory(x: tf.Tensor, memory_in: tf.Tensor, memory_size: int, name: str) -> Tuple[tf.Tensor, tf.Tensor]:
    """One trajectory of dynamic length from one memory.

    One fused ``BlockLSTMV2`` op runs every step: it has this cell's gate layout (i, f,
    g, o: IFCO) and no forget bias of its own, so it takes the weights as they are
    (``[x, h] @ concat(W_x, W_h) + b``), and it returns every intermediate ``c`` and ``h``.
    A ``tf.scan`` of the cell cost ~10 ops per step in a while loop (its cost: README,
    "Figures behind choices in the code"). Used for value estimates only (no gradient,
    not exported).

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
