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


#: Standard deviation of the initial biases of swish layers on normalised observations
#: (see `trainers.tf.encoders.body_bias_std`).
SWISH_BIAS_STD = 1.0


def dense(
    x: tf.Tensor,
    units: int,
    name: str,
    activation: Optional[Activation] = None,
    gain: float = float(np.sqrt(2.0)),
    bias_std: float = 0.0,
) -> tf.Tensor:
    """Fully connected layer ``[B, in] -> [B, units]`` with orthogonal init.

    ``gain`` follows common PPO practice: sqrt(2) for hidden layers, 0.01 for policy
    outputs (so the initial policy is near uniform / near zero mean), 1 for value heads.
    Biases start at 0, or drawn from N(0, bias_std^2) when ``bias_std`` > 0.
    """
    in_size = int(x.shape[-1])
    with tf.variable_scope(name):
        kernel = tf.get_variable(
            "kernel", [in_size, units], dtype=x.dtype, initializer=tf.orthogonal_initializer(gain)
        )
        bias = tf.get_variable(
            "bias",
            [units],
            dtype=x.dtype,
            initializer=(
                tf.random_normal_initializer(0.0, bias_std) if bias_std > 0 else tf.zeros_initializer()
            ),
        )
    y = tf.matmul(x, kernel) + bias
    return activation(y) if activation is not None else y


def mlp(
    x: tf.Tensor, hidden_units: int, num_layers: int, activation: Activation, name: str, bias_std: float = 0.0
) -> tf.Tensor:
    """``num_layers`` dense layers of ``hidden_units``: ``[B, in] -> [B, hidden_units]``."""
    with tf.variable_scope(name):
        for i in range(num_layers):
            x = dense(x, hidden_units, f"dense_{i}", activation, bias_std=bias_std)
    return x


def conv2d(
    x: tf.Tensor, filters: int, kernel: int, stride: int, name: str, padding: str = "VALID", torch_init: bool = False
) -> tf.Tensor:
    """2-D convolution on NHWC input ``[B, H, W, C] -> [B, H', W', filters]`` (no activation).

    He normal init (std ``sqrt(2 / fan_in)``, ``fan_in = kernel * kernel * C``), zero bias;
    with ``torch_init`` torch's ``nn.Conv2d`` default instead, which Release 22's encoders
    keep (``kaiming_uniform_(a=sqrt(5))``): kernel and bias both uniform in
    ``+-1/sqrt(fan_in)`` (~2.5x narrower). No variable's shape depends on the choice.
    """
    in_ch = int(x.shape[-1])
    bound = 1.0 / float(np.sqrt(kernel * kernel * in_ch))
    with tf.variable_scope(name):
        w = tf.get_variable(
            "kernel",
            [kernel, kernel, in_ch, filters],
            dtype=x.dtype,
            # variance_scaling's uniform limit is sqrt(3 * scale / fan_in): 1/sqrt(fan_in) at 1/3.
            initializer=(
                tf.variance_scaling_initializer(1.0 / 3.0, mode="fan_in", distribution="uniform")
                if torch_init
                else tf.variance_scaling_initializer(2.0, distribution="truncated_normal")
            ),
        )
        b = tf.get_variable(
            "bias",
            [filters],
            dtype=x.dtype,
            initializer=tf.random_uniform_initializer(-bound, bound) if torch_init else tf.zeros_initializer(),
        )
    return tf.nn.conv2d(x, w, strides=[1, stride, stride, 1], padding=padding) + b


def flatten(x: tf.Tensor) -> tf.Tensor:
    """``[B, ...] -> [B, prod(...)]`` with a static inner size."""
    size = int(np.prod([int(d) for d in x.shape[1:]]))
    return tf.reshape(x, [-1, size])
