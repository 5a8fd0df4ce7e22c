"""Graph contracts: shapes, masks, closed-form maths of the distributions, the normaliser
and the PPO loss, and the one-``sess.run``-per-minibatch update."""
from __future__ import annotations

import math

import numpy as np
import pytest
from trainer_test_utils import make_spec, random_obs, small_settings

from trainers.ppo.trainer import PPOTrainer
from trainers.stats import StatsReporter
from trainers.tf import tf


def make_trainer(spec, settings=None, seed=0, devices=("/cpu:0",)):
    return PPOTrainer("B", spec, settings or small_settings(), StatsReporter("B", []), seed, devices)


@pytest.mark.parametrize(
    "continuous,branches",
    [(2, ()), (0, (3, 2)), (1, (2,))],
    ids=["continuous", "discrete", "hybrid"],
)
def test_act_shapes_and_log_probs(continuous, branches):
    spec = make_spec(continuous, branches)
    trainer = make_trainer(spec)
    rng = np.random.default_rng(0)
    obs = random_obs(spec, 7, rng)
    info = trainer.policy.act(obs)
    assert info.env_continuous.shape == (7, continuous) and info.raw_continuous.shape == (7, continuous)
    assert info.discrete.shape == (7, len(branches)) and info.discrete.dtype == np.int32
    assert info.log_probs.shape == (7, continuous + len(branches))  # per dimension and branch
    assert np.all(np.abs(info.env_continuous) <= 1.0)
    np.testing.assert_allclose(info.env_continuous, np.clip(info.raw_continuous, -3, 3) / 3, rtol=1e-6)
    for b, size in enumerate(branches):
        assert np.all((info.discrete[:, b] >= 0) & (info.discrete[:, b] < size))
    values = trainer.optimizer.evaluate_values(obs)
    assert set(values) == {"extrinsic"} and values["extrinsic"].shape == (7,)
    det = trainer.policy.act(obs, deterministic=True)
    det2 = trainer.policy.act(obs, deterministic=True)
    np.testing.assert_array_equal(det.env_continuous, det2.env_continuous)
    np.testing.assert_array_equal(det.discrete, det2.discrete)
    trainer.close()


def test_gaussian_log_prob_and_entropy_closed_form():
    spec = make_spec(2, ())
    trainer = make_trainer(spec)
    policy = trainer.policy
    rng = np.random.default_rng(1)
    obs = random_obs(spec, 5, rng)
    info = policy.act(obs)
    mean, log_std, ent = policy.session.run(
        [policy.actor.continuous.mean, policy.actor.continuous.log_std, policy.entropy],
        {policy.obs[0]: obs[0]},
    )
    std = np.exp(log_std)
    # Per dimension (PPO clips each dimension's ratio); the joint one is their sum.
    expected = -0.5 * ((info.raw_continuous - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
    np.testing.assert_allclose(info.log_probs, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ent, np.mean(0.5 + 0.5 * math.log(2 * math.pi) + log_std), rtol=1e-6)
    trainer.close()


@pytest.mark.parametrize("branches", [(), (3,)], ids=["continuous", "hybrid"])
def test_continuous_entropy_is_the_mean_over_dimensions(branches):
    """ML-Agents averages the Gaussian entropy over action dimensions (so ``beta`` does not
    grow with their number): 4 dims at log_std 0 give 0.5 log(2 pi e) = 1.419, and each
    log_std gets gradient 1/4. A hybrid spec adds the discrete branches' summed entropy."""
    from trainers.policy import build_actor

    spec = make_spec(4, branches)
    graph = tf.Graph()
    with graph.as_default():
        obs = tf.placeholder(tf.float32, [None, 3])
        width = sum(branches)
        masks = tf.ones([tf.shape(obs)[0], width]) if branches else None
        actor = build_actor([obs], masks, spec, small_settings().network_settings, [None])
        entropy = actor.entropy()
        log_std = [v for v in tf.global_variables() if v.op.name.endswith("continuous/log_std")][0]
        grad = tf.gradients(tf.reduce_mean(entropy), log_std)[0]
        session = tf.Session()
        session.run(tf.global_variables_initializer())
    x = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    ent, g = session.run([entropy, grad], {obs: x})
    expected = 0.5 * math.log(2 * math.pi * math.e)
    assert expected == pytest.approx(1.419, abs=1e-3)
    if branches:
        lp = session.run(actor.discrete.log_probs, {obs: x})
        expected = expected - np.sum(np.exp(lp[0]) * lp[0], axis=1)
    np.testing.assert_allclose(ent, expected, rtol=1e-5)
    np.testing.assert_allclose(g, np.full(4, 0.25), rtol=1e-6)
    session.close()


def test_discrete_masks_are_respected_and_entropy_closed_form():
    spec = make_spec(0, (3, 2))
    trainer = make_trainer(spec)
    policy = trainer.policy
    rng = np.random.default_rng(2)
    obs = random_obs(spec, 400, rng)
    masks = np.ones((400, 5), np.float32)
    masks[:, 0] = 0.0  # branch 0: action 0 never allowed
    masks[:200, 4] = 0.0  # branch 1: action 1 masked for the first half
    info = policy.act(obs, masks)
    assert not np.any(info.discrete[:, 0] == 0)
    assert not np.any(info.discrete[:200, 1] == 1)
    assert np.any(info.discrete[200:, 1] == 1)
    det = policy.act(obs, masks, deterministic=True)
    assert not np.any(det.discrete[:, 0] == 0)
    log_probs, ent = policy.session.run(
        [policy.actor.discrete.log_probs, policy.entropy],
        {policy.obs[0]: obs[0], policy.action_masks: masks},
    )
    expected = sum(-np.sum(np.where(np.exp(lp) > 0, np.exp(lp) * lp, 0.0), axis=1) for lp in log_probs)
    np.testing.assert_allclose(ent, expected, rtol=1e-5)
    # A masked branch leaves a distribution over the allowed actions only.
    np.testing.assert_allclose(np.exp(log_probs[0][:, 0]), 0.0, atol=1e-30)
    np.testing.assert_allclose(np.exp(log_probs[1][:200, 0]), 1.0, rtol=1e-6)
    trainer.close()


def test_normalizer_matches_numpy_statistics():
    from trainers.tf.normalizer import build_normalizer

    graph = tf.Graph()
    with graph.as_default():
        norm = build_normalizer(4, "normalizer_0")
        x_ph = tf.placeholder(tf.float32, [None, 4])
        normalized = norm.normalize(x_ph)
        session = tf.Session()
        session.run(tf.global_variables_initializer())
    rng = np.random.default_rng(3)
    chunks = [rng.normal(3.0, 2.0, size=(n, 4)).astype(np.float32) for n in (5, 17, 1, 40)]
    for c in chunks:
        session.run(norm.update_op, {norm.update_input: c})
    count, mean, m2 = session.run([norm.count, norm.mean, norm.m2])
    data = np.concatenate(chunks).astype(np.float64)
    # The statistics start as one pseudo-sample at 0 contributing 1 to M2 (variance 1).
    n = 1.0 + len(data)
    exp_mean = data.sum(axis=0) / n
    exp_m2 = 1.0 + np.sum((data - exp_mean) ** 2, axis=0) + exp_mean**2
    assert count == pytest.approx(n)
    np.testing.assert_allclose(mean, exp_mean, rtol=1e-9)
    np.testing.assert_allclose(m2, exp_m2, rtol=1e-9)
    x = rng.normal(3.0, 2.0, size=(6, 4)).astype(np.float32)
    x[0] = 1e4  # far outside: clipped to +5
    out = session.run(normalized, {x_ph: x})
    np.testing.assert_allclose(out, np.clip((x - exp_mean) / np.sqrt(exp_m2 / n + 1e-8), -5, 5), rtol=1e-4, atol=1e-4)
    session.close()


def test_policy_update_normalization_merges_trajectories_in_one_compiled_call():
    """The policy's per-trajectory merge (a `FastCallable`, not ``Session.run``): vector
    statistics as the closed form above; the visual observation has none and is not fed."""
    import dataclasses

    settings = small_settings()
    settings = dataclasses.replace(
        settings, network_settings=dataclasses.replace(settings.network_settings, normalize=True)
    )
    spec = make_spec(0, (2,), vector=3, visual=(20, 20, 1))
    trainer = make_trainer(spec, settings)
    policy = trainer.policy
    rng = np.random.default_rng(5)
    trajectories = [random_obs(spec, n, rng) for n in (4, 9, 2)]
    for obs in trajectories:
        policy.update_normalization([o * 3.0 + 1.0 for o in obs])
    assert policy._update_normalization is not None and policy._update_normalization.calls == 3
    norm = next(n for n in policy.normalizers if n is not None)
    count, mean, m2 = policy.session.run([norm.count, norm.mean, norm.m2])
    data = np.concatenate([obs[0] * 3.0 + 1.0 for obs in trajectories]).astype(np.float64)
    n = 1.0 + len(data)
    exp_mean = data.sum(axis=0) / n
    assert count == pytest.approx(n)
    np.testing.assert_allclose(mean, exp_mean, rtol=1e-6)
    np.testing.assert_allclose(m2, 1.0 + np.sum((data - exp_mean) ** 2, axis=0) + exp_mean**2, rtol=1e-6)
    trainer.close()


def _minibatch(spec, trainer, n, rng):
    obs = random_obs(spec, n, rng)
    info = trainer.policy.act(obs)
    mb = {"obs_0": obs[0], "log_probs": info.log_probs, "advantages": rng.normal(size=n).astype(np.float32),
          "masks": np.ones(n, np.float32), "extrinsic_returns": rng.normal(size=n).astype(np.float32),
          "extrinsic_value_estimates": rng.normal(size=n).astype(np.float32)}
    if spec.action_spec.continuous_size:
        mb["continuous_action"] = info.raw_continuous
    if spec.action_spec.discrete_branches:
        mb["discrete_action"] = info.discrete
        mb["action_mask"] = np.ones((n, sum(spec.action_spec.discrete_branches)), np.float32)
    return mb


@pytest.mark.parametrize("clip_value_loss", [True, False])
def test_ppo_losses_match_closed_form(clip_value_loss):
    spec = make_spec(1, (2,))
    trainer = make_trainer(spec, small_settings(clip_value_loss=clip_value_loss, batch_size=32))
    rng = np.random.default_rng(4)
    mb = _minibatch(spec, trainer, 32, rng)
    # ratios != 1, different per column (1 continuous dimension, 1 branch)
    mb["log_probs"] = mb["log_probs"] + rng.normal(0, 0.3, size=(32, 2)).astype(np.float32)
    policy = trainer.policy
    # Current log-probs and values of the taken actions, from the pre-update weights
    # (feeding the sampled-action tensors evaluates the log-prob of given actions).
    logp_now = policy.session.run(
        policy.log_probs,
        {policy.obs[0]: mb["obs_0"], policy.action_masks: mb["action_mask"],
         policy.raw_continuous: mb["continuous_action"], policy.discrete: mb["discrete_action"]},
    )
    values = trainer.optimizer.evaluate_values([mb["obs_0"]])["extrinsic"]
    ent = policy.session.run(policy.entropy, {policy.obs[0]: mb["obs_0"], policy.action_masks: mb["action_mask"]})
    hp = trainer.settings.hyperparameters
    frac = 10 / trainer.settings.max_steps
    eps = (hp.epsilon - 0.1) * (1 - frac) + 0.1
    beta = (hp.beta - 1e-5) * (1 - frac) + 1e-5
    # ML-Agents' trust_region_policy_loss: the ratio per action column, the mean over
    # columns and rows; the KL estimate is of the joint probability.
    ratio = np.exp(logp_now - mb["log_probs"])  # [32, 2]
    adv = mb["advantages"][:, None]
    exp_policy = -np.mean(np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv))
    exp_kl = np.mean(0.5 * np.sum(logp_now - mb["log_probs"], axis=1) ** 2)
    exp_clipped = np.mean(np.abs(ratio - 1) > eps)
    old_v, ret = mb["extrinsic_value_estimates"], mb["extrinsic_returns"]
    v_clip = old_v + np.clip(values - old_v, -eps, eps)
    if clip_value_loss:
        exp_value = np.mean(np.maximum((ret - values) ** 2, (ret - v_clip) ** 2))
    else:
        exp_value = np.mean((ret - values) ** 2)
    stats = trainer.optimizer.update(mb, 10, {})
    assert stats["policy_loss"] == pytest.approx(exp_policy, rel=1e-4, abs=1e-6)
    assert stats["approx_kl"] == pytest.approx(exp_kl, rel=1e-4, abs=1e-7)
    assert stats["clip_fraction"] == pytest.approx(exp_clipped, abs=1e-6)
    assert stats["value_loss"] == pytest.approx(exp_value, rel=1e-4)
    assert stats["entropy"] == pytest.approx(float(np.mean(ent)), rel=1e-5)
    assert stats["epsilon"] == pytest.approx(eps, rel=1e-6) and stats["beta"] == pytest.approx(beta, rel=1e-5)
    assert stats["learning_rate"] == pytest.approx((hp.learning_rate - 1e-10) * (1 - frac) + 1e-10, rel=1e-5)
    trainer.close()


def test_update_is_one_session_run_per_minibatch_and_changes_every_network():
    spec = make_spec(1, (3,))
    settings = small_settings(batch_size=16, buffer_size=64, num_epoch=3)
    trainer = make_trainer(spec, settings)
    rng = np.random.default_rng(5)
    mb = _minibatch(spec, trainer, 70, rng)  # 70 rows: 4 full minibatches of 16 per epoch
    trainer.buffer.add_fields(mb)
    session = trainer.policy.session
    variables = trainer.policy.graph.get_collection("trainable_variables")
    before = session.run(variables)
    calls = {"run": 0}
    original_run = session.run

    def counting_run(*args, **kwargs):
        calls["run"] += 1
        return original_run(*args, **kwargs)

    session.run = counting_run  # any extra sess.run during the update would be counted
    trainer.update()
    session.run = original_run
    assert trainer.optimizer.update_runs == 3 * (70 // 16)
    assert calls["run"] == 0  # no other session run: only the one compiled update callable
    assert trainer.optimizer._update_fn.calls == 3 * (70 // 16)
    after = session.run(variables)
    changed = {v.op.name.split("/")[0] for v, a, b in zip(variables, before, after) if not np.array_equal(a, b)}
    assert changed == {"policy", "critic"}
    assert all(not np.array_equal(a, b) for a, b in zip(before, after))
    assert trainer.buffer.num_experiences == 0
    trainer.close()


def test_update_waits_for_more_than_buffer_size_rows():
    """ML-Agents updates when the buffer holds *more* than buffer_size rows."""
    spec = make_spec(1, ())
    trainer = make_trainer(spec, small_settings(batch_size=16, buffer_size=64))
    rng = np.random.default_rng(6)
    trainer.buffer.add_fields(_minibatch(spec, trainer, 64, rng))
    assert not trainer.ready_to_update
    trainer.buffer.add_fields(_minibatch(spec, trainer, 1, rng))
    assert trainer.ready_to_update
    trainer.close()


def test_shared_critic_puts_value_heads_on_the_actor_body():
    from dataclasses import replace

    spec = make_spec(0, (2,))
    settings = small_settings(shared_critic=True)
    trainer = make_trainer(spec, settings)
    names = {v.op.name for v in trainer.policy.graph.get_collection("trainable_variables")}
    assert not any(n.startswith("critic/encoder") for n in names)
    assert any(n.startswith("critic/value_extrinsic") for n in names)
    separate = make_trainer(spec, replace(settings, hyperparameters=replace(settings.hyperparameters, shared_critic=False)))
    names2 = {v.op.name for v in separate.policy.graph.get_collection("trainable_variables")}
    assert any(n.startswith("critic/encoder") for n in names2)
    trainer.close()
    separate.close()


def test_auto_pool_update_stays_in_the_caller_thread_only_when_cheap(monkeypatch):
    """An update callable with `AUTO_POOL` times its first calls in the caller's thread,
    then keeps that thread if they were cheap (below ``CALLER_LIMIT_S``) or moves to the
    inter-op pool for good; one with more costly ops than ``POOL_UNTRIED_OPS`` goes to the
    pool untried. Every call, during the trial and after it, gives the same weights as a
    run that always used the pool."""
    from trainers.tf.session import AUTO_POOL, CALLER_THREAD, UPDATE_POOL, FastCallable

    # A session with the general executor (a small PPO graph gets the single-threaded one,
    # whose runs are all in the caller's thread: nothing for the pools to choose).
    monkeypatch.setattr("trainers.graph.runs_inline", lambda settings, spec: False)
    spec = make_spec(1, (3,))
    settings = small_settings(batch_size=16, buffer_size=64, num_epoch=1)
    trial = FastCallable.WARMUP_CALLS + FastCallable.TRIAL_CALLS
    results = {}
    # (pool asked for, CALLER_LIMIT_S, POOL_UNTRIED_OPS, the pool expected after the trial)
    cases = [
        (UPDATE_POOL, None, None, UPDATE_POOL),
        (AUTO_POOL, 10.0, None, CALLER_THREAD),
        (AUTO_POOL, 0.0, None, UPDATE_POOL),
        (AUTO_POOL, 10.0, 0, UPDATE_POOL),  # cheap in time, but too many ops: never tried
    ]
    for pool, limit, untried, expected in cases:
        if limit is not None:
            monkeypatch.setattr(FastCallable, "CALLER_LIMIT_S", limit)
        if untried is not None:
            monkeypatch.setattr(FastCallable, "POOL_UNTRIED_OPS", untried)
        trainer = make_trainer(spec, settings, seed=3)
        mb = _minibatch(spec, trainer, 16 * (trial + 3), np.random.default_rng(7))
        original = FastCallable.__init__

        def with_pool(self, *args, _pool=pool, **kwargs):
            kwargs["pool"] = _pool
            original(self, *args, **kwargs)

        monkeypatch.setattr(FastCallable, "__init__", with_pool)
        trainer.buffer.add_fields(mb)
        trainer.update()
        monkeypatch.setattr(FastCallable, "__init__", original)
        fn = trainer.optimizer._update_fn
        assert fn.calls == trial + 3
        assert fn.pool == expected
        # Timed calls in the caller's thread only where a trial ran.
        assert len(fn._trials) == (FastCallable.TRIAL_CALLS if pool == AUTO_POOL and untried is None else 0)
        variables = trainer.policy.graph.get_collection("trainable_variables")
        results[(pool, limit, untried)] = trainer.policy.session.run(variables)
        trainer.close()
    reference = results[(UPDATE_POOL, None, None)]
    for key, weights in results.items():
        for a, b in zip(reference, weights):
            np.testing.assert_array_equal(a, b, err_msg=str(key))


def test_small_ppo_sessions_run_inline_with_the_same_weights(monkeypatch):
    """A feed-forward PPO behavior on vector observations with the extrinsic reward gets a
    session on TensorFlow's single-threaded executor (trainers.graph.runs_inline): its
    update stays in the caller's thread untried, and inference and updates give the same
    numbers as on the general executor. With memory, a camera, a reward-signal network, a
    threaded trainer or more than one tower, the general executor stays."""
    from dataclasses import replace

    from trainers.config import CuriositySettings, MemorySettings, NetworkSettings
    from trainers.tf.session import CALLER_THREAD, runs_inline

    spec = make_spec(1, (3,))
    settings = small_settings(batch_size=16, buffer_size=64, num_epoch=2)
    outputs = {}
    for inline in (True, False):
        if not inline:
            monkeypatch.setattr("trainers.graph.runs_inline", lambda settings, spec: False)
        trainer = make_trainer(spec, settings, seed=3)
        assert runs_inline(trainer.policy.session) is inline
        rng = np.random.default_rng(7)
        trainer.buffer.add_fields(_minibatch(spec, trainer, 80, rng))
        trainer.update()
        if inline:
            assert trainer.optimizer._update_fn.pool == CALLER_THREAD
            assert trainer.optimizer._update_fn._trials == []
        obs = random_obs(spec, 5, np.random.default_rng(8))
        info = trainer.policy.act(obs)
        variables = trainer.policy.graph.get_collection("trainable_variables")
        outputs[inline] = trainer.policy.session.run(variables) + [info.log_probs]
        trainer.close()
    for a, b in zip(outputs[True], outputs[False]):
        np.testing.assert_array_equal(a, b)
    monkeypatch.undo()
    memory = replace(settings, network_settings=NetworkSettings(hidden_units=16, memory=MemorySettings(16, 4)))
    curiosity = replace(settings, reward_signals={**settings.reward_signals, "curiosity": CuriositySettings()})
    for case, case_spec, case_settings, devices in (
        ("memory", spec, memory, ("/cpu:0",)),
        ("camera", make_spec(1, (3,), visual=(20, 20, 1)), settings, ("/cpu:0",)),
        ("curiosity", spec, curiosity, ("/cpu:0",)),
        ("threaded", spec, replace(settings, threaded=True), ("/cpu:0",)),
        ("towers", spec, settings, ("/cpu:0", "/cpu:1")),
    ):
        trainer = make_trainer(case_spec, case_settings, seed=3, devices=devices)
        assert not runs_inline(trainer.policy.session), case
        trainer.close()


def test_only_unrolled_lstm_updates_skip_the_caller_thread_trial():
    """`_costly_op_count` puts the LSTM update of `scripts/benchmark.py --memory` (sequences
    of 64) above ``POOL_UNTRIED_OPS`` (it goes to the pool without building a caller-thread
    executor it would drop), and the same network without memory below it (it is timed)."""
    from dataclasses import replace

    from trainers.config import MemorySettings, NetworkSettings
    from trainers.tf.session import FastCallable, _costly_op_count

    spec = make_spec(0, (2,), vector=1)
    counts = {}
    for memory in (None, MemorySettings(memory_size=128, sequence_length=64)):
        network = NetworkSettings(hidden_units=128, num_layers=2, memory=memory)
        settings = replace(small_settings(batch_size=256, buffer_size=2048), network_settings=network)
        trainer = make_trainer(spec, settings)
        opt = trainer.optimizer
        counts[memory is not None] = _costly_op_count(opt._stat_tensors, opt._feed_list, [opt._update_op])
        trainer.close()
    assert counts[False] < FastCallable.POOL_UNTRIED_OPS < counts[True], counts
