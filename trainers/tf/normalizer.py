"""In-graph running observation normalisation (vector observations only).

Running statistics are kept with Chan et al.'s parallel update so that a whole trajectory
is merged in one op: for a batch of ``n_b`` rows with mean ``m_b`` and sum of squared
deviations ``M2_b``, ``delta = m_b - m``, ``n' = n + n_b``, ``m' = m + delta n_b / n'``,
``M2' = M2 + M2_b + delta^2 n n_b / n'``. The statistics start as one pseudo-sample with
mean 0 and variance 1, so the first normalised outputs are finite. Kept in float64 so that
counts beyond 2^24 steps still add up; outputs are float32, clipped to +-5.
"""
from __future__ import annotations

from dataclasses import dataclass

from trainers.tf import tf

CLIP = 5.0


@dataclass(frozen=True)
class Normalizer:
    """Variables and update op of one vector observation's running statistics.

    Attributes:
        count: scalar float64 variable, number of rows merged (+1 pseudo-sample).
        mean: ``[size]`` float64 variable.
        m2: ``[size]`` float64 variable, sum of squared deviations.
        update_input: ``[N, size]`` float32 placeholder of raw observations to merge.
        update_op: merges ``update_input`` into the statistics.
    """

    count: tf.Variable
    mean: tf.Variable
    m2: tf.Variable
    update_input: tf.Tensor
    update_op: tf.Operation

    def normalize(self, x: tf.Tensor) -> tf.Tensor:
        """``[B, size] -> [B, size]``: (x - mean) / std, clipped to +-5."""
        variance = self.m2 / self.count
        mean = tf.cast(self.mean, x.dtype)
        std = tf.cast(tf.sqrt(variance + 1e-8), x.dtype)
        return tf.clip_by_value((x - mean) / std, -CLIP, CLIP)


def build_normalizer(size: int, name: str) -> Normalizer:
    """Creates the statistics of a ``size``-wide vector observation in scope ``name``."""
    with tf.variable_scope(name, reuse=tf.AUTO_REUSE):
        count = tf.get_variable("count", [], tf.float64, tf.ones_initializer(), trainable=False)
        mean = tf.get_variable("mean", [size], tf.float64, tf.zeros_initializer(), trainable=False)
        m2 = tf.get_variable("m2", [size], tf.float64, tf.ones_initializer(), trainable=False)
    with tf.name_scope(name + "_update"):
        x = tf.placeholder(tf.float32, [None, size], name="input")
        xb = tf.cast(x, tf.float64)
        n_b = tf.cast(tf.shape(xb)[0], tf.float64)
        mean_b = tf.reduce_mean(xb, axis=0)
        m2_b = tf.reduce_sum(tf.square(xb - mean_b), axis=0)
        new_count = count + n_b
        delta = mean_b - mean
        new_mean = mean + delta * n_b / new_count
        new_m2 = m2 + m2_b + tf.square(delta) * count * n_b / new_count
        # All three read the old values before any assignment.
        with tf.control_dependencies([new_mean, new_m2, new_count]):
            update = tf.group(
                tf.assign(mean, new_mean), tf.assign(m2, new_m2), tf.assign(count, new_count)
            )
    return Normalizer(count, mean, m2, x, update)
