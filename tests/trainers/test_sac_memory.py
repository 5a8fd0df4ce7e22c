"""Recurrent SAC (issue 32 item 4): what the replay stores per step and per sequence, what
the update graph recomputes from it (the actor's log-probabilities, V, and V' from the
critic memory one step later), sequence sampling, 1 vs 2 towers, resume with the replay
buffer, export, settings, and learning ML-Agents' test_recurrent_sac on Memory."""
from __future__ import annotations

import csv
import math
import os
import sys
import textwrap
from typing import Dict, List

import numpy as np
import pytest
from trainer_test_utils import CONFIG_DIR, finals_on_seeds, rollout

from envs.builtin import Memory
from trainers.buffer import pad_trajectory
from trainers.config import MemorySettings, NetworkSettings, SACSettings, TrainerSettings
from trainers.sac.replay import ReplayBuffer
from trainers.sac.trainer import REPLAY_FILE, SACTrainer
from trainers.stats import StatsReporter
from trainers.loop.trajectory import Trajectory

ROOT = os.path.dirname(CONFIG_DIR)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import diagnose_memory_sac  # noqa: E402  (ML-Agents' settings and the last-5 criterion)

MEMORY_SIZE = 8
SEQ = 4


def recurrent_sac_settings(**hyper: object) -> TrainerSettings:
    hp: Dict[str, object] = dict(batch_size=16, buffer_size=400, learning_rate=3e-3, tau=0.25, init_entcoef=0.5)
    hp.update(hyper)
    return TrainerSettings(
        trainer_type="sac",
        hyperparameters=SACSettings(**hp),  # type: ignore[arg-type]
        network_settings=NetworkSettings(
            hidden_units=16, num_layers=1, memory=MemorySettings(memory_size=MEMORY_SIZE, sequence_length=SEQ)
        ),
        max_steps=1000,
        time_horizon=7,  # an episode spans several trajectories: the critic memory carries
    )


def make_trainer(env: Memory, settings: TrainerSettings, devices=("/cpu:0",)) -> SACTrainer:
    return SACTrainer("Memory", env.behavior_specs["Memory"], settings, StatsReporter("Memory", []), 0, devices)


def squashed_log_prob(mean: np.ndarray, log_std: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Closed form of the tanh-squashed Gaussian's log-probability of ``raw`` ``[B, c]`` -> ``[B]``."""
    mean, log_std, raw = (np.asarray(x, np.float64) for x in (mean, log_std, raw))
    normal = -0.5 * ((raw - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
    # log(1 - tanh(u)^2), stable: 2 (log 2 - u - softplus(-2u)).
    correction = 2.0 * (math.log(2.0) - raw - np.logaddexp(0.0, -2.0 * raw))
    return (normal - correction).sum(axis=1)


def process_recording_values(trainer: SACTrainer, trajectories: List[Trajectory]) -> List[np.ndarray]:
    """Processes ``trajectories`` in order; -> per trajectory ``[T + 1]`` V of its
    observations and bootstrap observation, unrolled from the agent's critic memory as it
    was before the trajectory (what the update must recompute: V, and V' = V at init)."""
    opt = trainer.optimizer
    out = []
    for traj in trajectories:
        start = opt.critic_memory_dict.get(traj.agent)
        probe_key = ("probe",)
        if start is not None:
            opt.critic_memory_dict[probe_key] = start.copy()
        obs = [np.concatenate([o, n]) for o, n in zip(traj.obs, traj.next_obs)]
        values, _ = opt.trajectory_values(obs, probe_key, True)
        out.append(values["extrinsic"])
        trainer.process_trajectory(traj)
    return out


@pytest.mark.parametrize("actions", [dict(continuous=0, discrete=1), dict(continuous=1, discrete=0),
                                     dict(continuous=1, discrete=1)], ids=["discrete", "continuous", "hybrid"])
def test_the_update_recomputes_what_the_actor_and_critic_computed_while_acting(actions):
    """Fed the replay's sequences, the update graph's actor (unrolled from each sequence's
    stored first-row memory, with the stored previous actions, over left-padded rows)
    gives every real step exactly the log-probability its action was sampled with: the
    memory stored per step is the one the actor acted from, and the sequences start where
    the stored memories do. V (from the stored critic memory) gives the values of the
    critic's own unroll, and V' (= V before any update) gives V of the next observation
    from the critic memory one step later, the bootstrap observation's at a trajectory end."""
    env = Memory(num_agents=2, seed=5, **actions)
    trainer = make_trainer(env, recurrent_sac_settings())
    try:
        trajectories = rollout(trainer, env, 60)
        assert any(not t.done for t in trajectories) and any(t.done for t in trajectories)
        values = process_recording_values(trainer, trajectories)
        replay = trainer.replay
        contents = replay.contents()
        assert contents is not None and replay.rows_added == sum(len(t) for t in trajectories)
        rows = {k: v.reshape((-1,) + v.shape[2:]) for k, v in contents.items()}
        # The replay holds the trajectories in order, each left-padded to whole sequences.
        expected = [pad_trajectory({"logp": t.log_probs, "v": v[:-1], "v_next": v[1:],
                                    "real": np.ones(len(t), np.float32)}, SEQ)
                    for t, v in zip(trajectories, values)]
        real = np.concatenate([e["real"] for e in expected]) > 0
        np.testing.assert_array_equal(rows["masks"] > 0, real)
        # Padding repeats the first real row's memories: a sequence's first row holds the
        # memory its first real step started from.
        first = contents["masks"].argmax(axis=1)
        for key in ("memory", "critic_memory"):
            np.testing.assert_array_equal(contents[key][:, 0], contents[key][np.arange(len(first)), first])
        opt = trainer.optimizer
        probe = opt.probes[0]
        spec = trainer.spec.action_spec
        n = len(rows["masks"])
        feed = {opt.placeholders[k]: rows[k] for k in opt.placeholders if k in rows}
        if spec.is_continuous:
            feed[opt.placeholders["sac_noise"]] = np.zeros((n, spec.continuous_size), np.float32)
        fetches: Dict[str, object] = {"v": probe.values["extrinsic"], "v_next": probe.target_values["extrinsic"]}
        if probe.actor.continuous is not None:
            fetches["mean"], fetches["log_std"] = probe.actor.continuous.mean, probe.actor.continuous.log_std
        if probe.actor.discrete is not None:
            fetches["discrete"] = probe.actor.discrete.log_probs
        got = trainer.policy.session.run(fetches, feed)
        logp = np.zeros(n)
        if spec.is_continuous:
            logp += squashed_log_prob(got["mean"], got["log_std"], rows["continuous_action"])
        if spec.is_discrete:
            for b, branch in enumerate(got["discrete"]):
                logp += branch[np.arange(n), rows["discrete_action"][:, b]]
        # Stored per action column (continuous dimension, discrete branch): the joint is the sum.
        stored = np.concatenate([e["logp"] for e in expected])[real].sum(axis=1)
        np.testing.assert_allclose(logp[real], stored, atol=2e-5)
        np.testing.assert_allclose(got["v"][real, 0], np.concatenate([e["v"] for e in expected])[real], atol=1e-5)
        np.testing.assert_allclose(
            got["v_next"][real, 0], np.concatenate([e["v_next"] for e in expected])[real], atol=1e-5
        )
    finally:
        trainer.close()
        env.close()


def test_updates_sample_whole_stored_sequences_and_train_every_network():
    """An update samples max(1, batch_size // sequence_length) whole stored sequences
    (padding only in front), one run each; the actor's, both Q networks' and V's LSTMs
    learn, V' follows V by tau, the critic memory is dropped at an episode end."""
    env = Memory(num_agents=2, seed=3, continuous=0, discrete=1)
    trainer = make_trainer(env, recurrent_sac_settings(batch_size=18))
    try:
        trajectories = rollout(trainer, env, 50)
        for traj in trajectories:
            trainer.process_trajectory(traj)
        ended = {t.agent for t in trajectories if t.done} - {t.agent for t in trajectories[-2:] if not t.done}
        assert ended and not ended & set(trainer.optimizer.critic_memory_dict)
        assert trainer.sequences_per_update == 4  # 18 // 4
        stored = {s.tobytes(): s for s in trainer.replay.contents()["obs_0"]}
        batch = trainer.replay.sample(trainer.sequences_per_update, np.random.default_rng(0))
        assert len(batch["masks"]) == 4 * SEQ
        for seq, masks in zip(batch["obs_0"].reshape(4, SEQ, -1), batch["masks"].reshape(4, SEQ)):
            assert seq.tobytes() in stored  # a stored sequence, whole, from its first row
            assert np.all(np.diff(masks) >= 0)  # padding only in front
        graph = trainer.policy.graph

        def lstm_weights(prefix: str) -> List[np.ndarray]:
            variables = [v for v in graph.get_collection("variables") if v.op.name.startswith(prefix)]
            assert variables, prefix
            return trainer.policy.session.run(variables)

        nets = ["policy/lstm/", "sac_q1/lstm/", "sac_q2/lstm/", "sac_value/lstm/"]
        before = {p: lstm_weights(p) for p in nets}
        trainer.step = 50
        runs = trainer.optimizer.update_runs
        stats = trainer.update()
        assert trainer.optimizer.update_runs - runs == 49 and np.isfinite(list(stats.values())).all()
        for p in nets:
            assert any(not np.allclose(a, b) for a, b in zip(before[p], lstm_weights(p))), p
        target, value = lstm_weights("sac_target_value/lstm/"), lstm_weights("sac_value/lstm/")
        trainer.step = 51
        trainer.update()
        for t0, t1, v1 in zip(target, lstm_weights("sac_target_value/lstm/"), lstm_weights("sac_value/lstm/")):
            np.testing.assert_allclose(t1, 0.75 * t0 + 0.25 * v1, rtol=1e-5, atol=1e-6)
    finally:
        trainer.close()
        env.close()


def test_a_trajectory_longer_than_the_buffer_keeps_its_last_sequences_with_their_memories():
    buf = ReplayBuffer(8, sequence_length=4)
    memory = np.arange(22, dtype=np.float32).reshape(11, 2)
    buf.add({"x": np.arange(11, dtype=np.float32), "memory": memory, "action_mask": np.zeros((11, 2), np.float32)})
    c = buf.contents()
    # 11 rows -> 1 padded + 11 = 3 sequences; the 2 newest kept.
    np.testing.assert_array_equal(c["x"], [[3, 4, 5, 6], [7, 8, 9, 10]])
    np.testing.assert_array_equal(c["memory"][:, 0], memory[[3, 7]])
    small = ReplayBuffer(12, sequence_length=4)
    small.add({"memory": memory[:2], "action_mask": np.zeros((2, 2), np.float32)})
    c = small.contents()
    np.testing.assert_array_equal(c["memory"][0], memory[[0, 0, 0, 1]])  # the first row's, in front
    np.testing.assert_array_equal(c["action_mask"][0, :2], np.ones((2, 2)))  # never all-masked
    np.testing.assert_array_equal(c["masks"][0], [0, 0, 1, 1])


# --------------------------------------------------------------------- towers


def test_two_towers_match_one_tower(tmp_path):
    """Recurrent SAC + curiosity + GAIL + RND, continuous (scripts/check_towers.py
    --trainer=sac --memory --continuous): 11 sequences of 8 split 6/5 over 2 towers, masked
    rows in front of some: every weight (targets included) and stat after one update equal
    to 1e-5 relative."""
    from test_sac import check_towers_module

    ct = check_towers_module()
    mb = None
    results = []
    for devices in (("/cpu:0",), ("/cpu:0", "/cpu:1")):
        _, trainer = ct.build(devices, False, memory=True, trainer="sac", continuous=True)
        if mb is None:
            prefix = trainer.save(str(tmp_path))
            mb = ct.random_minibatch(trainer, 11 * ct.SEQUENCE_LENGTH, np.random.default_rng(0))
            assert {"memory", "critic_memory"} <= set(mb) and mb["masks"].min() == 0.0
        else:
            trainer.load(prefix)
        stats, _ = ct.run_update(trainer, mb, trace=False)
        variables = trainer.policy.graph.get_collection("variables")
        results.append((stats, dict(zip([v.op.name for v in variables], trainer.policy.session.run(variables)))))
        trainer.close()
    (s1, w1), (s2, w2) = results
    for key, v in s1.items():
        assert abs(v - s2[key]) <= 1e-5 * max(abs(v), 1e-3), key
    scale: Dict[str, float] = {}
    for name, v in w1.items():
        net = name.split("/")[0]
        scale[net] = max(scale.get(net, 1e-12), float(np.max(np.abs(v))) if np.size(v) else 0.0)
    for name, v in w1.items():
        if np.size(v):
            assert np.max(np.abs(np.asarray(v, np.float64) - w2[name])) <= 1e-5 * scale[name.split("/")[0]], name
    assert any(n.startswith("sac_target_value/lstm/") for n in w1)


@pytest.mark.slow
def test_check_towers_script_recurrent_sac_discrete():
    """The script end to end, recurrent discrete SAC, 11 sequences over 3 towers (4/4/3),
    each tower on its device."""
    import subprocess

    script = os.path.join(ROOT, "scripts", "check_towers.py")
    proc = subprocess.run(
        [sys.executable, script, "--trainer=sac", "--memory", "--devices=/cpu:0,/cpu:1,/cpu:2", "--rows=88",
         "--tolerance=1e-5"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout and "11 sequences of 8" in proc.stdout and "tower_2: CPU:2" in proc.stdout


# ---------------------------------------------------------------- export


def test_export_plays_like_the_policy_with_memories(tmp_path):
    """The recurrent squashed actor (hybrid actions) exports with recurrent_in/out; the
    ONNX model, its memories carried per agent by OnnxPolicy, acts as the live policy
    does step after step (deterministic), and agents are kept apart."""
    from trainers.export import export_policy
    from trainers.export.onnx_policy import OnnxPolicy
    from trainers.tf import tf

    env = Memory(num_agents=3, seed=2, continuous=1, discrete=1)
    trainer = make_trainer(env, recurrent_sac_settings())
    try:
        rng = np.random.default_rng(5)
        for v in trainer.policy.graph.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES):
            if v.op.name.startswith("policy/"):
                v.load(rng.normal(0, 0.7, v.shape.as_list()).astype(np.float32), trainer.policy.session)
        result = export_policy(trainer.policy, str(tmp_path), check=True)
        assert "recurrent_in" in result.input_names and "recurrent_out" in result.output_names
        assert result.max_diff <= 1e-5, result.diffs
        model = OnnxPolicy(result.onnx_path, trainer.spec)
        keys = [("a",), ("b",), ("c",)]
        moved = False
        for step in range(8):
            obs = [rng.uniform(-1, 1, (3, 1)).astype(np.float32)]
            masks = np.ones((3, 2), np.float32)
            live = trainer.policy.act(obs, masks, deterministic=True, agent_keys=keys)
            played = model.act(obs, masks, deterministic=True, agent_keys=keys)
            np.testing.assert_allclose(played.env_continuous, live.env_continuous, atol=1e-5)
            np.testing.assert_array_equal(played.discrete, live.discrete)
            moved |= bool(np.abs(trainer.policy.retrieve_memories(keys)).sum() > 0)
            if step == 3:  # one agent's episode ends: both start it again from zeros
                trainer.policy.forget_agents([keys[1]])
                model.forget_agents([keys[1]])
        assert moved
        model.close()
    finally:
        trainer.close()
        env.close()


def test_the_export_check_of_memories_is_relative_above_one():
    """recurrent_out is compared at 1e-5 x max(1, max |memory|): a trained LSTM's cell
    state grows over the check's 20 steps (|c| ~8 for a recurrent SAC + GAIL + BC policy
    on Memory, seed 3, whose ONNX memory then differed by 1.24e-5 from TF's) while each
    runtime rounds float32 its own way; below 1 and for actions the check stays absolute."""
    from trainer_test_utils import make_spec

    from trainers.export.check import _compare
    from trainers.export.freeze import ExportError

    spec = make_spec(1)
    memory = np.full((2, 1, 4), 8.0)
    ok = _compare("onnx", {"recurrent_out": memory + 2e-5}, {"recurrent_out": memory}, spec, False, "B")
    assert ok["recurrent_out"] == pytest.approx(2e-5)
    with pytest.raises(ExportError, match=r"recurrent_out differs .* by 0.001 \(tolerance 8e-05\)"):
        _compare("onnx", {"recurrent_out": memory + 1e-3}, {"recurrent_out": memory}, spec, False, "B")
    small = np.full((2, 1, 4), 0.5)
    with pytest.raises(ExportError, match=r"tolerance 1e-05"):
        _compare("onnx", {"recurrent_out": small + 2e-5}, {"recurrent_out": small}, spec, False, "B")
    actions = np.full((2, 1), 0.9)
    with pytest.raises(ExportError, match="deterministic_continuous_actions"):
        _compare("onnx", {"deterministic_continuous_actions": actions + 2e-5},
                 {"deterministic_continuous_actions": actions}, spec, False, "B")


# ----------------------------------------------------------------- settings


def test_a_buffer_smaller_than_one_sequence_is_one_line(run_cli, tmp_path):
    config = tmp_path / "lstm.yaml"
    config.write_text(textwrap.dedent("""\
        behaviors:
          Memory:
            trainer_type: sac
            hyperparameters: {batch_size: 8, buffer_size: 8}
            network_settings:
              memory: {memory_size: 16, sequence_length: 16}
        env_settings:
          env_path: builtin:Memory
        """))
    code, _, err = run_cli(str(config), "--run-id=lstm")
    lines = [line for line in err.splitlines() if line.startswith("trainer-learn: error:")]
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert "behaviors.Memory.hyperparameters.buffer_size: must hold at least one sequence" in lines[0]
    assert "sequence_length 16), got 8" in lines[0]


# --------------------------------------------------- resume with the buffer


def test_resume_restores_the_recurrent_replay_buffer(run_cli, tmp_path):
    """save_replay_buffer: the checkpoint's replay file holds whole sequences with their
    per-row memories; --resume restores it (the old sequences first, then new ones), and
    trainer-export rebuilds the recurrent actor from the checkpoint."""
    config = tmp_path / "sac.yaml"
    text = open(os.path.join(CONFIG_DIR, "sac", "Memory.yaml")).read()
    config.write_text(text.replace("save_replay_buffer: false", "save_replay_buffer: true")
                      .replace("buffer_init_steps: 500", "buffer_init_steps: 100"))
    code, _, err = run_cli(str(config), "--run-id=r", "--max-steps=300")
    assert code == 0, err
    path = os.path.join(run_cli.results, "r", "Memory", REPLAY_FILE)
    first = ReplayBuffer(20000, sequence_length=16)
    first.load(path)
    saved = first.contents()
    assert saved is not None and saved["memory"].shape[1:] == (16, 32) and saved["critic_memory"].shape[1:] == (16, 32)
    assert saved["prev_action"].shape[1:] == (16, 1)
    assert 300 - 64 <= first.rows_added <= 300 and first.num_sequences >= first.rows_added / 16
    # A real row's critic memory is not zero after the episode's first step.
    assert np.abs(saved["critic_memory"][saved["masks"] > 0]).sum() > 0
    code, _, err = run_cli(str(config), "--run-id=r", "--max-steps=400", "--resume")
    assert code == 0, err
    second = ReplayBuffer(20000, sequence_length=16)
    second.load(path)
    assert second.num_sequences > first.num_sequences and second.rows_added > first.rows_added
    again = second.contents()
    for key in ("obs_0", "memory", "critic_memory", "masks"):
        np.testing.assert_array_equal(again[key][: first.num_sequences], saved[key])
    from trainers.cli.export import main as export_main

    out = tmp_path / "exported.onnx"
    assert export_main([os.path.join(str(run_cli.results), "r"), f"--out={out}", "--check"]) == 0
    assert out.exists()


# ----------------------------------------------------------------- learning


def test_ml_agents_recurrent_sac_discrete_and_the_export_plays(tmp_path, capsys):
    """ML-Agents' test_recurrent_sac, action_sizes (0, 1) (step_size 0.2: the goal is
    hidden from the 4th step, 5 steps are needed), seed 1: the mean return of the last 5
    episodes > 0.9 at 4000 steps; the exported ONNX model, its memories fed back per
    agent, plays it as well. Measured (seeds 1-10): 1.00-1.02 at the end, first above 0.9
    at step 623-2268; the same settings without memory end at -0.42-0.01 (seeds 1-3)."""
    from trainers.cli.learn import main

    config = diagnose_memory_sac.ml_agents_recurrent_sac_config("discrete")
    means = diagnose_memory_sac.last_n_means(diagnose_memory_sac.run_seed(config, 1, str(tmp_path)))
    assert means[-1][1] > 0.9, means[-20:]
    model = tmp_path / "s1" / "Memory" / "Memory.onnx"
    code = main([str(tmp_path / "memory_sac_1.yaml"), "--run-id=s1", "--inference", f"--model={model}",
                 "--max-steps=300", f"--results-dir={tmp_path}"])
    assert code == 0, capsys.readouterr().err
    with open(tmp_path / "s1" / "Memory" / "stats.csv") as f:
        played = [(int(r["step"]), float(r["mean"])) for r in csv.DictReader(f)
                  if r["tag"] == "Environment/Cumulative Reward"]
    assert played[-1][0] == 300 and played[-1][1] > 0.9, played


def test_recurrent_sac_with_gail_and_bc_learns(tmp_path):
    """config/sac/Memory_gail.yaml (GAIL + BC from the recorded Memory demo, BC on whole
    demo sequences in every update run), seed 1: last-5 mean > 0.9 at 2000 steps, with
    the GAIL and pretraining losses reported. Measured (seeds 1-5): 1.02."""
    import yaml
    from trainer_test_utils import derived_config

    config_file = os.path.join(CONFIG_DIR, "sac", "Memory_gail.yaml")
    with open(derived_config(config_file, tmp_path / "gail.yaml", {})) as f:
        config = yaml.safe_load(f)
    means = diagnose_memory_sac.last_n_means(diagnose_memory_sac.run_seed(config, 1, str(tmp_path)))
    assert means[-1][1] > 0.9, means[-20:]
    with open(tmp_path / "s1" / "Memory" / "stats.csv") as f:
        tags = {r["tag"] for r in csv.DictReader(f)}
    assert {"Losses/GAIL Loss", "Losses/Pretraining Loss", "Losses/Q1 Loss"} <= tags


@pytest.mark.slow
@pytest.mark.parametrize("actions", ["discrete", "continuous"])
def test_ml_agents_recurrent_sac_passes_on_most_seeds(tmp_path, actions):
    """ML-Agents' test_recurrent_sac (batch 256, lr 3e-4, buffer_init_steps 1000,
    steps_per_update 2, memory 16 / sequence 16, 1 x 16 units, 4000 steps) on seeds 1-5:
    the mean return of the last 5 episodes > 0.9 at the end on at least 4. Measured: 5 of
    5 for both (discrete 1.01-1.02, continuous 1.05; discrete seeds 6-10 also 5 of 5)."""
    config = diagnose_memory_sac.ml_agents_recurrent_sac_config(actions)
    finals = finals_on_seeds(config, str(tmp_path), 0.9)
    assert sum(v > 0.9 for v in finals.values()) >= 4, finals
