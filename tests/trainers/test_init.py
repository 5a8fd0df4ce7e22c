"""Initialisation contracts of the hidden layers (issue 14 item 8: Acrobot-v1 with the
default swish and normalised observations stayed at -500)."""
from __future__ import annotations

import numpy as np
import pytest
from trainer_test_utils import make_spec, small_settings

from trainers.ppo.trainer import PPOTrainer
from trainers.config import NetworkSettings, TrainerSettings
from trainers.stats import StatsReporter
from trainers.tf import tf
from trainers.tf.layers import SWISH_BIAS_STD


def _trainer(activation: str, seed: int = 3, normalize: bool = True) -> PPOTrainer:
    base = small_settings()
    settings = TrainerSettings(
        hyperparameters=base.hyperparameters,
        network_settings=NetworkSettings(hidden_units=128, num_layers=2, normalize=normalize, activation=activation),
        max_steps=1000,
    )
    return PPOTrainer("B", make_spec(0, (3,), vector=6), settings, StatsReporter("B", []), seed)


def _body_preactivations(trainer: PPOTrainer, obs: np.ndarray, activation) -> list:
    """Pre-activations ``[N, 128]`` of each actor body layer, from its weights (a fresh
    normaliser is the identity: mean 0, variance 1)."""
    session = trainer.policy.session
    by_name = {v.op.name: v for v in trainer.policy.graph.get_collection("variables")}
    out, h = [], obs
    for i in range(2):
        kernel = session.run(by_name[f"policy/encoder/body/dense_{i}/kernel"])
        bias = session.run(by_name[f"policy/encoder/body/dense_{i}/bias"])
        z = h @ kernel + bias
        out.append(z)
        h = activation(z)
    return out


def test_swish_units_start_at_different_points_of_the_curve():
    # Normalised observations are zero-mean: with zero biases every unit's mean
    # pre-activation would be ~0 (spread across units ~0.03 here). The biases give the
    # units unit-order offsets, so swish is not the same near-linear map in every unit.
    trainer = _trainer("swish")
    obs = np.random.default_rng(0).standard_normal((4096, 6)).astype(np.float32)
    for z in _body_preactivations(trainer, obs, lambda z: z / (1.0 + np.exp(-z))):
        unit_means = z.mean(axis=0)
        assert unit_means.std() == pytest.approx(SWISH_BIAS_STD, rel=0.25)
        # Units sit on both sides of swish's minimum (-1.28) and in its linear part.
        assert (unit_means < -1.28).mean() > 0.05 and (unit_means > 1.0).mean() > 0.05
    biases = [v for v in trainer.policy.graph.get_collection("variables") if v.op.name.endswith("body/dense_0/bias")]
    assert biases and all(np.std(trainer.policy.session.run(b)) > 0.5 for b in biases)  # actor and critic
    trainer.close()


@pytest.mark.parametrize("activation,normalize", [("tanh", True), ("swish", False)])
def test_tanh_and_raw_observations_keep_zero_biases(activation, normalize):
    # Raw observations carry their own offsets; tanh is odd and centred on 0 (on Acrobot
    # it learned later with spread biases): both keep ML-Agents' zero biases.
    trainer = _trainer(activation, normalize=normalize)
    session = trainer.policy.session
    for var in trainer.policy.graph.get_collection("variables"):
        if var.op.name.endswith("/bias"):
            assert not np.any(session.run(var)), var.op.name
    trainer.close()


def test_output_layers_keep_zero_biases():
    swish = _trainer("swish")
    for var in swish.policy.graph.get_collection("variables"):
        name = var.op.name
        if name.endswith("/bias") and "/body/" not in name:  # heads: value, policy logits
            assert not np.any(swish.policy.session.run(var)), name
    swish.close()
    tf.compat.v1.reset_default_graph()
