"""Per-agent trajectory assembly from batched ``DecisionSteps`` / ``TerminalSteps``.

An agent's step is *pending* from the moment it receives an action until its next
decision or terminal step brings the reward for that action. A trajectory is emitted when
the agent's episode ends (``done``; ``interrupted`` when a time limit ended it) or when it
reaches ``time_horizon`` steps (then the agent's current observation is the bootstrap
observation and the agent goes on).

**Rollout cuts** (``rollout_cuts=True``, Stable-Baselines3's rollouts): instead of
``time_horizon`` steps after the trajectory's start, every agent of a worker that decides
at the worker's ``time_horizon``-th, ``2 x time_horizon``-th... env step is cut there. A
worker's env steps are counted by `add_decision` calls (``new_step``), from 0 at its first
one (the reset, which credits nothing). A cut trajectory holds the agent's rows since the
later of the rollout's start and its episode's start, so where every agent acts at every
step each rollout of a worker holds agents x ``time_horizon`` rows. Episode ends still end
a trajectory and do not restart the count; `end_episodes` and `drop_worker`, which restart
agents afresh, do. The cap of ``time_horizon`` rows per
trajectory holds either way.

**Groups** (ML-Agents' multi-agent groups, MA-POCA): an agent whose steps carry a
``group_id`` other than 0 records, for each of its steps, the status of its groupmates at
that env step (each mate's observation and action at its own last decision, its reward
now, whether its episode ended now; ML-Agents' ``GroupmateStatus``), the group's reward,
and at the trajectory's end the mates' current observations (``next_group_obs``) and
whether every mate's episode had ended (``all_group_dones_reached``). A mate's status is
its latest one, kept until its own episode ends (ML-Agents' ``_group_status``), so an
agent that finished early drops out of the others' statuses while its own last
trajectory bootstraps from the centralised critic over the mates still playing.

Unlike ML-Agents, whose terminal agents see the statuses that their mates in the same
env step's ``DecisionSteps`` had one step before, every status of an env step is gathered
before any of its trajectories is built: the trajectory of a grouped agent whose episode
ends in `add_terminal` is therefore returned by the `add_decision` call of the same
worker that follows (the controller calls the two in that order). Agents without a group
take none of these paths: their trajectories are exactly those of before (PPO, SAC).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Hashable, List, NamedTuple, Optional, Protocol, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorSpec, DecisionSteps, TerminalSteps

AgentKey = Tuple[int, int]  # (worker id, agent id)
GroupKey = Tuple[int, int]  # (worker id, group id); group ids are per worker, as agent ids


@dataclass
class Trajectory:
    """A run of consecutive steps of one agent.

    Attributes:
        agent: (worker id, agent id).
        obs: per observation spec ``[T, *shape]`` float32.
        next_obs: per spec ``[1, *shape]``: the observation after the last step.
        continuous_action: ``[T, c]`` raw samples; discrete_action: ``[T, b]`` int32.
        action_mask: ``[T, sum(branches)]`` float32 (1 = allowed) or None.
        log_probs: ``[T, c + b]`` (per continuous dimension and discrete branch); rewards:
            ``[T]`` environment rewards.
        done: the episode ended after the last step.
        interrupted: it ended by a time limit (bootstrap anyway).
        memory: recurrent policies: ``[T, memory_size]`` the memory each step acted from.
        prev_action: recurrent + discrete: ``[T, branches]`` the previous action fed.
        group: the agent's group data (`GroupData`), None for an agent in no group.
        scaled_rewards: ``[T]`` the rewards as `StepRewardScale` scaled them at the env
            step (``hyperparameters.normalize_reward``), None without one.
    """

    agent: AgentKey
    obs: List[np.ndarray]
    next_obs: List[np.ndarray]
    continuous_action: np.ndarray
    discrete_action: np.ndarray
    action_mask: Optional[np.ndarray]
    log_probs: np.ndarray
    rewards: np.ndarray
    done: bool
    interrupted: bool
    memory: Optional[np.ndarray] = None
    prev_action: Optional[np.ndarray] = None
    group: Optional["GroupData"] = None
    scaled_rewards: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def bootstrap(self) -> bool:
        """Value targets bootstrap from ``next_obs`` unless the state was truly terminal."""
        return not self.done or self.interrupted


@dataclass
class GroupData:
    """What a trajectory of ``T`` steps of a grouped agent knows of its groupmates.

    ``G`` is the most mates any of its steps saw (a mate absent at a step is a zero row
    with ``present`` 0); ``G_next`` the mates whose current observation was known at the
    end.

    Attributes:
        group_id: the agent's group id (> 0) on its worker.
        obs: per observation spec ``[T, G, *shape]`` float32: each mate's observation at
            its own last decision.
        continuous_action: ``[T, G, c]`` raw; discrete_action: ``[T, G, b]`` int32: the
            action each mate took there.
        present: ``[T, G]`` float32, 1 where the mate is there.
        group_reward: ``[T]`` the group's reward credited with each step.
        mate_rewards: ``[T]`` the sum of the mates' own rewards at each step (ML-Agents'
            POCA adds them to the extrinsic reward).
        next_obs: per spec ``[G_next, *shape]``: the mates' observations after the last step.
        all_done: every mate's episode had ended at the last step (True without mates):
            ML-Agents' ``all_group_dones_reached``.
    """

    group_id: int
    obs: List[np.ndarray]
    continuous_action: np.ndarray
    discrete_action: np.ndarray
    present: np.ndarray
    group_reward: np.ndarray
    mate_rewards: np.ndarray
    next_obs: List[np.ndarray]
    all_done: bool

    @property
    def num_mates(self) -> int:
        """``G``: the mate slots of each step."""
        return int(self.present.shape[1])


class StepRewardScale(Protocol):
    """Scales rewards at the env step they arrive (`trainers.ppo.reward_scale.RewardScale`):
    Stable-Baselines3's ``VecNormalize`` scales each vectorised step's rewards by the
    running statistics of the discounted returns up to and including that step, so the
    scaling happens here, in step order, not when a trajectory is processed later."""

    gamma: float

    def scale_step(self, rewards: np.ndarray, returns: np.ndarray) -> np.ndarray:
        """``rewards`` ``[n]`` of one env step's credited agents and their discounted
        returns ``[n]`` (this reward included) -> the scaled rewards ``[n]`` float32."""
        ...


class _MateStatus(NamedTuple):
    """A groupmate at one env step (ML-Agents' ``AgentStatus``)."""

    obs: Sequence[np.ndarray]
    cont: Optional[np.ndarray]
    disc: Optional[np.ndarray]
    reward: float
    done: bool


class _AgentRecord:
    __slots__ = (
        "obs", "cont", "disc", "mask", "logp", "rewards", "memory", "prev", "pending", "episode_reward", "episode_length",
        "group_id", "mates", "group_reward", "scaled", "discounted_return",
    )

    def __init__(self) -> None:
        self.obs: List[Sequence[np.ndarray]] = []
        self.cont: List[np.ndarray] = []
        self.disc: List[np.ndarray] = []
        self.mask: List[np.ndarray] = []
        self.logp: List[float] = []
        self.rewards: List[float] = []
        self.memory: List[np.ndarray] = []
        self.prev: List[np.ndarray] = []
        self.pending = False
        self.episode_reward = 0.0
        self.episode_length = 0
        self.group_id = 0  # the group of the steps below (0: none; nothing else is kept)
        self.mates: List[List[_MateStatus]] = []  # per step: the other members' statuses
        self.group_reward: List[float] = []
        self.scaled: List[float] = []  # with a StepRewardScale: each reward as scaled
        self.discounted_return = 0.0  # with a StepRewardScale: this episode's, so far


@dataclass(frozen=True)
class EpisodeEnd:
    """A finished episode: its return and length (for the Environment/* stats)."""

    agent: AgentKey
    reward: float
    length: int


class AgentProcessor:
    """Builds trajectories of one behavior for every agent of every worker."""

    def __init__(
        self, spec: BehaviorSpec, time_horizon: int, record: bool = True,
        reward_scale: Optional[StepRewardScale] = None, rollout_cuts: bool = False,
    ) -> None:
        """``record=False`` (inference): only episode returns and lengths are tracked.
        ``reward_scale``: scales each env step's rewards as they arrive (recording only);
        the trajectories then carry ``scaled_rewards``. ``rollout_cuts``: cut every agent
        of a worker at each ``time_horizon``-th env step of the worker (the module's
        docstring)."""
        self.spec = spec
        self.time_horizon = time_horizon
        self.rollout_cuts = rollout_cuts and record
        # rollout_cuts: worker -> its env steps so far (the first, its reset, is 0).
        self._worker_steps: Dict[int, int] = {}
        self.record = record
        self.reward_scale = reward_scale if record else None
        self._agents: Dict[AgentKey, _AgentRecord] = {}
        # Groups (recording only): each group's members' latest statuses and current
        # observations; grouped agents whose episode ended in `add_terminal`, waiting for
        # the same env step's `add_decision` (per worker); the grouped agents that leave
        # their group at the end of the worker's step.
        self._status: Dict[GroupKey, Dict[AgentKey, _MateStatus]] = {}
        self._current_obs: Dict[GroupKey, Dict[AgentKey, List[np.ndarray]]] = {}
        self._held: Dict[int, List[Tuple[AgentKey, _AgentRecord, List[np.ndarray], bool]]] = {}
        self._leaving: Dict[int, List[Tuple[GroupKey, AgentKey]]] = {}

    def _scale_step(self, worker: int, agent_ids: Sequence[int], rewards: Sequence[float]) -> Optional[Dict[int, float]]:
        """With a `StepRewardScale`: row -> scaled reward for each of the step's agents that
        is credited now (pending), every credited return merged in one call; each agent's
        discounted return advances here (a record dropped at its episode's end takes it
        along). None without one."""
        if self.reward_scale is None:
            return None
        rows: List[int] = []
        credited: List[_AgentRecord] = []
        for j, agent_id in enumerate(agent_ids):
            rec = self._agents.get((worker, agent_id))
            if rec is not None and rec.pending:
                rows.append(j)
                credited.append(rec)
        if not rows:
            return {}
        r = np.asarray([rewards[j] for j in rows], np.float64)
        returns = np.asarray([rec.discounted_return for rec in credited], np.float64) * self.reward_scale.gamma + r
        scaled = self.reward_scale.scale_step(r, returns)
        for rec, ret in zip(credited, returns.tolist()):
            rec.discounted_return = ret
        return dict(zip(rows, scaled.tolist()))

    @staticmethod
    def _status_of(rec: _AgentRecord, reward: float, done: bool) -> _MateStatus:
        """The status a pending agent shows its mates: the step it is being credited for."""
        return _MateStatus(
            rec.obs[-1], rec.cont[-1] if rec.cont else None, rec.disc[-1] if rec.disc else None, reward, done
        )

    def _set_status(self, gkey: GroupKey, key: AgentKey, status: _MateStatus, obs: List[np.ndarray]) -> None:
        self._status.setdefault(gkey, {})[key] = status
        self._current_obs.setdefault(gkey, {})[key] = obs

    def _credit_group(self, key: AgentKey, rec: _AgentRecord, group_id: int, group_reward: float) -> None:
        """Records the group's reward and the mates' statuses with the step just credited."""
        # An agent that joined its group mid-trajectory has fewer entries than steps:
        # `_group_data` gives its earlier steps no mates and no group reward.
        rec.group_id = group_id
        rec.group_reward.append(group_reward)
        statuses = self._status.get((key[0], group_id), {})
        rec.mates.append([s for k, s in statuses.items() if k != key])

    def _group_data(self, key: AgentKey, rec: _AgentRecord, n: int) -> GroupData:
        """The trajectory's `GroupData` from the record's per-step statuses."""
        specs = self.spec.observation_specs
        action = self.spec.action_spec
        mates: List[List[_MateStatus]] = [[] for _ in range(n - len(rec.mates))] + rec.mates
        group_reward = [0.0] * (n - len(rec.group_reward)) + rec.group_reward
        width = max((len(m) for m in mates), default=0)
        obs = [np.zeros((n, width) + tuple(o.shape), np.float32) for o in specs]
        cont = np.zeros((n, width, action.continuous_size), np.float32)
        disc = np.zeros((n, width, action.discrete_size), np.int32)
        present = np.zeros((n, width), np.float32)
        mate_rewards = np.zeros(n, np.float32)
        for t, statuses in enumerate(mates):
            for g, st in enumerate(statuses):
                for i, o in enumerate(st.obs):
                    obs[i][t, g] = o
                if st.cont is not None:
                    cont[t, g] = st.cont
                if st.disc is not None:
                    disc[t, g] = st.disc
                present[t, g] = 1.0
                mate_rewards[t] += st.reward
        current = [o for k, o in self._current_obs.get((key[0], rec.group_id), {}).items() if k != key]
        next_obs = [
            np.stack([m[i] for m in current]).astype(np.float32, copy=False)
            if current else np.zeros((0,) + tuple(spec.shape), np.float32)
            for i, spec in enumerate(specs)
        ]
        return GroupData(
            group_id=rec.group_id,
            obs=obs,
            continuous_action=cont,
            discrete_action=disc,
            present=present,
            group_reward=np.asarray(group_reward, np.float32),
            mate_rewards=mate_rewards,
            next_obs=next_obs,
            all_done=all(s.done for s in mates[-1]) if mates else True,
        )

    def _emit(self, key: AgentKey, rec: _AgentRecord, next_obs: Sequence[np.ndarray], done: bool, interrupted: bool) -> Trajectory:
        n_obs = len(self.spec.observation_specs)
        group = self._group_data(key, rec, len(rec.rewards)) if rec.group_id else None
        traj = Trajectory(
            agent=key,
            obs=[np.stack([o[i] for o in rec.obs]) for i in range(n_obs)],
            next_obs=[np.asarray(o)[None] for o in next_obs],
            continuous_action=np.stack(rec.cont) if rec.cont else np.zeros((len(rec.rewards), 0), np.float32),
            discrete_action=np.stack(rec.disc) if rec.disc else np.zeros((len(rec.rewards), 0), np.int32),
            action_mask=np.stack(rec.mask) if rec.mask else None,
            log_probs=np.asarray(rec.logp, np.float32),
            rewards=np.asarray(rec.rewards, np.float32),
            scaled_rewards=np.asarray(rec.scaled, np.float32) if self.reward_scale is not None else None,
            done=done,
            interrupted=interrupted,
            memory=np.stack(rec.memory) if rec.memory else None,
            prev_action=np.stack(rec.prev) if rec.prev else None,
            group=group,
        )
        rec.obs, rec.cont, rec.disc, rec.mask, rec.logp, rec.rewards = [], [], [], [], [], []
        rec.scaled = []
        rec.memory, rec.prev = [], []
        if rec.group_id:
            rec.mates, rec.group_reward = [], []
        return traj

    def add_terminal(self, worker: int, terminal: TerminalSteps) -> Tuple[List[Trajectory], List[EpisodeEnd]]:
        """Closes the episodes of the agents in ``terminal``.

        A grouped agent's last trajectory comes from the `add_decision` call that follows
        (the module's docstring); its `EpisodeEnd` comes now."""
        trajectories: List[Trajectory] = []
        episodes: List[EpisodeEnd] = []
        if not len(terminal.agent_id):  # most steps: nobody's episode ended
            return trajectories, episodes
        gids = terminal.group_id.tolist() if self.record and terminal.group_id.any() else None
        agent_ids = terminal.agent_id.tolist()
        scaled = self._scale_step(worker, agent_ids, terminal.reward.tolist())
        for j, agent_id in enumerate(agent_ids):
            key = (worker, agent_id)
            if gids is not None and gids[j] > 0:
                self._leaving.setdefault(worker, []).append(((worker, gids[j]), key))
            rec = self._agents.pop(key, None)
            if rec is None or not rec.pending:
                continue
            reward = float(terminal.reward[j])
            rec.episode_reward += reward
            rec.episode_length += 1
            if self.record:
                rec.rewards.append(reward)
                if scaled is not None:
                    rec.scaled.append(scaled[j])
                obs = [o[j] for o in terminal.obs]
                if gids is not None and gids[j] > 0:
                    self._set_status((worker, gids[j]), key, self._status_of(rec, reward, True), obs)
                    # The mates' statuses of this env step are complete after add_decision.
                    self._credit_group(key, rec, gids[j], float(terminal.group_reward[j]))
                    rec.mates.pop()
                    self._held.setdefault(worker, []).append((key, rec, obs, bool(terminal.interrupted[j])))
                else:
                    trajectories.append(self._emit(key, rec, obs, True, bool(terminal.interrupted[j])))
            episodes.append(EpisodeEnd(key, rec.episode_reward, rec.episode_length))
        return trajectories, episodes

    def add_decision(self, worker: int, decision: DecisionSteps, new_step: bool = True) -> List[Trajectory]:
        """Credits rewards to pending steps; cuts trajectories at ``time_horizon``; emits
        the last trajectories of the grouped agents whose episode ended in the
        `add_terminal` call just before (same worker).

        ``new_step``: this call starts a new env step of ``worker`` (with ``rollout_cuts``,
        the step count advances); False for the further behavior ids of the same env step
        (a behavior with several teams, ``Name?team=N``)."""
        trajectories = []
        cut_all = False
        if self.rollout_cuts:
            n = self._worker_steps.get(worker, -1) + int(new_step)
            self._worker_steps[worker] = n
            cut_all = n > 0 and n % self.time_horizon == 0
        rewards = decision.reward.tolist()
        gids = decision.group_id.tolist() if self.record and decision.group_id.any() else None
        if gids is not None:
            # Every grouped agent's status at this env step, before any trajectory uses them.
            for j, agent_id in enumerate(decision.agent_id.tolist()):
                rec = self._agents.get((worker, agent_id))
                if gids[j] > 0 and rec is not None and rec.pending:
                    status = self._status_of(rec, rewards[j], False)
                    self._set_status((worker, gids[j]), (worker, agent_id), status, [o[j] for o in decision.obs])
        held = self._held.pop(worker, None)
        if held:
            for key, rec, obs, interrupted in held:
                statuses = self._status.get((worker, rec.group_id), {})
                rec.mates.append([s for k, s in statuses.items() if k != key])
                trajectories.append(self._emit(key, rec, obs, True, interrupted))
        agent_ids = decision.agent_id.tolist()
        scaled = self._scale_step(worker, agent_ids, rewards) if self.record else None
        for j, agent_id in enumerate(agent_ids):
            key = (worker, agent_id)
            rec = self._agents.get(key)
            if rec is None:
                self._agents[key] = _AgentRecord()
                continue
            if rec.pending:
                rec.episode_reward += rewards[j]
                rec.episode_length += 1
                rec.pending = False
                if not self.record:
                    continue
                rec.rewards.append(rewards[j])
                if scaled is not None:
                    rec.scaled.append(scaled[j])
                if gids is not None and gids[j] > 0:
                    self._credit_group(key, rec, gids[j], float(decision.group_reward[j]))
                if len(rec.rewards) >= self.time_horizon or cut_all:
                    obs = [o[j] for o in decision.obs]
                    trajectories.append(self._emit(key, rec, obs, False, False))
        leaving = self._leaving.pop(worker, None)
        if leaving:  # ML-Agents' _clear_group_status_and_obs, after the whole step
            for gkey, key in leaving:
                statuses = self._status.get(gkey, {})
                statuses.pop(key, None)
                if not statuses:
                    self._status.pop(gkey, None)
                current = self._current_obs.get(gkey, {})
                current.pop(key, None)
                if not current:
                    self._current_obs.pop(gkey, None)
        return trajectories

    def add_actions(
        self,
        worker: int,
        decision: DecisionSteps,
        obs: Sequence[np.ndarray],
        continuous: np.ndarray,
        discrete: np.ndarray,
        masks: Optional[np.ndarray],
        log_probs: np.ndarray,
        memories: Optional[np.ndarray] = None,
        prev_actions: Optional[np.ndarray] = None,
    ) -> None:
        """Records the action each agent of ``decision`` took (rows of the arrays).

        ``memories`` / ``prev_actions`` (recurrent policies): what each agent acted from.

        ``obs`` must be arrays the env will not overwrite (the caller copies once per step).
        Without ``record`` only the fact that each agent acted is kept.
        """
        if not self.record:
            for agent_id in decision.agent_id.tolist():
                self._agents[(worker, agent_id)].pending = True
            return
        has_c = continuous.shape[1] > 0
        has_d = discrete.shape[1] > 0
        for j, agent_id in enumerate(decision.agent_id.tolist()):
            rec = self._agents[(worker, agent_id)]
            rec.obs.append([o[j] for o in obs])
            if has_c:
                rec.cont.append(continuous[j])
            if has_d:
                rec.disc.append(discrete[j])
            if masks is not None:
                rec.mask.append(masks[j])
            rec.logp.append(log_probs[j])
            if memories is not None:
                rec.memory.append(memories[j])
            if prev_actions is not None:
                rec.prev.append(prev_actions[j])
            rec.pending = True

    @property
    def agent_keys(self) -> List[Hashable]:
        return list(self._agents)

    def end_episodes(self) -> None:
        """Forgets every agent (its partial trajectory, unsent; its episode's return): the
        next step starts each one afresh, as after an environment reset (ML-Agents'
        ``AgentProcessor.end_episode``; self-play's team change)."""
        self._agents.clear()
        self._worker_steps.clear()
        for table in (self._status, self._current_obs, self._held, self._leaving):
            table.clear()

    def drop_worker(self, worker: int) -> None:
        """Forgets the agents of one env worker, as `end_episodes` forgets every agent: a
        worker that was replaced (a Ray rollout worker that died, `trainers.loop.ray_rollouts`)
        starts new episodes, and its agents' unfinished trajectories are dropped unsent."""
        for key in [k for k in self._agents if k[0] == worker]:
            del self._agents[key]
        for groups in (self._status, self._current_obs):
            for gkey in [g for g in groups if g[0] == worker]:
                del groups[gkey]
        self._held.pop(worker, None)
        self._leaving.pop(worker, None)
        self._worker_steps.pop(worker, None)
