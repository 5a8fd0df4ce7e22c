"""``resnet``'s convolutions start as Release 22's: torch's ``nn.Conv2d`` default (issue 32).

torch: ``kaiming_uniform_(weight, a=sqrt(5))`` -> U(-1/sqrt(fan_in), 1/sqrt(fan_in)) and the
bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), ``fan_in = in_channels * kh * kw``; R22's encoders
(``torch_entities/encoders.py``, ac576f9f) never re-initialise their convolutions. The other
encoders keep He normal init (std sqrt(2/fan_in), zero bias).
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from trainers.tf import tf
from trainers.tf.encoders import _VISUAL
from trainers.tf.layers import conv2d


def _init_values(build, shape, seed: int) -> Dict[str, np.ndarray]:
    """Every variable's initial value (by op name) of the graph ``build(x)`` makes."""
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(seed)
        build(tf.placeholder(tf.float32, [None] + list(shape)))
        variables = {v.op.name: v for v in tf.global_variables()}
        with tf.Session(graph=graph) as sess:
            sess.run(tf.global_variables_initializer())
            return dict(zip(variables, sess.run(list(variables.values()))))


def test_torch_init_is_uniform_within_one_over_sqrt_fan_in():
    # fan_in 3*3*32 = 288: bound 1/sqrt(288) = 0.0589; a uniform's std is bound/sqrt(3).
    values = _init_values(lambda x: conv2d(x, 64, 3, 1, "conv", torch_init=True), (12, 12, 32), seed=0)
    kernel, bias = values["conv/kernel"], values["conv/bias"]
    bound = 1.0 / np.sqrt(3 * 3 * 32)
    assert kernel.shape == (3, 3, 32, 64) and bias.shape == (64,)
    assert np.abs(kernel).max() <= bound and np.abs(bias).max() <= bound
    assert abs(kernel.std() - bound / np.sqrt(3)) < 0.02 * bound  # 18432 draws
    assert np.abs(kernel).max() > 0.99 * bound  # uniform up to the bound, not a normal's tail
    assert np.abs(bias).max() > 0.5 * bound and bias.std() > 0.3 * bound  # biases are not zero


def test_default_init_stays_he_normal():
    # fan_in 8*8*3 = 192: He std sqrt(2/192) = 0.102 (truncated at 2 std: ~0.88 of it).
    values = _init_values(lambda x: conv2d(x, 64, 8, 4, "conv"), (20, 20, 3), seed=1)
    he = np.sqrt(2.0 / 192)
    assert abs(values["conv/kernel"].std() - he) < 0.05 * he
    assert not values["conv/bias"].any()


def test_only_resnet_convolutions_use_torch_init():
    """Every ``resnet`` convolution lies within its own +-1/sqrt(fan_in) with non-zero
    biases; ``simple``'s first convolution (He, std 1.4/sqrt(fan_in)) does not."""
    def body(encoder):
        return lambda x: _VISUAL[encoder](x, tf.nn.relu)

    resnet = _init_values(body("resnet"), (15, 15, 3), seed=2)
    kernels = [n for n in resnet if n.endswith("/kernel")]
    assert len(kernels) == 15  # 3 stacks x (1 + 2 blocks x 2)
    for name in kernels:
        k = resnet[name]
        bound = 1.0 / np.sqrt(np.prod(k.shape[:-1]))
        assert np.abs(k).max() <= bound and np.abs(resnet[name[:-len("kernel")] + "bias"]).max() <= bound, name
        assert resnet[name[:-len("kernel")] + "bias"].any(), name
    simple = _init_values(body("simple"), (20, 20, 3), seed=2)
    assert np.abs(simple["conv_0/kernel"]).max() > 1.0 / np.sqrt(8 * 8 * 3) and not simple["conv_0/bias"].any()
