"""Adam with its epsilon where torch puts it.

TF1's ``AdamOptimizer`` adds epsilon to the root of the raw second moment,
``lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps)``; ``torch.optim.Adam`` (ML-Agents'
torch trainers, Stable-Baselines3) adds it to the bias-corrected one,
``lr m_hat / (sqrt(v_hat) + eps)``. The two differ by a factor ``1 / sqrt(1 - b2^t)`` on
epsilon: 32x at the first step, 2x until about step 290, 1.1x until about step 1,660 (b2
0.999). Where gradients are of epsilon's size that is a much slower start: PPO's policy
gradients, scaled down with the critic's by the global-norm clip, are ~1e-6 per weight
in CartPole's first updates, so with epsilon 1e-5 TF moved the policy ~10x less than
torch in its first update (README, "Adam's epsilon").
"""
from __future__ import annotations

from typing import Union

from trainers.tf import tf


class TorchAdam(tf.train.AdamOptimizer):
    """``tf.train.AdamOptimizer`` whose update is ``torch.optim.Adam``'s for the same
    ``epsilon``: TF's epsilon is scaled by ``sqrt(1 - beta2^t)`` at each step ``t`` (its
    own ``beta2_power``, saved with checkpoints), which moves it onto the bias-corrected
    root. No variables of its own: checkpoints are those of ``AdamOptimizer``."""

    def _prepare(self) -> None:
        super()._prepare()
        # apply_gradients creates the slots (and the beta powers, b^t during step t)
        # before it calls _prepare.
        _, beta2_power = self._get_beta_accumulators()
        eps: tf.Tensor = self._epsilon_t  # type: ignore[has-type]  # set by super()._prepare
        self._epsilon_t = eps * tf.sqrt(1.0 - tf.cast(beta2_power, eps.dtype))


def adam(
    learning_rate: Union[float, tf.Tensor], epsilon: float, placement: str, name: str = "Adam"
) -> tf.train.AdamOptimizer:
    """Adam with ``epsilon`` where ``placement`` puts it: ``tf`` (TF1's ``AdamOptimizer``)
    or ``torch`` (`TorchAdam`): PPO's and POCA's ``adam_epsilon_placement``."""
    if placement == "torch":
        return TorchAdam(learning_rate, epsilon=epsilon, name=name)
    if placement == "tf":
        return tf.train.AdamOptimizer(learning_rate, epsilon=epsilon, name=name)
    raise ValueError(f"unknown Adam epsilon placement {placement!r}")  # the settings check it
