"""Behavioral cloning: the loss falls, actions are cloned in environment space, the
learning rate decays to 0, and the trainer runs BC after the PPO epochs."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from trainer_test_utils import make_spec, small_settings

from envs.demo import DemoWriter
from envs.exceptions import DemoError
from trainers.ppo.trainer import PPOTrainer
from trainers.config import BehavioralCloningSettings
from trainers.stats import StatsReporter

SPEC = make_spec(1, (3,), vector=2)


def expert_action(obs):
    """A learnable expert: continuous = 0.5 x sign(obs[0]) (env space), branch = obs[1] > 0."""
    return np.array([0.5 * np.sign(obs[0])], np.float32), np.array([2 if obs[1] > 0 else 0], np.int32)


def write_demo(path, n=48, seed=0):
    rng = np.random.default_rng(seed)
    with DemoWriter(path, "bc", "B", SPEC) as w:
        for t in range(n):
            obs = rng.choice([-1.0, 1.0], size=2).astype(np.float32)
            cont, disc = expert_action(obs)
            w.add_step([obs], cont, disc, reward=0.0, done=(t % 8 == 7), agent_id=0)
    return str(path)


def make_trainer(demo, seed=0, action_clip=3.0, **bc):
    settings = replace(
        small_settings(batch_size=16, buffer_size=64, num_epoch=2, action_clip=action_clip),
        behavioral_cloning=BehavioralCloningSettings(demo_path=demo, **bc),
    )
    return PPOTrainer("B", SPEC, settings, StatsReporter("B", []), seed)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return write_demo(tmp_path_factory.mktemp("bc") / "expert.demo")


@pytest.fixture(scope="module")
def trainer(demo):
    t = make_trainer(demo)
    yield t
    t.close()


def test_bc_clones_the_expert_in_environment_space(trainer):
    bc = trainer.bc
    assert bc.batch_size == 16 and bc.num_epoch == 2  # the trainer's, by default
    obs = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]], np.float32)
    losses = [bc.update(step=0) for _ in range(80)]
    assert losses[-1] < 0.2 * losses[0]
    assert bc.update_runs == 80 * 2 * (len(bc.expert) // 16)
    act = trainer.policy.act([obs], deterministic=True)
    want = [expert_action(o) for o in obs]
    # The env action clip(mu, -3, 3) / 3 matches the demo's env-space action (cloning mu
    # itself to 0.5 would give env actions of 0.17).
    np.testing.assert_allclose(act.env_continuous[:, 0], [w[0][0] for w in want], atol=0.15)
    np.testing.assert_array_equal(act.discrete[:, 0], [w[1][0] for w in want])


def test_bc_clones_through_the_policys_action_clip(demo):
    """With ``action_clip: 1`` the env gets clip(mu, -1, 1): BC must clone mu itself (0.5),
    not 3 x 0.5 as with ML-Agents' clip, for the env action to be the expert's."""
    trainer = make_trainer(demo, action_clip=1.0)
    try:
        for _ in range(80):
            trainer.bc.update(step=0)
        obs = np.array([[1.0, 1.0], [-1.0, -1.0]], np.float32)
        act = trainer.policy.act([obs], deterministic=True)
        np.testing.assert_allclose(act.env_continuous[:, 0], [0.5, -0.5], atol=0.15)
        mean = trainer.policy.session.run(trainer.policy.actor.continuous.mean, {trainer.policy.obs[0]: obs})
        np.testing.assert_allclose(mean[:, 0], [0.5, -0.5], atol=0.15)
    finally:
        trainer.close()


def test_bc_learning_rate_decays_linearly_to_zero(demo):
    t = make_trainer(demo, strength=0.5, steps=100)
    bc = t.bc
    lr = t.policy.session.run
    base = t.settings.hyperparameters.learning_rate * 0.5
    assert lr(bc.learning_rate, {bc._step: 0}) == pytest.approx(base)
    assert lr(bc.learning_rate, {bc._step: 25}) == pytest.approx(0.75 * base)
    assert lr(bc.learning_rate, {bc._step: 100}) == 0.0
    assert lr(bc.learning_rate, {bc._step: 500}) == 0.0
    # At lr 0 an update changes nothing.
    variables = t.policy.graph.get_collection("trainable_variables")
    before = t.policy.session.run(variables)
    bc.update(step=100)
    after = t.policy.session.run(variables)
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    t.close()


def test_samples_per_update_and_batch_size(demo):
    t = make_trainer(demo, samples_per_update=20, batch_size=8, num_epoch=3)
    assert t.bc.samples_per_update == 20
    t.bc.update(0)
    assert t.bc.update_runs == 3 * (20 // 8)
    t.close()


def test_each_epoch_reshuffles_the_whole_demo(tmp_path):
    """ML-Agents: with samples_per_update > 0 every epoch takes the first rows of a fresh
    shuffle of the *whole* demo, so one update sees more than samples_per_update rows."""
    path = tmp_path / "unique.demo"
    with DemoWriter(str(path), "bc", "B", SPEC) as w:
        for t in range(48):
            obs = np.array([t / 48.0, 1.0], np.float32)
            w.add_step([obs], *expert_action(obs), reward=0.0, done=(t % 8 == 7), agent_id=0)
    t = make_trainer(str(path), samples_per_update=8, batch_size=8, num_epoch=6)
    bc = t.bc
    bc.update(0)  # builds the callable
    seen = []
    inner = bc._update_fn
    bc._update_fn = lambda *feeds: (seen.extend(np.round(feeds[0][:, 0] * 48).astype(int)), inner(*feeds))[1]
    bc.update(0)
    assert len(seen) == 6 * 8
    assert len(set(seen)) > 8  # one subset drawn per update would give exactly 8
    assert all(len(set(seen[i : i + 8])) == 8 for i in range(0, 48, 8))  # no repeats in an epoch
    t.close()


def test_trainer_runs_bc_after_the_ppo_epochs(trainer):
    rng = np.random.default_rng(1)
    n = 64
    obs = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    info = trainer.policy.act([obs])
    trainer.buffer.add_fields({
        "obs_0": obs, "log_probs": info.log_probs, "advantages": rng.normal(size=n).astype(np.float32),
        "masks": np.ones(n, np.float32), "continuous_action": info.raw_continuous,
        "discrete_action": info.discrete, "action_mask": np.ones((n, 3), np.float32),
        "extrinsic_returns": np.zeros(n, np.float32), "extrinsic_value_estimates": np.zeros(n, np.float32),
    })
    ppo_before, bc_before = trainer.optimizer.update_runs, trainer.bc.update_runs
    added = []
    original = trainer.stats.add_stat
    trainer.stats.add_stat = lambda tag, value, *a, **k: (added.append(tag), original(tag, value, *a, **k))
    try:
        stats = trainer.update()
    finally:
        trainer.stats.add_stat = original
    assert trainer.optimizer.update_runs - ppo_before == 2 * (64 // 16)
    assert trainer.bc.update_runs - bc_before == 2 * (len(trainer.bc.expert) // 16)
    assert np.isfinite(stats["pretraining_loss"])
    assert "Losses/Pretraining Loss" in added


def test_bc_demo_mismatch_is_one_clear_error(tmp_path):
    other = make_spec(2, ())
    path = tmp_path / "other.demo"
    with DemoWriter(path, "x", "B", other) as w:
        w.add_step([np.zeros(3, np.float32)], np.zeros(2, np.float32), None, reward=0.0, done=True, agent_id=0)
    with pytest.raises(DemoError, match="does not match behavior 'B'"):
        make_trainer(str(path))
