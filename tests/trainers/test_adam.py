"""`trainers.tf.adam.TorchAdam`: torch.optim.Adam's update, written out in numpy."""
from __future__ import annotations

import numpy as np
import pytest

from trainers.tf import tf
from trainers.tf.adam import TorchAdam


def _torch_adam_steps(grads, lr, eps, b1=0.9, b2=0.999):
    """torch.optim.Adam (no weight decay, no amsgrad) from w = 0: the weights after each step."""
    m = v = np.zeros_like(grads[0], np.float64)
    w = np.zeros_like(grads[0], np.float64)
    out = []
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(w.copy())
    return out


@pytest.mark.parametrize("scale", [1e-7, 1e-5, 1.0])
def test_steps_are_torch_adams_for_gradients_of_any_size(scale):
    """Gradients far below, at and far above epsilon (1e-5): where TF's placement differs
    most (at the first step TF's epsilon acts 32x larger)."""
    rng = np.random.default_rng(3)
    grads = [rng.normal(0.0, scale, 4) for _ in range(6)]
    graph = tf.Graph()
    with graph.as_default():
        w = tf.get_variable("w", [4], tf.float64, tf.zeros_initializer())
        g_in = tf.placeholder(tf.float64, [4])
        opt = TorchAdam(1e-3, epsilon=1e-5)
        step = opt.apply_gradients([(g_in, w)])
        plain = tf.train.AdamOptimizer(1e-3, epsilon=1e-5)
        w2 = tf.get_variable("w2", [4], tf.float64, tf.zeros_initializer())
        step2 = plain.apply_gradients([(g_in, w2)])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got, tf_style = [], []
            for g in grads:
                sess.run([step, step2], {g_in: g})
                got.append(sess.run(w))
                tf_style.append(sess.run(w2))
    want = _torch_adam_steps(grads, 1e-3, 1e-5)
    for a, b in zip(got, want):
        # TF casts its betas through float32 (0.9 -> 0.89999998): ~1e-5 of a 1e-3 step.
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-8)
    if scale <= 1e-5:  # TF's own placement is measurably slower there
        assert np.abs(tf_style[0]).max() < 0.5 * np.abs(want[0]).max()


def test_no_variables_beyond_adams():
    def names(opt_class):
        graph = tf.Graph()
        with graph.as_default():
            w = tf.get_variable("w", [2])
            opt_class(0.1, epsilon=1e-5).minimize(tf.reduce_sum(w * w))
            return sorted(v.op.name for v in tf.global_variables())

    assert names(TorchAdam) == names(tf.train.AdamOptimizer)
