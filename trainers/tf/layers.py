"""Hand-written layers over ``tf.compat.v1.get_variable`` (Keras 3 breaks ``tf.layers``).

Every layer creates its variables in the current variable scope, so a tower built under
``variable_scope(..., reuse=tf.AUTO_REUSE)`` shares them with every other tower.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from trainers.tf import tf

Activation = Callable[[tf.Tensor], tf.Tensor]


def swish(x: tf.Tensor) -> tf.Tensor:
    """x * sigmoid(x): smooth, non-monotonic; ML-Agents' default hidden activation."""
    return x * tf.nn.sigmoid(x)


ACTIVATIONS = {"swish": swish, "tanh": tf.nn.tanh, "relu": tf.nn.relu}


def get_activation(name: str) -> Activation:
    """Activation by config name (``swish``, ``tanh``, ``relu``)."""
    return ACTIVATIONS[name]


#: Standard deviation of the initial biases of swish layers (0 for every other layer).
SWISH_BIAS_STD = 1.0


def bias_initializer(activation: Optional[Activation]) -> object:
    """Initial biases of a layer followed by ``activation``.

    Zero, except before swish: N(0, SWISH_BIAS_STD^2). With zero biases and normalised
    (zero-mean) observations every unit's pre-activation starts centred on 0, with a
    spread of ~0.3 under orthogonal init, where swish is x/2 + x^2/4: all units are then
    the same near-linear function of the observation, and PPO on Acrobot-v1 (normalize
    on) never leaves -500 (README, "Swish initialisation"). Unit-variance biases place
    the units at different points of swish's curve (its minimum is at -1.28), as the
    raw observations' own offsets do when they are not centred. tanh is odd and
    centred on 0 already, so its layers keep zero biases (SB3 and ML-Agents practice).
    """
    if activation is swish:
        return tf.random_normal_initializer(0.0, SWISH_BIAS_STD)
    return tf.zeros_initializer()


def dense(
    x: tf.Tensor,
    units: int,
    name: str,
    activation: Optional[Activation] = None,
    gain: float = float(np.sqrt(2.0)),
) -> tf.Tensor:
    """Fully connected layer ``[B, in] -> [B, units]`` with orthogonal init.

    ``gain`` follows common PPO practice: sqrt(2) for hidden layers, 0.01 for policy
    outputs (so the initial policy is near uniform / near zero mean), 1 for value heads.
    Biases: see `bias_initializer`.
    """
    in_size = int(x.shape[-1])
    with tf.variable_scope(name):
        kernel = tf.get_variable(
            "kernel", [in_size, units], dtype=x.dtype, initializer=tf.orthogonal_initializer(gain)
        )
        bias = tf.get_variable("bias", [units], dtype=x.dtype, initializer=bias_initializer(activation))
    y = tf.matmul(x, kernel) + bias
    return activation(y) if activation is not None else y


def mlp(x: tf.Tensor, hidden_units: int, num_layers: int, activation: Activation, name: str) -> tf.Tensor:
    """``num_layers`` dense layers of ``hidden_units``: ``[B, in] -> [B, hidden_units]``."""
    with tf.variable_scope(name):
        for i in range(num_layers):
            x = dense(x, hidden_units, f"dense_{i}", activation)
    return x


def conv2d(x: tf.Tensor, filters: int, kernel: int, stride: int, name: str, padding: str = "VALID") -> tf.Tensor:
    """2-D convolution on NHWC input ``[B, H, W, C] -> [B, H', W', filters]`` (no activation)."""
    in_ch = int(x.shape[-1])
    with tf.variable_scope(name):
        w = tf.get_variable(
            "kernel",
            [kernel, kernel, in_ch, filters],
            dtype=x.dtype,
            initializer=tf.variance_scaling_initializer(2.0, distribution="truncated_normal"),
        )
        b = tf.get_variable("bias", [filters], dtype=x.dtype, initializer=tf.zeros_initializer())
    return tf.nn.conv2d(x, w, strides=[1, stride, stride, 1], padding=padding) + b


def flatten(x: tf.Tensor) -> tf.Tensor:
    """``[B, ...] -> [B, prod(...)]`` with a static inner size."""
    size = int(np.prod([int(d) for d in x.shape[1:]]))
    return tf.reshape(x, [-1, size])
