"""scripts/compare_sb3_update.py without Stable-Baselines3: its torch-style Adam against
torch.optim.Adam's update written out in numpy, and its refusals."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from script_loader import ROOT, load_script

from trainers.tf import tf

SCRIPT = os.path.join(ROOT, "scripts", "compare_sb3_update.py")


def _torch_adam_steps(grads, lr, eps, b1=0.9, b2=0.999):
    """torch.optim.Adam (no weight decay, no amsgrad) from w = 0: the weights after each step."""
    m = v = w = np.zeros_like(grads[0], np.float64)
    out = []
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        out.append(w.copy())
    return out


@pytest.mark.parametrize("scale", [1e-7, 1e-5, 1.0])
def test_torch_adam_is_torchs_update_for_gradients_of_any_size(monkeypatch, scale):
    """Gradients far below, at and far above epsilon (1e-5), where TF's placement (epsilon on
    the raw root: 32x larger at the first step) moves the weights measurably less."""
    monkeypatch.setattr(tf.train, "AdamOptimizer", tf.train.AdamOptimizer)  # undone after the test
    plain = tf.train.AdamOptimizer
    load_script("compare_sb3_update").torch_adam()
    rng = np.random.default_rng(3)
    grads = [rng.normal(0.0, scale, 4) for _ in range(6)]
    graph = tf.Graph()
    with graph.as_default():
        g_in = tf.placeholder(tf.float64, [4])
        w = tf.get_variable("w", [4], tf.float64, tf.zeros_initializer())
        w_tf = tf.get_variable("w_tf", [4], tf.float64, tf.zeros_initializer())
        steps = [tf.train.AdamOptimizer(1e-3, epsilon=1e-5).apply_gradients([(g_in, w)]),
                 plain(1e-3, epsilon=1e-5).apply_gradients([(g_in, w_tf)])]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got, tf_style = [], []
            for g in grads:
                sess.run(steps, {g_in: g})
                got.append(sess.run(w))
                tf_style.append(sess.run(w_tf))
    want = _torch_adam_steps(grads, 1e-3, 1e-5)
    for a, b in zip(got, want):
        # TF casts its betas through float32 (0.9 -> 0.89999998): ~1e-5 of a 1e-3 step.
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-8)
    if scale <= 1e-5:
        assert np.abs(tf_style[0]).max() < 0.5 * np.abs(want[0]).max()


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "--sb3-python=<interpreter with stable-baselines3> is required"),
        (["--sb3-python=python", "--task=Nope"], "unknown --task 'Nope'"),
        (["--sb3-python=python", "--task=Acrobot"], "Acrobot: only PPO with discrete actions"),
    ],
)
def test_refusals_are_one_line(args, message):
    done = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
