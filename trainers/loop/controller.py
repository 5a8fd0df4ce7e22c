"""The training loop: env manager <-> trainers; summaries, checkpoints, shutdown.

Per env step: **one** inference ``sess.run`` per behavior acts for every agent of the
behavior across the env workers that answered. Where the workers are other processes
(`EnvManager.steps_in_background`), they start their next step at once, and only then,
while they step, comes the bookkeeping of the step just acted on (terminal steps close
trajectories, decision steps credit rewards, finished trajectories go to their trainer,
the actions join the trajectories), followed by updates, summaries and checkpoints. So
the workers never wait for that work (`scripts/benchmark_slow_env.py` measures the gain;
README, "Threaded updates").
With the env in this thread nothing can overlap, so the bookkeeping comes first, then the
updates, and the inference call after them: an update that the step's trajectories start
is already in the actions of that step (Stable-Baselines3's order: its next rollout starts
from the new weights; PPO's data is then all on-policy: README, Benchmarks, "Adam's
epsilon, and acting after the update"). Where the workers step in the background, and in
ML-Agents, each agent's first action after an update comes from the weights before it;
self-play keeps acting first too (a team change regroups the agents).
There the observation normalizer also takes in a trajectory that has just finished one
inference call later (ML-Agents' trainers take trajectories from a queue, later still).
Checkpoints are written every ``checkpoint_interval`` steps, at the end, on SIGINT/SIGTERM
and when an env worker or a cluster worker fails.
Behaviors with ``threaded: true`` update in a thread while the envs keep stepping
(`trainers.loop.threaded`; the hooks are together at the end of `TrainerController`); a
checkpoint then waits for the running update, so none is written mid-update.
Behaviors with ``evaluation:`` are evaluated every ``interval`` steps after their
checkpoints, on an env of their own (`trainers.loop.evaluation`, which says why training is
unchanged by it), also never mid-update; the best mean return keeps its checkpoint and model.

Env workers step in lockstep (every worker, then the next step once all have answered),
which keeps a run exactly reproducible, unless a behavior is threaded (which gives that
up already) and there are several workers: then they step **out of lockstep**
(`EnvManager.step_some` / `wait_some`): each step acts for the workers that have answered
(at least one; every one there by then) and sends them their actions at once, so a worker
never idles while another finishes its step or while the acting thread runs inference for
another (the steps/s it gains: README, "Threaded updates").
"""
from __future__ import annotations

import json
import math
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Tuple, cast

import numpy as np

from envs.base_env import ActionTuple, DecisionSteps, allowed_mask, behavior_ids
from envs.managers.base import EnvManager, EnvStep
from envs.exceptions import EnvInterrupted, EnvWorkerError
from trainers.exceptions import WorkerLostError
from trainers.layout import RunLayout
from trainers.loop.checkpoints import run_relative
from trainers.loop.curriculum import EnvironmentParameterManager
from trainers.loop.evaluation import MAX_STEPS_PER_EPISODE, EvaluatedBehavior, EvaluationResult, Evaluator
from trainers.loop.self_play import ActingGroup, SelfPlay, SelfPlayBehavior
from trainers.loop.remote import ActedEnvStep, RemoteActingManager, RemoteBehavior
from trainers.loop.status import CheckpointEntry, TrainingStatus
from trainers.loop.threaded import BackgroundUpdater
from trainers.loop.trajectory import AgentProcessor, Trajectory
from trainers.policy import ActionInfo
from trainers.stats.reporter import StatsAggregation, StatsReporter
from trainers.trainer import Trainer

CheckpointHook = Callable[[Trainer, str], None]

#: Trainers that learn from each agent's own reward only: group rewards get a warning.
SINGLE_AGENT_TRAINERS = ("ppo", "sac")

#: What an evaluation writes, at its step (`StatsReporter.write_now`).
EVALUATION_REWARD_TAG = "Environment/Evaluation Reward"
EVALUATION_LENGTH_TAG = "Environment/Evaluation Episode Length"


@dataclass
class Timers:
    """Wall-clock seconds spent in each part of the loop."""

    env: float = 0.0
    inference: float = 0.0
    trajectories: float = 0.0
    update: float = 0.0
    total: float = 0.0
    env_steps: int = 0
    update_durations: List[float] = field(default_factory=list)  # seconds of each update
    # Threaded behaviors: ``update`` is the updates' wall time, which overlaps env stepping
    # (so the parts add up to more than ``total``); ``swap``: acting-weight swaps.
    swap: float = 0.0
    update_wait: float = 0.0  # controller time spent waiting for a running update
    evaluation: float = 0.0  # evaluations (``evaluation:``), their env steps and inference included
    save: float = 0.0  # checkpoints and their exports (.pb/.onnx), the final ones included

    def as_dict(self) -> Dict[str, object]:
        keys = ("env", "inference", "trajectories", "update", "total", "env_steps", "update_durations", "swap",
                "update_wait", "evaluation", "save")
        return {k: getattr(self, k) for k in keys}


@dataclass
class BehaviorState:
    trainer: Trainer
    processor: AgentProcessor
    stats: StatsReporter
    checkpoint_dir: str
    next_summary: int = 0
    next_checkpoint: int = 0
    last_summary: int = -1
    updater: Optional[BackgroundUpdater] = None  # threaded: true
    recurrent: bool = False  # the policy keeps per-agent state (LSTM memories, gSDE noise): acts by agent key
    # The environment's ids of this behavior (``Name?team=N`` from Unity games, the plain
    # name elsewhere): every team of ``Name`` acts through ``Name``'s trainer.
    ids: Tuple[str, ...] = ()
    next_evaluation: Optional[int] = None  # None: no ``evaluation:`` (or not training)
    best_reward: Optional[float] = None  # the best evaluation's mean return (kept by --resume)
    # Not yet warned that this single-agent trainer ignores group rewards (`_warn_group_reward`).
    warn_group_reward: bool = False


@dataclass(slots=True)
class Turn:
    """What `TrainerController._act` did for one behavior in one env step, for `_record`."""

    name: str
    behavior: BehaviorState
    parts: List[Tuple[EnvStep, str]]  # (worker's step, behavior id), in the order of the rows
    decisions: List[DecisionSteps]  # one per part
    rows: List[slice]  # each part's rows in ``obs`` and ``info``
    agents: int  # all workers' agents asking for a decision
    obs: Optional[List[np.ndarray]] = None  # the policy's input, all agents
    masks: Optional[np.ndarray] = None
    info: Optional[ActionInfo] = None  # None: no agent asked for a decision
    # The ids' actor and trajectories (self-play: the learning team's or a ghost team's);
    # None: the behavior's ids, actor and processor.
    group: Optional[ActingGroup] = None

    @property
    def processor(self) -> AgentProcessor:
        """Where the turn's steps and actions go (self-play: a ghost team's processor keeps
        episode returns only, no trajectory)."""
        return self.group.processor if self.group is not None else self.behavior.processor


#: ML-Agents' StatsAggregationMethod (what Unity's StatsRecorder sends) -> ours; histograms
#: are averaged.
_ENV_STAT_AGGREGATION = {
    0: StatsAggregation.MEAN,
    1: StatsAggregation.MOST_RECENT,
    2: StatsAggregation.SUM,
    3: StatsAggregation.MEAN,
}


class TrainerController:
    """Runs the env manager and the trainers until every behavior reaches ``max_steps``."""

    #: Stepping in this thread: act after the step's update (see the module docstring).
    #: False gives the order of the overlapped paths (subprocess workers, Ray workers) and
    #: of self-play, which act before it; tests compare those paths with this one so.
    act_after_update = True

    def __init__(
        self,
        env: EnvManager,
        trainers: Mapping[str, Trainer],
        stats: Mapping[str, StatsReporter],
        run_dir: str,
        status: TrainingStatus,
        training: bool = True,
        on_checkpoint: Optional[CheckpointHook] = None,
        evaluation_env: Optional[EnvManager] = None,
        on_best: Optional[CheckpointHook] = None,
        curriculum: Optional[EnvironmentParameterManager] = None,
    ) -> None:
        """``evaluation_env``: where behaviors with ``evaluation:`` are evaluated (training
        only; the caller builds and closes it); ``on_best``: called with the trainer and the
        prefix of ``checkpoint-best`` after a new best evaluation (the best model's export),
        as ``on_checkpoint`` after each checkpoint. ``curriculum``: the environment
        parameters, whose values the envs were built with (`_advance_curriculum`)."""
        self.env = env
        self.training = training
        self.run_dir = run_dir
        self.status = status
        self.layout = RunLayout(run_dir)
        self.status_path = self.layout.training_status
        self.on_checkpoint = on_checkpoint
        self.on_best = on_best
        self.evaluator = Evaluator(evaluation_env) if training and evaluation_env is not None else None
        self.curriculum = curriculum
        self._env_reset_due = False  # a lesson with require_reset changed: reset after this step
        if curriculum is not None and training:
            status.curriculum = curriculum.status  # saved (and so resumed) with every status
        self.timers = Timers()
        self.behaviors: Dict[str, BehaviorState] = {}
        ids = behavior_ids(env.behavior_specs)
        for name, trainer in trainers.items():
            s = trainer.settings
            state = BehaviorState(
                trainer,
                AgentProcessor(
                    trainer.spec, s.time_horizon, record=training, reward_scale=trainer.step_reward_scale,
                    rollout_cuts=s.rollout_cuts,
                ),
                stats[name],
                self.layout.behavior_dir(name),
                # A `Policy` with gSDE keeps noise per agent (an ONNX model draws its own).
                recurrent=trainer.actor.use_recurrent or getattr(trainer.actor, "state_dependent", False),
                warn_group_reward=training and s.trainer_type in SINGLE_AGENT_TRAINERS,
                ids=tuple(ids.get(name, (name,))),
            )
            state.next_summary = (trainer.step // s.summary_freq + 1) * s.summary_freq
            state.next_checkpoint = (trainer.step // s.checkpoint_interval + 1) * s.checkpoint_interval
            if training and s.updates_in_thread:
                state.updater = BackgroundUpdater(trainer)
            if training and s.evaluation is not None:
                if self.evaluator is None:
                    raise ValueError(f"behaviors.{name}.evaluation: the controller needs an evaluation_env")
                interval = s.evaluation.interval
                state.next_evaluation = (trainer.step // interval + 1) * interval
                best = status.get_best_checkpoint(name)
                state.best_reward = best.reward if best is not None else None
            self.behaviors[name] = state
            if training:  # saved with every status: trainer-export rebuilds the actor without an env
                status.set_behavior_spec(name, trainer.spec)
        # Self-play (`trainers.loop.self_play`) while training; --inference plays every team
        # with the policy.
        self._plain_groups: Dict[str, ActingGroup] = {}
        self.self_play = self._make_self_play(status) if training else None
        # Workers that act themselves (Ray rollout workers, `trainers.loop.remote`) build
        # their copies of the actors now; `_add_remote_actions` records what they did.
        self.remote = isinstance(env, RemoteActingManager)
        if isinstance(env, RemoteActingManager):
            env.attach(
                {n: RemoteBehavior(b.trainer.actor, b.trainer.spec, b.trainer.settings, b.ids)
                 for n, b in self.behaviors.items()},
                deterministic=not training,
                version=lambda: len(self.timers.update_durations),  # the acting weights change with each update
            )
        # Out of lockstep only where runs are not reproducible anyway (see the module docstring).
        self.lockstep = self.remote or not (
            training and env.num_workers > 1 and any(b.updater is not None for b in self.behaviors.values())
        )
        self._stop_signal: Optional[int] = None
        self._start = time.perf_counter()
        # Seconds of earlier sessions of this run (resume), so elapsed time adds up.
        self._elapsed_before = max((status.get_elapsed_seconds(n) for n in self.behaviors), default=0.0)

    # ----------------------------------------------------------------- loop

    def _all_done(self) -> bool:
        return all(b.trainer.is_training_done for b in self.behaviors.values())

    def _request_stop(self, signum: int, frame: object) -> None:
        if self._stop_signal is not None:
            # A second Ctrl-C: the user will not wait for the save (nothing else can end an
            # env that hangs in this thread); checkpoints already on disk are kept.
            raise KeyboardInterrupt
        self._stop_signal = signum

    def run(self) -> None:
        """Trains until done or interrupted; always saves what it has before returning."""
        previous = {
            s: signal.signal(s, self._request_stop) for s in (signal.SIGINT, signal.SIGTERM)
        }
        # Waits for env workers end within a fraction of a second of a stop signal.
        self.env.set_stop_check(lambda: self._stop_signal is not None)
        start = time.perf_counter()
        self._sync_acting_weights()
        if self.training:  # a checkpoint adopted by --resume gets the exports it lacks
            for name in self.behaviors:
                kept = self.status.get_checkpoints(name)
                if kept:
                    self._export_if_missing(name, kept[-1])
        try:
            t = time.perf_counter()
            steps = self.env.reset()
            self.timers.env += time.perf_counter() - t
            self._record_env_stats(steps)
            stepped = False
            # Stepping in this thread, the actions are chosen after the step's update (see
            # the module docstring); not with self-play, where a team change in
            # `_after_step` regroups the agents the turns were built for.
            fresh = (self.act_after_update and not self.env.steps_in_background and not self.remote
                     and self.self_play is None)
            while not self._all_done() and self._stop_signal is None:
                actions, acted = self._act(steps, infer=False) if fresh else self._act(steps)
                if not self.env.steps_in_background:  # it steps in this thread: no overlap
                    self._record(steps, acted)
                    self._after_step()
                    if fresh:
                        actions = self._infer(acted)
                        self._record_actions(acted)
                    t = time.perf_counter()
                    steps = self.env.step(actions)
                else:
                    t = time.perf_counter()
                    if self.lockstep:
                        self.env.step_async(actions)
                    else:
                        self.env.step_some({s.worker_id: actions[s.worker_id] for s in steps})
                    self.timers.env += time.perf_counter() - t
                    # While the workers step: the bookkeeping of the steps just acted on,
                    # then updates, summaries and checkpoints (see the module docstring).
                    self._record(steps, acted)
                    self._after_step()
                    t = time.perf_counter()
                    steps = self.env.wait_all() if self.lockstep else self.env.wait_some()
                    if self.remote:  # the actions the workers took on the steps just recorded
                        self.timers.env += time.perf_counter() - t
                        self._add_remote_actions(acted, steps)
                        t = time.perf_counter()
                self.timers.env += time.perf_counter() - t
                self.timers.env_steps += 1
                self._record_env_stats(steps)
                if self._env_reset_due:
                    steps = self._reset_envs()
                stepped = True
            if stepped and self.training and self._stop_signal is None:
                self._learn_from_last_step(steps)
        except EnvWorkerError:
            self._finish(start)  # save what was learned, then report the worker's failure
            raise
        except WorkerLostError as exc:
            self._finish(start)  # the weights of the last completed update
            raise WorkerLostError(f"{exc}; checkpoint saved in {self.run_dir} (continue with --resume)") from None
        except EnvInterrupted:
            pass  # a stop signal ended a wait for the workers: save below, as for any stop
        except BaseException:
            self._wait_for_updates()  # no update thread outlives the run
            raise
        finally:
            self.env.set_stop_check(None)
            for s, handler in previous.items():
                signal.signal(s, handler)
        self._finish(start)
        if self._stop_signal is not None:
            print(f"[INFO] Interrupted by signal {self._stop_signal}; checkpoint saved in {self.run_dir}", flush=True)

    @property
    def exit_code(self) -> int:
        """0 for a run that finished; ``128 + signal`` (130 for Ctrl-C, 143 for SIGTERM) for
        one stopped by a signal, as a shell reports it, so scripts can tell them apart."""
        return 128 + int(self._stop_signal) if self._stop_signal is not None else 0

    def _learn_from_last_step(self, steps: List[EnvStep]) -> None:
        """The outcome of the last actions (their rewards, ended episodes) completes the
        trajectories it closes, and a buffer that fills with them is learned from, as in
        ML-Agents, which counts a step once its outcome is processed and updates while
        ``step <= max_steps``: a ``max_steps`` that is a multiple of ``buffer_size`` gets
        its last update. No action is taken for these decisions."""
        acted = []
        for name, b in self.behaviors.items():
            for group in self._groups(name, b):
                parts = [(env_step, bid) for env_step in steps for bid in group.ids]
                acted.append(Turn(name, b, parts, [s.steps[bid][0] for s, bid in parts], [], 0, group=group))
        self._record(steps, acted)
        self._after_step()

    def _record_env_stats(self, steps: List[EnvStep]) -> None:
        """Stats the environment recorded (Unity's StatsRecorder) go to every behavior's
        summaries, as in ML-Agents."""
        for env_step in steps:
            for key, values in env_step.env_stats.items():
                for value, aggregation in values:
                    kind = _ENV_STAT_AGGREGATION.get(int(aggregation), StatsAggregation.MEAN)
                    for b in self.behaviors.values():
                        try:
                            b.stats.add_stat(key, value, kind)
                        except ValueError:  # the game changed a stat's aggregation: keep the first
                            pass

    def _act(self, steps: List[EnvStep], infer: bool = True) -> Tuple[List[Dict[str, ActionTuple]], List[Turn]]:
        """Actions for the workers in ``steps`` (every worker in lockstep), indexed by
        worker: one inference call per behavior for all their agents. Nothing else that
        can wait for `_record` is done here: it runs while the workers step. Without
        ``infer`` only the turns (their inputs) are built; `_infer` acts on them later."""
        actions: List[Dict[str, ActionTuple]] = [dict() for _ in range(self.env.num_workers)]
        acted: List[Turn] = []
        for name, b in self.behaviors.items():
            # One call per acting group: every id of the behavior, or with self-play the
            # learning team (the trainer's actor) and the other teams (the ghost).
            for group in self._groups(name, b):
                actor = group.actor
                decisions, counts, rows, agents = [], [], [], 0
                parts = [(env_step, bid) for env_step in steps for bid in group.ids]
                for env_step, bid in parts:
                    decision, terminal = env_step.steps[bid]
                    if b.recurrent and len(terminal):  # memories (gSDE noise) restart with the next episode
                        actor.forget_agents([(env_step.worker_id, a) for a in terminal.agent_id.tolist()])
                    n = len(decision)
                    decisions.append(decision)
                    counts.append(n)
                    rows.append(slice(agents, agents + n))
                    agents += n
                turn = Turn(name, b, parts, decisions, rows, agents, group=group)
                acted.append(turn)
                if agents == 0:
                    continue
                t = time.perf_counter()
                spec = b.trainer.spec
                branches = spec.action_spec.discrete_branches
                # One copy per step: the env may reuse its observation buffers. (One worker: a
                # copy, not a concatenation of one array, which costs several times more.)
                # ML-Agents' True = unavailable -> 1 = allowed; the all-allowed arrays are shared.
                mask_parts = [allowed_mask(d.action_mask, n, branches, shared=True) for d, n in zip(decisions, counts)]
                if len(decisions) == 1:
                    turn.obs = [o.copy() for o in decisions[0].obs]
                    turn.masks = mask_parts[0]
                else:
                    turn.obs = [
                        np.concatenate([d.obs[i] for d in decisions]) for i in range(len(spec.observation_specs))
                    ]
                    # With discrete branches every part has a mask.
                    turn.masks = np.concatenate(cast(List[np.ndarray], mask_parts)) if branches else None
                self.timers.inference += time.perf_counter() - t
                if self.remote or not infer:  # the workers act (`_add_remote_actions`), or `_infer`
                    continue
                self._infer_turn(turn, actions)
        return actions, acted

    def _infer_turn(self, turn: Turn, actions: List[Dict[str, ActionTuple]]) -> None:
        """One inference call for ``turn``'s agents: sets ``turn.info`` and their actions."""
        t = time.perf_counter()
        assert turn.group is not None and turn.obs is not None  # set by `_act`
        keys = (
            [(s.worker_id, a) for (s, _), d in zip(turn.parts, turn.decisions) for a in d.agent_id.tolist()]
            if turn.behavior.recurrent
            else None
        )
        info = turn.info = turn.group.actor.act(
            turn.obs, turn.masks, deterministic=not self.training, agent_keys=keys
        )
        for (env_step, bid), part in zip(turn.parts, turn.rows):
            actions[env_step.worker_id][bid] = ActionTuple.trusted(info.env_continuous[part], info.discrete[part])
        self.timers.inference += time.perf_counter() - t

    def _infer(self, acted: List[Turn]) -> List[Dict[str, ActionTuple]]:
        """The actions for turns `_act` built without inference (after the step's update)."""
        actions: List[Dict[str, ActionTuple]] = [dict() for _ in range(self.env.num_workers)]
        for turn in acted:
            if turn.agents:
                self._infer_turn(turn, actions)
        return actions

    def _record(self, steps: List[EnvStep], acted: List[Turn]) -> None:
        """The bookkeeping of ``steps`` and of the actions `_act` chose for them: terminal
        steps close trajectories, decision steps credit rewards, finished trajectories go
        to their trainer, and the actions join the agents' trajectories."""
        for turn in acted:
            b, name = turn.behavior, turn.name
            t = time.perf_counter()
            processor = turn.processor
            learning = turn.group is None or turn.group.learning
            previous: Optional[EnvStep] = None
            for env_step, bid in turn.parts:
                decision, terminal = env_step.steps[bid]
                # count_nonzero: a fifth of ndarray.any()'s cost on a few agents, every step
                if b.warn_group_reward and (np.count_nonzero(terminal.group_reward)
                                            or np.count_nonzero(decision.group_reward)):
                    self._warn_group_reward(name, b)
                trajectories, episodes = processor.add_terminal(env_step.worker_id, terminal)
                # A worker's further behavior ids (teams) are the same env step (rollout_cuts).
                trajectories += processor.add_decision(env_step.worker_id, decision, env_step is not previous)
                previous = env_step
                for traj in trajectories:
                    self._process_trajectory(b, traj)
                    if self.self_play is not None and name in self.self_play:
                        self.self_play.on_trajectory(name, traj)  # a game's result: ELO
                if episodes:
                    b.trainer.record_episodes(episodes)
                    if self.curriculum is not None and learning:  # lessons count the learning team's
                        self.curriculum.record_episodes(name, [e.reward for e in episodes])
            self._add_turn_actions(turn)
            # Every agent that asked for a decision is a step (remote workers act for theirs).
            if learning:
                b.trainer.step += turn.agents
            elif self.self_play is not None:
                self.self_play.add_ghost_steps(name, turn.agents)
            self.timers.trajectories += time.perf_counter() - t

    @staticmethod
    def _add_turn_actions(turn: Turn) -> None:
        """The actions ``turn.info`` holds join its agents' trajectories (none without)."""
        info, obs, masks = turn.info, turn.obs, turn.masks
        if info is None:
            return
        assert obs is not None  # set with info by _act
        for (env_step, _), decision, rows in zip(turn.parts, turn.decisions, turn.rows):
            if rows.stop > rows.start:
                turn.processor.add_actions(
                    env_step.worker_id,
                    decision,
                    [o[rows] for o in obs],
                    info.raw_continuous[rows],
                    info.discrete[rows],
                    masks[rows] if masks is not None else None,
                    info.log_probs[rows],
                    info.memory[rows] if info.memory is not None else None,
                    info.prev_action[rows] if info.prev_action is not None else None,
                )

    def _record_actions(self, acted: List[Turn]) -> None:
        """`_infer`'s actions join the trajectories (what `_record` does for `_act`'s)."""
        t = time.perf_counter()
        for turn in acted:
            self._add_turn_actions(turn)
        self.timers.trajectories += time.perf_counter() - t

    @staticmethod
    def _warn_group_reward(name: str, b: BehaviorState) -> None:
        """Once per behavior, as ML-Agents' ``RLTrainer._warn_if_group_reward``: PPO and SAC
        learn from each agent's own reward; a group reward (`DecisionSteps.group_reward`)
        reaches no buffer."""
        b.warn_group_reward = False
        print(
            f"[WARNING] {name}: an agent received a group reward, but trainer_type {b.trainer.settings.trainer_type} "
            f"is not a multi-agent trainer and ignores it; use trainer_type: poca for best results.",
            flush=True,
        )

    def _add_remote_actions(self, acted: List[Turn], steps: List[EnvStep]) -> None:
        """Workers that act themselves (`trainers.loop.remote`): the actions they took on
        the steps of ``acted``, returned with ``steps``, join the agents' trajectories as
        `_record` adds the actions `_act` chose. A worker that was replaced (its
        `ActedEnvStep.restarted`) took none that count: its agents are dropped, unfinished
        trajectories unsent, as `_reset_envs` drops every agent."""
        t = time.perf_counter()
        answered = {s.worker_id: s for s in steps if isinstance(s, ActedEnvStep)}
        for worker, s in answered.items():
            if s.restarted:
                for b in self.behaviors.values():
                    b.processor.drop_worker(worker)
        for turn in acted:
            obs, masks = turn.obs, turn.masks
            if obs is None:
                continue
            processor = turn.group.processor if turn.group is not None else turn.behavior.processor
            for (env_step, bid), decision, rows in zip(turn.parts, turn.decisions, turn.rows):
                new = answered.get(env_step.worker_id)
                if rows.stop == rows.start or new is None or new.restarted:
                    continue
                info = new.acted[bid]  # rows in the order of ``decision``
                processor.add_actions(
                    env_step.worker_id, decision, [o[rows] for o in obs], info.raw_continuous, info.discrete,
                    masks[rows] if masks is not None else None, info.log_probs, info.memory, info.prev_action,
                )
        self.timers.trajectories += time.perf_counter() - t

    def _after_step(self) -> None:
        if self.curriculum is not None:
            self._advance_curriculum()
        for name, b in self.behaviors.items():
            trainer = b.trainer
            self._collect_update(b)
            if self.training and trainer.ready_to_update and trainer.may_update:
                self._update(b)
            if self.self_play is not None and name in self.self_play:
                self.self_play.advance(name, trainer.step)  # team change, snapshot, swap
            if trainer.step >= b.next_summary:
                b.stats.set_stat("Is Training", 1.0 if self.training else 0.0)
                b.stats.write_stats(trainer.step)
                b.last_summary = trainer.step
                b.next_summary = (trainer.step // trainer.settings.summary_freq + 1) * trainer.settings.summary_freq
            if self.training and trainer.step >= b.next_checkpoint:
                self._collect_update(b, wait=True)  # never a checkpoint mid-update
                self.save_checkpoint(name)
                interval = trainer.settings.checkpoint_interval
                b.next_checkpoint = (trainer.step // interval + 1) * interval
            evaluation = trainer.settings.evaluation
            if b.next_evaluation is not None and evaluation is not None and trainer.step >= b.next_evaluation:
                if self._stop_signal is None:
                    self._collect_update(b, wait=True)  # never an evaluation mid-update
                    self.evaluate(name)
                b.next_evaluation = (trainer.step // evaluation.interval + 1) * evaluation.interval

    # ------------------------------------------------------------ evaluation

    def evaluate(self, name: str) -> Optional[EvaluationResult]:
        """Plays the behavior's evaluation episodes on the evaluation env (every behavior
        acting deterministically), writes ``Environment/Evaluation Reward`` and
        ``Environment/Evaluation Episode Length`` at the current step and, for the best mean
        return so far, saves ``checkpoint-best``, the status and the best model (`on_best`).
        None when a stop request cut it short (nothing written)."""
        b = self.behaviors[name]
        trainer = b.trainer
        evaluation = trainer.settings.evaluation
        if self.evaluator is None or evaluation is None:
            raise ValueError(f"{name}: no evaluation (evaluation settings and an evaluation env are needed)")
        actors = {n: EvaluatedBehavior(s.trainer.actor, s.trainer.spec) for n, s in self.behaviors.items()}
        t = time.perf_counter()
        try:
            result = self.evaluator.run(name, evaluation.episodes, actors, lambda: self._stop_signal is not None)
        finally:
            self.timers.evaluation += time.perf_counter() - t
        if result is None:
            return None
        if not result.rewards:  # no episode ended within the evaluation's step budget
            print(
                f"[WARNING] {name}. Step: {trainer.step}. The evaluation ended no episode in "
                f"{evaluation.episodes} x {MAX_STEPS_PER_EPISODE} steps; nothing written.",
                flush=True,
            )
            return result
        b.stats.write_now({EVALUATION_REWARD_TAG: result.rewards, EVALUATION_LENGTH_TAG: result.lengths}, trainer.step)
        reward = result.mean_reward
        if math.isfinite(reward) and (b.best_reward is None or reward > b.best_reward):
            self._save_best(name, reward)
        return result

    def _save_best(self, name: str, reward: float) -> None:
        """``checkpoint-best`` (beside the numbered ones, never pruned or resumed from), then
        the status recording it (atomically), then the best model (`on_best`), in the order
        of a checkpoint's files."""
        t = time.perf_counter()
        try:
            self._write_best(name, reward)
        finally:
            self.timers.save += time.perf_counter() - t

    def _write_best(self, name: str, reward: float) -> None:
        b = self.behaviors[name]
        trainer = b.trainer
        prefix = self.layout.best_checkpoint(name)
        trainer.save_as(prefix)
        previous = b.best_reward
        entry = CheckpointEntry(trainer.step, run_relative(name, prefix), time.time(), reward)
        self.status.set_best_checkpoint(name, entry)
        self._save_status()
        b.best_reward = reward
        before = "" if previous is None else f" (was {previous:.3f})"
        print(f"[INFO] {name}. Step: {trainer.step}. New best evaluation reward {reward:.3f}{before}.", flush=True)
        if self.on_best is not None:
            self.on_best(trainer, prefix)

    # ----------------------------------------------------------- checkpoints

    def save_checkpoint(self, name: str) -> CheckpointEntry:
        """Checkpoint (+ export hook) for one behavior; prunes beyond keep_checkpoints."""
        t = time.perf_counter()
        try:
            return self._save_checkpoint(name)
        finally:
            self.timers.save += time.perf_counter() - t

    def _save_checkpoint(self, name: str) -> CheckpointEntry:
        b = self.behaviors[name]
        trainer = b.trainer
        prefix = trainer.save(b.checkpoint_dir)
        if self.self_play is not None and name in self.self_play:
            self.self_play.save(name, prefix, self.status)  # beside the checkpoint; its ELO in the status
        # The status follows the checkpoint at once (atomically: a temporary file, then a
        # rename), before the slow exports; older checkpoints go only once the status no
        # longer lists them. A run killed anywhere keeps a resumable checkpoint (and
        # --resume also finds a complete checkpoint the status does not list yet).
        reward = b.stats.get_stats_summaries("Environment/Cumulative Reward")
        entry = CheckpointEntry(
            trainer.step, run_relative(name, prefix), time.time(), reward.mean if reward.num else None
        )
        dropped = self.status.add_checkpoint(name, entry, trainer.settings.keep_checkpoints)
        self.status.set_step(name, trainer.step)
        self.status.set_episodes(name, trainer.episodes)
        self.status.set_elapsed_seconds(name, self._elapsed_before + time.perf_counter() - self._start)
        self._save_status()
        for old in dropped:
            # Inside this run's folder whatever the status says: a status copied or moved
            # with its run names paths of the run it came from.
            trainer.delete_checkpoint(self.layout.in_run(name, old.file_path))
            for ext in ("pb", "onnx"):
                exported = self._exported_path(name, old.steps, ext)
                if os.path.exists(exported):
                    os.remove(exported)
        if self.on_checkpoint is not None:
            self.on_checkpoint(trainer, prefix)
        return entry

    def _export_if_missing(self, name: str, entry: CheckpointEntry) -> None:
        """Exports a kept checkpoint whose models were never written (a run killed between
        the checkpoint and its export, then resumed from it)."""
        b = self.behaviors[name]
        if self.on_checkpoint is None or b.trainer.step != entry.steps:
            return  # only the weights in the session can be exported
        if not os.path.exists(self._exported_path(name, entry.steps, "pb")):
            t = time.perf_counter()
            self.on_checkpoint(b.trainer, self.layout.in_run(name, entry.file_path))
            self.timers.save += time.perf_counter() - t

    def _exported_path(self, name: str, step: int, ext: str) -> str:
        """``<Behavior>-<step>.<ext>`` beside the behavior's checkpoints."""
        return self.layout.exported(name, step, ext)

    def _save_status(self) -> None:
        os.makedirs(os.path.dirname(self.status_path), exist_ok=True)
        self.status.save(self.status_path)

    def _finish(self, start: float) -> None:
        self._wait_for_updates()
        self.timers.total += time.perf_counter() - start
        for name, b in self.behaviors.items():
            if self.training:
                kept = self.status.get_checkpoints(name)
                if kept and kept[-1].steps == b.trainer.step:
                    final = kept[-1]  # just saved at this step
                    self._export_if_missing(name, final)
                else:
                    final = self.save_checkpoint(name)
                self.status.set_final_checkpoint(name, final)
            if b.trainer.step > b.last_summary:
                b.stats.set_stat("Is Training", 1.0 if self.training else 0.0)
                b.stats.write_stats(b.trainer.step)
        if self.training:
            self._save_status()
        os.makedirs(self.layout.run_logs, exist_ok=True)
        with open(self.layout.timers, "w") as f:
            json.dump(self.timers.as_dict(), f, indent=2)

    # ------------------------------------------------- updates (threaded: true hooks)
    # Everything that differs between threaded and synchronous updates is here.

    def _process_trajectory(self, b: BehaviorState, traj: Trajectory) -> None:
        if b.updater is not None:
            b.updater.process(traj)  # queued while an update runs
        else:
            b.trainer.process_trajectory(traj)

    def _update(self, b: BehaviorState) -> None:
        """Synchronous update, or (threaded) start one unless one is running."""
        if b.updater is None:
            t = time.perf_counter()
            b.trainer.update()
            self.timers.update_durations.append(time.perf_counter() - t)
            self.timers.update += self.timers.update_durations[-1]
        elif not b.updater.busy:
            b.updater.start()

    def _collect_update(self, b: BehaviorState, wait: bool = False) -> None:
        """Threaded: a finished update swaps the acting weights (``wait``: wait for it)."""
        if b.updater is None or not b.updater.busy:
            return
        t = time.perf_counter()
        swap_before = b.updater.swap_seconds
        duration = b.updater.poll(wait)
        if wait:
            self.timers.update_wait += time.perf_counter() - t
        if duration is not None:
            self.timers.update_durations.append(duration)
            self.timers.update += duration
            self.timers.swap += b.updater.swap_seconds - swap_before

    def _wait_for_updates(self) -> None:
        for b in self.behaviors.values():
            self._collect_update(b, wait=True)

    def _sync_acting_weights(self) -> None:
        """Threaded policies act with a copy of the actor: fill it (fresh or restored weights)."""
        for b in self.behaviors.values():
            b.trainer.actor.sync_acting_weights()

    # ------------------------------------------------ environment parameters (curricula)

    def _advance_curriculum(self) -> None:
        """After each env step (ML-Agents' ``reset_env_if_ready``): the lessons are checked
        (training only), a lesson change sends the new values to every env (and the
        evaluation env) at once, and one with ``require_reset`` has every env reset once the
        step in flight has returned (`_reset_envs`). The lessons go to every behavior's
        summaries."""
        curriculum = self.curriculum
        assert curriculum is not None
        if self.training:
            steps = {name: b.trainer.step for name, b in self.behaviors.items()}
            max_steps = {name: b.trainer.settings.max_steps for name, b in self.behaviors.items()}
            updated, must_reset = curriculum.update(steps, max_steps)
            if updated:
                # Every parameter's value, as ML-Agents sends them; with a reset, together with
                # it (`_reset_envs`), so the step in flight does not get them first.
                if must_reset:
                    self._env_reset_due = True
                else:
                    self.env.set_env_parameters(curriculum.values())
                if self.evaluator is not None:
                    self.evaluator.env.set_env_parameters(curriculum.values())
        for tag, lesson in curriculum.lesson_stats():
            for b in self.behaviors.values():
                b.stats.set_stat(tag, lesson)

    def _reset_envs(self) -> List[EnvStep]:
        """Every env starts new episodes (a lesson with ``require_reset`` changed). The
        agents' unfinished trajectories and episodes are dropped, unsent, and recurrent
        memories forgotten, as ML-Agents' ``AgentProcessor.end_episode`` drops them at its
        reset; the step that was in flight is dropped with them."""
        self._env_reset_due = False
        for name, b in self.behaviors.items():
            if self.self_play is not None and name in self.self_play:
                self.self_play.ghosts[name].restart_agents()  # the ghost team's agents too
                continue
            if b.recurrent and b.processor.agent_keys:
                b.trainer.actor.forget_agents(b.processor.agent_keys)
            b.processor.end_episodes()
        t = time.perf_counter()
        if self.curriculum is not None:
            self.env.set_env_parameters(self.curriculum.values())
        steps = self.env.reset()
        self.timers.env += time.perf_counter() - t
        self._record_env_stats(steps)
        return steps

    # ------------------------------------------------------------ self-play hooks

    def _groups(self, name: str, b: BehaviorState) -> List[ActingGroup]:
        """How the behavior's ids act this step (`trainers.loop.self_play.ActingGroup`)."""
        if self.self_play is not None and name in self.self_play:
            return self.self_play.groups(name)
        group = self._plain_groups.get(name)
        if group is None or group.actor is not b.trainer.actor:
            group = self._plain_groups[name] = ActingGroup(b.ids, b.trainer.actor, b.processor, True)
        return [group]

    def _make_self_play(self, status: TrainingStatus) -> Optional[SelfPlay]:
        """Self-play for the behaviors with ``self_play``; a resumed behavior's state is
        restored from beside the checkpoint it resumed from."""
        behaviors, prefixes = [], {}
        for name, b in self.behaviors.items():
            trainer, settings = b.trainer, b.trainer.settings
            if settings.self_play is None:
                continue
            ghost = getattr(trainer, "ghost", None)
            if ghost is None:
                raise ValueError(f"behaviors.{name}.self_play: its trainer has no ghost actor")
            behaviors.append(SelfPlayBehavior(
                name, settings.self_play, b.ids, trainer.actor, ghost, b.processor, trainer.spec,
                settings.time_horizon, b.stats, settings.max_steps,
            ))
            if trainer.step > 0:
                prefixes[name] = trainer.checkpoint_prefix(b.checkpoint_dir, trainer.step)
        return SelfPlay(behaviors, self.env.seed or 0, status, prefixes) if behaviors else None
