"""Random network distillation (``reward_signals.rnd``): the target stays random, the
predictor learns in the one update run, the reward is ``strength x`` the squared error."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from trainer_test_utils import make_spec, random_obs, small_settings

from trainers.config import ExtrinsicSettings, NetworkSettings, RNDSettings
from trainers.fields import ADVANTAGES, MASKS, obs_key
from trainers.ppo.trainer import PPOTrainer
from trainers.stats import StatsReporter
from trainers.tf import tf

STRENGTH = 0.5


@pytest.fixture
def trainer():
    settings = small_settings(batch_size=32, buffer_size=32, num_epoch=1)
    rnd = RNDSettings(strength=STRENGTH, learning_rate=1e-2, network_settings=NetworkSettings(hidden_units=8))
    settings = dataclasses.replace(settings, reward_signals={"extrinsic": ExtrinsicSettings(), "rnd": rnd})
    t = PPOTrainer("B", make_spec(branches=(2,)), settings, StatsReporter("B", []), 0)
    yield t
    t.close()


def _variables(trainer, prefix):
    with trainer.policy.graph.as_default():
        found = [v for v in tf.global_variables() if v.op.name.startswith(prefix)]
    return dict(zip([v.op.name for v in found], trainer.policy.session.run(found)))


def _fill(trainer, obs):
    rows = {k: np.zeros((len(obs),) + tuple(ph.shape.as_list()[1:]), ph.dtype.as_numpy_dtype)
            for k, ph in trainer.optimizer.placeholders.items()}
    rows[obs_key(0)] = obs
    rows["action_mask"] = np.ones((len(obs), 2), np.float32)
    rows[MASKS] = np.ones(len(obs), np.float32)
    rows[ADVANTAGES] = np.zeros(len(obs), np.float32)
    trainer.buffer.add_fields(rows)


def test_reward_is_strength_times_the_squared_error_from_the_first_step(trainer):
    obs = random_obs(trainer.spec, 6, np.random.default_rng(1))
    signal = trainer.signals["rnd"]
    reward = signal.evaluate({obs_key(0): obs[0]}, has_updated=False)
    target, prediction = trainer.policy.session.run(
        [signal.target_output, signal.predictor_output], {signal._obs[0]: obs[0]}
    )
    want = STRENGTH * np.square(prediction - target).sum(axis=1)
    np.testing.assert_allclose(reward, want, rtol=1e-6)
    assert reward.shape == (6,) and (reward > 0).all()
    assert signal.use_terminal_states is False and signal.uses_next_obs is False


def test_only_the_predictor_learns_and_its_error_falls(trainer):
    obs = random_obs(trainer.spec, 33, np.random.default_rng(2))[0]
    target_before = _variables(trainer, "rnd/target/")
    predictor_before = _variables(trainer, "rnd/predictor/")
    assert target_before and predictor_before
    signal = trainer.signals["rnd"]
    first = signal.evaluate({obs_key(0): obs}, True).mean()
    losses = []
    for _ in range(20):
        _fill(trainer, obs)
        losses.append(trainer.update()["rnd/loss"])
    for name, value in _variables(trainer, "rnd/target/").items():
        np.testing.assert_array_equal(value, target_before[name], err_msg=name)
    moved = [n for n, v in _variables(trainer, "rnd/predictor/").items() if not np.array_equal(v, predictor_before[n])]
    assert moved, "the predictor did not change"
    assert losses[-1] < 0.5 * losses[0], losses
    assert signal.evaluate({obs_key(0): obs}, True).mean() < 0.5 * first


def test_target_is_saved_with_checkpoints(trainer, tmp_path):
    prefix = trainer.save(str(tmp_path))
    target = _variables(trainer, "rnd/target/")
    other = PPOTrainer("B", trainer.spec, trainer.settings, StatsReporter("B", []), 7)  # another seed
    try:
        assert any(not np.array_equal(v, target[n]) for n, v in _variables(other, "rnd/target/").items())
        other.load(prefix)
        for name, value in _variables(other, "rnd/target/").items():
            np.testing.assert_array_equal(value, target[name], err_msg=name)
    finally:
        other.close()
