"""MA-POCA (trainers/poca/): lambda-returns as ML-Agents', group rewards into the extrinsic
signal, the bootstrap of an agent that finished before its group, padded groupmate slots
that change nothing, the buffer's groupmate width, one run per minibatch, 1 vs 2 vs 4
towers with uneven groups, checkpoints (the saved group size) and a CLI run with --resume."""
from __future__ import annotations

import csv
import json
from typing import List, Optional

import numpy as np
import pytest
import yaml
from trainer_test_utils import make_spec

from trainers.config import NetworkSettings, POCASettings, TrainerSettings
from trainers.loop.trajectory import GroupData, Trajectory
from trainers.poca.trainer import POCATrainer, lambda_returns
from trainers.stats import StatsReporter

SPEC = make_spec(1, (3,))  # a vector of 3; one continuous action and a branch of 3
GAMMA = 0.99  # the extrinsic signal's default


def settings(**hyper) -> TrainerSettings:
    hp = dict(batch_size=16, buffer_size=40, learning_rate=3e-3, num_epoch=2)
    hp.update(hyper)
    return TrainerSettings(
        trainer_type="poca",
        hyperparameters=POCASettings(**hp),
        network_settings=NetworkSettings(hidden_units=16, num_layers=1),
        max_steps=1000,
    )


def build(devices=("/cpu:0",), **hyper) -> POCATrainer:
    return POCATrainer("B", SPEC, settings(**hyper), StatsReporter("B", []), 0, devices)


def trajectory(rng, n: int, mates: int, agent=(0, 1), done=False, all_done=True, next_mates: Optional[int] = None,
               present: Optional[np.ndarray] = None, interrupted=False) -> Trajectory:
    """A random trajectory of ``n`` steps with ``mates`` groupmate slots (``present``: which
    are there, all by default); ``mates=0`` and ``next_mates=None``: no group at all."""
    group = None
    if mates or next_mates is not None:
        nm = mates if next_mates is None else next_mates
        group = GroupData(
            group_id=1,
            obs=[rng.uniform(-1, 1, (n, mates, 3)).astype(np.float32)],
            continuous_action=rng.normal(size=(n, mates, 1)).astype(np.float32),
            discrete_action=rng.integers(0, 3, (n, mates, 1)).astype(np.int32),
            present=np.ones((n, mates), np.float32) if present is None else present,
            group_reward=rng.uniform(0, 1, n).astype(np.float32),
            mate_rewards=rng.uniform(0, 1, n).astype(np.float32),
            next_obs=[rng.uniform(-1, 1, (nm, 3)).astype(np.float32)],
            all_done=all_done,
        )
        group.obs[0] *= group.present[..., None]
    return Trajectory(
        agent=agent,
        obs=[rng.uniform(-1, 1, (n, 3)).astype(np.float32)],
        next_obs=[rng.uniform(-1, 1, (1, 3)).astype(np.float32)],
        continuous_action=rng.normal(size=(n, 1)).astype(np.float32),
        discrete_action=rng.integers(0, 3, (n, 1)).astype(np.int32),
        action_mask=None,
        log_probs=rng.normal(-1, 0.3, (n, 2)).astype(np.float32),  # 1 continuous, 1 branch
        rewards=rng.uniform(-1, 1, n).astype(np.float32),
        done=done,
        interrupted=interrupted,
        group=group,
    )


@pytest.fixture(scope="module")
def trainer() -> POCATrainer:
    return build()


def test_lambda_returns_are_ml_agents_recursion():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=7), rng.normal(size=7)
    gamma, lambd, v_next = 0.9, 0.8, 0.4
    expected = np.zeros(7)
    expected[-1] = r[-1] + gamma * v_next
    for t in reversed(range(6)):  # ML-Agents' trainer_utils.lambda_return
        expected[t] = gamma * lambd * expected[t + 1] + r[t] + (1 - lambd) * gamma * v[t + 1]
    np.testing.assert_allclose(lambda_returns(r, v, v_next, gamma, lambd), expected, rtol=1e-5, atol=1e-6)


def test_extrinsic_reward_returns_and_the_early_finishers_bootstrap(trainer):
    """The extrinsic reward is own + group + mates' rewards; an agent done before its group
    (all_done False) bootstraps from the critic over its mates' next observations; once
    the whole group is done it does not; advantages are returns - baseline."""
    rng = np.random.default_rng(1)
    for all_done in (False, True):
        trainer.buffer.clear()
        trainer._width = 0
        traj = trajectory(rng, 5, 2, done=True, all_done=all_done, next_mates=1)
        trainer.process_trajectory(traj)  # (raises the saved group size first)
        values, baselines = trainer.optimizer.group_values(traj.obs, traj.next_obs, traj.group)
        g = traj.group
        assert g is not None
        rewards = trainer.buffer["extrinsic_rewards"]
        np.testing.assert_allclose(rewards, traj.rewards + g.group_reward + g.mate_rewards, rtol=1e-6)
        v = values["extrinsic"]
        v_next = 0.0 if all_done else v[-1]
        expected = lambda_returns(rewards, v[:-1], v_next, GAMMA, 0.95)
        np.testing.assert_allclose(trainer.buffer["extrinsic_returns"], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(trainer.buffer["extrinsic_advantage"], expected - baselines["extrinsic"], atol=1e-6)
        assert abs(v[-1]) > 1e-4  # the bootstrap value is not trivially 0
    # A time limit bootstraps even when every mate is done.
    trainer.buffer.clear()
    traj = trajectory(rng, 3, 1, done=True, all_done=True, interrupted=True)
    trainer.process_trajectory(traj)
    values, _ = trainer.optimizer.group_values(traj.obs, traj.next_obs, traj.group)
    expected = lambda_returns(trainer.buffer["extrinsic_rewards"], values["extrinsic"][:-1], values["extrinsic"][-1], GAMMA, 0.95)
    np.testing.assert_allclose(trainer.buffer["extrinsic_returns"], expected, rtol=1e-5, atol=1e-6)
    trainer.buffer.clear()
    trainer._width = 0


def test_padded_groupmate_slots_change_nothing(trainer):
    """Critic and baseline of rows with absent mates do not depend on the padding's content
    or width (the zero-entity mask), and differ from a row whose mate is there."""
    rng = np.random.default_rng(2)
    traj = trajectory(rng, 6, 2, present=np.array([[1, 0], [0, 0], [1, 1], [1, 0], [0, 0], [1, 1]], np.float32))
    g = traj.group
    assert g is not None
    values, baselines = trainer.optimizer.group_values(traj.obs, traj.next_obs, g)
    # Garbage in the absent slots, and two more absent slots.
    wide = GroupData(
        g.group_id,
        [np.concatenate([np.where(g.present[..., None] > 0, g.obs[0], 7.0), np.full((6, 2, 3), -5.0, np.float32)], 1)],
        np.concatenate([g.continuous_action, np.full((6, 2, 1), 3.0, np.float32)], 1),
        np.concatenate([g.discrete_action, np.full((6, 2, 1), 2, np.int32)], 1),
        np.concatenate([g.present, np.zeros((6, 2), np.float32)], 1),
        g.group_reward, g.mate_rewards, g.next_obs, g.all_done,
    )
    values2, baselines2 = trainer.optimizer.group_values(traj.obs, traj.next_obs, wide)
    np.testing.assert_allclose(values2["extrinsic"], values["extrinsic"], atol=1e-5)
    np.testing.assert_allclose(baselines2["extrinsic"], baselines["extrinsic"], atol=1e-5)
    # Rows 1 and 4 (no mate) vs the same agent with a mate: the critic sees the group.
    alone = GroupData(g.group_id, [g.obs[0] * 0], g.continuous_action, g.discrete_action, g.present * 0,
                      g.group_reward, g.mate_rewards, g.next_obs, g.all_done)
    values3, _ = trainer.optimizer.group_values(traj.obs, traj.next_obs, alone)
    np.testing.assert_allclose(values3["extrinsic"][[1, 4]], values["extrinsic"][[1, 4]], atol=1e-5)
    assert np.abs(values3["extrinsic"][[2, 5]] - values["extrinsic"][[2, 5]]).max() > 1e-4


def test_buffer_widens_to_the_widest_group_and_one_run_per_minibatch(trainer):
    trainer.buffer.clear()
    trainer._width = 0
    runs = trainer.optimizer.update_runs
    size_before = trainer.policy.session.run(trainer.optimizer.max_group_size)
    rng = np.random.default_rng(3)
    trainer.process_trajectory(trajectory(rng, 10, 0, agent=(0, 9)))  # no group: zero slots
    assert trainer.buffer["group_present"].shape == (10, 0)
    trainer.process_trajectory(trajectory(rng, 12, 1, agent=(0, 1)))
    trainer.process_trajectory(trajectory(rng, 11, 3, agent=(0, 2)))  # re-pads the rows held
    trainer.process_trajectory(trajectory(rng, 9, 2, agent=(0, 3)))  # padded to 3
    assert trainer.buffer["group_obs_0"].shape == (42, 3, 3)
    assert trainer.buffer["group_continuous_action"].shape == (42, 3, 1)
    np.testing.assert_array_equal(trainer.buffer["group_present"].sum(axis=0), [32, 20, 11])
    # The critic's member count scale: the most members seen (3 mates + the agent).
    assert trainer.policy.session.run(trainer.optimizer.max_group_size) == max(size_before, 4.0)
    assert trainer.ready_to_update
    stats = trainer.update()
    # 42 rows // 16 = 2 minibatches per epoch, 2 epochs: 4 runs, each updating everything.
    assert trainer.optimizer.update_runs - runs == 4
    assert {"policy_loss", "value_loss", "baseline_loss", "entropy"} <= set(stats)
    assert all(np.isfinite(v) for v in stats.values())
    assert trainer.buffer.num_experiences == 0 and trainer._width == 0


def _uneven_minibatch(trainer: POCATrainer):
    rng = np.random.default_rng(4)
    # Groups of 1 to 4 members, trajectories of uneven lengths, some mates absent.
    for k, (n, mates) in enumerate(((5, 3), (4, 0), (7, 1), (3, 2), (6, 3))):
        present = (rng.uniform(size=(n, mates)) > 0.3).astype(np.float32)
        trainer.process_trajectory(trajectory(rng, n, mates, agent=(0, k), present=present))
    return {k: trainer.buffer[k] for k in trainer.optimizer.placeholders}


def test_one_two_and_four_towers_agree_with_uneven_groups(trainer, tmp_path):
    """Rows carry their own groupmates, so the towers' row-wise split (25 rows: 13/12 and
    7/6/6/6) gives the one-tower update: the same statistics and weights."""
    one = trainer
    one.buffer.clear()
    one._width = 0
    prefix = one.save(str(tmp_path))
    mb = _uneven_minibatch(one)
    assert mb["group_present"].shape == (25, 3)
    results = {}
    for devices in (("/cpu:0",), ("/cpu:0", "/cpu:1"), ("/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3")):
        trainer = one if len(devices) == 1 else build(devices)
        trainer.load(prefix)
        stats = trainer.optimizer.update(mb, 10, {})
        variables = [v for _, v in trainer.optimizer.towers.gradients["poca"]]
        weights = dict(zip([v.op.name for v in variables], trainer.policy.session.run(variables)))
        results[len(devices)] = (stats, weights)
    stats1, weights1 = results[1]
    for towers in (2, 4):
        stats, weights = results[towers]
        for name in ("policy_loss", "value_loss", "baseline_loss", "entropy"):
            assert stats[name] == pytest.approx(stats1[name], rel=1e-4, abs=1e-6), (towers, name)
        assert weights.keys() == weights1.keys()
        for name, w in weights.items():
            np.testing.assert_allclose(w, weights1[name], rtol=1e-4, atol=1e-6, err_msg=f"{towers} towers: {name}")


def test_checkpoint_restores_weights_and_group_size(trainer, tmp_path):
    rng = np.random.default_rng(5)
    first = trainer
    first.buffer.clear()
    first._width = 0
    first.process_trajectory(trajectory(rng, 30, 4, agent=(0, 1)))
    first.process_trajectory(trajectory(rng, 12, 2, agent=(0, 2)))
    first.update()
    first.step = 77
    prefix = first.save(str(tmp_path))
    probe = trajectory(rng, 4, 2)
    expected = first.optimizer.group_values(probe.obs, probe.next_obs, probe.group)
    second = build()
    second.optimizer.observe_group_size(2)  # a cached value the restore must drop
    second.load(prefix)
    assert second.step == 77
    assert second.policy.session.run(second.optimizer.max_group_size) == 5.0
    got = second.optimizer.group_values(probe.obs, probe.next_obs, probe.group)
    for a, b in zip(expected, got):
        np.testing.assert_allclose(a["extrinsic"], b["extrinsic"], atol=1e-6)
    second.optimizer.observe_group_size(3)  # smaller than the restored 5: unchanged
    assert second.policy.session.run(second.optimizer.max_group_size) == 5.0


def _stat_steps(path, tag) -> List[int]:
    with open(path) as f:
        return [int(r["step"]) for r in csv.DictReader(f) if r["tag"] == tag]


def test_cli_trains_rendezvous_resumes_and_exports_the_actor(run_cli, tmp_path):
    config = {
        "behaviors": {
            "Rendezvous": {
                "trainer_type": "poca",
                "hyperparameters": {"batch_size": 64, "buffer_size": 256, "num_epoch": 1},
                "network_settings": {"hidden_units": 16, "num_layers": 1},
                "max_steps": 600, "summary_freq": 300, "checkpoint_interval": 300, "time_horizon": 16,
            }
        },
        "env_settings": {"env_path": "builtin:Rendezvous", "env_args": {"num_agents": 6, "group_size": 3, "length": 4}},
    }
    path = tmp_path / "poca.yaml"
    path.write_text(yaml.safe_dump(config))
    code, out, err = run_cli(str(path), "--run-id=r")
    assert code == 0, err
    behavior = run_cli.results / "r" / "Rendezvous"
    stats = behavior / "stats.csv"
    assert _stat_steps(stats, "Losses/Baseline Loss") and _stat_steps(stats, "Environment/Group Cumulative Reward")
    assert _stat_steps(stats, "Policy/Extrinsic Baseline Estimate")
    assert (behavior / "Rendezvous.onnx").is_file()
    config["behaviors"]["Rendezvous"]["max_steps"] = 1200
    path.write_text(yaml.safe_dump(config))
    code, out, err = run_cli(str(path), "--run-id=r", "--resume")
    assert code == 0, err
    status = json.loads((run_cli.results / "r" / "run_logs" / "training_status.json").read_text())
    assert "Rendezvous" in json.dumps(status)
    steps = _stat_steps(stats, "Losses/Baseline Loss")
    assert steps[-1] >= 1200 and min(s for s in steps if s > 600) > 600
