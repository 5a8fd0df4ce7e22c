"""`Rendezvous`: a cooperative group task with a group reward (``builtin:Rendezvous``).

The agents of one behavior form groups of ``group_size`` (default 3; ``num_agents`` agents,
a multiple of it, so ``num_agents / group_size`` groups side by side). Each group has a
track of ``length`` cells (0 .. ``length - 1``) and a meeting point on it; at the start of a
group episode every member stands on a random cell other than the meeting point (meeting
point and starts are drawn from the env's seeded generator, in group then member order).

Every step each member still in the episode moves one cell (discrete branch of 3: 0 = left,
1 = stay, 2 = right; the track's ends clip). A member that stands on the meeting point
after its move **leaves**: its own `TerminalSteps` row (``interrupted`` False, reward 0),
and it asks for no more decisions, while the rest of the group plays on. The group
**succeeds** in the step where its last member arrives: the group reward ``+1`` arrives in
the terminal row of every member arriving in that step (members that left earlier are
gone, as a deactivated Unity agent leaves its ``SimpleMultiAgentGroup``; a trainer with
group credit assignment, such as ML-Agents' POCA, keeps them in the group's episode). A
group that has not succeeded after ``max_steps`` steps **fails**: its remaining members'
terminal rows have group reward 0 and ``interrupted`` False. The step limit is part of the
task, not a cut of it: the observation shows the steps left, so the end is a true terminal
state; marked interrupted, the trainers would bootstrap from the critic's value of a state
it is never trained on (every value target there is itself a bootstrap) and a critic that
starts high stays high (seen with POCA, seeds 2 and 4). Either way the whole group starts a
new episode in the next `DecisionSteps` (new agent ids, same group id).

Rewards: every agent's own ``reward`` is 0 (its own signal says nothing about the group's
success), unless ``shared_reward`` copies the group reward it receives into it (the view of
independent learners with a team reward); ``group_reward`` is 1 on success, else 0. Group
ids are ``1 .. num_agents / group_size`` (0 would mean "no group"), fixed for the env's
life, as a Unity scene's groups are.

Observation (one vector of 5 per agent, all in [-1, 1]): ``[my cell, the meeting point,
meeting point - my cell, members still in the episode / group_size, steps left /
max_steps]``, the first three divided by ``length - 1``.

Why skill matters: `expert_action` walks straight to the meeting point and every group
succeeds within ``length - 1`` steps; uniformly random moves make every member a lazy
random walk, and the whole group must arrive within ``max_steps``
(``tests/envs/test_rendezvous.py`` measures both). Why credit assignment matters: an
agent's arrival earns it nothing itself, and the group reward goes only to the members
that arrive last.
"""
from __future__ import annotations

from typing import List, Mapping, Tuple

import numpy as np

from envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorSpec,
    DecisionSteps,
    ObservationSpec,
    TerminalSteps,
)
from envs.builtin._base import check_int
from envs.exceptions import EnvError

#: The group reward of a group whose members all reached the meeting point.
SUCCESS_REWARD = 1.0
OBS_SIZE = 5


class Rendezvous(BaseEnv):
    """Groups that must all reach their meeting point (see the module docstring)."""

    def __init__(
        self,
        num_agents: int = 12,
        group_size: int = 3,
        length: int = 7,
        max_steps: int = 20,
        behavior_name: str = "Rendezvous",
        seed: int = 0,
        shared_reward: bool = False,
    ) -> None:
        """
        Args:
            num_agents: agents of the behavior, a multiple of ``group_size``.
            group_size: members per group (>= 1).
            length: cells of each group's track (>= 2).
            max_steps: steps after which a group's episode fails (>= 1).
            behavior_name: the behavior's name.
            seed: seeds the env's only generator (meeting points and starts).
            shared_reward: also give each member the group reward it receives as its own
                ``reward`` (what independent learners with a team reward see: the baseline
                that POCA's credit assignment is compared with).
        """
        env = "builtin:Rendezvous"
        self._size = check_int(env, "group_size", group_size, 1)
        n = check_int(env, "num_agents", num_agents, self._size)
        if n % self._size:
            raise EnvError(f"{env}: env_args.num_agents must be a multiple of group_size={self._size}, got {n}")
        self._length = check_int(env, "length", length, 2)
        self._max_steps = check_int(env, "max_steps", max_steps, 1)
        if not isinstance(behavior_name, str) or not behavior_name:
            raise EnvError(f"{env}: env_args.behavior_name must be a non-empty string, got {behavior_name!r}")
        self._name = behavior_name
        if not isinstance(shared_reward, bool):
            raise EnvError(f"{env}: env_args.shared_reward must be true or false, got {shared_reward!r}")
        self._shared = shared_reward
        self._groups = n // self._size
        self._spec = BehaviorSpec((ObservationSpec((OBS_SIZE,), "rendezvous"),), ActionSpec(0, (3,)))
        self._rng = np.random.default_rng(seed)
        g, k = self._groups, self._size
        self._pos = np.zeros((g, k), np.int64)
        self._goal = np.zeros(g, np.int64)
        self._present = np.zeros((g, k), bool)
        self._ids = np.zeros((g, k), np.int32)
        self._steps_taken = np.zeros(g, np.int64)
        self._group_id = np.repeat(np.arange(1, g + 1, dtype=np.int32)[:, None], k, axis=1)
        self._next_id = 0
        self._action: "ActionTuple | None" = None
        self._out: "Tuple[DecisionSteps, TerminalSteps] | None" = None
        self._empty_terminal = TerminalSteps.empty(self._spec)
        self._closed = False

    # ----------------------------------------------------------------- BaseEnv
    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return {self._name: self._spec}

    def reset(self) -> None:
        self._check_open()
        self._action = None
        self._start(np.arange(self._groups))
        self._out = (self._decision(), self._empty_terminal)

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        self._check_name(behavior_name)
        if self._out is None:
            raise RuntimeError("call reset() before get_steps()")
        return self._out

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._check_name(behavior_name)
        n = int(self._present.sum())
        if action.discrete.shape != (n, 1):
            raise ValueError(f"{behavior_name}: discrete actions must have shape {(n, 1)}, got {action.discrete.shape}")
        self._action = action

    def step(self) -> None:
        self._check_open()
        if self._out is None:
            raise RuntimeError("call reset() before step()")
        present = self._present
        moves = np.zeros(present.shape, np.int64)
        if self._action is not None:  # rows of the last DecisionSteps: present agents, row-major
            moves[present] = np.clip(self._action.discrete[:, 0].astype(np.int64), 0, 2) - 1
        else:  # like ML-Agents: agents without an action get zeros (here: move left)
            moves[present] = -1
        self._action = None
        self._pos = np.where(present, np.clip(self._pos + moves, 0, self._length - 1), self._pos)
        self._steps_taken += 1
        arrived = present & (self._pos == self._goal[:, None])
        success = ~(present & ~arrived).any(axis=1)  # nobody left on the way
        timeout = ~success & (self._steps_taken >= self._max_steps)
        stopped = timeout[:, None] & present & ~arrived
        ending = arrived | stopped  # terminal rows, row-major
        terminal = self._empty_terminal
        if ending.any():
            obs = self._observe()[ending]
            group_reward = np.where(success[:, None] & arrived, SUCCESS_REWARD, 0.0)[ending].astype(np.float32)
            terminal = TerminalSteps(
                obs=[obs],
                reward=group_reward.copy() if self._shared else np.zeros(int(ending.sum()), np.float32),
                interrupted=np.zeros(int(ending.sum()), bool),  # the step limit is the task's
                agent_id=self._ids[ending],
                group_id=self._group_id[ending],
                group_reward=group_reward,
            )
        self._present = present & ~arrived
        over = np.flatnonzero(success | timeout)
        if len(over):
            self._start(over)
        self._out = (self._decision(), terminal)

    def close(self) -> None:
        self._closed = True
        self._out = None

    # ----------------------------------------------------------------- helpers
    def expert_action(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        """Steps toward the meeting point, for the agents of ``decision_steps`` (the env's
        last `DecisionSteps`, in its order)."""
        self._check_name(behavior_name)
        rows = self._rows(decision_steps.agent_id)
        direction = np.sign(self._goal[rows[0]] - self._pos[rows])
        return ActionTuple(np.zeros((len(rows[0]), 0), np.float32), (direction + 1).astype(np.int32)[:, None])

    def optimal_return(self) -> float:
        """The group reward of a group acting with `expert_action` (every episode succeeds)."""
        return SUCCESS_REWARD if self._length - 1 <= self._max_steps else 0.0

    def _rows(self, agent_ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        where = {int(a): (g, i) for (g, i), a in np.ndenumerate(self._ids) if self._present[g, i]}
        try:
            cells = [where[int(a)] for a in agent_ids]
        except KeyError as e:
            raise ValueError(f"{self._name}: agent id {e.args[0]} is not in an episode of this env") from None
        return np.array([c[0] for c in cells], np.int64), np.array([c[1] for c in cells], np.int64)

    def _start(self, groups: np.ndarray) -> None:
        """New episodes for ``groups``: meeting points, then starts off them, new ids."""
        k = self._size
        for g in groups:
            self._goal[g] = self._rng.integers(0, self._length)
            # Start anywhere but the meeting point: cell c of length - 1, shifted past it.
            starts = self._rng.integers(0, self._length - 1, size=k)
            self._pos[g] = starts + (starts >= self._goal[g])
            self._ids[g] = np.arange(self._next_id, self._next_id + k, dtype=np.int32)
            self._next_id += k
        self._present[groups] = True
        self._steps_taken[groups] = 0

    def _observe(self) -> np.ndarray:
        """``[groups, group_size, 5]`` float32 observations of every slot."""
        scale = float(self._length - 1)
        goal = np.broadcast_to(self._goal[:, None], self._pos.shape)
        members = np.broadcast_to(self._present.sum(axis=1, keepdims=True) / self._size, self._pos.shape)
        left = np.broadcast_to(((self._max_steps - self._steps_taken) / self._max_steps)[:, None], self._pos.shape)
        return np.stack(
            [self._pos / scale, goal / scale, (goal - self._pos) / scale, members, left], axis=-1
        ).astype(np.float32)

    def _decision(self) -> DecisionSteps:
        present = self._present
        n = int(present.sum())
        return DecisionSteps(
            obs=[self._observe()[present]],
            reward=np.zeros(n, np.float32),
            agent_id=self._ids[present],
            group_id=self._group_id[present],
            group_reward=np.zeros(n, np.float32),
        )

    def _check_name(self, behavior_name: str) -> None:
        self._check_open()
        if behavior_name != self._name:
            raise KeyError(f"unknown behavior {behavior_name!r}; this env has [{self._name!r}]")

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Rendezvous is closed")


def group_ends(terminal: TerminalSteps) -> np.ndarray:
    """``[n]`` bool: the terminal rows that end their group's episode, its last arrivers
    (group reward) or its members stopped by the step limit (no step left), rather than
    members that left early."""
    return (terminal.group_reward > 0) | (terminal.obs[0][:, 4] <= 0.0)


def play(env: Rendezvous, policy: str, steps: int, seed: int = 0) -> List[float]:
    """Group returns of the episodes that end within ``steps`` steps, acting with
    ``policy`` ``"expert"`` or ``"random"`` (uniform moves from ``seed``'s generator): the
    sum of each ended group episode's group rewards (1 success, 0 timeout). For tests and
    the README's figures."""
    rng = np.random.default_rng(seed)
    name = next(iter(env.behavior_specs))
    env.reset()
    returns: List[float] = []
    for _ in range(steps):
        decision, _ = env.get_steps(name)
        if policy == "expert":
            action = env.expert_action(name, decision)
        else:
            action = ActionTuple(np.zeros((len(decision), 0), np.float32), rng.integers(0, 3, (len(decision), 1)))
        env.set_actions(name, action)
        env.step()
        _, terminal = env.get_steps(name)
        ended = {}
        for gid, grew in zip(terminal.group_id[group_ends(terminal)], terminal.group_reward[group_ends(terminal)]):
            ended[int(gid)] = float(grew)
        returns += list(ended.values())
    return returns
