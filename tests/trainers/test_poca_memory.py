"""Recurrent MA-POCA (``network_settings.memory`` with ``trainer_type: poca``): the critic's
and the baseline's LSTM (after the attention and the dense layers, ML-Agents'
``MultiAgentNetworkBody``) against a step-by-step numpy unroll of the graph's own weights,
their memories carried per agent across ``time_horizon`` chunks and dropped at the episode
end, the padded buffer layout, 1 vs 2 towers, and a CLI run on Rendezvous with --resume
and export."""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Dict, Tuple

import numpy as np
import pytest
import yaml
from test_poca import SPEC, _stat_steps, trajectory

from trainers.config import MemorySettings, NetworkSettings, POCASettings, TrainerSettings
from trainers.loop.trajectory import Trajectory
from trainers.poca.trainer import POCATrainer
from trainers.stats import StatsReporter
from trainers.tf import tf

MEMORY = MemorySettings(memory_size=8, sequence_length=4)


def settings(**hyper) -> TrainerSettings:
    hp = dict(batch_size=16, buffer_size=40, learning_rate=3e-3, num_epoch=2)
    hp.update(hyper)
    return TrainerSettings(
        trainer_type="poca",
        hyperparameters=POCASettings(**hp),
        network_settings=NetworkSettings(hidden_units=16, num_layers=1, memory=MEMORY),
        max_steps=1000,
    )


def build(devices=("/cpu:0",)) -> POCATrainer:
    return POCATrainer("B", SPEC, settings(), StatsReporter("B", []), 0, devices)


def recurrent(traj: Trajectory, rng: np.random.Generator) -> Trajectory:
    """``traj`` with the actor's memories and previous actions a recurrent policy records."""
    n = len(traj)
    prev = np.concatenate([np.zeros((1, 1), np.int32), traj.discrete_action[:-1]], axis=0)
    return replace(traj, memory=rng.normal(0, 0.5, (n, MEMORY.memory_size)).astype(np.float32), prev_action=prev)


@pytest.fixture(scope="module")
def trainer() -> POCATrainer:
    return build()


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def unrolled(trainer: POCATrainer, traj: Trajectory, starts: Tuple[np.ndarray, np.ndarray]
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The closed form: the graph's encodings before the LSTM (``value_streams``), then the
    LSTM cell (gates i, f, g, o; memory ``concat(c, h)``) stepped row by row in numpy with
    the graph's weights from ``starts`` (critic, baseline), then the value head. Returns
    (critic values ``[T + 1]``, baselines ``[T]``, each step's starting critic and
    baseline memories ``[T, m]``, the memories after the last step)."""
    opt = trainer.optimizer
    sess = trainer.policy.session
    graph = trainer.policy.graph
    # Encodings only: the memory inputs are fed but unused by these tensors.
    _, _, memories = opt.trajectory_group_values(traj.obs, traj.next_obs, traj.group)  # warm the callable
    assert memories is not None
    feeds = _value_feeds(trainer, traj)
    fetch = [opt.value_streams[s] for s in ("critic", "baseline")]
    (enc_c, scaled_c), (enc_b, scaled_b) = sess.run(fetch, feeds)
    with graph.as_default():
        names = ["critic/lstm/kernel_x", "critic/lstm/kernel_h", "critic/lstm/bias", "critic/value_extrinsic/kernel",
                 "critic/value_extrinsic/bias"]
        variables = {v.op.name: v for v in tf.global_variables()}
    kx, kh, b, head_w, head_b = sess.run([variables[n] for n in names])
    units = MEMORY.memory_size // 2
    n = len(traj)

    def run(x: np.ndarray, scaled: np.ndarray, start: np.ndarray, rows: int):
        c, h = start[:units].astype(np.float64), start[units:].astype(np.float64)
        out, started = [], []
        for t in range(rows):
            started.append(np.concatenate([c, h]))
            gates = x[t] @ kx + h @ kh + b
            i, f, o = _sigmoid(gates[:units]), _sigmoid(gates[units:2 * units]), _sigmoid(gates[3 * units:])
            c = f * c + i * np.tanh(gates[2 * units:3 * units])
            h = o * np.tanh(c)
            out.append(np.concatenate([h, scaled[t]]) @ head_w[:, 0] + head_b[0])
            if t == n - 1:
                after_last = np.concatenate([c, h])
        return np.array(out), np.array(started)[:n], after_last

    values, started_c, last_c = run(enc_c, scaled_c, starts[0], n + 1)
    baselines, started_b, last_b = run(enc_b, scaled_b, starts[1], n)
    return values, baselines, started_c, started_b, last_c, last_b


def _value_feeds(trainer: POCATrainer, traj: Trajectory) -> Dict[tf.Tensor, np.ndarray]:
    """The value graph's feeds for ``traj`` (what `trajectory_group_values` feeds)."""
    opt = trainer.optimizer
    g = traj.group
    assert g is not None
    n, width = len(traj), max(g.num_mates, len(g.next_obs[0]))
    mates = np.zeros((n + 1, width, 3), np.float32)
    mates[:n, : g.num_mates] = g.obs[0]
    mates[n, : len(g.next_obs[0])] = g.next_obs[0]
    present = np.zeros((n + 1, width), np.float32)
    present[:n, : g.num_mates] = g.present
    present[n, : len(g.next_obs[0])] = 1.0
    cont = np.zeros((n + 1, width, 1), np.float32)
    cont[:n, : g.num_mates] = g.continuous_action
    disc = np.zeros((n + 1, width, 1), np.int32)
    disc[:n, : g.num_mates] = g.discrete_action
    inputs = opt.value_inputs
    return {
        trainer.policy.obs[0]: np.concatenate([traj.obs[0], traj.next_obs[0]]),
        inputs["group_obs_0"]: mates, inputs["group_present"]: present,
        inputs["group_continuous_action"]: cont, inputs["group_discrete_action"]: disc,
    }


def test_values_and_baselines_equal_a_step_by_step_unroll(trainer):
    """From non-zero carried memories, the one-run trajectory values (the bootstrap row
    as the step after the last), baselines and per-step starting memories equal the numpy
    unroll; the memories after the last step are kept for the agent."""
    rng = np.random.default_rng(11)
    opt = trainer.optimizer
    agent = (0, 7)
    starts = (rng.normal(0, 0.5, MEMORY.memory_size).astype(np.float32),
              rng.normal(0, 0.5, MEMORY.memory_size).astype(np.float32))
    opt.critic_memory_dict[agent], opt.baseline_memory_dict[agent] = starts
    traj = recurrent(trajectory(rng, 6, 2, agent=agent, present=np.array(
        [[1, 1], [1, 0], [0, 0], [1, 1], [0, 1], [1, 1]], np.float32)), rng)
    expected = unrolled(trainer, traj, starts)
    values, baselines, memories = opt.trajectory_group_values(traj.obs, traj.next_obs, traj.group, agent, False)
    assert memories is not None
    np.testing.assert_allclose(values["extrinsic"], expected[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(baselines["extrinsic"], expected[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(memories[0], expected[2], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(memories[1], expected[3], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(opt.critic_memory_dict[agent], expected[4], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(opt.baseline_memory_dict[agent], expected[5], rtol=1e-4, atol=1e-5)
    # The memories matter: zero starts give other values and baselines.
    zero = np.zeros(MEMORY.memory_size, np.float32)
    from_zero = unrolled(trainer, traj, (zero, zero))
    assert np.abs(from_zero[0] - expected[0]).max() > 1e-4 and np.abs(from_zero[1] - expected[1]).max() > 1e-4
    opt.critic_memory_dict.clear()
    opt.baseline_memory_dict.clear()


def test_memories_carry_across_chunks_and_reset_at_the_episode_end(trainer):
    """Two ``time_horizon`` chunks of one episode give the values and memories of the
    whole episode unrolled at once; after the chunk that ends it the agent's memories
    are gone, so its next episode starts from zeros; another agent's are untouched.
    The buffer holds the padded layout: each chunk padded to whole sequences (masks 0)."""
    rng = np.random.default_rng(12)
    opt = trainer.optimizer
    trainer.buffer.clear()
    trainer._width = 0
    agent, other = (0, 1), (0, 2)
    other_start = (np.full(MEMORY.memory_size, 0.3, np.float32), np.full(MEMORY.memory_size, -0.2, np.float32))
    opt.critic_memory_dict[other], opt.baseline_memory_dict[other] = other_start
    whole = recurrent(trajectory(rng, 11, 2, agent=agent, done=True), rng)
    g = whole.group
    assert g is not None

    def chunk(lo: int, hi: int, last: bool) -> Trajectory:
        group = replace(
            g, obs=[g.obs[0][lo:hi]], continuous_action=g.continuous_action[lo:hi],
            discrete_action=g.discrete_action[lo:hi], present=g.present[lo:hi],
            group_reward=g.group_reward[lo:hi], mate_rewards=g.mate_rewards[lo:hi],
            next_obs=g.next_obs if last else [g.obs[0][hi]],
        )
        return replace(
            whole, obs=[whole.obs[0][lo:hi]], next_obs=whole.next_obs if last else [whole.obs[0][hi : hi + 1]],
            continuous_action=whole.continuous_action[lo:hi], discrete_action=whole.discrete_action[lo:hi],
            log_probs=whole.log_probs[lo:hi], rewards=whole.rewards[lo:hi], done=last,
            memory=whole.memory[lo:hi], prev_action=whole.prev_action[lo:hi], group=group,
        )

    zero = np.zeros(MEMORY.memory_size, np.float32)
    opt.observe_group_size(3)  # what processing raises the member-count scale to, first
    expected = unrolled(trainer, whole, (zero, zero))
    first, second = chunk(0, 7, False), chunk(7, 11, True)
    trainer.process_trajectory(first)
    assert agent in opt.critic_memory_dict and agent in opt.baseline_memory_dict
    np.testing.assert_allclose(opt.critic_memory_dict[agent], expected[2][7], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(opt.baseline_memory_dict[agent], expected[3][7], rtol=1e-4, atol=1e-5)
    trainer.process_trajectory(second)
    assert agent not in opt.critic_memory_dict and agent not in opt.baseline_memory_dict
    np.testing.assert_allclose(opt.critic_memory_dict[other], other_start[0])
    # Buffer: 7 rows padded to 8, then 4 rows (a whole sequence).
    buf = trainer.buffer
    assert buf.num_experiences == 12
    np.testing.assert_array_equal(buf["masks"], [1] * 7 + [0] + [1] * 4)
    real = buf["masks"] > 0
    np.testing.assert_allclose(buf["critic_memory"][real], expected[2], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(buf["baseline_memory"][real], expected[3], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(buf["extrinsic_value_estimates"][real], expected[0][:-1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(buf["extrinsic_baseline_estimates"][real], expected[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(buf["memory"][real], whole.memory)
    np.testing.assert_array_equal(buf["group_present"][7], [0, 0])  # the padding has no mates
    # The next episode starts from zero memories.
    again = recurrent(trajectory(rng, 5, 1, agent=agent), rng)
    fresh = unrolled(trainer, again, (zero, zero))
    values, baselines, _ = opt.trajectory_group_values(again.obs, again.next_obs, again.group, agent, False)
    np.testing.assert_allclose(values["extrinsic"], fresh[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(baselines["extrinsic"], fresh[1], rtol=1e-4, atol=1e-5)
    opt.critic_memory_dict.clear()
    opt.baseline_memory_dict.clear()
    # A full buffer updates: sequences of 4, one run per minibatch.
    for k, n in enumerate((9, 14, 6)):
        trainer.process_trajectory(recurrent(trajectory(rng, n, k + 1, agent=(1, k), done=True), rng))
    assert trainer.buffer.num_experiences % MEMORY.sequence_length == 0 and trainer.ready_to_update
    rows, runs = trainer.buffer.num_experiences, opt.update_runs
    stats = trainer.update()
    assert opt.update_runs - runs == 2 * (rows // 16)
    assert all(np.isfinite(v) for v in stats.values()) and stats["baseline_loss"] > 0


def test_one_and_two_towers_agree_split_by_whole_sequences(trainer, tmp_path):
    """Two towers split a minibatch of 7 sequences (28 rows, padding included) by whole
    sequences, each starting from its sequences' memories: the same statistics and
    weights as one tower."""
    rng = np.random.default_rng(13)
    one = trainer
    one.buffer.clear()
    one._width = 0
    prefix = one.save(str(tmp_path))
    for k, (n, mates) in enumerate(((5, 2), (7, 0), (6, 1), (3, 2))):
        present = (rng.uniform(size=(n, mates)) > 0.3).astype(np.float32)
        one.process_trajectory(recurrent(trajectory(rng, n, mates, agent=(2, k), present=present), rng))
    one.optimizer.critic_memory_dict.clear()
    one.optimizer.baseline_memory_dict.clear()
    mb = {k: one.buffer[k] for k in one.optimizer.placeholders}
    assert mb["masks"].shape == (28,) and mb["masks"].sum() == 21
    # Memories at every sequence start, not only zeros: the second sequence of a trajectory.
    assert np.abs(mb["critic_memory"][4]).max() > 0 and np.abs(mb["baseline_memory"][4]).max() > 0
    results = {}
    for devices in (("/cpu:0",), ("/cpu:0", "/cpu:1")):
        trainer = one if len(devices) == 1 else build(devices)
        trainer.load(prefix)
        stats = trainer.optimizer.update(mb, 10, {})
        variables = [v for _, v in trainer.optimizer.towers.gradients["poca"]]
        results[len(devices)] = (stats, dict(zip([v.op.name for v in variables], trainer.policy.session.run(variables))))
    (stats1, weights1), (stats2, weights2) = results[1], results[2]
    assert any("critic/lstm" in name for name in weights1)
    for name in ("policy_loss", "value_loss", "baseline_loss", "entropy"):
        assert stats2[name] == pytest.approx(stats1[name], rel=1e-4, abs=1e-6), name
    for name, w in weights2.items():
        np.testing.assert_allclose(w, weights1[name], rtol=1e-4, atol=1e-6, err_msg=name)
    one.buffer.clear()
    one._width = 0


def test_cli_recurrent_poca_on_rendezvous_resumes_and_exports(run_cli, tmp_path):
    """trainer-learn with memory on builtin:Rendezvous, then --resume to more steps: the
    exported actor is recurrent (``recurrent_in``), training goes on past the first run."""
    import onnx

    config = {
        "behaviors": {
            "Rendezvous": {
                "trainer_type": "poca",
                "hyperparameters": {"batch_size": 64, "buffer_size": 256, "num_epoch": 1},
                "network_settings": {"hidden_units": 16, "num_layers": 1,
                                     "memory": {"memory_size": 16, "sequence_length": 8}},
                "max_steps": 600, "summary_freq": 300, "checkpoint_interval": 300, "time_horizon": 16,
            }
        },
        "env_settings": {"env_path": "builtin:Rendezvous", "env_args": {"num_agents": 6, "group_size": 3, "length": 4}},
    }
    path = tmp_path / "rpoca.yaml"
    path.write_text(yaml.safe_dump(config))
    code, out, err = run_cli(str(path), "--run-id=r")
    assert code == 0, err
    behavior = run_cli.results / "r" / "Rendezvous"
    stats = behavior / "stats.csv"
    assert _stat_steps(stats, "Losses/Baseline Loss") and _stat_steps(stats, "Policy/Extrinsic Baseline Estimate")
    model = onnx.load(str(behavior / "Rendezvous.onnx"))
    assert "recurrent_in" in [i.name for i in model.graph.input]
    config["behaviors"]["Rendezvous"]["max_steps"] = 1200
    path.write_text(yaml.safe_dump(config))
    code, out, err = run_cli(str(path), "--run-id=r", "--resume")
    assert code == 0, err
    status = json.loads((run_cli.results / "r" / "run_logs" / "training_status.json").read_text())
    assert "Rendezvous" in json.dumps(status)
    steps = _stat_steps(stats, "Losses/Baseline Loss")
    assert steps[-1] >= 1200 and min(s for s in steps if s > 600) > 600


def recurrent_group_success_rate(model: str, episodes: int = 300) -> float:
    """`test_poca_learning.group_success_rate` for a recurrent actor: each agent's memory
    (keyed by its agent id, which Rendezvous never reuses) fed back, dropped at its end."""
    from envs.base_env import ActionTuple
    from envs.builtin.rendezvous import Rendezvous, group_ends
    from trainers.export.onnx_policy import OnnxPolicy

    env = Rendezvous(seed=123)
    name = next(iter(env.behavior_specs))
    policy = OnnxPolicy(model, env.behavior_specs[name])
    env.reset()
    ends: Dict[Tuple[int, int], bool] = {}
    step = 0
    while len(ends) < episodes:
        decision, terminal = env.get_steps(name)
        for j in np.flatnonzero(group_ends(terminal)):
            ends[(step, int(terminal.group_id[j]))] = bool(terminal.group_reward[j] > 0)
        policy.forget_agents([int(a) for a in terminal.agent_id])
        info = policy.act(decision.obs, None, deterministic=False, agent_keys=[int(a) for a in decision.agent_id])
        env.set_actions(name, ActionTuple(discrete=info.discrete))
        env.step()
        step += 1
    env.close()
    return float(np.mean(list(ends.values())))


@pytest.mark.slow  # one 30k-step run of config/poca/Rendezvous.yaml with memory
def test_recurrent_poca_learns_rendezvous(run_cli, tmp_path):
    """Recurrent POCA (memory_size 32, sequence_length 8) on config/poca/Rendezvous.yaml's
    budget (30k steps, seed 1) reaches the feed-forward example's threshold: group success
    >= 0.9 (test_poca_learning.THRESHOLD), sampling actions as in training. Measured:
    1.000 on seed 1 (and 1.000 on seed 2, run once by hand), about 70 s on 2 cores."""
    import os

    from trainer_test_utils import CONFIG_DIR

    with open(os.path.join(CONFIG_DIR, "poca", "Rendezvous.yaml")) as f:
        config = yaml.safe_load(f)
    config["behaviors"]["Rendezvous"]["network_settings"]["memory"] = {"memory_size": 32, "sequence_length": 8}
    path = tmp_path / "rpoca.yaml"
    path.write_text(yaml.safe_dump(config))
    code, _, err = run_cli(str(path), "--run-id=rpoca", "--seed=1")
    assert code == 0, err
    success = recurrent_group_success_rate(str(run_cli.results / "rpoca" / "Rendezvous" / "Rendezvous.onnx"))
    print(f"recurrent poca group success: {success:.3f}")
    assert success >= 0.9, success
