"""Self-play with real trainers: the ghost copy of the actor (weights as snapshots, one
``sess.run`` to swap), ML-Agents' ghost learning tests on two-team `Simple`, SAC, threaded
updates, and the release-10 self-play configs' keys on `Paddles` with their behaviors' names
and spaces. The adversarial game's own learning test is in ``test_self_play_game.py``."""
from __future__ import annotations

import os
from typing import Dict, List, Mapping

import numpy as np
import pytest
import yaml

from envs.base_env import BehaviorId, specs_by_name
from envs.builtin import Simple
from envs.managers import InProcessEnvManager
from trainers.config import (
    MemorySettings,
    NetworkSettings,
    PPOSettings,
    SelfPlaySettings,
    TrainerSettings,
    load_settings,
)
from trainers.loop.controller import TrainerController
from trainers.loop.status import TrainingStatus
from trainers.ppo.trainer import PPOTrainer
from trainers.stats import StatsReporter
from trainers.tf import tf

from trainer_test_utils import make_spec

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "configs")


class RecordingSimple(Simple):
    """`Simple` that keeps every episode's return per behavior id (ML-Agents' test env's
    ``final_rewards``)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.final_rewards: Dict[str, List[float]] = {n: [] for n in self.behavior_specs}
        self._returns: Dict[str, Dict[int, float]] = {n: {} for n in self.behavior_specs}

    def step(self) -> None:
        super().step()
        for name in self.behavior_specs:
            decision, terminal = self.get_steps(name)
            running = self._returns[name]
            for a, r in zip(terminal.agent_id.tolist(), terminal.reward.tolist()):
                self.final_rewards[name].append(running.pop(a, 0.0) + r)
            for a, r in zip(decision.agent_id.tolist(), decision.reward.tolist()):
                running[a] = running.get(a, 0.0) + r


def ppo_dummy(**changes) -> TrainerSettings:
    """ML-Agents' ``ppo_dummy_config()`` (tests/dummy_config.py, Release 22)."""
    fields = dict(
        hyperparameters=PPOSettings(learning_rate=5.0e-3, learning_rate_schedule="constant", batch_size=16,
                                    buffer_size=64),
        network_settings=NetworkSettings(num_layers=1, hidden_units=32),
        summary_freq=500, max_steps=3000, threaded=False,
    )
    fields.update(changes)
    return TrainerSettings(**fields)  # type: ignore[arg-type]


def check_environment_trains(tmp_path, env: RecordingSimple, config: Mapping[str, TrainerSettings], seed: int = 1337):
    """ML-Agents' ``check_environment_trains`` without its threshold: trains ``env`` (every
    behavior name with its settings) through our controller."""
    manager = InProcessEnvManager.from_envs([env], "builtin:Simple", seed)
    trainers = {}
    try:
        for name, spec in specs_by_name(manager.behavior_specs).items():
            trainers[name] = PPOTrainer(name, spec, config[name], StatsReporter(name, []), seed)
        controller = TrainerController(
            manager, trainers, {n: t.stats for n, t in trainers.items()}, str(tmp_path / "run"), TrainingStatus()
        )
        controller.run()
    finally:
        for trainer in trainers.values():
            trainer.close()
        manager.close()
    return controller


def last5(rewards: List[float]) -> float:
    """ML-Agents' ``default_reward_processor``: the mean of the last 5 episode returns."""
    return float(np.mean(rewards[-5:]))


# ----------------------------------------------------------------- the ghost actor


def test_the_ghost_plays_a_snapshot_with_its_own_normalizer_and_swaps_in_one_run():
    spec = make_spec(continuous=2, branches=(3, 2), vector=4)
    settings = TrainerSettings(
        hyperparameters=PPOSettings(batch_size=16, buffer_size=64),
        network_settings=NetworkSettings(hidden_units=16, num_layers=1, normalize=True),
        self_play=SelfPlaySettings(),
    )
    trainer = PPOTrainer("B", spec, settings, StatsReporter("B", []), seed=3)
    try:
        ghost = trainer.ghost
        assert ghost is not None
        obs = [np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)]
        snapshot = ghost.get_weights()
        assert ghost.variable_names[:3] == ["normalizer_0/count", "normalizer_0/mean", "normalizer_0/m2"]
        ghost.load_weights(snapshot)
        same = trainer.policy.act(obs, deterministic=True), ghost.act(obs, deterministic=True)
        np.testing.assert_array_equal(same[0].env_continuous, same[1].env_continuous)
        np.testing.assert_array_equal(same[0].discrete, same[1].discrete)
        # The policy's normalizer moves on; the ghost keeps the snapshot's statistics.
        trainer.policy.update_normalization([np.full((50, 4), 3.0, np.float32)])
        moved = trainer.policy.act(obs, deterministic=True).env_continuous
        assert not np.allclose(moved, ghost.act(obs, deterministic=True).env_continuous)
        np.testing.assert_array_equal(ghost.current_weights()[1], snapshot[1])
        # A swap is one run of assigns: no op is added (the graph is finalised).
        ops = len(trainer.policy.graph.get_operations())
        ghost.load_weights(ghost.get_weights())
        assert len(trainer.policy.graph.get_operations()) == ops
        np.testing.assert_allclose(ghost.act(obs, deterministic=True).env_continuous, moved)
        with trainer.policy.graph.as_default():
            saved = {v.op.name for v in tf.global_variables()}
            trainable = {v.op.name for v in tf.trainable_variables()}
        assert not any(n.startswith("ghost/") for n in saved | trainable)  # not in checkpoints, not trained
        with pytest.raises(ValueError, match="expected shape"):
            ghost.load_weights([w[..., :1] if w.ndim else w for w in snapshot])
    finally:
        trainer.close()


def test_the_ghost_leaves_the_initial_weights_as_without_self_play():
    spec = make_spec(branches=(3,), vector=3)
    base = dict(hyperparameters=PPOSettings(batch_size=16, buffer_size=64),
                network_settings=NetworkSettings(hidden_units=16, num_layers=1))
    plain = PPOTrainer("B", spec, TrainerSettings(**base), StatsReporter("B", []), seed=5)  # type: ignore[arg-type]
    ghosted = PPOTrainer("B", spec, TrainerSettings(**base, self_play=SelfPlaySettings()),  # type: ignore[arg-type]
                         StatsReporter("B", []), seed=5)
    try:
        with plain.policy.graph.as_default():
            a = {v.op.name: v for v in tf.global_variables()}
        with ghosted.policy.graph.as_default():
            b = {v.op.name: v for v in tf.global_variables()}
        assert set(a) == set(b)
        values_a = plain.policy.session.run(list(a.values()))
        values_b = ghosted.policy.session.run([b[n] for n in a])
        for name, x, y in zip(a, values_a, values_b):
            np.testing.assert_array_equal(x, y, err_msg=name)
    finally:
        plain.close()
        ghosted.close()


def test_a_recurrent_ghost_keeps_memories_of_its_own():
    spec = make_spec(branches=(3,), vector=3)
    settings = TrainerSettings(
        hyperparameters=PPOSettings(batch_size=16, buffer_size=64),
        network_settings=NetworkSettings(hidden_units=8, num_layers=1, memory=MemorySettings(8, 4)),
        self_play=SelfPlaySettings(),
    )
    trainer = PPOTrainer("B", spec, settings, StatsReporter("B", []), seed=2)
    try:
        ghost = trainer.ghost
        assert ghost is not None and ghost.use_recurrent
        ghost.load_weights(ghost.get_weights())
        rng = np.random.default_rng(1)
        keys = [(0, 1), (0, 2)]
        for _ in range(3):  # the same observations, step by step, through both
            obs = [rng.normal(size=(2, 3)).astype(np.float32)]
            mine = trainer.policy.act(obs, deterministic=True, agent_keys=keys)
            theirs = ghost.act(obs, deterministic=True, agent_keys=keys)
            np.testing.assert_array_equal(mine.memory, theirs.memory)  # the same weights, memories apart
        before = {k: v.copy() for k, v in trainer.policy._memories.items()}
        ghost.act([rng.normal(size=(2, 3)).astype(np.float32)], agent_keys=keys)
        for k, v in before.items():
            np.testing.assert_array_equal(trainer.policy._memories[k], v)  # the ghost's call left them
        ghost.forget_agents(keys)
        assert set(trainer.policy._memories) == set(keys)
    finally:
        trainer.close()


# ----------------------------------------------------------------- ML-Agents' ghost tests

ACTIONS = [{"continuous": 0, "discrete": 1}, {"continuous": 1, "discrete": 0}]
IDS = ["discrete", "continuous"]


@pytest.mark.parametrize("actions", ACTIONS, ids=IDS)
def test_simple_ghost(tmp_path, actions):
    # ML-Agents' test_simple_ghost: the ghost plays the latest weights (ratio 1.0), swapped
    # every 2000 ghost steps: both teams end above 0.9.
    env = RecordingSimple(behavior_names=["1D?team=0", "1D?team=1"], seed=1337, **actions)
    sp = SelfPlaySettings(play_against_latest_model_ratio=1.0, save_steps=2000, swap_steps=2000)
    controller = check_environment_trains(tmp_path, env, {"1D": ppo_dummy(self_play=sp, max_steps=2500)})
    results = {name: last5(r) for name, r in env.final_rewards.items()}
    assert all(r > 0.9 for r in results.values()), results
    assert controller.self_play is not None and controller.self_play.elo("1D") > 1200.0


@pytest.mark.parametrize("actions", ACTIONS, ids=IDS)
def test_simple_ghost_fails(tmp_path, actions):
    # ML-Agents' test_simple_ghost_fails: swap_steps 4000 > the 2500 steps, so the ghost
    # keeps the initial policy: the learning team succeeds, the ghost team does not.
    env = RecordingSimple(behavior_names=["1D?team=0", "1D?team=1"], seed=1337, **actions)
    sp = SelfPlaySettings(play_against_latest_model_ratio=1.0, save_steps=2000, swap_steps=4000)
    check_environment_trains(tmp_path, env, {"1D": ppo_dummy(self_play=sp, max_steps=2500)})
    results = [last5(r) for r in env.final_rewards.values()]
    assert any(r > 0.9 for r in results) and any(r < 0.9 for r in results), results


@pytest.mark.parametrize("actions", ACTIONS, ids=IDS)
def test_simple_asymm_ghost(tmp_path, actions):
    # ML-Agents' test_simple_asymm_ghost: two behaviors, one team each, the learning team
    # changes every 400 steps; both end above 0.9.
    env = RecordingSimple(behavior_names=["1D?team=0", "1DOpp?team=1"], seed=1337, **actions)
    sp = SelfPlaySettings(play_against_latest_model_ratio=1.0, save_steps=10000, swap_steps=10000, team_change=400)
    config = ppo_dummy(self_play=sp, max_steps=4000)
    check_environment_trains(tmp_path, env, {"1D": config, "1DOpp": config})
    results = {name: last5(r) for name, r in env.final_rewards.items()}
    assert all(r > 0.9 for r in results.values()), results


@pytest.mark.parametrize("actions", ACTIONS, ids=IDS)
def test_simple_asymm_ghost_fails(tmp_path, actions):
    # ML-Agents' test_simple_asymm_ghost_fails: never the latest model (ratio 0) and
    # snapshots only every 5000 steps: the behavior not learning at the end plays its
    # initial policy.
    env = RecordingSimple(behavior_names=["1D?team=0", "1DOpp?team=1"], seed=1337, **actions)
    sp = SelfPlaySettings(play_against_latest_model_ratio=0.0, save_steps=5000, swap_steps=5000, team_change=2000)
    config = ppo_dummy(self_play=sp, max_steps=3000)
    check_environment_trains(tmp_path, env, {"1D": config, "1DOpp": config})
    results = [last5(r) for r in env.final_rewards.values()]
    assert any(r > 0.9 for r in results) and any(r < 0.9 for r in results), results


# ----------------------------------------------------------------- other trainers and modes


def _simple_two_teams(tmp_path, run_cli, behavior: dict, run_id: str, **env_args):
    config = {
        "behaviors": {"1D": behavior},
        "env_settings": {"env_path": "builtin:Simple", "seed": 1,
                         "env_args": {"behavior_names": ["1D?team=0", "1D?team=1"], **env_args}},
    }
    path = tmp_path / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump(config))
    code, out, err = run_cli(str(path), f"--run-id={run_id}")
    assert code == 0, err
    return out


def test_sac_self_plays(tmp_path, run_cli):
    behavior = {
        "trainer_type": "sac",
        "hyperparameters": {"learning_rate": 5.0e-3, "batch_size": 8, "buffer_init_steps": 100, "buffer_size": 5000,
                            "tau": 0.01, "init_entcoef": 0.01},
        "network_settings": {"num_layers": 1, "hidden_units": 16},
        "max_steps": 800, "summary_freq": 200,
        "self_play": {"play_against_latest_model_ratio": 1.0, "save_steps": 300, "swap_steps": 300},
    }
    out = _simple_two_teams(tmp_path, run_cli, behavior, "sac", continuous=1, discrete=0)
    assert "ELO:" in out
    assert os.path.isfile(run_cli.results / "sac" / "1D" / "checkpoint-800.self_play.npz")


def test_threaded_snapshots_are_the_acting_copys_weights():
    # With threaded: true an update runs beside the acting thread; a snapshot is read from
    # the acting copy, which changes only at the swap after an update.
    spec = make_spec(branches=(3,), vector=3)
    settings = TrainerSettings(
        hyperparameters=PPOSettings(batch_size=16, buffer_size=64),
        network_settings=NetworkSettings(hidden_units=8, num_layers=1), threaded=True, self_play=SelfPlaySettings(),
    )
    trainer = PPOTrainer("B", spec, settings, StatsReporter("B", []), seed=2)
    try:
        ghost = trainer.ghost
        assert ghost is not None
        trainer.policy.sync_acting_weights()
        before = ghost.get_weights()
        i = ghost.variable_names.index("policy/discrete/branch_0/bias")
        with trainer.policy.graph.as_default():
            (bias,) = [v for v in tf.global_variables() if v.op.name == "policy/discrete/branch_0/bias"]
        bias.load(np.full(3, 0.25, np.float32), trainer.policy.session)  # as an update in flight would
        np.testing.assert_array_equal(ghost.get_weights()[i], before[i])
        trainer.policy.sync_acting_weights()
        np.testing.assert_array_equal(ghost.get_weights()[i], np.full(3, 0.25, np.float32))
    finally:
        trainer.close()


def test_threaded_self_play_trains_end_to_end(tmp_path, run_cli):
    behavior = {
        "trainer_type": "ppo",
        "hyperparameters": {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant", "batch_size": 16,
                            "buffer_size": 64},
        "network_settings": {"num_layers": 1, "hidden_units": 32},
        "max_steps": 1500, "summary_freq": 500, "threaded": True,
        "self_play": {"play_against_latest_model_ratio": 0.5, "save_steps": 300, "swap_steps": 200},
    }
    out = _simple_two_teams(tmp_path, run_cli, behavior, "threaded", continuous=0, discrete=1)
    assert "ELO:" in out
    assert os.path.isfile(run_cli.results / "threaded" / "1D" / "checkpoint-1500.self_play.npz")


# ----------------------------------------------------------------- release 10's configs

RELEASE_10 = {
    # file -> the Unity game's behavior ids and spaces (Learning-Environment-Examples.md at
    # release 10: SoccerTwos 336 observations, 3 branches of 3; Tennis 9 observations
    # (its stacking is not documented there), 3 continuous actions; Striker 294 and
    # Goalie 738 observations, 3 branches of 3 each).
    "release_10_SoccerTwos.yaml": {"behavior_names": ["SoccerTwos?team=0", "SoccerTwos?team=1"],
                                   "vec_obs_size": 336, "discrete": [3, 3, 3], "num_agents": 4},
    "release_10_Tennis.yaml": {"behavior_names": ["Tennis?team=0", "Tennis?team=1"], "vec_obs_size": 9,
                               "continuous": 3, "discrete": [], "num_agents": 4},
    "release_10_StrikersVsGoalie.yaml": {"behavior_names": ["Striker?team=0", "Goalie?team=1"],
                                         "vec_obs_size": [294, 738], "discrete": [3, 3, 3],
                                         "num_agents": 4},
}


@pytest.mark.parametrize("name", sorted(RELEASE_10))
def test_release_10_self_play_configs_load_and_train_on_paddles(tmp_path, run_cli, name):
    path = os.path.join(DATA, name)
    options = load_settings(path)
    with open(path) as f:
        raw = yaml.safe_load(f)
    for behavior, section in raw["behaviors"].items():
        assert options.behaviors[behavior].self_play == SelfPlaySettings(**section["self_play"])
    env_args = RELEASE_10[name]
    assert options.env_settings.env_args == env_args
    ids = {BehaviorId.parse(n).name for n in env_args["behavior_names"]}
    assert ids == set(options.behaviors)
    code, out, err = run_cli(path, "--run-id=r10")
    assert code == 0, err
    for behavior in options.behaviors:
        assert os.path.isfile(run_cli.results / "r10" / behavior / f"{behavior}.onnx")
    assert "ELO:" in out
