"""The Stable-Baselines3 / rl-zoo knobs of PPO (issue 32 item 5), against closed forms.
Their defaults are ML-Agents' behaviour (the golden runs are unchanged by them)."""
from __future__ import annotations

import numpy as np
import pytest
from trainer_test_utils import make_spec, random_obs, small_settings

from trainers.buffer import normalized
from trainers.config import POCASettings, PPOSettings, TrainerSettings, load_settings
from trainers.exceptions import ConfigError
from trainers.fields import ADVANTAGES, MASKS
from trainers.ppo.reward_scale import CLIP_REWARD, RewardScale
from trainers.ppo.trainer import PPOTrainer
from trainers.reward_signals._features import action_features
from trainers.stats import StatsReporter
from trainers.tf import tf
from trainers.tf.towers import OptimizerGroup, TowerOutput, build_towers


def _trainer(spec=None, **hyper) -> PPOTrainer:
    return PPOTrainer("B", spec or make_spec(branches=(3,)), small_settings(**hyper), StatsReporter("B", []), 0)


# ------------------------------------------------------------------ settings


def test_defaults_are_ml_agents_and_bad_values_are_refused(tmp_path):
    hp = PPOSettings()
    assert (hp.beta_final, hp.epsilon_final, hp.max_grad_norm) == (1e-5, 0.1, None)
    assert (hp.advantage_normalization, hp.log_std_init, hp.normalize_reward) == ("buffer", 0.0, False)
    assert (hp.adam_epsilon, hp.adam_epsilon_placement, hp.action_clip) == (1e-5, "tf", 3.0)
    path = tmp_path / "c.yaml"
    for text, expected in [
        ("max_grad_norm: 0", "hyperparameters.max_grad_norm: expected a number > 0, got 0"),
        ("advantage_normalization: batch", "hyperparameters.advantage_normalization: unknown value 'batch'"),
        ("log_std_init: 5", "hyperparameters.log_std_init: expected a number"),
        ("epsilon_final: 1.5", "hyperparameters.epsilon_final: expected a number"),
        ("adam_epsilon: 0", "hyperparameters.adam_epsilon: expected a number"),
        ("adam_epsilon_placement: pytorch", "hyperparameters.adam_epsilon_placement: unknown value 'pytorch'"),
        ("action_clip: 0", "hyperparameters.action_clip: expected a number > 0, got 0"),
    ]:
        path.write_text(f"behaviors:\n  A:\n    hyperparameters: {{{text}}}\n")
        with pytest.raises(ConfigError) as info:
            load_settings(str(path))
        assert str(info.value).startswith(f"{path}: behaviors.A.{expected}"), str(info.value)
    path.write_text(
        "behaviors:\n  A:\n    hyperparameters: {normalize_reward: true}\n"
        "    reward_signals: {curiosity: {strength: 0.1}}\n"
    )
    with pytest.raises(ConfigError, match="normalize_reward: true needs the extrinsic reward signal"):
        load_settings(str(path))


# ------------------------------------------------------------------ Adam's epsilon


@pytest.mark.parametrize("trainer_type", ["ppo", "poca"])
@pytest.mark.parametrize("placement", ["tf", "torch"])
def test_adam_epsilon_and_its_placement_reach_the_optimizer(trainer_type, placement):
    """PPO's and POCA's one Adam takes ``adam_epsilon`` where ``adam_epsilon_placement``
    says (`trainers.tf.adam.TorchAdam` is checked against torch's update in test_adam.py),
    under Adam's own name, so checkpoints of either placement load in the other."""
    from trainers.poca.trainer import POCATrainer
    from trainers.tf.adam import TorchAdam

    hyper = dict(adam_epsilon=1e-7, adam_epsilon_placement=placement)
    if trainer_type == "ppo":
        trainer = _trainer(**hyper)
    else:
        settings = small_settings(**hyper)
        settings = TrainerSettings(
            trainer_type="poca", hyperparameters=POCASettings(**vars(settings.hyperparameters)),
            network_settings=settings.network_settings, max_steps=settings.max_steps,
        )
        trainer = POCATrainer("B", make_spec(branches=(3,)), settings, StatsReporter("B", []), 0)
    try:
        (group,) = trainer.optimizer.groups
        assert isinstance(group.optimizer, TorchAdam) == (placement == "torch")
        assert isinstance(group.optimizer, tf.train.AdamOptimizer)
        assert group.optimizer._epsilon == 1e-7 and group.optimizer.get_name() == "Adam"
    finally:
        trainer.close()


# ------------------------------------------------------------------ schedules


def test_linear_beta_and_epsilon_end_at_their_final_values():
    trainer = _trainer(beta=0.01, epsilon=0.3, beta_final=0.002, epsilon_final=0.05)
    try:
        opt = trainer.optimizer
        for step, want_beta, want_eps in [(0, 0.01, 0.3), (500, 0.006, 0.175), (1000, 0.002, 0.05)]:
            beta, eps = trainer.policy.session.run([opt.beta, opt.epsilon], {opt.current_step: step})
            assert beta == pytest.approx(want_beta) and eps == pytest.approx(want_eps)
    finally:
        trainer.close()


# ------------------------------------------------------------------ gradient clipping


@pytest.mark.parametrize("devices", [("/cpu:0",), ("/cpu:0", "/cpu:1")])
@pytest.mark.parametrize("clip", [None, 0.5, 100.0])
def test_gradient_clipped_to_global_norm_after_tower_averaging(devices, clip):
    """Loss sum_rows |w - t|^2 / rows + (b - 1)^2: gradient 2 (w - mean(t)) and 2 (b - 1);
    one plain SGD step of rate 1 moves the weights by minus the (clipped) gradient."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 3], "x")

        def tower(shard):
            with tf.variable_scope("net", reuse=tf.AUTO_REUSE):
                w = tf.get_variable("w", [3], initializer=tf.zeros_initializer())
                b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
            rows = tf.cast(tf.shape(shard["x"])[0], tf.float32)
            loss = tf.reduce_sum(tf.square(w - shard["x"])) / tf.maximum(rows, 1.0) + tf.reduce_sum(tf.square(b - 1.0))
            return TowerOutput({"g": loss}, {}, rows)

        group = OptimizerGroup("g", tf.train.GradientDescentOptimizer(1.0), ("net/",), max_grad_norm=clip)
        towers = build_towers(tower, {"x": x}, [group], list(devices))
        variables = [v for _, v in towers.gradients["g"]]
        init = tf.global_variables_initializer()
    config = tf.ConfigProto(device_count={"CPU": 2})
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(init)
        target = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [2.0, 2.0, 2.0], [0.0, 4.0, 2.0]], np.float32)
        sess.run(towers.apply_ops["g"], {x: target})
        moved = np.concatenate([sess.run(v).reshape(-1) for v in variables])
    grad = np.concatenate([-2.0 * target.mean(axis=0), [-2.0]])  # at w = 0, b = 0
    norm = np.linalg.norm(grad)
    want = -grad * (min(1.0, clip / norm) if clip is not None else 1.0)
    np.testing.assert_allclose(moved, want, rtol=1e-5)


# ------------------------------------------------------------------ advantages


def test_normalized_is_over_valid_rows_only():
    values = np.array([1.0, 2.0, 3.0, 100.0], np.float32)
    valid = np.array([True, True, True, False])
    out = normalized(values, valid, 1e-8)
    np.testing.assert_allclose(out[:3], (values[:3] - 2.0) / np.sqrt(2.0 / 3.0), rtol=1e-6)
    assert out[3] == 0.0 and out.dtype == np.float32
    assert not normalized(values, np.zeros(4, bool), 1e-8).any()


def test_normalized_with_ddof_1_is_torch_unbiased_std():
    # Stable-Baselines3's (adv - adv.mean()) / (adv.std() + 1e-8), torch's std dividing by n - 1
    values = np.array([1.0, 2.0, 3.0, 6.0], np.float32)
    out = normalized(values, np.ones(4, bool), 1e-8, ddof=1)
    np.testing.assert_allclose(out, (values - 3.0) / np.sqrt(14.0 / 3.0), rtol=1e-6)
    one = normalized(values, np.array([False, True, False, False]), 1e-8, ddof=1)
    assert not one.any()  # one valid row: x - mean = 0 (SB3 leaves a one-row minibatch as it is)


@pytest.mark.parametrize("mode", ["buffer", "minibatch", "none"])
def test_advantage_normalization_modes(mode):
    trainer = _trainer(advantage_normalization=mode, batch_size=16, buffer_size=64, num_epoch=1)
    try:
        rng = np.random.default_rng(3)
        raw = rng.normal(5.0, 3.0, 64).astype(np.float32)
        rows = {k: np.zeros((64,) + tuple(ph.shape.as_list()[1:]), ph.dtype.as_numpy_dtype)
                for k, ph in trainer.optimizer.placeholders.items()}
        rows["obs_0"] = random_obs(trainer.spec, 64, rng)[0]
        rows["action_mask"] = np.ones((64, 3), np.float32)
        rows[MASKS] = np.ones(64, np.float32)
        rows[ADVANTAGES] = raw
        trainer.buffer.add_fields(rows)
        fed = []
        real_update = trainer.optimizer.update

        def capture(minibatch, step, feed):
            fed.append(np.array(minibatch[ADVANTAGES]))
            return real_update(minibatch, step, feed)

        trainer.optimizer.update = capture  # type: ignore[method-assign]
        trainer.update()
        everything = np.sort(np.concatenate(fed))
        if mode == "none":
            np.testing.assert_allclose(everything, np.sort(raw))
        elif mode == "buffer":
            np.testing.assert_allclose(everything, np.sort(normalized(raw, np.ones(64, bool), 1e-10)), rtol=1e-5)
        else:
            assert len(fed) == 4
            for adv in fed:  # each minibatch on its own: mean 0, unbiased std 1 (SB3's, torch's)
                assert abs(adv.mean()) < 1e-5 and adv.std(ddof=1) == pytest.approx(1.0, rel=1e-5)
    finally:
        trainer.close()


# ------------------------------------------------------------------ log std


def test_initial_log_std_of_continuous_actions():
    trainer = _trainer(spec=make_spec(continuous=2), log_std_init=-2.0)
    try:
        with trainer.policy.graph.as_default():
            (log_std,) = [v for v in tf.global_variables() if v.op.name == "policy/continuous/log_std"]
        np.testing.assert_array_equal(trainer.policy.session.run(log_std), [-2.0, -2.0])
    finally:
        trainer.close()


@pytest.mark.parametrize("clip", [3.0, 2.0, 0.5])
@pytest.mark.parametrize("use_sde", [False, True])
def test_action_clip_maps_raw_actions_to_the_env(clip, use_sde):
    """The env receives clip(a, -c, c) / c (ML-Agents: c = 3), sampled and deterministic; a
    gym Box then scales [-1, 1] by its half width, so c = that width is the raw action in
    the env's units clipped to its bounds (Stable-Baselines3's mapping)."""
    trainer = _trainer(spec=make_spec(continuous=2), action_clip=clip, log_std_init=0.7, use_sde=use_sde)
    try:
        policy = trainer.policy
        assert policy.action_clip == clip
        obs = random_obs(trainer.spec, 256, np.random.default_rng(2))
        info = policy.act(obs)
        np.testing.assert_allclose(info.env_continuous, np.clip(info.raw_continuous, -clip, clip) / clip, rtol=1e-6)
        assert np.any(np.abs(info.raw_continuous) > clip)  # std ~2: some rows are clipped
        mean = policy.session.run(policy.actor.continuous.mean, {policy.obs[0]: obs[0]})
        det = policy.act(obs, deterministic=True).env_continuous
        np.testing.assert_allclose(det, np.clip(mean, -clip, clip) / clip, rtol=1e-6)
        # The reward signals (GAIL, curiosity) map the policy's raw actions the same way.
        raw = np.array([[4.0, -0.25], [-4.0, 0.3]], np.float32)
        with tf.Graph().as_default():  # (the policy's graph is finalised; the mapping has no variables)
            ph = tf.placeholder(tf.float32, [None, 2])
            features = action_features(trainer.spec.action_spec, ph, None, policy.to_env)
            with tf.Session() as session:
                got = session.run(features, {ph: raw})
        np.testing.assert_allclose(got, np.clip(raw, -clip, clip) / clip, rtol=1e-6)
    finally:
        trainer.close()


# ------------------------------------------------------------------ reward normalisation


def _expected_scale(returns_seen: np.ndarray) -> float:
    """Variance of one pseudo-return (mean 0, variance 1) merged with ``returns_seen``."""
    n = 1 + len(returns_seen)
    mean = returns_seen.sum() / n
    m2 = 1.0 + (0.0 - mean) ** 2 + ((returns_seen - mean) ** 2).sum()
    return 1.0 / np.sqrt(m2 / n + 1e-8)


def test_reward_scale_is_the_running_std_of_discounted_returns():
    graph = tf.Graph()
    with graph.as_default():
        session = tf.Session(graph=graph)
        scale = RewardScale(session, gamma=0.5)
        session.run(tf.global_variables_initializer())
    rewards = np.array([1.0, 1.0, 1.0], np.float32)
    first = scale.scale("a", rewards, episode_ended=False)
    seen = np.array([1.0, 1.5, 1.75])  # R_t = 0.5 R_{t-1} + r_t
    np.testing.assert_allclose(first, rewards * _expected_scale(seen), rtol=1e-6)
    # The agent's return carries over into its next trajectory ...
    second = scale.scale("a", np.array([2.0], np.float32), episode_ended=True)
    seen = np.append(seen, 0.5 * 1.75 + 2.0)
    np.testing.assert_allclose(second, [2.0 * _expected_scale(seen)], rtol=1e-6)
    # ... and restarts with the next episode.
    third = scale.scale("a", np.array([1.0], np.float32), episode_ended=True)
    seen = np.append(seen, 1.0)
    np.testing.assert_allclose(third, [_expected_scale(seen)], rtol=1e-6)
    session.close()


def test_a_reward_far_above_the_returns_spread_is_clipped_to_10():
    """Stable-Baselines3's clip_reward: after 400 zero returns the std is ~0.05."""
    graph = tf.Graph()
    with graph.as_default(), tf.Session(graph=graph) as session:
        scale = RewardScale(session, gamma=0.5)
        session.run(tf.global_variables_initializer())
        scale.scale("b", np.zeros(400, np.float32), episode_ended=True)
        out = scale.scale("c", np.array([1.0, -1.0], np.float32), episode_ended=True)
    assert out.tolist() == [CLIP_REWARD, -CLIP_REWARD]


def test_normalized_rewards_feed_the_extrinsic_signal_and_are_saved(tmp_path):
    from trainers.loop.trajectory import Trajectory

    spec = make_spec(branches=(3,))
    trainer = _trainer(spec=spec, normalize_reward=True)
    try:
        assert trainer.reward_scale is not None
        rng = np.random.default_rng(0)
        n = 5
        traj = Trajectory(
            agent=("w", 0),
            obs=random_obs(spec, n, rng),
            next_obs=random_obs(spec, 1, rng),
            continuous_action=np.zeros((n, 0), np.float32),
            discrete_action=rng.integers(0, 3, (n, 1)).astype(np.int32),
            action_mask=None,
            log_probs=np.zeros((n, 1), np.float32),  # one branch
            rewards=np.full(n, 4.0, np.float32),
            done=False,
            interrupted=False,
        )
        trainer.process_trajectory(traj)
        gamma = trainer.signals["extrinsic"].gamma
        seen = np.array([4.0 * sum(gamma**k for k in range(t + 1)) for t in range(n)])
        np.testing.assert_allclose(
            trainer.buffer["extrinsic_rewards"], np.full(n, 4.0 * _expected_scale(seen)), rtol=1e-5
        )
        prefix = trainer.save(str(tmp_path))
        variance = trainer.reward_scale.variance()
    finally:
        trainer.close()
    resumed = _trainer(spec=spec, normalize_reward=True)
    try:
        resumed.load(prefix)
        assert resumed.reward_scale is not None
        np.testing.assert_allclose(resumed.reward_scale.variance(), variance)
    finally:
        resumed.close()


def test_knobs_off_build_no_extra_variables():
    """ML-Agents' defaults add nothing to the graph (checkpoints stay compatible)."""
    plain, knobs = _trainer(), _trainer(normalize_reward=True, max_grad_norm=0.5)
    try:
        def names(t):
            with t.policy.graph.as_default():
                return {v.op.name for v in tf.global_variables()}
        assert names(knobs) - names(plain) == {
            "reward_normalization/count", "reward_normalization/mean", "reward_normalization/m2"
        }
    finally:
        plain.close()
        knobs.close()


def test_settings_carry_the_knobs_into_trainer_settings():
    settings = TrainerSettings(hyperparameters=PPOSettings(max_grad_norm=0.5, normalize_reward=True))
    assert settings.hyperparameters.max_grad_norm == 0.5
