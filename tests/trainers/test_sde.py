"""PPO's ``use_sde`` (generalized state-dependent exploration, Stable-Baselines3's gSDE):
the distribution against its closed form, the per-agent noise matrices, the settings, the
export, and a short run through the CLI."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from trainer_test_utils import make_spec, small_settings

from trainers.cli.learn import main as learn_main
from trainers.config import load_settings
from trainers.exceptions import ConfigError
from trainers.export import export_policy, onnx_session
from trainers.ppo.trainer import PPOTrainer
from trainers.stats import StatsReporter
from trainers.tf import tf
from trainers.tf.distributions import SDE_VARIANCE_EPSILON, build_gaussian


def _trainer(continuous: int = 2, branches=(), **hyper) -> PPOTrainer:
    settings = small_settings(use_sde=True, **hyper)
    return PPOTrainer("B", make_spec(continuous=continuous, branches=branches), settings, StatsReporter("B", []), 0)


# ------------------------------------------------------------------ distribution


def test_state_dependent_gaussian_against_its_closed_form():
    """sigma^2 = z^2 @ exp(L)^2 + 1e-6, log N(a; m, sigma^2) summed over dims, sample
    m + z @ (eps * exp(L)), ML-Agents' entropy (mean over dims), and the gradient of the
    log-probability: d/dL_hj = (-1 + (a - m)^2 / sigma^2) z_h^2 exp(2 L_hj) / sigma^2, none
    into the features through the noise."""
    rng = np.random.default_rng(5)
    rows, hidden, size = 6, 4, 2
    z = rng.normal(0.0, 1.0, (rows, hidden)).astype(np.float32)
    eps = rng.normal(0.0, 1.0, (rows, hidden, size)).astype(np.float32)
    actions = rng.normal(0.0, 1.0, (rows, size)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        encoding = tf.placeholder(tf.float32, [None, hidden])
        noise = tf.placeholder(tf.float32, [None, None, size])
        gauss = build_gaussian(encoding, size, log_std_init=-0.5, state_dependent=True, sde_noise=noise)
        (log_std_var,) = [v for v in tf.global_variables() if v.op.name == "continuous/sde_log_std"]
        (mu_kernel,) = [v for v in tf.global_variables() if v.op.name == "continuous/mu/kernel"]
        log_prob = gauss.log_prob(tf.constant(actions))
        grad_l, grad_z = tf.gradients(tf.reduce_sum(log_prob), [log_std_var, encoding])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            big_l = rng.normal(-0.5, 0.3, (hidden, size)).astype(np.float32)
            log_std_var.load(big_l, sess)
            got = sess.run(
                {"mean": gauss.mean, "log_std": gauss.log_std, "sample": gauss.sample, "log_prob": log_prob,
                 "entropy": gauss.entropy(), "grad_l": grad_l, "grad_z": grad_z, "kernel": mu_kernel},
                {encoding: z, noise: eps},
            )
    std = np.exp(big_l)
    variance = (z ** 2) @ (std ** 2) + SDE_VARIANCE_EPSILON
    np.testing.assert_allclose(got["log_std"], 0.5 * np.log(variance), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["sample"], got["mean"] + np.einsum("bh,bhc->bc", z, eps * std), rtol=1e-5, atol=1e-6)
    diff2 = (actions - got["mean"]) ** 2
    want = (-0.5 * diff2 / variance - 0.5 * np.log(variance) - 0.5 * math.log(2 * math.pi)).sum(axis=1)
    np.testing.assert_allclose(got["log_prob"], want, rtol=1e-5, atol=1e-5)
    want_entropy = (0.5 + 0.5 * math.log(2 * math.pi) + 0.5 * np.log(variance)).mean(axis=1)
    np.testing.assert_allclose(got["entropy"], want_entropy, rtol=1e-5, atol=1e-6)
    dvar = 0.5 * (-1.0 / variance + diff2 / variance ** 2)  # d log N / d sigma^2, [B, c]
    want_grad_l = np.einsum("bc,bh->hc", dvar, z ** 2) * 2.0 * std ** 2
    np.testing.assert_allclose(got["grad_l"], want_grad_l, rtol=1e-4, atol=1e-5)
    # Into the features only through the mean: (a - m) / sigma^2 @ W_mu^T.
    want_grad_z = ((actions - got["mean"]) / variance) @ got["kernel"].T
    np.testing.assert_allclose(got["grad_z"], want_grad_z, rtol=1e-4, atol=1e-5)


def test_without_fed_noise_the_sample_has_the_state_dependent_std():
    """The export's sample (a fresh draw per row): std sqrt(z^2 @ exp(L)^2 + 1e-6)."""
    hidden = 3
    z = np.array([[1.0, 0.0, 0.0], [0.5, 2.0, -1.0]], np.float32)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(1)
        encoding = tf.placeholder(tf.float32, [None, hidden])
        gauss = build_gaussian(encoding, 1, log_std_init=-1.0, state_dependent=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            rows = np.repeat(z, 20000, axis=0)
            sample, mean = sess.run([gauss.sample, gauss.mean], {encoding: rows})
    want = np.sqrt((z ** 2).sum(axis=1) * math.exp(-2.0) + SDE_VARIANCE_EPSILON)
    got = (sample - mean).reshape(2, 20000).std(axis=1)
    np.testing.assert_allclose(got, want, rtol=0.03)


# ------------------------------------------------------------------ per-agent noise


def test_each_agent_keeps_its_noise_for_sde_sample_freq_steps():
    """The noise is z @ W with W per agent: on the same observation an agent repeats its
    action while it keeps W; W is drawn anew after sde_sample_freq of its steps, at its
    episode's end and after an update."""
    trainer = _trainer(sde_sample_freq=3, log_std_init=0.0)
    policy = trainer.policy
    try:
        obs = [np.full((2, 3), 0.5, np.float32)]
        keys = ["a", "b"]
        acts = [policy.act(obs, agent_keys=keys).raw_continuous for _ in range(4)]
        for step in (1, 2):
            np.testing.assert_array_equal(acts[step], acts[0])
        assert not np.allclose(acts[0][0], acts[0][1])  # agents draw their own matrices
        assert not np.allclose(acts[3], acts[0])  # the 4th step: new matrices
        before = policy.act(obs, agent_keys=keys).raw_continuous  # 2nd step of the new ones
        policy.forget_agents(["a"])  # a's episode ended
        after = policy.act(obs, agent_keys=keys).raw_continuous
        assert not np.allclose(after[0], before[0])
        np.testing.assert_array_equal(after[1], before[1])
        policy.resample_exploration()
        resampled = policy.act(obs, agent_keys=keys).raw_continuous
        assert not np.allclose(resampled[1], after[1])
        # Deterministic: the mean, no noise, the matrices untouched.
        mode = policy.act(obs, deterministic=True, agent_keys=keys).env_continuous
        np.testing.assert_array_equal(mode[0], mode[1])
        np.testing.assert_array_equal(policy.act(obs, agent_keys=keys).raw_continuous, resampled)
    finally:
        trainer.close()


def test_default_freq_keeps_the_noise_until_the_update_and_the_update_trains_its_std():
    trainer = _trainer(sde_sample_freq=-1, batch_size=16, buffer_size=16, num_epoch=1)
    policy = trainer.policy
    try:
        obs = [np.full((1, 3), -0.3, np.float32)]
        first = policy.act(obs, agent_keys=["a"])
        for _ in range(20):
            np.testing.assert_array_equal(policy.act(obs, agent_keys=["a"]).raw_continuous, first.raw_continuous)
        with policy.graph.as_default():
            (log_std,) = [v for v in tf.global_variables() if v.op.name == "policy/continuous/sde_log_std"]
        assert log_std.shape.as_list() == [16, 2]  # [hidden, c]; no plain log_std
        before = policy.session.run(log_std)
        rng = np.random.default_rng(0)
        from trainer_test_utils import random_obs

        from trainers.fields import (ADVANTAGES, CONTINUOUS_ACTION, LOG_PROBS, MASKS, RETURNS,
                                     VALUE_ESTIMATES, obs_key, signal_key)
        batch_obs = random_obs(policy.spec, 16, rng)
        info = policy.act(batch_obs, agent_keys=list(range(16)))
        trainer.buffer[obs_key(0)] = batch_obs[0]
        trainer.buffer[CONTINUOUS_ACTION] = info.raw_continuous
        trainer.buffer[LOG_PROBS] = info.log_probs
        trainer.buffer[ADVANTAGES] = rng.normal(size=16).astype(np.float32)
        trainer.buffer[MASKS] = np.ones(16, np.float32)
        trainer.buffer[signal_key("extrinsic", RETURNS)] = rng.normal(size=16).astype(np.float32)
        trainer.buffer[signal_key("extrinsic", VALUE_ESTIMATES)] = np.zeros(16, np.float32)
        trainer.update()
        assert not np.allclose(policy.session.run(log_std), before)
        assert not np.allclose(policy.act(obs, agent_keys=["a"]).raw_continuous, first.raw_continuous)
    finally:
        trainer.close()


def test_discrete_only_behaviors_ignore_it():
    trainer = _trainer(continuous=0, branches=(3,))
    try:
        assert not trainer.policy.state_dependent and trainer.policy.sde_noise is None
    finally:
        trainer.close()


# ------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    "text, expected",
    [
        ("trainer_type: ppo\n    hyperparameters: {use_sde: true, sde_sample_freq: 0}",
         "behaviors.A.hyperparameters.sde_sample_freq: expected -1 (after each update) or an integer >= 1, got 0"),
        ("trainer_type: ppo\n    hyperparameters: {use_sde: yes please}",
         "behaviors.A.hyperparameters.use_sde: expected"),
        ("trainer_type: poca\n    hyperparameters: {use_sde: true}",
         "behaviors.A.hyperparameters.use_sde: true is not supported with trainer_type poca"),
        ("trainer_type: sac\n    hyperparameters: {use_sde: true}",
         "behaviors.A.hyperparameters.use_sde: is a ppo hyperparameter, but the trainer type is sac"),
    ],
)
def test_bad_settings_are_one_line(text, expected, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"behaviors:\n  A:\n    {text}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(str(path))
    assert str(info.value).startswith(f"{path}: {expected}"), str(info.value)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ export


def test_export_samples_the_state_dependent_std_and_keeps_the_mode(tmp_path):
    trainer = _trainer(continuous=1, log_std_init=-1.5)
    policy = trainer.policy
    try:
        result = export_policy(policy, str(tmp_path), formats=("onnx",), check=False)
        sess = onnx_session(result.onnx_path)
        obs = np.array([[0.2, -0.1, 0.4], [1.0, 1.0, -1.0]], np.float32)
        rows = np.repeat(obs, 8000, axis=0)
        sampled, mode = sess.run(["continuous_actions", "deterministic_continuous_actions"], {"obs_0": rows})
        live_mode = policy.act([obs], deterministic=True).env_continuous
        np.testing.assert_allclose(mode[::8000], live_mode, atol=1e-5)
        log_std = policy.session.run(policy.actor.continuous.log_std, {policy.obs[0]: obs})
        # Env units: clip(a, -3, 3) / 3, far from the clip at these std.
        want = np.exp(log_std[:, 0]) / 3.0
        got = sampled.reshape(2, 8000).std(axis=1)
        np.testing.assert_allclose(got, want, rtol=0.05)
    finally:
        trainer.close()


# ------------------------------------------------------------------ end to end


def test_cli_trains_exports_and_resumes_with_use_sde(tmp_path, capsys, monkeypatch):
    # The controller acts by agent key (the noise is kept per agent), in training.
    from trainers.policy import Policy

    keyed = []
    original = Policy.act

    def act(self, obs, action_masks=None, deterministic=False, agent_keys=None):
        if not deterministic:
            keyed.append(agent_keys is not None and len(agent_keys) == obs[0].shape[0])
        return original(self, obs, action_masks, deterministic, agent_keys)

    monkeypatch.setattr(Policy, "act", act)
    config = tmp_path / "sde.yaml"
    config.write_text(
        "behaviors:\n"
        "  Pendulum-v1:\n"
        "    trainer_type: ppo\n"
        "    hyperparameters: {use_sde: true, sde_sample_freq: 4, batch_size: 64, buffer_size: 512,\n"
        "                      log_std_init: 0.4, update_when_full: true}\n"
        "    network_settings: {hidden_units: 32, num_layers: 2, activation: tanh, normalize: true}\n"
        "    time_horizon: 128\n"
        "    max_steps: 2048\n"
        "    summary_freq: 1024\n"
        "env_settings: {env_path: 'gym:Pendulum-v1', seed: 3, num_envs: 1, agents_per_env: 4}\n"
    )
    results = tmp_path / "results"
    args = [str(config), "--run-id=sde", f"--results-dir={results}"]
    assert learn_main(args) == 0
    assert keyed and all(keyed)
    run = results / "sde" / "Pendulum-v1"
    assert (run / "Pendulum-v1.onnx").exists()
    assert learn_main(args + ["--resume", "--max-steps=3072"]) == 0
    out = capsys.readouterr().out
    assert "Step: 3072" in out
    assert os.path.exists(run / "checkpoint-3072.index")
