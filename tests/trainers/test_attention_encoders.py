"""Entity observations in the trainers' networks (`trainers.tf.encoders.encode_entities`):
PPO's and SAC's actors and critics encode them with ML-Agents' entity embedding + masked
residual self-attention; the order of the entities and the content of absent (zero) rows
never change actions or values; a short run of each trainer on `builtin:Sorter` updates.
"""
from __future__ import annotations

import csv

import numpy as np
import pytest
from trainer_test_utils import config_path, derived_config, small_settings

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from trainers.config import NetworkSettings, SACSettings, TrainerSettings
from trainers.ppo.trainer import PPOTrainer
from trainers.sac.trainer import SACTrainer
from trainers.stats import StatsReporter
from trainers.tf import tf

E, F = 4, 3
SPEC = BehaviorSpec(
    (ObservationSpec((2,), "vector"), ObservationSpec((E, F), "buffer", ObservationKind.ENTITIES)), ActionSpec(2, (3,))
)


def _batch(rng, n=12):
    vector = rng.normal(size=(n, 2)).astype(np.float32)
    entities = (rng.normal(size=(n, E, F)) + 1.0).astype(np.float32)
    entities[np.arange(n)[:, None] % (E + 1) <= np.arange(E)[None, :]] = 0.0  # row r: r % 5 present
    return [vector, entities]


def _shuffled(obs, rng):
    """The same entities, each agent's rows (present and absent) in another order."""
    entities = obs[1].copy()
    for r in range(len(entities)):
        entities[r] = entities[r][rng.permutation(E)]
    return [obs[0], entities]


def _outputs(trainer, obs):
    policy = trainer.policy
    feed = {**dict(zip(policy.obs, obs)), policy.action_masks: np.ones((len(obs[0]), 3), np.float32)}
    mean, mode = policy.session.run([policy.deterministic_continuous, policy.deterministic_discrete], feed)
    return mean, mode, trainer.optimizer.evaluate_values(obs)["extrinsic"]


@pytest.mark.parametrize("kind", ["ppo", "sac"])
def test_actor_and_critic_ignore_order_and_attend_to_entities(kind):
    if kind == "ppo":
        trainer = PPOTrainer("B", SPEC, small_settings(), StatsReporter("B", []), 0)
    else:
        settings = TrainerSettings(
            trainer_type="sac",
            hyperparameters=SACSettings(batch_size=8, buffer_size=100),
            network_settings=NetworkSettings(hidden_units=16, num_layers=1),
        )
        trainer = SACTrainer("B", SPEC, settings, StatsReporter("B", []), 0)
    try:
        rng = np.random.default_rng(7)
        obs = _batch(rng)
        mean, mode, values = _outputs(trainer, obs)
        mean2, mode2, values2 = _outputs(trainer, _shuffled(obs, rng))
        np.testing.assert_allclose(mean2, mean, atol=1e-5)
        np.testing.assert_array_equal(mode2, mode)
        np.testing.assert_allclose(values2, values, atol=1e-5)
        # A present entity's features reach the actions and the values.
        moved = [obs[0], obs[1].copy()]
        moved[1][1:, 0] += 3.0  # rows 1.. have at least one entity
        mean3, _, values3 = _outputs(trainer, moved)
        assert np.all(np.abs(mean3[1:] - mean[1:]).max(axis=1) > 1e-6)  # the output layer starts at gain 0.01
        assert np.all(np.abs(values3[1:] - values[1:]) > 1e-6)
        np.testing.assert_allclose(mean3[0], mean[0], atol=1e-6)  # row 0 has no entity
        with trainer.policy.graph.as_default():
            names = [v.op.name for v in tf.trainable_variables()]
        attention = [n for n in names if "/attention/fc_q/kernel" in n]
        # the actor's and each critic's own block (PPO: critic; SAC: Q1, Q2, V)
        assert len(attention) >= (2 if kind == "ppo" else 4), attention
        assert any("self_encoding" in n for n in names) and any("entities_1/dense" in n for n in names)
    finally:
        trainer.close()


@pytest.mark.slow  # ~30 s each on 2 shared cores
@pytest.mark.parametrize(
    "trainer_type,overrides",
    [
        ("ppo", {"network_settings": {"memory": {"memory_size": 16, "sequence_length": 4}}}),
        ("sac", {"hyperparameters": {"buffer_size": 1000, "buffer_init_steps": 64, "batch_size": 16}}),
    ],
    ids=["ppo_recurrent", "sac"],
)
def test_short_runs_update_on_sorter(run_cli, tmp_path, trainer_type, overrides):
    behavior = {"trainer_type": trainer_type, "max_steps": 320, "summary_freq": 160, "checkpoint_interval": 320}
    if trainer_type == "sac":
        behavior["hyperparameters"] = {"beta": None, "num_epoch": None, **overrides["hyperparameters"]}  # PPO's keys out
    else:
        behavior.update(overrides)
        behavior["hyperparameters"] = {"buffer_size": 128, "batch_size": 32}
    config = derived_config(config_path("Sorter.yaml"), tmp_path / "sorter.yaml", {"behaviors": {"Sorter": behavior}})
    code, _, err = run_cli(config, "--run-id=short")
    assert code == 0, err
    with open(run_cli.results / "short" / "Sorter" / "stats.csv") as stream:
        tags = {row["tag"] for row in csv.DictReader(stream)}
    assert ("Losses/Policy Loss" if trainer_type == "ppo" else "Losses/Q1 Loss") in tags
    assert (run_cli.results / "short" / "Sorter" / "Sorter.onnx").exists()  # exported (and checked)
