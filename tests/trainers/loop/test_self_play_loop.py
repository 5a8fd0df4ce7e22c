"""Self-play's bookkeeping (`trainers.loop.self_play`), without TensorFlow: ratings in closed
form, the snapshot ring, swaps, team changes, persistence, and what the controller hands a
trainer when teams play (a fake trainer on the built-in Chain with two teams)."""
from __future__ import annotations

import json
import os
from typing import List, Optional, Sequence

import numpy as np
import pytest

from envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec
from envs.managers import make_env_manager
from trainers.config import SelfPlaySettings, TrainerSettings
from trainers.loop.controller import TrainerController
from trainers.loop.self_play import (
    STATE_SUFFIX,
    BehaviorGhost,
    GhostController,
    SelfPlay,
    SelfPlayBehavior,
    elo_change,
    game_result,
)
from trainers.loop.status import TrainingStatus
from trainers.loop.trajectory import AgentProcessor
from trainers.stats import StatsReporter

from test_controller import LENGTH, AlwaysRight, FakeTrainer

SPEC = BehaviorSpec((ObservationSpec((1,), "obs"),), ActionSpec(0, (2,)))


class FakeGhost(AlwaysRight):
    """A ghost whose "weights" are one array; `trained` stands for the policy's weights."""

    def __init__(self) -> None:
        super().__init__()
        self.trained = [np.zeros(2, np.float32)]
        self.playing: Optional[List[np.ndarray]] = None
        self.loads = 0
        self.variable_names = ["w"]

    def get_weights(self) -> List[np.ndarray]:
        return [w.copy() for w in self.trained]

    def load_weights(self, weights: Sequence[np.ndarray]) -> None:
        self.playing = [np.array(w) for w in weights]
        self.loads += 1

    def current_weights(self) -> List[np.ndarray]:
        assert self.playing is not None
        return self.playing


class Reporter(StatsReporter):
    def __init__(self) -> None:
        super().__init__("B", [])
        self.elos: List[float] = []

    def add_stat(self, key, value, aggregation=None):  # type: ignore[override]
        if key == "Self-play/ELO":
            self.elos.append(value)


def _behavior(name: str, ids, ghost: FakeGhost, **settings) -> SelfPlayBehavior:
    return SelfPlayBehavior(
        name, SelfPlaySettings(**settings), tuple(ids), AlwaysRight(), ghost, AgentProcessor(SPEC, 8), SPEC, 8,
        Reporter(), 10**9,
    )


def test_game_results_and_elo_changes_in_closed_form():
    assert [game_result(r) for r in (1.0, 0.01, 0.0, -0.5)] == [1.0, 1.0, 0.5, 0.0]
    # Equal ratings: expected 0.5, so a win gives +0.5 (K = 1, as ML-Agents' code).
    assert elo_change(1200.0, 1200.0, 1.0) == pytest.approx(0.5)
    assert elo_change(1200.0, 1200.0, 0.5) == pytest.approx(0.0)
    # 400 points above: expected 10 / 11.
    assert elo_change(1600.0, 1200.0, 1.0) == pytest.approx(1.0 / 11.0)
    assert elo_change(1600.0, 1200.0, 0.0) == pytest.approx(-10.0 / 11.0)
    assert elo_change(1200.0, 1600.0, 1.0) == pytest.approx(10.0 / 11.0)


def test_the_first_team_learns_and_teams_rotate():
    controller = GhostController()
    ghost = BehaviorGhost(_behavior("B", ["B?team=0", "B?team=1", "B?team=2"], FakeGhost()), controller, 0, 1200.0)
    assert controller.learning_team == 0 and list(controller.queue) == [1, 2]
    order = [controller.learning_team]
    for _ in range(4):
        controller.change_training_team()
        order.append(controller.learning_team)
    assert order == [0, 1, 2, 0, 1]
    assert ghost.is_learning
    groups = ghost.groups()
    assert [g.learning for g in groups] == [True, False]
    assert groups[0].ids == ("B?team=0",) or controller.learning_team != 0


def test_snapshots_fill_a_ring_of_window_with_their_ratings():
    fake = FakeGhost()
    ghost = BehaviorGhost(_behavior("B", ["B?team=0", "B?team=1"], fake, window=3), GhostController(), 0, 1200.0)
    for k in range(5):
        fake.trained = [np.full(2, k, np.float32)]
        ghost.policy_elos[-1] = 1000.0 + k
        ghost.save_snapshot()
    # Slots 0, 1, 2, 0, 1: snapshots 3 and 4 overwrote 0 and 1.
    assert [float(s[0][0]) for s in ghost.snapshots] == [3.0, 4.0, 2.0]
    assert ghost.policy_elos == [1003.0, 1004.0, 1002.0, 1004.0]
    assert ghost.snapshot_counter == 2


def test_swaps_play_the_latest_weights_at_the_given_ratio():
    fake = FakeGhost()
    ghost = BehaviorGhost(
        _behavior("B", ["B?team=0", "B?team=1"], fake, play_against_latest_model_ratio=0.3), GhostController(), 7,
        1200.0,
    )
    for k in range(3):
        fake.trained = [np.full(2, k, np.float32)]
        ghost.save_snapshot()
    fake.trained = [np.full(2, 9, np.float32)]
    latest, picked = 0, []
    n = 2000
    for _ in range(n):
        ghost.swap_snapshots()
        assert fake.playing is not None
        if ghost.current_opponent == -1:
            latest += 1
            assert float(fake.playing[0][0]) == 9.0
        else:
            picked.append(ghost.current_opponent)
            assert float(fake.playing[0][0]) == float(ghost.current_opponent)
    # Binomial(2000, 0.3): 600 +- 4.5 standard deviations (20.5 each).
    assert abs(latest - 0.3 * n) < 4.5 * np.sqrt(n * 0.3 * 0.7)
    counts = np.bincount(picked, minlength=3)
    assert counts.min() > 0.8 * counts.mean()  # uniform over the window


def test_ratings_move_against_a_snapshot_and_not_against_the_latest_weights():
    controller = GhostController()
    fake = FakeGhost()
    ghost = BehaviorGhost(_behavior("B", ["B?team=0", "B?team=1"], fake), controller, 0, 1200.0)
    ghost.save_snapshot()
    ghost.current_opponent = 0
    assert ghost.record_game(1.0) == pytest.approx(0.5)
    assert ghost.current_elo == pytest.approx(1200.5) and ghost.policy_elos[0] == pytest.approx(1199.5)
    # Against the latest weights the opponent is the learning policy itself: no change.
    ghost.current_opponent = -1
    ghost.record_game(1.0)
    assert ghost.current_elo == pytest.approx(1200.5)
    assert ghost.behavior.stats.elos == pytest.approx([1200.5, 1200.5])  # type: ignore[attr-defined]


def test_asymmetric_opponent_rating_is_the_other_behaviors_snapshot():
    controller = GhostController()
    a = BehaviorGhost(_behavior("A", ["A?team=0"], FakeGhost()), controller, 0, 1200.0)
    b = BehaviorGhost(_behavior("B", ["B?team=1"], FakeGhost()), controller, 0, 1600.0)
    b.save_snapshot()  # B's snapshot 0 rated 1600
    b.current_opponent = 0
    change = a.record_game(1.0)
    assert change == pytest.approx(10.0 / 11.0)
    assert a.current_elo == pytest.approx(1200.0 + 10.0 / 11.0)
    assert b.policy_elos[0] == pytest.approx(1600.0 - 10.0 / 11.0)
    assert [g.learning for g in a.groups()] == [True] and [g.learning for g in b.groups()] == [False]


def test_advance_saves_swaps_and_changes_teams_on_ml_agents_counters():
    fake = FakeGhost()
    self_play = SelfPlay([_behavior("B", ["B?team=0", "B?team=1"], fake, save_steps=10, swap_steps=5,
                                    team_change=30, play_against_latest_model_ratio=1.0)], seed=0)
    ghost = self_play.ghosts["B"]
    assert len(ghost.snapshots) == 1 and fake.loads == 1  # the initial weights, played at once
    self_play.advance("B", 10)
    assert len(ghost.snapshots) == 1  # ML-Agents: strictly more than save_steps
    self_play.advance("B", 11)
    assert len(ghost.snapshots) == 2 and ghost.last_save == 11
    self_play.add_ghost_steps("B", 5)
    self_play.advance("B", 12)
    assert fake.loads == 1  # 5 ghost steps: not more than swap_steps
    self_play.add_ghost_steps("B", 1)
    self_play.advance("B", 13)
    assert fake.loads == 2 and ghost.last_swap == 6
    assert self_play.learning_team() == 0
    self_play.advance("B", 31)
    # The team changed: team 1 learns, and the ghost (now team 0's) got a new opponent.
    assert self_play.learning_team() == 1 and fake.loads == 3
    assert [g.ids for g in self_play.groups("B")] == [("B?team=1",), ("B?team=0",)]


def test_state_round_trips_through_the_checkpoint_file(tmp_path):
    fake = FakeGhost()
    behavior = _behavior("B", ["B?team=0", "B?team=1"], fake, save_steps=1, window=3)
    self_play = SelfPlay([behavior], seed=3)
    ghost = self_play.ghosts["B"]
    for k in range(4):
        fake.trained = [np.full(2, k + 1, np.float32)]
        self_play.add_ghost_steps("B", 7)
        self_play.advance("B", 2 * (k + 1))
    ghost.current_opponent = 1
    ghost.record_game(-1.0)
    status = TrainingStatus()
    prefix = str(tmp_path / "checkpoint-8")
    self_play.save("B", prefix, status)
    assert os.path.isfile(prefix + STATE_SUFFIX)
    assert status.get_elo("B") == pytest.approx(ghost.current_elo)
    before = ghost.state()

    fake2 = FakeGhost()
    restored = SelfPlay([_behavior("B", ["B?team=0", "B?team=1"], fake2, save_steps=1, window=3)], seed=99,
                        status=status, checkpoint_prefixes={"B": prefix}).ghosts["B"]
    after = restored.state()
    for key in ("policy_elos", "snapshot_counter", "snapshots", "current_opponent", "ghost_step", "last_save",
                "last_swap", "last_team_change", "learning_team", "rng", "controller"):
        assert after[key] == before[key], key
    for mine, theirs in zip(ghost.snapshots, restored.snapshots):
        np.testing.assert_array_equal(mine[0], theirs[0])
    assert fake2.playing is not None and fake.playing is not None
    np.testing.assert_array_equal(fake2.playing[0], fake.playing[0])
    # The same draws follow (the generator's state was saved).
    assert ghost.rng.uniform() == restored.rng.uniform()


def test_a_run_without_the_state_file_starts_from_the_recorded_elo():
    status = TrainingStatus()
    status.set_elo("B", 1333.0)
    self_play = SelfPlay([_behavior("B", ["B?team=0", "B?team=1"], FakeGhost())], seed=0, status=status)
    assert self_play.elo("B") == 1333.0


def test_the_state_file_of_another_actor_is_refused_in_one_line(tmp_path):
    fake = FakeGhost()
    self_play = SelfPlay([_behavior("B", ["B?team=0", "B?team=1"], fake)], seed=0)
    prefix = str(tmp_path / "checkpoint-1")
    self_play.save("B", prefix, TrainingStatus())
    other = FakeGhost()
    other.variable_names = ["v"]
    from trainers.exceptions import CheckpointError

    with pytest.raises(CheckpointError, match="cannot restore the self-play state"):
        SelfPlay([_behavior("B", ["B?team=0", "B?team=1"], other)], seed=0, checkpoint_prefixes={"B": prefix})


# ----------------------------------------------------------------- through the controller


class GhostedTrainer(FakeTrainer):
    """The fake trainer with a ghost: its trajectories tell which team was learning."""

    def __init__(self, spec, settings) -> None:
        super().__init__(spec, settings)
        self.ghost = FakeGhost()

    def checkpoint_prefix(self, directory: str, step: int) -> str:
        return os.path.join(directory, f"checkpoint-{step}")


def _chain_run(tmp_path, **self_play):
    env = make_env_manager("builtin:Chain", {"length": LENGTH, "behavior_names": ["C?team=0", "C?team=1"]}, 1, 1, 0)
    settings = TrainerSettings(max_steps=40, time_horizon=3, summary_freq=1000, checkpoint_interval=1000,
                               self_play=SelfPlaySettings(**self_play))
    try:
        trainer = GhostedTrainer(env.behavior_specs["C?team=0"], settings)
        controller = TrainerController(
            env,
            {"C": trainer},  # type: ignore[dict-item]  (a duck-typed Trainer)
            {"C": StatsReporter("C", [])},
            str(tmp_path / "run"),
            TrainingStatus(),
        )
        teams = {}
        orig = controller._act

        def act(steps):
            actions, acted = orig(steps)
            for turn in acted:
                for (env_step, bid), decision in zip(turn.parts, turn.decisions):
                    for a in decision.agent_id.tolist():
                        teams[a] = bid
            return actions, acted

        controller._act = act  # type: ignore[method-assign]
        controller.run()
    finally:
        env.close()
    return trainer, controller, teams


def test_only_the_learning_team_trains_and_counts_steps(tmp_path):
    trainer, controller, teams = _chain_run(tmp_path, save_steps=10**6, team_change=10**6, swap_steps=10**6)
    assert trainer.trajectories
    assert {teams[t.agent[1]] for t in trainer.trajectories} == {"C?team=0"}
    assert sum(len(t) for t in trainer.trajectories) == trainer.step
    # Both agents acted every step: the trainer's actor and the ghost, one call each.
    assert trainer.actor.calls == trainer.ghost.calls == trainer.step  # type: ignore[attr-defined]
    assert controller.self_play is not None and controller.self_play.ghosts["C"].ghost_step == trainer.step
    # Every team's episodes count in the episode stats (ML-Agents): 2 agents, 4 steps each.
    assert len(trainer.episode_ends) >= 2 * (trainer.step // (LENGTH - 1)) - 2
    # The checkpoint's state file is written and the status has the rating.
    with open(os.path.join(controller.run_dir, "run_logs", "training_status.json")) as f:
        assert json.load(f)["behaviors"]["C"]["elo"] > 1200.0  # always right: every game won


def test_team_changes_hand_the_trainer_the_other_teams_trajectories(tmp_path):
    trainer, controller, teams = _chain_run(tmp_path, save_steps=5, team_change=12, swap_steps=3)
    learned = [teams[t.agent[1]] for t in trainer.trajectories]
    # team_change 12: team 0 learns steps 1-13, team 1 the next 13, then team 0 again; no
    # trajectory of a team after its turn (its partial ones are dropped at the change).
    blocks = [learned[0]] + [b for a, b in zip(learned, learned[1:]) if a != b]
    assert blocks[:3] == ["C?team=0", "C?team=1", "C?team=0"]
    assert controller.self_play is not None
    ghost_steps = controller.self_play.ghosts["C"].ghost_step
    # Every agent step is the trainer's (learning team) or a ghost step, never both.
    assert trainer.step + ghost_steps == trainer.actor.calls + trainer.ghost.calls  # type: ignore[attr-defined]
    assert sum(len(t) for t in trainer.trajectories) < trainer.step


def test_the_status_keeps_the_rating_as_ml_agents_elo_key(tmp_path):
    status = TrainingStatus()
    status.set_elo("Tennis", 1234.5)
    path = str(tmp_path / "training_status.json")
    status.save(path)
    with open(path) as f:
        assert json.load(f)["behaviors"]["Tennis"]["elo"] == 1234.5
    assert TrainingStatus.load(path).get_elo("Tennis") == 1234.5
    status.set_step("Plain", 3)  # a behavior without self-play has no key
    status.save(path)
    with open(path) as f:
        assert "elo" not in json.load(f)["behaviors"]["Plain"]


def test_self_play_bookkeeping_does_not_import_tensorflow():
    import subprocess
    import sys

    code = "import sys, trainers.loop.self_play\nassert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_console_line_shows_the_rating_after_the_reward_as_ml_agents():
    import io

    from trainers.stats import StatsAggregation, StatsSummary
    from trainers.stats.writers import ConsoleWriter

    def summary(value: float) -> StatsSummary:
        return StatsSummary(value, 0.5, 4, 4 * value, StatsAggregation.MEAN)

    stream = io.StringIO()
    writer = ConsoleWriter(stream, start_time=0.0, clock=lambda: 10.0)
    training = StatsSummary(1.0, 0.0, 1, 1.0, StatsAggregation.MOST_RECENT)
    writer.write_stats("Tennis", {"Environment/Cumulative Reward": summary(0.25), "Is Training": training,
                                  "Self-play/ELO": summary(1234.5678)}, 500)
    writer.write_stats("Tennis", {"Is Training": training, "Self-play/ELO": summary(1234.5678)}, 1000)
    first, second = stream.getvalue().splitlines()
    assert first == ("[INFO] Tennis. Step: 500. Time Elapsed: 10.0 s. Mean Reward: 0.25. Std of Reward: 0.5. "
                     "Training. ELO: 1234.568.")
    assert "ELO" not in second  # no episode: no reward, no rating (as ML-Agents)
