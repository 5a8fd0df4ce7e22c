"""Per-agent trajectory assembly from batched ``DecisionSteps`` / ``TerminalSteps``.

An agent's step is *pending* from the moment it receives an action until its next
decision or terminal step brings the reward for that action. A trajectory is emitted when
the agent's episode ends (``done``; ``interrupted`` when a time limit ended it) or when it
reaches ``time_horizon`` steps (then the agent's current observation is the bootstrap
observation and the agent goes on).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorSpec, DecisionSteps, TerminalSteps

AgentKey = Tuple[int, int]  # (worker id, agent id)


@dataclass
class Trajectory:
    """A run of consecutive steps of one agent.

    Attributes:
        agent: (worker id, agent id).
        obs: per observation spec ``[T, *shape]`` float32.
        next_obs: per spec ``[1, *shape]``: the observation after the last step.
        continuous_action: ``[T, c]`` raw samples; discrete_action: ``[T, b]`` int32.
        action_mask: ``[T, sum(branches)]`` float32 (1 = allowed) or None.
        log_probs: ``[T]``; rewards: ``[T]`` environment rewards.
        done: the episode ended after the last step.
        interrupted: it ended by a time limit (bootstrap anyway).
        memory: recurrent policies: ``[T, memory_size]`` the memory each step acted from.
        prev_action: recurrent + discrete: ``[T, branches]`` the previous action fed.
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

    def __len__(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def bootstrap(self) -> bool:
        """Value targets bootstrap from ``next_obs`` unless the state was truly terminal."""
        return not self.done or self.interrupted


class _AgentRecord:
    __slots__ = (
        "obs", "cont", "disc", "mask", "logp", "rewards", "memory", "prev", "pending", "episode_reward", "episode_length"
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


@dataclass(frozen=True)
class EpisodeEnd:
    """A finished episode: its return and length (for the Environment/* stats)."""

    agent: AgentKey
    reward: float
    length: int


class AgentProcessor:
    """Builds trajectories of one behavior for every agent of every worker."""

    def __init__(self, spec: BehaviorSpec, time_horizon: int, record: bool = True) -> None:
        """``record=False`` (inference): only episode returns and lengths are tracked."""
        self.spec = spec
        self.time_horizon = time_horizon
        self.record = record
        self._agents: Dict[AgentKey, _AgentRecord] = {}

    def _emit(self, key: AgentKey, rec: _AgentRecord, next_obs: Sequence[np.ndarray], done: bool, interrupted: bool) -> Trajectory:
        n_obs = len(self.spec.observation_specs)
        traj = Trajectory(
            agent=key,
            obs=[np.stack([o[i] for o in rec.obs]) for i in range(n_obs)],
            next_obs=[np.asarray(o)[None] for o in next_obs],
            continuous_action=np.stack(rec.cont) if rec.cont else np.zeros((len(rec.rewards), 0), np.float32),
            discrete_action=np.stack(rec.disc) if rec.disc else np.zeros((len(rec.rewards), 0), np.int32),
            action_mask=np.stack(rec.mask) if rec.mask else None,
            log_probs=np.asarray(rec.logp, np.float32),
            rewards=np.asarray(rec.rewards, np.float32),
            done=done,
            interrupted=interrupted,
            memory=np.stack(rec.memory) if rec.memory else None,
            prev_action=np.stack(rec.prev) if rec.prev else None,
        )
        rec.obs, rec.cont, rec.disc, rec.mask, rec.logp, rec.rewards = [], [], [], [], [], []
        rec.memory, rec.prev = [], []
        return traj

    def add_terminal(self, worker: int, terminal: TerminalSteps) -> Tuple[List[Trajectory], List[EpisodeEnd]]:
        """Closes the episodes of the agents in ``terminal``."""
        trajectories: List[Trajectory] = []
        episodes: List[EpisodeEnd] = []
        if not len(terminal.agent_id):  # most steps: nobody's episode ended
            return trajectories, episodes
        for j, agent_id in enumerate(terminal.agent_id.tolist()):
            key = (worker, agent_id)
            rec = self._agents.pop(key, None)
            if rec is None or not rec.pending:
                continue
            reward = float(terminal.reward[j])
            rec.episode_reward += reward
            rec.episode_length += 1
            if self.record:
                rec.rewards.append(reward)
                obs = [o[j] for o in terminal.obs]
                trajectories.append(self._emit(key, rec, obs, True, bool(terminal.interrupted[j])))
            episodes.append(EpisodeEnd(key, rec.episode_reward, rec.episode_length))
        return trajectories, episodes

    def add_decision(self, worker: int, decision: DecisionSteps) -> List[Trajectory]:
        """Credits rewards to pending steps; cuts trajectories at ``time_horizon``."""
        trajectories = []
        rewards = decision.reward.tolist()
        for j, agent_id in enumerate(decision.agent_id.tolist()):
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
                if len(rec.rewards) >= self.time_horizon:
                    obs = [o[j] for o in decision.obs]
                    trajectories.append(self._emit(key, rec, obs, False, False))
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
