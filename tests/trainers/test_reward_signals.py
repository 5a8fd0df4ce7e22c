"""Reward signals as plugins: curiosity, GAIL and VAIL losses learn on a fixed batch, GAIL
separates expert from policy rows, VAIL's beta follows its closed-form update, and one
update is one ``sess.run`` per minibatch that trains every network."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from trainer_test_utils import make_spec, small_settings

from envs.demo import DemoWriter
from envs.exceptions import DemoError
from trainers.ppo.trainer import PPOTrainer
from trainers.reward_signals.gail import BETA_FLOOR, Z_SIZE, GAILRewardSignal, VAIL_ALPHA
from trainers.config import CuriositySettings, ExtrinsicSettings, GAILSettings
from trainers.stats import StatsReporter

SPEC = make_spec(1, (3,))  # hybrid: every action path of every signal


def write_demo(path, spec, n, rng, behavior="B"):
    """``n`` expert rows unlike `policy_minibatch`'s: obs in [0.5, 1], actions fixed."""
    with DemoWriter(path, "test", behavior, spec) as w:
        for t in range(n):
            obs = [rng.uniform(0.5, 1.0, o.shape).astype(np.float32) for o in spec.observation_specs]
            cont = np.full(spec.action_spec.continuous_size, 0.8, np.float32)
            disc = np.array([b - 1 for b in spec.action_spec.discrete_branches], np.int32)
            w.add_step(obs, cont if cont.size else None, disc if disc.size else None,
                       reward=0.0, done=(t % 10 == 9), agent_id=0)
    return str(path)


def make_trainer(signals, spec=SPEC, seed=0, **hyper):
    settings = replace(small_settings(**hyper), reward_signals=signals)
    return PPOTrainer("B", spec, settings, StatsReporter("B", []), seed)


def policy_minibatch(trainer, n, rng):
    """``n`` policy rows with every field the signals read (obs in [-1, 0.5])."""
    spec = trainer.spec
    obs = [rng.uniform(-1.0, 0.5, (n,) + o.shape).astype(np.float32) for o in spec.observation_specs]
    info = trainer.policy.act(obs)
    mb = {"obs_0": obs[0], "log_probs": info.log_probs, "advantages": rng.normal(size=n).astype(np.float32),
          "masks": np.ones(n, np.float32), "done": (rng.random(n) < 0.1).astype(np.float32),
          "environment_rewards": np.zeros(n, np.float32)}
    mb["next_obs_0"] = np.roll(obs[0], -1, axis=0)
    if spec.action_spec.continuous_size:
        mb["continuous_action"] = info.raw_continuous
    if spec.action_spec.discrete_branches:
        mb["discrete_action"] = info.discrete
        mb["action_mask"] = np.ones((n, sum(spec.action_spec.discrete_branches)), np.float32)
    for s in trainer.signals:
        mb[f"{s}_returns"] = rng.normal(size=n).astype(np.float32)
        mb[f"{s}_value_estimates"] = rng.normal(size=n).astype(np.float32)
    return mb


def trainable_variables(trainer):
    return {v.op.name: v for v in trainer.policy.graph.get_collection("trainable_variables")}


def variable_setter(trainer):
    """``set(name, value)``: fills a trainable variable with ``value``."""
    variables = trainable_variables(trainer)

    def set_variable(name, value):
        var = variables[name]
        var.load(np.full(var.shape, value, np.float32), trainer.policy.session)

    return set_variable


def run_update(trainer, mb, step=0):
    feed = {}
    for signal in trainer.signals.values():
        feed.update(signal.prepare_update(mb, len(mb["masks"])))
    return trainer.optimizer.update(mb, step, feed)


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory):
    return write_demo(tmp_path_factory.mktemp("demo") / "expert.demo", SPEC, 40, np.random.default_rng(1))


@pytest.fixture(scope="module")
def gail_trainer(demo_path):
    trainer = make_trainer({
        "extrinsic": ExtrinsicSettings(),
        "curiosity": CuriositySettings(encoding_size=16, learning_rate=3e-3),
        "gail": GAILSettings(demo_path=demo_path, encoding_size=16, learning_rate=3e-3, use_actions=True),
    }, batch_size=32)  # the updates below feed 32 rows
    yield trainer
    trainer.close()


@pytest.fixture(scope="module")
def vail_trainer(demo_path):
    trainer = make_trainer({
        "extrinsic": ExtrinsicSettings(),
        "curiosity": CuriositySettings(encoding_size=16),
        "gail": GAILSettings(demo_path=demo_path, encoding_size=16, learning_rate=3e-3, use_actions=True, use_vail=True),
    }, num_epoch=3, batch_size=32)  # the updates below feed 32 rows
    yield trainer
    trainer.close()


def test_registered_signals_and_stats_tags(gail_trainer, vail_trainer):
    assert gail_trainer.signals["curiosity"].stats == {
        "Losses/Curiosity Forward Loss": "curiosity/forward_loss",
        "Losses/Curiosity Inverse Loss": "curiosity/inverse_loss",
    }
    assert gail_trainer.signals["gail"].stats == {
        "Losses/GAIL Loss": "gail/loss",
        "Policy/GAIL Policy Estimate": "gail/policy_estimate",
        "Policy/GAIL Expert Estimate": "gail/expert_estimate",
    }
    assert vail_trainer.signals["gail"].stats["Policy/GAIL Beta"] == "gail/beta"
    assert gail_trainer.signals["curiosity"].use_terminal_states is False
    assert gail_trainer.signals["gail"].use_terminal_states is False  # TF release_1
    assert gail_trainer.signals["gail"].beta is None
    assert vail_trainer.signals["gail"].beta.op.name == "gail_beta"


def test_curiosity_and_gail_losses_decrease_and_gail_scores_expert_higher(gail_trainer):
    trainer = gail_trainer
    rng = np.random.default_rng(2)
    mb = policy_minibatch(trainer, 32, rng)
    history = [run_update(trainer, mb) for _ in range(20)]
    first, last = history[0], history[-1]
    assert last["curiosity/forward_loss"] < first["curiosity/forward_loss"]
    assert last["curiosity/inverse_loss"] < first["curiosity/inverse_loss"]
    assert last["curiosity/loss"] < 0.8 * first["curiosity/loss"]
    assert last["gail/discriminator_loss"] < first["gail/discriminator_loss"]
    assert last["gail/loss"] < first["gail/loss"]
    assert last["gail/expert_estimate"] > last["gail/policy_estimate"] + 0.2
    # Rewards (mean bottleneck, no noise): expert rows earn more than policy rows.
    gail = trainer.signals["gail"]
    expert = gail.expert
    expert_fields = {"obs_0": expert.obs[0], "continuous_action": expert.continuous_action * 3.0,
                     "discrete_action": expert.discrete_action, "done": expert.done}
    assert gail.evaluate(expert_fields, True).mean() > gail.evaluate(mb, True).mean()


def test_curiosity_reward_is_zero_before_the_first_update_and_bounded(gail_trainer):
    curiosity = gail_trainer.signals["curiosity"]
    mb = policy_minibatch(gail_trainer, 20, np.random.default_rng(3))
    before = curiosity.evaluate(mb, has_updated=False)
    assert before.shape == (20,) and before.dtype == np.float32 and not before.any()
    after = curiosity.evaluate(mb, has_updated=True)
    assert after.shape == (20,) and np.all(after >= 0.0) and np.all(after <= 1.0) and after.any()


def test_gail_expert_batch_matches_the_policy_minibatch(gail_trainer):
    gail = gail_trainer.signals["gail"]
    assert len(gail.expert) < 64  # shorter demo: rows drawn with replacement
    for n in (16, 64):
        mb = policy_minibatch(gail_trainer, n, np.random.default_rng(n))
        feed = gail.prepare_update(mb, n)
        assert set(feed) == set(gail.batch_placeholders().values())
        assert all(len(v) == n for v in feed.values())
    # Without replacement when the demo is long enough.
    rows = gail.sample_expert_rows(len(gail.expert))
    assert sorted(rows) == list(range(len(gail.expert)))


def test_vail_loss_decreases(vail_trainer):
    mb = policy_minibatch(vail_trainer, 32, np.random.default_rng(5))
    history = [run_update(vail_trainer, mb) for _ in range(20)]
    # The bottleneck samples z, so single losses are noisy: compare means of 3 updates.
    first = np.mean([h["gail/loss"] for h in history[:3]])
    last = np.mean([h["gail/loss"] for h in history[-3:]])
    assert last < 0.5 * first
    margin = np.mean([h["gail/expert_estimate"] - h["gail/policy_estimate"] for h in history[-5:]])
    assert margin > 0.0


def test_vail_beta_moves_toward_the_target_kl(vail_trainer):
    trainer = vail_trainer
    gail = trainer.signals["gail"]
    session = trainer.policy.session
    set_variable = variable_setter(trainer)
    mb = policy_minibatch(trainer, 32, np.random.default_rng(4))
    # The bottleneck at the prior (mu = 0, sigma = 1) carries ~0 nats: beta relaxes.
    set_variable("gail/z_mean/kernel", 0.0)
    set_variable("gail/z_mean/bias", 0.0)
    set_variable("gail/z_log_sigma", 0.0)
    beta0 = session.run(gail.beta)
    stats = run_update(trainer, mb)
    beta1 = session.run(gail.beta)
    assert stats["gail/kl"] < 0.5
    assert stats["gail/beta"] == pytest.approx(beta0)  # the beta this update's loss used
    assert beta1 == pytest.approx(max(BETA_FLOOR, beta0 + VAIL_ALPHA * (stats["gail/kl"] - 0.5)), abs=1e-7)
    assert beta1 < beta0
    # A wide bottleneck (sigma = e^2) carries far more than 0.5 nats: beta grows.
    set_variable("gail/z_log_sigma", 2.0)
    stats = run_update(trainer, mb)
    beta2 = session.run(gail.beta)
    assert stats["gail/kl"] > 0.5
    assert beta2 == pytest.approx(beta1 + VAIL_ALPHA * (stats["gail/kl"] - 0.5), rel=1e-5)
    assert beta2 > beta1


def test_update_is_one_run_per_minibatch_and_trains_every_network(vail_trainer):
    trainer = vail_trainer
    hp = trainer.settings.hyperparameters
    trainer.buffer.add_fields(policy_minibatch(trainer, 70, np.random.default_rng(6)))
    session = trainer.policy.session
    graph = trainer.policy.graph
    variables = graph.get_collection("trainable_variables") + [trainer.signals["gail"].beta]
    before = session.run(variables)
    calls_before = trainer.optimizer._update_fn.calls
    runs_before = trainer.optimizer.update_runs
    counted = {"run": 0}
    original_run = session.run

    def counting_run(*args, **kwargs):
        counted["run"] += 1
        return original_run(*args, **kwargs)

    session.run = counting_run
    try:
        stats = trainer.update()
    finally:
        session.run = original_run
    minibatches = hp.num_epoch * (70 // hp.batch_size)
    assert trainer.optimizer._update_fn.calls - calls_before == minibatches
    assert trainer.optimizer.update_runs - runs_before == minibatches
    assert counted["run"] == 0
    after = session.run(variables)
    unchanged = [v.op.name for v, a, b in zip(variables, before, after) if np.array_equal(a, b)]
    assert unchanged == []
    scopes = {v.op.name.split("/")[0] for v in variables}
    assert scopes == {"policy", "critic", "curiosity", "gail", "gail_beta"}
    for key in ("curiosity/forward_loss", "curiosity/inverse_loss", "gail/loss", "gail/policy_estimate",
                "gail/expert_estimate", "gail/beta"):
        assert np.isfinite(stats[key])


def test_two_towers_give_the_same_curiosity_losses(demo_path):
    """Curiosity is deterministic: one tower and two (uneven) towers average the same; GAIL
    (VAIL) samples, so on two towers its statistics are only checked to be finite."""
    signals = {"extrinsic": ExtrinsicSettings(), "curiosity": CuriositySettings(encoding_size=8),
               "gail": GAILSettings(demo_path=demo_path, encoding_size=8, use_actions=True, use_vail=True)}
    one = make_trainer(signals, seed=3, batch_size=15)
    settings = replace(small_settings(batch_size=15), reward_signals=signals)
    two = PPOTrainer("B", SPEC, settings, StatsReporter("B", []), 3, ("/cpu:0", "/cpu:1"))
    mb = policy_minibatch(one, 15, np.random.default_rng(7))
    s1, s2 = run_update(one, mb), run_update(two, mb)
    for key in ("curiosity/forward_loss", "curiosity/inverse_loss", "curiosity/loss"):
        assert s2[key] == pytest.approx(s1[key], rel=1e-5)
    assert all(np.isfinite(v) for k, v in s2.items() if k.startswith("gail/"))
    assert s2["gail/beta"] == pytest.approx(1.0)
    one.close()
    two.close()


def test_demo_spec_mismatch_is_one_clear_error(tmp_path):
    other = make_spec(2, ())
    path = write_demo(tmp_path / "other.demo", other, 5, np.random.default_rng(0))
    with pytest.raises(DemoError) as info:
        make_trainer({"gail": GAILSettings(demo_path=path)})
    message = str(info.value)
    assert "\n" not in message
    assert "does not match behavior 'B'" in message and "other.demo" in message
    with pytest.raises(DemoError, match="not found"):
        make_trainer({"gail": GAILSettings(demo_path=str(tmp_path / "missing.demo"))})


def test_demo_spec_mismatch_from_the_cli(tmp_path, run_cli):
    path = write_demo(tmp_path / "other.demo", make_spec(0, (2,), vector=1), 5, np.random.default_rng(0))
    config = tmp_path / "gail.yaml"
    config.write_text(
        "behaviors:\n  Simple:\n    reward_signals:\n"
        f"      gail: {{demo_path: {path}}}\n"
        "env_settings:\n  env_path: builtin:Simple\n"
    )
    code, out, err = run_cli(str(config))
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("trainer-learn")]
    assert len(lines) == 1 and "does not match behavior 'Simple'" in lines[0]


def test_gail_signal_class_is_registered():
    from trainers.reward_signals.curiosity import CuriosityRewardSignal
    from trainers.reward_signals.factory import REGISTRY

    assert REGISTRY["gail"] is GAILRewardSignal and REGISTRY["curiosity"] is CuriosityRewardSignal


def _kernel_rows(trainer, name):
    return int(trainable_variables(trainer)[name].shape[0])


def test_gail_reads_done_and_actions_only_with_use_actions(demo_path, gail_trainer):
    """ML-Agents' discriminator reads (obs, action, done) with ``use_actions`` and obs alone
    without: ``done`` alone would let it tell policy from expert by episode ends."""
    trainer = make_trainer({"extrinsic": ExtrinsicSettings(),
                            "gail": GAILSettings(demo_path=demo_path, encoding_size=16)}, batch_size=12)
    gail = trainer.signals["gail"]
    assert tuple(gail.update_fields()) == ()
    assert "done" not in trainer.optimizer.placeholders
    assert not any("done" in key for key in gail.batch_placeholders())
    # The first layer reads the 16-wide encoding only.
    assert _kernel_rows(trainer, "gail/hidden/kernel") == 16
    mb = policy_minibatch(trainer, 12, np.random.default_rng(8))
    run_update(trainer, mb)
    without_done = {k: v for k, v in mb.items() if k != "done"}
    assert gail.evaluate(without_done, True).shape == (12,)
    trainer.close()
    # With actions: encoding + continuous (1) + one-hot branch (3) + done (1), and done matters.
    assert _kernel_rows(gail_trainer, "gail/hidden/kernel") == 16 + 1 + 3 + 1
    with_actions = gail_trainer.signals["gail"]
    assert tuple(with_actions.update_fields()) == ("done",)
    mb = policy_minibatch(gail_trainer, 12, np.random.default_rng(9))
    flipped = dict(mb, done=1.0 - mb["done"])
    assert not np.allclose(with_actions.evaluate(mb, True), with_actions.evaluate(flipped, True))


def test_gail_reward_is_zero_before_the_first_update(gail_trainer):
    gail = gail_trainer.signals["gail"]
    mb = policy_minibatch(gail_trainer, 10, np.random.default_rng(10))
    before = gail.evaluate(mb, has_updated=False)
    assert before.shape == (10,) and before.dtype == np.float32 and not before.any()
    assert gail.evaluate(mb, has_updated=True).all()


def test_gail_value_targets_bootstrap_through_terminal_states(demo_path):
    """TF release_1: GAIL (like curiosity) has no terminal states, so the last return of an
    ended episode still adds gamma x V(next obs); the extrinsic return stops there."""
    from trainers.loop.trajectory import Trajectory

    trainer = make_trainer({"extrinsic": ExtrinsicSettings(gamma=0.9),
                            "gail": GAILSettings(demo_path=demo_path, encoding_size=16, gamma=0.8)})
    trainer.has_updated = True
    rng = np.random.default_rng(11)
    n = 5
    obs = [rng.uniform(-1, 1, (n, 3)).astype(np.float32)]
    nxt = [rng.uniform(-1, 1, (1, 3)).astype(np.float32)]
    info = trainer.policy.act(obs)
    traj = Trajectory((0, 0), obs, nxt, info.raw_continuous, info.discrete, None, info.log_probs,
                      rng.normal(size=n).astype(np.float32), done=True, interrupted=False)
    trainer.process_trajectory(traj)
    v_next = trainer.optimizer.evaluate_values(nxt)
    buf = trainer.buffer
    assert buf["extrinsic_returns"][-1] == pytest.approx(buf["extrinsic_rewards"][-1], abs=1e-6)
    expected = buf["gail_rewards"][-1] + 0.8 * v_next["gail"][0]
    assert abs(v_next["gail"][0]) > 1e-3  # the test can tell the two conventions apart
    assert buf["gail_returns"][-1] == pytest.approx(expected, abs=1e-5)
    trainer.close()


def test_vail_kl_is_the_sum_of_both_sides_and_beta_has_a_floor(vail_trainer):
    """ML-Agents' kl_loss adds the policy's and the expert's mean KL; beta stays >= 1e-7."""
    trainer = vail_trainer
    gail = trainer.signals["gail"]
    session = trainer.policy.session
    set_variable = variable_setter(trainer)
    # mu = 0.3 on every row of both sides, sigma = 1: each side's KL is 0.5 x 128 x 0.09.
    set_variable("gail/z_mean/kernel", 0.0)
    set_variable("gail/z_mean/bias", 0.3)
    set_variable("gail/z_log_sigma", 0.0)
    mb = policy_minibatch(trainer, 32, np.random.default_rng(12))
    stats = run_update(trainer, mb)
    assert stats["gail/kl"] == pytest.approx(2 * 0.5 * Z_SIZE * 0.09, rel=1e-4)
    # At the prior (KL ~ 0) a small beta would go negative: it stops at the floor.
    set_variable("gail/z_mean/bias", 0.0)
    gail.beta.load(1e-6, session)
    stats = run_update(trainer, mb)
    assert stats["gail/kl"] < 0.5
    assert session.run(gail.beta) == pytest.approx(BETA_FLOOR, rel=1e-6)


def test_curiosity_reads_raw_observations_not_the_normaliser():
    """ML-Agents' ICM encodes raw observations: moving the policy's normaliser must not
    change the curiosity reward of the same transitions (drift is not novelty)."""
    settings = small_settings()
    settings = replace(settings, network_settings=replace(settings.network_settings, normalize=True),
                       reward_signals={"extrinsic": ExtrinsicSettings(),
                                       "curiosity": CuriositySettings(encoding_size=8)})
    trainer = PPOTrainer("B", SPEC, settings, StatsReporter("B", []), 0)
    curiosity = trainer.signals["curiosity"]
    mb = policy_minibatch(trainer, 10, np.random.default_rng(13))
    before = curiosity.evaluate(mb, has_updated=True)
    trainer.policy.update_normalization([np.random.default_rng(14).normal(50.0, 10.0, (200, 3)).astype(np.float32)])
    after = curiosity.evaluate(mb, has_updated=True)
    np.testing.assert_allclose(after, before, rtol=1e-6)
    trainer.close()
