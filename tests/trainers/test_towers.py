"""Towers: 1, 2 and 4 towers give the same averaged gradients and weights after an update
(even, uneven and empty splits), every tower's ops run on its own device, checkpoints move
between tower counts, and a 2-tower run learns."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from trainer_test_utils import config_path, make_spec, random_obs, small_settings

from trainers.ppo.trainer import PPOTrainer
from trainers.stats import StatsReporter
from trainers.tf import tf
from trainers.tf.towers import split_sizes

SPEC = make_spec(1, (3,))


def build(devices, tmp_path=None, restore=None, batch_size=16):
    """A trainer on ``devices``; its update takes minibatches of ``batch_size`` rows."""
    trainer = PPOTrainer("B", SPEC, small_settings(batch_size=batch_size), StatsReporter("B", []), 0, devices)
    if restore is not None:
        trainer.load(restore)
    return trainer


def minibatch(n, seed=0):
    rng = np.random.default_rng(seed)
    obs = random_obs(SPEC, n, rng)
    return {
        "obs_0": obs[0],
        "continuous_action": rng.normal(size=(n, 1)).astype(np.float32),
        "discrete_action": rng.integers(0, 3, size=(n, 1)).astype(np.int32),
        "action_mask": np.ones((n, 3), np.float32),
        "log_probs": rng.normal(-1, 0.3, size=(n, 2)).astype(np.float32),  # 1 continuous, 1 branch
        "advantages": rng.normal(size=n).astype(np.float32),
        "masks": np.ones(n, np.float32),
        "extrinsic_returns": rng.normal(size=n).astype(np.float32),
        "extrinsic_value_estimates": rng.normal(size=n).astype(np.float32),
    }


def grads_and_update(trainer, mb):
    opt = trainer.optimizer
    feed = {opt.placeholders[k]: v for k, v in mb.items()}
    feed[opt.current_step] = 10
    pairs = opt.towers.gradients["ppo"]
    names = [v.op.name for _, v in pairs]
    grads = trainer.policy.session.run([g for g, _ in pairs], feed)
    stats = opt.update(mb, 10, {})
    weights = trainer.policy.session.run([v for _, v in pairs])
    return dict(zip(names, grads)), dict(zip(names, weights)), stats


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("towers"))
    one = build(("/cpu:0",))
    prefix = one.save(directory)
    one.close()
    results = {}
    for n in (32, 19, 3):
        # Every case starts from the same weights and optimizer state, in a trainer whose
        # minibatches are n rows (the update's row count is static).
        ref = build(("/cpu:0",), restore=prefix, batch_size=n)
        results[n] = grads_and_update(ref, minibatch(n))
        ref.close()
    return prefix, results


@pytest.mark.parametrize("num_towers", [2, 4])
@pytest.mark.parametrize("rows", [32, 19, 3], ids=["even", "uneven", "fewer-rows-than-towers"])
def test_towers_match_one_tower(reference, num_towers, rows):
    prefix, results = reference
    ref_grads, ref_weights, ref_stats = results[rows]
    multi = build(tuple(f"/cpu:{i}" for i in range(num_towers)), restore=prefix, batch_size=rows)
    grads, weights, stats = grads_and_update(multi, minibatch(rows))
    multi.close()
    assert set(grads) == set(ref_grads)
    # Relative to the largest gradient entry of the network: single entries that are sums
    # of cancelling terms carry float32 round-off of the terms, not of the sum.
    scale = max(float(np.max(np.abs(g))) for g in ref_grads.values())
    for name in ref_grads:
        assert float(np.max(np.abs(ref_grads[name] - grads[name]))) / scale < 1e-6, name
        np.testing.assert_allclose(weights[name], ref_weights[name], rtol=1e-6, atol=1e-7, err_msg=name)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl"):
        assert stats[key] == pytest.approx(ref_stats[key], rel=1e-5, abs=1e-7), key


def test_split_rule():
    with tf.Graph().as_default(), tf.Session() as sess:
        sizes = sess.run([split_sizes(tf.constant(n), 4) for n in (8, 9, 11, 2)])
    assert [list(s) for s in sizes] == [[2, 2, 2, 2], [3, 2, 2, 2], [3, 3, 3, 2], [1, 1, 0, 0]]


def test_every_tower_runs_on_its_own_device():
    trainer = build(("/cpu:0", "/cpu:1"))
    opt = trainer.optimizer
    mb = minibatch(16)
    feed = {opt.placeholders[k]: v for k, v in mb.items()}
    feed[opt.current_step] = 1
    meta = tf.RunMetadata()
    trainer.policy.session.run(
        opt._update_op, feed, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=meta
    )
    graph = trainer.policy.graph
    placed = {}
    for dev in meta.step_stats.dev_stats:
        for node in dev.node_stats:
            name = node.node_name
            if not name.startswith("tower_") or name.startswith("tower_average"):
                continue
            try:
                op_type = graph.get_operation_by_name(name).type
            except KeyError:
                op_type = "?"
            # Reading a resource variable happens where the variable lives (by design:
            # variables live on the first device); everything else on the tower's device.
            if op_type == "ReadVariableOp":
                continue
            placed.setdefault(name.split("/")[0], set()).add(dev.device.lower())
    assert set(placed) == {"tower_0", "tower_1"}
    assert all("cpu:0" in d for d in placed["tower_0"]), placed["tower_0"]
    assert all("cpu:1" in d for d in placed["tower_1"]), placed["tower_1"]
    assert len(meta.step_stats.dev_stats) >= 2
    trainer.close()


def test_checkpoints_move_between_tower_counts(tmp_path):
    two = build(("/cpu:0", "/cpu:1"))
    two.optimizer.update(minibatch(16), 5, {})
    two.step = 123
    prefix = two.save(str(tmp_path))
    obs = random_obs(SPEC, 4, np.random.default_rng(1))
    expected = two.policy.act(obs, deterministic=True)
    values = two.optimizer.evaluate_values(obs)
    two.close()
    one = build(("/cpu:0",), restore=prefix)
    assert one.step == 123
    got = one.policy.act(obs, deterministic=True)
    np.testing.assert_array_equal(got.env_continuous, expected.env_continuous)
    np.testing.assert_array_equal(got.discrete, expected.discrete)
    np.testing.assert_array_equal(one.optimizer.evaluate_values(obs)["extrinsic"], values["extrinsic"])
    prefix_one = one.save(str(tmp_path / "one"))
    one.close()
    four = build(tuple(f"/cpu:{i}" for i in range(4)), restore=prefix_one)
    np.testing.assert_array_equal(four.policy.act(obs, deterministic=True).discrete, expected.discrete)
    four.close()


def test_two_tower_run_learns(run_cli):
    import csv
    import os

    code, out, err = run_cli(config_path("Simple_discrete.yaml"), "--run-id=towers", "--devices=/cpu:0,/cpu:1")
    assert code == 0, err
    with open(os.path.join(run_cli.results, "towers", "Simple", "stats.csv")) as f:
        rewards = [float(r["mean"]) for r in csv.DictReader(f) if r["tag"] == "Environment/Cumulative Reward"]
    assert rewards[-1] > 0.9


def test_bad_device_lists(run_cli):
    for devices, expected in (("/gpu:0", "available"), ("/tpu:0", "available"), ("cpu:x", "expected device names")):
        code, _, err = run_cli(config_path("Simple_discrete.yaml"), "--run-id=bad", f"--devices={devices}")
        assert code == 1, err
        line = [l for l in err.splitlines() if l.startswith("trainer-learn")][0]
        assert devices in line and expected in line


def test_full_update_with_every_reward_signal_matches_across_towers():
    """PPO + curiosity + GAIL + VAIL: 1 tower vs 3 towers (uneven split), same weights after
    one update to 1e-6 relative, and each tower's ops on its own device."""
    import os
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "check_towers.py")
    proc = subprocess.run(
        [sys.executable, script, "--vail", "--devices=/cpu:0,/cpu:1,/cpu:2", "--rows=50", "--tolerance=1e-6"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout and "tower_2: CPU:2" in proc.stdout


# ------------------------------------------------------------------ with an LSTM

SEQ = 4


def build_recurrent(devices, restore=None, pack=False):
    """``pack``: ``pack_sequences`` (packed layout, resets inside sequences); else ML-Agents'
    padded layout (one memory per sequence)."""
    from trainers.config import MemorySettings

    base = small_settings(pack_sequences=pack)
    network = dataclasses.replace(base.network_settings, memory=MemorySettings(memory_size=8, sequence_length=SEQ))
    trainer = PPOTrainer("B", SPEC, dataclasses.replace(base, network_settings=network), StatsReporter("B", []), 0, devices)
    if restore is not None:
        trainer.load(restore)
    return trainer


def recurrent_minibatch(num_sequences, seed=0, pack=False):
    """``num_sequences`` sequences of SEQ rows; masked rows in every other one, stored
    actor/critic memories per row (the padded layout reads each sequence's first) and
    previous actions; ``pack``: trajectories starting inside sequences (``reset``)."""
    rng = np.random.default_rng(seed)
    n = num_sequences * SEQ
    mb = minibatch(n, seed)
    for s in range(0, num_sequences, 2):
        mb["masks"][s * SEQ : s * SEQ + 1 + s % 3] = 0.0
    mb["memory"] = rng.normal(size=(n, 8)).astype(np.float32)
    mb["critic_memory"] = rng.normal(size=(n, 8)).astype(np.float32)
    mb["prev_action"] = rng.integers(0, 3, size=(n, 1)).astype(np.int32)
    if pack:
        mb["reset"] = (rng.uniform(size=n) < 0.3).astype(np.float32)
    return mb


@pytest.fixture(scope="module")
def recurrent_trainers(tmp_path_factory):
    """One recurrent trainer per tower count (1, 2, 4), built once (graph building
    dominates these tests), and the 1-tower checkpoint every case starts from."""
    directory = str(tmp_path_factory.mktemp("towers_lstm"))
    trainers = {n: build_recurrent(tuple(f"/cpu:{i}" for i in range(n))) for n in (1, 2, 4)}
    prefix = trainers[1].save(directory)
    yield trainers, prefix
    for trainer in trainers.values():
        trainer.close()


@pytest.mark.parametrize(
    "num_towers,sequences", [(2, 5), (2, 8), (4, 5), (4, 3)], ids=["2-uneven", "2-even", "4-uneven", "4-fewer-sequences"]
)
def test_towers_with_lstm_match_one_tower(recurrent_trainers, num_towers, sequences):
    """Sequences are never split: N towers give the 1-tower update of the LSTM actor and
    critic (stored memories, padding, previous actions) to 1e-6."""
    trainers, prefix = recurrent_trainers
    mb = recurrent_minibatch(sequences)
    trainers[1].load(prefix)
    ref_grads, ref_weights, ref_stats = grads_and_update(trainers[1], mb)
    multi = trainers[num_towers]
    multi.load(prefix)
    grads, weights, stats = grads_and_update(multi, mb)
    assert any("lstm" in name for name in ref_grads)
    scale = max(float(np.max(np.abs(g))) for g in ref_grads.values())
    for name in ref_grads:
        assert float(np.max(np.abs(ref_grads[name] - grads[name]))) / scale < 1e-6, name
        np.testing.assert_allclose(weights[name], ref_weights[name], rtol=1e-6, atol=1e-7, err_msg=name)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl"):
        assert stats[key] == pytest.approx(ref_stats[key], rel=1e-5, abs=1e-7), key


def test_towers_with_packed_lstm_match_one_tower(tmp_path):
    """``pack_sequences: true`` (trajectories starting inside sequences): 2 towers give the
    1-tower update to 1e-6 on 5 sequences (uneven)."""
    one = build_recurrent(("/cpu:0",), pack=True)
    prefix = one.save(str(tmp_path))
    two = build_recurrent(("/cpu:0", "/cpu:1"), restore=prefix, pack=True)
    mb = recurrent_minibatch(5, seed=3, pack=True)
    assert mb["reset"].reshape(-1, SEQ)[:, 1:].sum() > 0  # trajectory starts inside sequences
    ref_grads, ref_weights, _ = grads_and_update(one, mb)
    grads, weights, _ = grads_and_update(two, mb)
    scale = max(float(np.max(np.abs(g))) for g in ref_grads.values())
    for name in ref_grads:
        assert float(np.max(np.abs(ref_grads[name] - grads[name]))) / scale < 1e-6, name
        np.testing.assert_allclose(weights[name], ref_weights[name], rtol=1e-6, atol=1e-7, err_msg=name)
    one.close()
    two.close()


def test_lstm_checkpoints_move_between_tower_counts(recurrent_trainers, tmp_path):
    trainers, start = recurrent_trainers
    two = trainers[2]
    two.load(start)
    two.optimizer.update(recurrent_minibatch(4), 5, {})
    prefix = two.save(str(tmp_path))
    rng = np.random.default_rng(1)
    steps = [random_obs(SPEC, 3, rng) for _ in range(4)]

    def play(trainer, tag):
        # Deterministic actions over 4 steps, memories carried per agent, and the critic's
        # values of the same observations as one trajectory.
        keys = [(tag, i) for i in range(3)]
        out = [trainer.policy.act(obs, deterministic=True, agent_keys=keys) for obs in steps]
        traj = [np.concatenate([s[0][:1] for s in steps])]
        values, memories = trainer.optimizer.trajectory_values(traj, tag, True)
        return out, values["extrinsic"], memories

    expected = play(two, "two")
    for n in (1, 4):
        trainers[n].load(prefix)
        got = play(trainers[n], f"restored-{n}")
        for a, b in zip(got[0], expected[0]):
            np.testing.assert_array_equal(a.env_continuous, b.env_continuous)
            np.testing.assert_array_equal(a.discrete, b.discrete)
        np.testing.assert_array_equal(got[1], expected[1])
        np.testing.assert_array_equal(got[2], expected[2])


@pytest.mark.slow
def test_full_update_with_lstm_and_reward_signals_matches_across_towers():
    """scripts/check_towers.py --memory: PPO + curiosity + GAIL with an LSTM actor and
    critic, 1 tower vs 3 towers on 7 sequences (uneven), to 1e-6 (slow: ~1 min of graph
    building; the in-process tests above cover the PPO networks in the default run)."""
    import os
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "check_towers.py")
    proc = subprocess.run(
        [sys.executable, script, "--memory", "--devices=/cpu:0,/cpu:1,/cpu:2", "--rows=56", "--tolerance=1e-6"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout and "7 sequences of 8" in proc.stdout
