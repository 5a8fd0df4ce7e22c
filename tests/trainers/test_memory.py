"""Recurrent policies: the LSTM, the actor's and the critic's memories (seed 2), sequences in
the buffer, learning on the Memory env, export and inference with memories, both configs."""
from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
from trainer_test_utils import config_path, derived_config, finals_on_seeds, rollout

from envs.builtin import Memory
from trainers.buffer import pad_trajectory
from trainers.ppo import optimizer as ppo_optimizer
from trainers.ppo.trainer import PPOTrainer
from trainers.config import MemorySettings, NetworkSettings, PPOSettings, TrainerSettings
from trainers.stats import StatsReporter
from trainers.tf import tf
from trainers.tf.lstm import lstm_sequences, lstm_trajectory

MEMORY_SIZE = 8
SEQ = 4


def recurrent_settings(shared_critic: bool = False, pack: bool = False, **hyper) -> TrainerSettings:
    """``pack``: ``pack_sequences`` (packed buffer layout; default: padded, ML-Agents')."""
    hp = dict(batch_size=16, buffer_size=64, learning_rate=3e-3, num_epoch=1, shared_critic=shared_critic,
              pack_sequences=pack)
    hp.update(hyper)
    return TrainerSettings(
        hyperparameters=PPOSettings(**hp),
        network_settings=NetworkSettings(
            hidden_units=16, num_layers=1, memory=MemorySettings(memory_size=MEMORY_SIZE, sequence_length=SEQ)
        ),
        max_steps=1000,
        time_horizon=7,  # trajectories of an episode span several chunks
    )


def make_trainer(env: Memory, settings: TrainerSettings, devices=("/cpu:0",)) -> PPOTrainer:
    spec = env.behavior_specs["Memory"]
    return PPOTrainer("Memory", spec, settings, StatsReporter("Memory", []), 0, devices)


# ------------------------------------------------------------------------- cell


def test_lstm_forms_agree_and_padding_keeps_the_memory():
    """The training unroll, the one-trajectory scan and padded sequences give the same
    outputs; masked (padding) steps leave the memory unchanged."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 3)).astype(np.float32)
    m0 = rng.normal(size=(1, MEMORY_SIZE)).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        xs = tf.placeholder(tf.float32, [None, 3])
        mem = tf.placeholder(tf.float32, [None, MEMORY_SIZE])
        mask = tf.placeholder(tf.float32, [None])
        with tf.variable_scope("n", reuse=tf.AUTO_REUSE):
            full_out, full_mem = lstm_sequences(xs, mem, 6, MEMORY_SIZE, "lstm")
            seq_out, seq_mem = lstm_sequences(xs, mem, 4, MEMORY_SIZE, "lstm", mask)
            traj_out, traj_states = lstm_trajectory(xs, mem, MEMORY_SIZE, "lstm")
        sess.run(tf.global_variables_initializer())
        a, am = sess.run([full_out, full_mem], {xs: x, mem: m0})
        b, states = sess.run([traj_out, traj_states], {xs: x, mem: m0})
        # 6 steps as 2 sequences of 4: [pad, pad, x0, x1], [x2 .. x5], the second from the
        # memory after x1 (as the buffer stores it).
        padded = pad_trajectory({"x": x, "masks": np.ones(6, np.float32)}, 4)
        mem_starts = np.concatenate([m0, states[1:2]])
        c, cm = sess.run([seq_out, seq_mem], {xs: padded["x"], mem: mem_starts, mask: padded["masks"]})
    np.testing.assert_allclose(b, a, atol=1e-6)
    np.testing.assert_allclose(states[-1:], am, atol=1e-6)
    np.testing.assert_allclose(c[2:], a, atol=1e-6)
    np.testing.assert_allclose(cm[0], states[1], atol=1e-6)  # the padding did not move the memory
    np.testing.assert_allclose(cm[1], states[-1], atol=1e-6)
    assert padded["masks"].tolist() == [0, 0, 1, 1, 1, 1, 1, 1]


def test_packed_sequence_resets_at_trajectory_starts():
    """Two trajectories packed in sequences of 4 ([a0 a1 a2 b0], [b1 b2 b3 b4]) with
    ``reset`` on b0 give each trajectory's own unroll from its stored memory (1e-6), and
    the second sequence, started from b1's stored memory, continues b's unroll."""
    rng = np.random.default_rng(1)
    xa = rng.normal(size=(3, 3)).astype(np.float32)
    xb = rng.normal(size=(5, 3)).astype(np.float32)
    ma = rng.normal(size=(1, MEMORY_SIZE)).astype(np.float32)
    mb = rng.normal(size=(1, MEMORY_SIZE)).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        xs = tf.placeholder(tf.float32, [None, 3])
        mem = tf.placeholder(tf.float32, [None, MEMORY_SIZE])
        reset = tf.placeholder(tf.float32, [None])
        with tf.variable_scope("n", reuse=tf.AUTO_REUSE):
            traj_out, traj_states = lstm_trajectory(xs, mem, MEMORY_SIZE, "lstm")
            packed_out, packed_mem = lstm_sequences(xs, mem, 4, MEMORY_SIZE, "lstm", reset=reset)
        sess.run(tf.global_variables_initializer())
        a, a_states = sess.run([traj_out, traj_states], {xs: xa, mem: ma})
        b, b_states = sess.run([traj_out, traj_states], {xs: xb, mem: mb})
        # The memory each step acted from, as the buffer stores it (rows a1, a2 and b1..b4
        # are not read: the unroll carries the state there, except at sequence starts).
        rows_memory = np.concatenate([ma, a_states[:2], mb, b_states[:4]])
        resets = np.array([1, 0, 0, 1, 0, 0, 0, 0], np.float32)
        out, final = sess.run(
            [packed_out, packed_mem], {xs: np.concatenate([xa, xb]), mem: rows_memory, reset: resets}
        )
        # Garbage in the rows that must not be read changes nothing.
        noisy = rows_memory.copy()
        noisy[[1, 2, 5, 6, 7]] = 100.0
        out_noisy = sess.run(packed_out, {xs: np.concatenate([xa, xb]), mem: noisy, reset: resets})
    np.testing.assert_allclose(out[:3], a, atol=1e-6)
    np.testing.assert_allclose(out[3:], b, atol=1e-6)
    np.testing.assert_allclose(final[1], b_states[-1], atol=1e-6)
    np.testing.assert_array_equal(out_noisy, out)
    # Without the reset, b0 would continue a's memory: a different output.
    assert np.abs(out[3] - a_states[2, MEMORY_SIZE // 2 :]).max() > 1e-3



@pytest.mark.parametrize("use_reset, use_mask, use_partner", [
    (True, True, True), (True, False, True), (False, True, False), (False, False, False), (True, False, False),
    (False, False, True),
])
def test_unroll_gradients_equal_tensorflows_own(monkeypatch, use_reset, use_mask, use_partner):
    """The training unroll's hand-written backward pass (`lstm._unroll_with_bptt`) equals
    TensorFlow's own gradient of the same forward ops for every weight, input and memory,
    with resets, padding masks and an `LSTMPartner` (1e-6), and the custom gradient never
    reaches the one-step graph that is exported. Every combination the callers build:
    PPO packed (resets, partner or not), PPO padded (partner or not), BC (masks)."""
    from trainers.tf import lstm

    rng = np.random.default_rng(2)
    rows, length = 12, 4
    x = rng.normal(size=(rows, 3)).astype(np.float32)
    feeds = {
        "memory": rng.normal(size=(rows, MEMORY_SIZE)).astype(np.float32),
        "reset": np.array([1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1], np.float32),
        "mask": np.array([0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1], np.float32),
    }

    def gradients() -> list:
        with tf.Graph().as_default() as graph, tf.Session() as sess:
            tf.set_random_seed(0)
            xs = tf.placeholder(tf.float32, [None, 3])
            mem = tf.placeholder(tf.float32, [None, MEMORY_SIZE])
            reset = tf.placeholder(tf.float32, [None])
            mask = tf.placeholder(tf.float32, [None])
            initial = mem if use_reset else mem[::length]  # per row, or per sequence
            partner = None
            if use_partner:
                with tf.variable_scope("critic"):
                    partner = lstm.LSTMPartner(xs * 2.0, initial[::-1], MEMORY_SIZE, "lstm")
            with tf.variable_scope("actor"):
                out, final = lstm.lstm_sequences(
                    xs, initial, length, MEMORY_SIZE, "lstm", mask if use_mask else None,
                    reset if use_reset else None, partner,
                )
                one_step, _ = lstm.lstm_sequences(xs, mem, 1, MEMORY_SIZE, "one_step")
            weights = rng.normal(size=(rows, MEMORY_SIZE // 2)).astype(np.float32)
            loss = tf.reduce_sum(out * weights) + tf.reduce_sum(final * 0.5)
            if partner is not None:
                loss += tf.reduce_sum(tf.square(partner.output)) + tf.reduce_sum(partner.memory_out)
            wrt = [v for v in tf.trainable_variables() if "one_step" not in v.name] + [xs, mem]
            exported = [op for op in one_step.graph.get_operations() if op.name.startswith("actor/one_step")]
            assert not any("_gradient_op_type" in op.node_def.attr for op in exported)
            sess.run(tf.global_variables_initializer())
            return sess.run(
                tf.gradients(loss, wrt),
                {xs: x, mem: feeds["memory"], reset: feeds["reset"], mask: feeds["mask"]},
            )

    rng_state = rng.bit_generator.state
    ours = gradients()
    rng.bit_generator.state = rng_state
    monkeypatch.setattr(lstm, "_unroll_with_bptt", lambda *args: (
        lambda outputs, c, h, _: (tf.stack(outputs, axis=args[0].shape.ndims - 2), c, h)
    )(*lstm._unroll(*args)))
    reference = gradients()
    assert len(ours) == len(reference) == (8 if use_partner else 5)  # 3 weights per LSTM, inputs, memories
    for a, b in zip(ours, reference):
        assert np.abs(b).max() > 0
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-6)


def test_short_trajectories_are_packed_with_pack_sequences(episode_run):
    """``pack_sequences: true``: short trajectories (time_horizon 7, sequences of 4) occupy
    their real rows plus at most one padded sequence at update time, not a padded
    sequence each; ``buffer_size`` counts real rows."""
    trainer, trajectories = episode_run
    for traj in trajectories:
        trainer.process_trajectory(traj)
    buf = trainer.buffer
    real = sum(len(t) for t in trajectories)
    assert buf.num_experiences == real  # nothing padded when stored
    assert buf["reset"].sum() == len(trajectories)
    starts = np.cumsum([0] + [len(t) for t in trajectories[:-1]])
    assert np.flatnonzero(buf["reset"]).tolist() == starts.tolist()
    padded_per_trajectory = sum(-(-len(t) // SEQ) * SEQ for t in trajectories)
    added = buf.pad_to_sequences(SEQ)
    assert buf.num_experiences == -(-real // SEQ) * SEQ < padded_per_trajectory
    assert added < SEQ and float(buf["masks"].sum()) == real
    assert np.all(buf["masks"][real:] == 0) and np.all(buf["reset"][real:] == 1)
    np.testing.assert_array_equal(buf["memory"][real:], np.repeat(buf["memory"][real - 1 : real], added, 0))
    trainer.buffer.clear()


def test_trajectories_fill_whole_sequences_by_default():
    """ML-Agents' layout (the default): each trajectory is padded at its end to whole
    sequences (time_horizon 7, sequences of 4: 7 or 5 steps -> 8 rows), so every
    sequence holds one trajectory's steps from its first one; the padding rows are masked
    (0), keep the action masks open and the last memories, and count in ``buffer_size``
    (ML-Agents' ``num_experiences``), so an update comes after fewer steps than packed."""
    env = Memory(continuous=0, discrete=1, num_agents=2, seed=3)
    trainer = make_trainer(env, recurrent_settings(buffer_size=70))
    trajectories = rollout(trainer, env, 40)
    lengths = [len(t) for t in trajectories]
    assert max(lengths) > SEQ and any(n % SEQ for n in lengths)  # several sequences, partial ones
    expected_masks = []
    for traj in trajectories:
        trainer.process_trajectory(traj)
        expected_masks += [1.0] * len(traj) + [0.0] * ((-len(traj)) % SEQ)
    buf = trainer.buffer
    assert "reset" not in buf  # no trajectory starts inside a sequence
    assert buf["masks"].tolist() == expected_masks
    assert buf.num_experiences == len(expected_masks) == sum(-(-n // SEQ) * SEQ for n in lengths)
    assert buf.pad_to_sequences(SEQ) == 0
    starts = np.cumsum([0] + [-(-n // SEQ) * SEQ for n in lengths[:-1]])
    for start, traj in zip(starts, trajectories):
        n = len(traj)
        np.testing.assert_array_equal(buf["memory"][start : start + n], traj.memory)
        np.testing.assert_array_equal(buf["obs_0"][start : start + n], traj.obs[0])
        end = start + -(-n // SEQ) * SEQ
        assert np.all(buf["action_mask"][start + n : end] == 1)
        np.testing.assert_array_equal(buf["memory"][start + n : end], np.repeat(traj.memory[-1:], end - start - n, 0))
        assert np.all(buf["advantages"][start + n : end] == 0)
    # ML-Agents' rule (more rows than buffer_size) on the padded count: 68 real steps
    # make more than buffer_size (70) rows.
    assert sum(lengths) == 68 and buf.num_experiences > 70 and trainer.ready_to_update
    trainer.close()
    env.close()


@pytest.mark.parametrize("pack", [False, True], ids=["padded", "packed"])
def test_advantages_are_normalised_as_ml_agents_does(pack):
    """``advantage_normalization: buffer``: padded, over every row of the buffer, the
    padding's zero advantages included (ML-Agents' ``_update_policy`` normalises its whole
    padded buffer); packed, over the real rows only."""
    env = Memory(continuous=0, discrete=1, num_agents=2, seed=3)
    trainer = make_trainer(env, recurrent_settings(pack=pack))
    for traj in rollout(trainer, env, 43):
        trainer.process_trajectory(traj)
    trainer.buffer.pad_to_sequences(SEQ)
    raw = trainer.buffer["advantages"].copy()
    real = trainer.buffer["masks"] > 0
    assert (~real).sum() > 0 and np.all(raw[~real] == 0)
    seen = []
    update = trainer.optimizer.update

    def capture(minibatch, step, feed):
        if not seen:
            seen.append(trainer.buffer["advantages"].copy())
        return update(minibatch, step, feed)

    trainer.optimizer.update = capture  # type: ignore[method-assign]
    trainer.update()
    rows = np.ones_like(real) if not pack else real
    mean, std = raw[rows].mean(), raw[rows].std()
    np.testing.assert_allclose(seen[0][real], (raw[real] - mean) / (std + 1e-10), rtol=1e-5, atol=1e-6)
    if not pack:
        assert abs(seen[0].mean()) < 1e-5  # over every row: mean 0 there, not on the real rows
        assert abs(seen[0][real].mean()) > 1e-3
    trainer.close()
    env.close()


def test_pack_sequences_is_read_and_checked(tmp_path):
    """``hyperparameters.pack_sequences``: false by default (ML-Agents' padded layout), read
    from YAML, and anything but a boolean is one error line naming the file and key."""
    from trainers.config import load_settings
    from trainers.exceptions import ConfigError

    assert PPOSettings().pack_sequences is False
    path = tmp_path / "c.yaml"
    path.write_text("behaviors:\n  A:\n    hyperparameters: {pack_sequences: true}\n")
    assert load_settings(str(path)).behaviors["A"].hyperparameters.pack_sequences is True
    path.write_text("behaviors:\n  A:\n    hyperparameters: {pack_sequences: 3}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}: behaviors.A.hyperparameters.pack_sequences: ") and "\n" not in message
    assert "true or false" in message or "bool" in message, message


def test_pad_trajectory_fields():
    fields = {
        "memory": np.arange(6, dtype=np.float32).reshape(3, 2),
        "action_mask": np.zeros((3, 2), np.float32),
        "masks": np.ones(3, np.float32),
        "obs_0": np.ones((3, 1), np.float32),
    }
    out = pad_trajectory(fields, 4)
    assert out["memory"].tolist() == [[0, 1], [0, 1], [2, 3], [4, 5]]
    assert out["action_mask"][0].tolist() == [1, 1]
    assert out["masks"].tolist() == [0, 1, 1, 1]
    assert out["obs_0"][:, 0].tolist() == [0, 1, 1, 1]


# ------------------------------------------------------------- critic memories


@pytest.fixture(scope="module")
def episode_run():
    env = Memory(continuous=0, discrete=1, num_agents=2, seed=3)
    trainer = make_trainer(env, recurrent_settings(pack=True))
    trajectories = rollout(trainer, env, 40)
    yield trainer, trajectories
    trainer.close()
    env.close()


def test_critic_memory_carried_across_chunks_equals_one_unroll(episode_run):
    """Chunks of one episode (time_horizon 7) evaluated in order, carrying the agent's
    critic memory, give the values and memories of one unroll over the whole episode;
    the memory starts at zero and is dropped when the episode ends."""
    trainer, trajectories = episode_run
    opt = trainer.optimizer
    agent = trajectories[0].agent
    episode = []
    for traj in trajectories:
        if traj.agent != agent:
            continue
        episode.append(traj)
        if traj.done:
            break
    assert len(episode) >= 2 and episode[-1].done, [len(t) for t in episode]
    opt.critic_memory_dict.clear()
    chunk_values, chunk_memories = [], []
    for traj in episode:
        obs_all = [np.concatenate([o, n]) for o, n in zip(traj.obs, traj.next_obs)]
        values, memories = opt.trajectory_values(obs_all, ("chunks",), traj.done)
        chunk_values.append(values["extrinsic"][:-1])
        chunk_memories.append(memories)
        if not traj.done:
            # The memory kept for the next chunk is the one its first step starts from.
            assert ("chunks",) in opt.critic_memory_dict
    assert ("chunks",) not in opt.critic_memory_dict  # dropped at the episode end
    whole = [np.concatenate([t.obs[i] for t in episode] + [episode[-1].next_obs[i]]) for i in range(len(trainer.spec.observation_specs))]
    values, memories = opt.trajectory_values(whole, ("whole",), True)
    np.testing.assert_allclose(np.concatenate(chunk_values), values["extrinsic"][:-1], atol=1e-6)
    np.testing.assert_allclose(np.concatenate(chunk_memories), memories, atol=1e-6)
    assert not np.any(memories[0])  # zero at the episode start
    assert np.all(np.abs(memories[1:]).sum(axis=1) > 0)


@pytest.mark.parametrize("pack", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize(
    "env_kwargs,shared",
    [
        (dict(continuous=0, discrete=1), False),
        (dict(continuous=1, discrete=1), False),
        (dict(continuous=0, discrete=1), True),
    ],
    ids=["discrete", "hybrid", "shared-critic"],
)
def test_update_reproduces_rollout_from_stored_memories(env_kwargs, shared, pack):
    """Fed the stored memories (actor ``memory``, critic ``critic_memory``), the previous
    actions and, packed, the trajectory starts (``reset``), the training graph recomputes
    exactly the log-probabilities the actions were sampled with and the values the targets
    were computed from: ratio 1 and, with returns set to the stored values, value loss 0 —
    on padded sequences (each trajectory's, continued across sequences: time_horizon 7)
    and on packed sequences where several trajectories (of both agents) share one."""
    env = Memory(num_agents=2, seed=5, **env_kwargs)
    trainer = make_trainer(env, recurrent_settings(shared, pack))
    for traj in rollout(trainer, env, 60):
        trainer.process_trajectory(traj)
    buf = trainer.buffer
    rows = buf.num_experiences
    real = int(buf["masks"].sum())
    assert ("critic_memory" in buf) is (not shared)
    if pack:
        assert rows == real and buf.pad_to_sequences(SEQ) == (-real) % SEQ  # only the last sequence padded
        # Trajectories start inside sequences (time_horizon 7, SEQ 4): resets off sequence starts.
        inside = buf["reset"].reshape(-1, SEQ)[:, 1:]
        assert inside[:-1].sum() >= 5, inside
    else:
        assert buf.pad_to_sequences(SEQ) == 0 and rows > real
        assert "reset" not in buf and "reset" not in trainer.optimizer.placeholders
    batch = {k: buf[k] for k in trainer.optimizer.placeholders}
    batch["extrinsic_returns"] = batch["extrinsic_value_estimates"]
    stats = trainer.optimizer.update(batch, 0, {})
    assert stats["approx_kl"] < 1e-10, stats
    assert stats["clip_fraction"] == 0.0
    assert stats["value_loss"] < 1e-10, stats
    trainer.close()
    env.close()


@pytest.mark.parametrize("pack", [False, True], ids=["padded", "packed"])
def test_critic_lstm_with_the_actor_or_apart_gives_the_same_update(monkeypatch, pack):
    """The update steps the critic's LSTM in the actor's LSTM ops (`LSTMPartner`) or as
    its own unroll, whichever runs faster where the update runs
    (`critic_lstm_with_actor`); from the same weights and trajectories both give the
    same update (1e-6), on padded sequences and on packed sequences with resets."""
    env = Memory(num_agents=2, seed=5)
    trainers, weights = [], []
    for together in (True, False):
        monkeypatch.setattr(ppo_optimizer, "critic_lstm_with_actor", lambda settings, devices, t=together: t)
        trainers.append(make_trainer(env, recurrent_settings(pack=pack)))
    with_partner, apart = trainers
    with with_partner.policy.graph.as_default():
        start = {v.op.name: v.eval(with_partner.policy.session) for v in tf.global_variables()}
    with apart.policy.graph.as_default():
        variables = tf.global_variables()
        assert sorted(v.op.name for v in variables) == sorted(start)
        for v in variables:
            v.load(start[v.op.name], apart.policy.session)
    trajectories = rollout(with_partner, env, 60)
    for trainer in trainers:
        for traj in trajectories:
            trainer.process_trajectory(traj)
        trainer.buffer.pad_to_sequences(SEQ)
        if pack:
            assert trainer.buffer["reset"].reshape(-1, SEQ)[:, 1:].sum() >= 5  # resets inside sequences
        batch = {k: trainer.buffer[k] for k in trainer.optimizer.placeholders}
        trainer.optimizer.update(batch, 0, {})
        with trainer.policy.graph.as_default():
            weights.append({v.op.name: v.eval(trainer.policy.session) for v in tf.global_variables()})
    ops = [len(t.policy.graph.get_operations()) for t in trainers]
    assert ops[0] < ops[1]  # the partnered update has fewer ops
    changed = 0
    for name, value in weights[0].items():
        np.testing.assert_allclose(weights[1][name], value, atol=1e-6, err_msg=name)
        changed += not np.allclose(value, start[name])
    assert changed > 10  # the update moved the actor's and the critic's weights
    for trainer in trainers:
        trainer.close()
    env.close()


def test_update_buffer_by_sequences(episode_run):
    """The update shuffles whole sequences: every minibatch is sequences of SEQ
    contiguous rows."""
    trainer, trajectories = episode_run
    for traj in trajectories:
        trainer.process_trajectory(traj)
    trainer.buffer.pad_to_sequences(SEQ)
    rows = trainer.buffer.num_experiences
    # Tag every row with its index, to see which rows each minibatch takes.
    trainer.buffer["row"] = np.arange(rows)
    seen = []
    for mb in trainer.buffer.minibatches(8, np.random.default_rng(0), SEQ, ["row", "memory", "masks"]):
        idx = mb["row"].reshape(-1, SEQ)
        assert np.all(idx[:, 0] % SEQ == 0) and np.all(np.diff(idx, axis=1) == 1)
        seen.extend(idx[:, 0].tolist())
    num_seq = rows // SEQ
    assert len(seen) == len(set(seen)) == num_seq - num_seq % 2  # each sequence at most once
    assert set(seen) <= set(range(0, rows, SEQ))
    trainer.buffer.clear()


# -------------------------------------------------------------------- learning


def reward_rows(results, run_id: str, behavior: str = "Memory"):
    path = os.path.join(results, run_id, behavior, "stats.csv")
    with open(path) as f:
        return [(int(r["step"]), float(r["mean"])) for r in csv.DictReader(f) if r["tag"] == "Environment/Cumulative Reward"]


def memory_config(tmp_path, memory: bool = True, **replace: str) -> str:
    """config/ppo/Memory.yaml with one checkpoint (one export) at 4000 steps, optionally
    without the memory section, with text replacements."""
    text = open(config_path("Memory.yaml")).read().replace("checkpoint_interval: 2000", "checkpoint_interval: 4000")
    if not memory:
        start = text.index("      memory:")
        end = text.index("sequence_length: 16") + len("sequence_length: 16\n")
        text = text[:start] + text[end:]
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / ("memory.yaml" if memory else "feed_forward.yaml")
    path.write_text(text)
    return str(path)


#: Action kind -> (env_args, buffer_size, max_steps) of ML-Agents Release 22's recurrent
#: PPO learning tests: test_recurrent_ppo's action_sizes (0, 1) and (1, 0) (test_simple_rl.py),
#: test_hybrid_recurrent_ppo's (1, 1) with step_size 0.5 (test_hybrid.py).
ML_AGENTS_RECURRENT = {
    "discrete": ({"continuous": 0, "discrete": 1}, 128, 6000),
    "continuous": ({"continuous": 1, "discrete": 0}, 128, 6000),
    "hybrid": ({"continuous": 1, "discrete": 1, "step_size": 0.5}, 512, 5000),
}


def ml_agents_recurrent_config(tmp_path, memory: bool = True, actions: str = "discrete", max_steps=None) -> str:
    """ML-Agents Release 22's recurrent PPO learning test (test_simple_rl.py /
    test_hybrid.py, commit ac576f9f) as a config: PPO_TORCH_CONFIG (1 x 32 units, beta and
    epsilon decaying linearly) with lr 1e-3, batch 64, memory_size 16 (sequence_length:
    R22's default 64) and the test's buffer, steps and env (`ML_AGENTS_RECURRENT`), on
    Memory; one checkpoint (one export) at the end. ``memory=False``: the same without the
    LSTM; ``max_steps``: another budget (the schedules decay over it)."""
    env_args, buffer_size, steps = ML_AGENTS_RECURRENT[actions]
    steps = max_steps or steps
    network = {"hidden_units": 32, "num_layers": 1,
               "memory": {"memory_size": 16, "sequence_length": 64} if memory else None}
    hyper = {"batch_size": 64, "buffer_size": buffer_size, "learning_rate": 1.0e-3,
             "learning_rate_schedule": "constant", "beta_schedule": "linear", "epsilon_schedule": "linear"}
    name = f"r22_{actions}_{steps}" + ("" if memory else "_ff") + ".yaml"
    return derived_config(config_path("Memory.yaml"), tmp_path / name, {
        "behaviors": {"Memory": {"hyperparameters": hyper, "network_settings": network, "max_steps": steps,
                                 "summary_freq": 500, "checkpoint_interval": steps}},
        "env_settings": {"env_args": env_args, "seed": 1},
    })


def test_memory_env_needs_the_lstm_and_the_export_plays(run_cli, tmp_path):
    """ML-Agents' test_recurrent_ppo, action_sizes (0, 1), in half its budget: PPO + LSTM
    solves Memory in 3000 steps (> 0.9, here the mean of the last summary period, 500
    steps); the same run without memory stays below 0.6 (the best memoryless policy, which
    walks at random once the goal is hidden, averages about 0.48); the exported ONNX model,
    its memories fed back per agent, plays it as well.

    Measured (scripts/diagnose_memory.py --actions=discrete --steps=3000; seed 1 here): the
    last-5 mean stays above 0.9 from step 844-1507 on seeds 1-5 (seed 1: 844), as with
    6000 steps; ML-Agents reaches 0.98 by about step 2000. Before ML-Agents' padded
    sequences (issue 32 item 2): from step 4413-5300 in 6000 steps."""
    config = ml_agents_recurrent_config(tmp_path, max_steps=3000)
    code, out, err = run_cli(config, "--run-id=lstm")
    assert code == 0, err
    rows = reward_rows(run_cli.results, "lstm")
    assert rows[-1][0] == 3000 and rows[-1][1] > 0.9, rows
    code, _, err = run_cli(ml_agents_recurrent_config(tmp_path, memory=False, max_steps=3000), "--run-id=ff")
    assert code == 0, err
    ff = reward_rows(run_cli.results, "ff")
    assert ff[-1][1] < 0.6, ff
    model = os.path.join(run_cli.results, "lstm", "Memory", "Memory.onnx")
    code, out, err = run_cli(config, "--run-id=lstm", "--inference", f"--model={model}", "--max-steps=300")
    assert code == 0, err
    played = reward_rows(run_cli.results, "lstm")
    assert played[-1][0] == 300 and played[-1][1] > 0.9, played


def test_ml_agents_recurrent_ppo_continuous(run_cli, tmp_path):
    """ML-Agents' test_recurrent_ppo, action_sizes (1, 0): > 0.9 in 6000 steps. Measured
    (scripts/diagnose_memory.py --actions=continuous; seed 1 here): the last-5 mean stays
    above 0.9 from step 1531-2906 on seeds 1-5 (1.02 at the end); before ML-Agents' padded
    sequences, from step 4639-5200 on 3 of them, the others below 0.9 at 6000."""
    code, out, err = run_cli(ml_agents_recurrent_config(tmp_path, actions="continuous"), "--run-id=lstm")
    assert code == 0, err
    rows = reward_rows(run_cli.results, "lstm")
    assert rows[-1][0] == 6000 and rows[-1][1] > 0.9, rows


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("actions", ["discrete", "continuous", "hybrid"])
def test_ml_agents_recurrent_learning_test_passes_on_most_seeds(tmp_path, actions):
    """ML-Agents Release 22's recurrent PPO learning tests with their settings, env and
    budget (`ML_AGENTS_RECURRENT`: test_recurrent_ppo's discrete and continuous, 6000
    steps; test_hybrid_recurrent_ppo's hybrid, step_size 0.5, buffer 512, 5000 steps) and
    their pass criterion (check_environment_trains: the mean return of the run's last 5
    episodes > 0.9) pass on at least 4 of the seeds 1-5 (the runs stop once that is
    decided). Measured (scripts/diagnose_memory.py, seeds 1-5): 5 of 5 for each kind."""
    finals = finals_on_seeds(ml_agents_recurrent_config(tmp_path, actions=actions), str(tmp_path), 0.9)
    assert sum(v > 0.9 for v in finals.values()) >= 4, finals


@pytest.mark.slow
def test_memory_resume_mid_run_and_checkpoint_inference(run_cli, tmp_path):
    """Stopped at 2000 steps and resumed to 4000, the LSTM run reaches > 0.9; --inference
    from the checkpoint (TF policy, memories per agent) plays > 0.9."""
    config = memory_config(tmp_path, **{"checkpoint_interval: 4000": "checkpoint_interval: 2000"})
    code, out, err = run_cli(config, "--run-id=resume", "--max-steps=2000")
    assert code == 0, err
    code, out, err = run_cli(config, "--run-id=resume", "--resume", "--max-steps=4000")
    assert code == 0, err
    assert "Step: 3000" in out and reward_rows(run_cli.results, "resume")[-1][1] > 0.9
    code, out, err = run_cli(config, "--run-id=resume", "--inference", "--max-steps=300")
    assert code == 0, err
    assert reward_rows(run_cli.results, "resume")[-1][1] > 0.9


CURIOSITY = "      curiosity: {strength: 0.02, gamma: 0.99, encoding_size: 16, learning_rate: 3.0e-3}\n"
LSTM = "      num_layers: 1\n      memory:\n        memory_size: 32\n        sequence_length: 16\n"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["curiosity", "gail-bc", "hybrid"])
def test_recurrent_policies_with_other_signals_and_actions_learn(run_cli, tmp_path, case):
    """LSTM + curiosity (Memory), LSTM + GAIL + BC from the recorded Memory demo (Memory),
    LSTM + hybrid actions (Simple): each > 0.9 at the end."""
    behavior = "Memory"
    if case == "curiosity":
        extrinsic = "      extrinsic: {strength: 1.0, gamma: 0.99}\n"
        config = memory_config(tmp_path, **{extrinsic: extrinsic + CURIOSITY})
        args = ["--max-steps=4000"]
    elif case == "gail-bc":
        config = config_path("Memory_gail.yaml")
        args = []
    else:
        text = open(config_path("Simple_hybrid.yaml")).read().replace("      num_layers: 1\n", LSTM, 1)
        config = str(tmp_path / "hybrid.yaml")
        open(config, "w").write(text)
        # LSTM + hybrid on Simple is seed-sensitive at 6000 steps: seeds 1, 2, 5, 6, 7 and 8
        # of 1-8 end above 0.9 (1.02; scripts/diagnose_memory.py --config with this file);
        # seed 4 settles at -0.04 (one coordinate goes each way whatever the goal, a local
        # optimum), seed 3 at 0.37. Seed 7 stays above 0.9 (last-5 mean) from step 2595;
        # what this test shows is that it can learn.
        args, behavior = ["--seed=7"], "Simple"
    code, out, err = run_cli(config, f"--run-id={case}", *args)
    assert code == 0, err
    rows = reward_rows(run_cli.results, case, behavior)
    assert rows[-1][1] > 0.9, rows


def test_flat_config_trains_with_memory(run_cli, tmp_path):
    """The TF-era flat keys use_recurrent / memory_size / sequence_length."""
    config = tmp_path / "flat.yaml"
    config.write_text(
        "default:\n  trainer: ppo\n  batch_size: 32\n  buffer_size: 128\n  hidden_units: 16\n  num_layers: 1\n"
        "  max_steps: 300\n  time_horizon: 16\n  summary_freq: 100\n"
        "Memory:\n  use_recurrent: true\n  memory_size: 16\n  sequence_length: 8\n"
    )
    code, out, err = run_cli(str(config), "--run-id=flat", "--env=builtin:Memory")
    assert code == 0, err
    resolved = open(os.path.join(run_cli.results, "flat", "configuration.yaml")).read()
    assert "memory_size: 16" in resolved and "sequence_length: 8" in resolved
    assert reward_rows(run_cli.results, "flat")
    with open(os.path.join(run_cli.results, "flat", "run_logs", "training_status.json")) as f:
        assert json.load(f)


# ----------------------------------------------------------------------- export


@pytest.mark.parametrize("env_kwargs", [dict(continuous=0, discrete=2), dict(continuous=2, discrete=0)], ids=["discrete", "continuous"])
def test_recurrent_export_parity_over_a_rollout(tmp_path, env_kwargs):
    """ONNX and frozen graph follow the live graph over 20 steps with memories fed back
    (1e-5), with the ML-Agents 2.0 recurrent contract."""
    import onnx

    from trainers.export import RECURRENT_CHECK_STEPS, ExportError, export_policy
    from trainers.tf import names

    env = Memory(num_agents=2, seed=1, **env_kwargs)
    trainer = make_trainer(env, recurrent_settings())
    for traj in rollout(trainer, env, 40):
        trainer.process_trajectory(traj)
    trainer.update()  # weights away from their initial values
    result = export_policy(trainer.policy, str(tmp_path))
    assert RECURRENT_CHECK_STEPS == 20
    for runtime in ("onnx", "pb"):
        assert result.diffs[runtime][names.RECURRENT_OUT] <= 1e-5
    assert result.max_diff <= 1e-5
    model = onnx.load(result.onnx_path)
    inputs = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert inputs[names.RECURRENT_IN] == [names.ONNX_BATCH_DIM, 1, MEMORY_SIZE]
    assert [o.name for o in model.graph.output][-1] == names.RECURRENT_OUT
    assert (names.PREV_ACTION in inputs) is bool(env_kwargs["discrete"])
    with pytest.raises(ExportError, match="without legacy names"):
        export_policy(trainer.policy, str(tmp_path / "legacy"), legacy_names=True)
    from trainers.export.onnx_policy import OnnxPolicy

    played = OnnxPolicy(result.onnx_path, trainer.spec)
    assert played.memory_size == MEMORY_SIZE
    # The ONNX policy carries each agent's memory like the TF policy.
    rng = np.random.default_rng(0)
    keys = [("a",), ("b",)]
    for _ in range(5):
        obs = [rng.normal(size=(2,) + o.shape).astype(np.float32) for o in trainer.spec.observation_specs]
        a = played.act(obs, agent_keys=keys)
        b = trainer.policy.act(obs, deterministic=True, agent_keys=keys)
        np.testing.assert_allclose(a.env_continuous, b.env_continuous, atol=1e-5)
        np.testing.assert_array_equal(a.discrete, b.discrete)
    trainer.close()
    env.close()

