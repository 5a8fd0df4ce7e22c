"""``rollout_cuts`` (issue 32, task C2): every agent of a worker is cut at each
``time_horizon``-th env step of that worker, as Stable-Baselines3's rollouts of ``n_steps``,
so that with ``update_when_full`` every update takes exactly ``buffer_size`` rows. Closed
forms of the cut schedule (by hand), the controller end to end (built-in `Chain`), the
rows per update, and the default (off) left as ML-Agents'."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pytest
from test_controller import LENGTH, FakeTrainer  # the same directory's duck-typed Trainer

from envs.base_env import ActionSpec, BehaviorSpec, DecisionSteps, ObservationSpec, TerminalSteps
from envs.managers import make_env_manager
from trainers.config import TrainerSettings
from trainers.exceptions import ConfigError
from trainers.loop.controller import TrainerController
from trainers.loop.status import TrainingStatus
from trainers.loop.trajectory import AgentProcessor, Trajectory
from trainers.stats import StatsReporter

SPEC = BehaviorSpec((ObservationSpec((1,)),), ActionSpec(1, ()))


def _decision(ids: List[int], step: int) -> DecisionSteps:
    """Agents ``ids`` decide; the observation and reward are the env step's number, so each
    trajectory row tells which env step credited it."""
    n = len(ids)
    return DecisionSteps([np.full((n, 1), step, np.float32)], np.full(n, step, np.float32), np.array(ids, np.int32))


def _terminal(ids: List[int], step: int) -> TerminalSteps:
    n = len(ids)
    return TerminalSteps([np.full((n, 1), step, np.float32)], np.full(n, step, np.float32),
                         np.zeros(n, bool), np.array(ids, np.int32))


def _act(proc: AgentProcessor, worker: int, dec: DecisionSteps) -> None:
    n = len(dec)
    proc.add_actions(worker, dec, [o.copy() for o in dec.obs], np.zeros((n, 1), np.float32),
                     np.zeros((n, 0), np.int32), None, np.zeros((n, 1), np.float32))


Script = Dict[int, Tuple[List[int], List[int]]]  # env step -> (deciding ids, ids whose episode ends)


def _play(proc: AgentProcessor, worker: int, script: Script, steps: int, teams: int = 1) -> List[Trajectory]:
    """Env steps 0 (the reset) .. ``steps`` of one worker, as the controller drives them:
    terminal then decision steps, then the actions. ``teams`` > 1: the same agents appear
    again under further behavior ids (ids + 100 * team), as ``Name?team=N`` in one env step."""
    out: List[Trajectory] = []
    for step in range(steps + 1):
        deciding, ending = script[step]
        for team in range(teams):
            offset = 100 * team
            trajs, _ = proc.add_terminal(worker, _terminal([i + offset for i in ending], step))
            out += trajs
            dec = _decision([i + offset for i in deciding], step)
            out += proc.add_decision(worker, dec, new_step=team == 0)
            _act(proc, worker, dec)
    return out


def _schedule() -> Script:
    """Agent 1 plays steps 0-10. Agent 2's episode ends at step 3 and agent 3 (the next
    episode, a new id, as a Gymnasium copy) decides from step 3; agent 3's ends at step 6,
    agent 4 takes over at 6 and is still playing at 10."""
    script: Script = {}
    for step in range(11):
        deciding = [1] + ([2] if step < 3 else [3] if step < 6 else [4])
        script[step] = (deciding, [2] if step == 3 else [3] if step == 6 else [])
    return script


def _rows(trajs: List[Trajectory]) -> List[Tuple[int, List[int], bool]]:
    """(agent id, the env steps that credited its rows, done) per trajectory, in order."""
    return [(t.agent[1], [int(r) for r in t.rewards], t.done) for t in trajs]


def test_rollout_cuts_cut_every_agent_at_each_time_horizon_th_env_step_of_its_worker() -> None:
    """time_horizon 4: cuts at env steps 4 and 8 for every agent playing then, whatever its
    trajectory's start; episode ends (steps 3, 6) end a trajectory without moving the cuts.
    Every rollout (steps 1-4, 5-8) holds exactly 2 agents x 4 rows."""
    trajs = _play(AgentProcessor(SPEC, 4, rollout_cuts=True), 0, _schedule(), 10)
    assert _rows(trajs) == [
        (2, [1, 2, 3], True),       # episode end at 3
        (1, [1, 2, 3, 4], False),   # cut at 4
        (3, [4], False),            # cut at 4: one row since its first decision at 3
        (3, [5, 6], True),          # episode end at 6
        (1, [5, 6, 7, 8], False),   # cut at 8
        (4, [7, 8], False),         # cut at 8
    ]
    by_rollout = [sum(1 for t in trajs for r in t.rewards if lo <= r <= lo + 3) for lo in (1, 5)]
    assert by_rollout == [8, 8]
    # The cut trajectories bootstrap from the observation at the cut step.
    assert [float(t.next_obs[0][0, 0]) for t in trajs if not t.done] == [4.0, 4.0, 8.0, 8.0]


def test_without_rollout_cuts_the_schedule_is_ml_agents() -> None:
    """The default: time_horizon steps after each trajectory's start (agent 3: from its
    first decision at step 3, so a cut at 7 would come but its episode ends at 6; agent 4
    from step 6: 4 rows at step 10)."""
    trajs = _play(AgentProcessor(SPEC, 4), 0, _schedule(), 10)
    assert _rows(trajs) == [
        (2, [1, 2, 3], True),
        (1, [1, 2, 3, 4], False),
        (3, [4, 5, 6], True),
        (1, [5, 6, 7, 8], False),
        (4, [7, 8, 9, 10], False),
    ]


def test_each_worker_counts_its_own_steps_and_teams_share_them() -> None:
    """Worker 1 starts 2 env steps after worker 0 (e.g. a threaded behavior's workers out of
    lockstep): its cuts come at its own 3rd and 6th steps. A second team of worker 0 (ids
    + 100, ``new_step=False``) is cut at the same steps as the first, not twice as often."""
    proc = AgentProcessor(SPEC, 3, rollout_cuts=True)
    script0: Script = {s: ([1], []) for s in range(7)}
    cuts: Dict[int, List[List[int]]] = {}
    for round_ in range(9):
        if round_ <= 6:  # worker 0: its steps 0..6 in rounds 0..6, two teams
            for t in _play_one(proc, 0, script0[round_][0], round_, teams=2):
                cuts.setdefault(t.agent[1], []).append([int(r) for r in t.rewards])
        if round_ >= 2:  # worker 1: its steps 0..6 in rounds 2..8
            for t in _play_one(proc, 1, [1], round_ - 2):
                cuts.setdefault(10 + t.agent[1], []).append([int(r) for r in t.rewards])
    assert cuts == {1: [[1, 2, 3], [4, 5, 6]], 101: [[1, 2, 3], [4, 5, 6]], 11: [[1, 2, 3], [4, 5, 6]]}


def _play_one(proc: AgentProcessor, worker: int, ids: List[int], step: int, teams: int = 1) -> List[Trajectory]:
    """One env step of one worker (decisions only), ``teams`` behavior ids."""
    out: List[Trajectory] = []
    for team in range(teams):
        dec = _decision([i + 100 * team for i in ids], step)
        out += proc.add_decision(worker, dec, new_step=team == 0)
        _act(proc, worker, dec)
    return out


def test_end_episodes_and_drop_worker_restart_the_count() -> None:
    """After `end_episodes` (a reset, self-play's team change) the next step is step 0 again:
    the agents' first rollout after it holds time_horizon rows, not fewer; `drop_worker`
    restarts one worker's count."""
    proc = AgentProcessor(SPEC, 3, rollout_cuts=True)
    out = [_play_one(proc, 0, [1], s) for s in range(3)]  # steps 0, 1, 2: no cut yet
    assert not any(out)
    proc.end_episodes()
    out = [_play_one(proc, 0, [1], s) for s in range(4)]  # 0 (reset) .. 3: the cut at 3
    assert [[int(r) for r in t.rewards] for o in out for t in o] == [[1, 2, 3]]
    proc.drop_worker(0)
    out = [_play_one(proc, 0, [1], s) for s in range(4)]
    assert [[int(r) for r in t.rewards] for o in out for t in o] == [[1, 2, 3]]


def test_inference_processors_never_cut() -> None:
    """``record=False`` keeps returns only: the knob is ignored."""
    proc = AgentProcessor(SPEC, 2, record=False, rollout_cuts=True)
    assert not proc.rollout_cuts
    for step in range(5):
        dec = _decision([1], step)
        assert proc.add_decision(0, dec) == []
        proc.add_actions(0, dec, dec.obs, np.zeros((1, 1), np.float32), np.zeros((1, 0), np.int32), None,
                         np.zeros((1, 1), np.float32))


class RowTrainer(FakeTrainer):
    """A `FakeTrainer` whose buffer counts rows and updates as PPO with ``update_when_full``
    (``rows >= buffer_size``), recording the rows of each update."""

    def __init__(self, spec: BehaviorSpec, settings: TrainerSettings, buffer_size: int) -> None:
        super().__init__(spec, settings)
        self.buffer_size = buffer_size
        self.rows = 0
        self.update_rows: List[int] = []

    def process_trajectory(self, traj: Trajectory) -> None:
        super().process_trajectory(traj)
        self.rows += len(traj)

    @property
    def ready_to_update(self) -> bool:
        return self.rows >= self.buffer_size

    def update(self) -> Dict[str, float]:
        self.update_rows.append(self.rows)
        self.rows = 0
        return super().update()


def _controller_run(tmp_path, rollout_cuts: bool, num_envs: int = 2, env_id: str = "builtin:Chain",
                    steps: int = 36) -> RowTrainer:
    """builtin:Chain (4-step episodes with an always-right actor), time_horizon 3, 2 workers
    in lockstep, buffer_size 2 x 3 = 6 (SB3's n_steps 3 x n_envs 2), 36 steps."""
    env_args = {"length": LENGTH} if env_id == "builtin:Chain" else {}
    env = make_env_manager(env_id, env_args, num_envs, 1, seed=0)
    try:
        name = next(iter(env.behavior_specs)).split("?")[0]  # Paddles?team=0 and ?team=1: one behavior
        settings = TrainerSettings(max_steps=steps, time_horizon=3, rollout_cuts=rollout_cuts, summary_freq=1000,
                                   checkpoint_interval=1000, keep_checkpoints=1)
        spec = next(iter(env.behavior_specs.values()))
        agents = sum(len(env.behavior_specs) for _ in range(num_envs))  # one agent per id per worker
        trainer = RowTrainer(spec, settings, buffer_size=3 * agents)
        TrainerController(
            env,
            {name: trainer},  # type: ignore[dict-item]  # RowTrainer: a duck-typed Trainer
            {name: StatsReporter(name, [])},
            str(tmp_path / "run"),
            TrainingStatus(),
        ).run()
    finally:
        env.close()
    return trainer


def test_controller_cuts_at_rollout_ends_and_every_update_takes_buffer_size_rows(tmp_path) -> None:
    """Episodes of steps 1-4, 5-8, 9-12...; rollout cuts at 3, 6, 9, 12...: per worker
    [1-3 | 4 done], [5-6 | 7-8 done], [9 | 10-12 done], then it repeats. Every update takes
    exactly 2 workers x 3 rows. Off (ML-Agents): [3, 1] per episode, and updates of 6 and 8
    rows alternate (4 rows wait after each cut of 3 + 3)."""
    on = _controller_run(tmp_path / "on", rollout_cuts=True)
    per_worker = [len(t) for t in on.trajectories if t.agent[0] == 0]
    assert per_worker[:8] == [3, 1, 2, 2, 1, 3, 3, 1]
    assert [t.done for t in on.trajectories if t.agent[0] == 0][:6] == [False, True, False, True, False, True]
    assert on.update_rows == [6] * 6  # 36 steps / 6 rows
    off = _controller_run(tmp_path / "off", rollout_cuts=False)
    assert [len(t) for t in off.trajectories if t.agent[0] == 0][:4] == [3, 1, 3, 1]
    assert off.update_rows[:2] == [6, 8] and set(off.update_rows) != {6}


@pytest.mark.parametrize("value", [1, "yes"])
def test_rollout_cuts_must_be_a_boolean(value: object) -> None:
    with pytest.raises(ConfigError, match="rollout_cuts: expected true or false"):
        TrainerSettings(rollout_cuts=value)  # type: ignore[arg-type]


def test_a_behavior_with_two_teams_counts_each_env_step_once(tmp_path) -> None:
    """builtin:Paddles without self-play: one behavior, ids ``Paddles?team=0`` and ``?team=1``,
    two `add_decision` calls per env step. Counted once per step, every update takes exactly
    2 agents x 3 rows (counted per call, team 1 would be cut at other steps than team 0 and
    the first update would take 7 rows)."""
    trainer = _controller_run(tmp_path, rollout_cuts=True, num_envs=1, env_id="builtin:Paddles", steps=60)
    assert len(trainer.update_rows) == 10 and set(trainer.update_rows) == {6}


def test_recurrent_memories_split_at_the_rollout_cut() -> None:
    """A recurrent agent's rows keep the memory each action was taken from: cut at the
    rollout's end (step 4, 2 rows after the agent's first decision at step 2), the next
    trajectory starts with the memory of the step after the cut, none lost or repeated."""
    proc = AgentProcessor(SPEC, 4, rollout_cuts=True)
    trajs: List[Trajectory] = []
    for step in range(9):
        ids = [1] if step >= 2 else []  # agent 1 enters at the worker's step 2
        dec = _decision(ids, step)
        trajs += proc.add_decision(0, dec)
        n = len(ids)
        proc.add_actions(0, dec, [o.copy() for o in dec.obs], np.zeros((n, 1), np.float32),
                         np.zeros((n, 0), np.int32), None, np.zeros((n, 1), np.float32),
                         memories=np.full((n, 3), step, np.float32), prev_actions=np.zeros((n, 0), np.float32))
    assert [[int(r) for r in t.rewards] for t in trajs] == [[3, 4], [5, 6, 7, 8]]
    memories = [t.memory for t in trajs]
    assert all(m is not None for m in memories)
    assert [int(m[0]) for t in trajs for m in t.memory] == [2, 3, 4, 5, 6, 7]  # type: ignore[union-attr]


@pytest.mark.slow  # two 8192-step runs: 13 s at load 4, 40 s at load 6
def test_pendulum_zoo_updates_on_sb3s_cadence(tmp_path, monkeypatch) -> None:
    """config/ppo/zoo_Pendulum.yaml (4 Gymnasium copies, 200-step episodes, time_horizon
    1024, buffer_size 4096, update_when_full), seed 1, 8192 steps, the real PPO trainer:
    with rollout_cuts (the config) 2 updates of exactly 4 x 1024 rows, as SB3's rollouts;
    without, the copies' cuts drift with their episodes and the first update waits for
    4 x 1200 rows (episodes 1-6 end together at step 1200, before any 1024-step cut)."""
    import dataclasses
    import os

    from trainers.cli.learn import run_training
    from trainers.config import load_settings
    from trainers.ppo.trainer import PPOTrainer

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    rows: List[int] = []
    update = PPOTrainer.update

    def counting(self: PPOTrainer) -> Dict[str, float]:
        rows.append(self.experiences)
        return update(self)

    monkeypatch.setattr(PPOTrainer, "update", counting)
    seen = {}
    for cuts in (True, False):
        rows.clear()
        options = load_settings(os.path.join(root, "config", "ppo", "zoo_Pendulum.yaml"), {
            "run_id": f"cuts_{cuts}", "results_dir": str(tmp_path), "seed": 1, "max_steps": 8192})
        behaviors = {n: dataclasses.replace(s, rollout_cuts=cuts) for n, s in options.behaviors.items()}
        run_training(dataclasses.replace(options, behaviors=behaviors))
        seen[cuts] = list(rows)
    assert seen == {True: [4096, 4096], False: [4800]}


def test_sb3_spec_notes_rollout_cuts_off(tmp_path) -> None:
    """scripts/benchmark_suite.py's SB3 side: the zoo configs set rollout_cuts (no note);
    with it off the difference from SB3's rollouts is named once."""
    import dataclasses
    import importlib.util
    import os
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    spec = importlib.util.spec_from_file_location("benchmark_suite", os.path.join(root, "scripts", "benchmark_suite.py"))
    assert spec is not None and spec.loader is not None
    suite = sys.modules.get(spec.name) or importlib.util.module_from_spec(spec)
    if spec.name not in sys.modules:
        sys.modules[spec.name] = suite  # its dataclasses look their module up by name
        spec.loader.exec_module(suite)
    task = next(t for t in suite.TASKS if t.name == "Acrobot")
    options = suite.load_task(task, 4096, 1, str(tmp_path), 1)
    assert suite.sb3_spec(options, 1, 1)[1] == []
    off = dataclasses.replace(options, behaviors={
        n: dataclasses.replace(s, rollout_cuts=False) for n, s in options.behaviors.items()})
    notes = suite.sb3_spec(off, 1, 1)[1]
    assert len(notes) == 1 and "set rollout_cuts" in notes[0] and "cut 256 steps after their start" in notes[0]
