"""`Chain`: a sparse-reward exploration environment (for curiosity).

A chain of ``length`` states ``0 .. length-1``; every agent starts each episode in state 0.
One discrete branch of size 2: 0 = move left (state 0 is a wall), 1 = move right. With
probability ``slip`` the move goes the other way (drawn from the env's seeded generator;
0 by default, so the env is deterministic). Reaching the last state ends the episode with
reward +1; every other step gives 0. ``max_episode_steps`` (default ``2 x length``)
interrupts the episode otherwise.

Observation: the one-hot position ``[length]`` (``one_hot=True``, the default, which suits
curiosity's forward/inverse models), or the scalar ``state / (length - 1)`` in [0, 1].

Why it needs exploration: a uniformly random policy is a reflected random walk, which
needs about ``length**2`` steps to reach the end. With the defaults (length 20, 40 steps
per episode) it finds the reward in about 0.3% of episodes (measured in
``tests/envs/test_builtin.py``), so plain PPO sees almost no reward in a budget of a few
thousand steps and has no gradient to follow. Curiosity rewards visiting new states,
which pushes the policy right until it finds the +1. The optimal return is 1.0
(``length - 1`` right moves); `expert_action` always moves right.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, ObservationSpec
from envs.builtin._base import BehaviorState, BuiltinEnv, check_float, check_int, check_names
from envs.exceptions import EnvError

LEFT, RIGHT = 0, 1


class _ChainState(BehaviorState):
    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.position = np.zeros(n, np.int64)


class Chain(BuiltinEnv):
    """Sparse reward at the far end of a chain of states (needs exploration, e.g. curiosity).

    See the module docstring for the dynamics.
    """

    def __init__(
        self,
        length: int = 20,
        one_hot: bool = True,
        slip: float = 0.0,
        num_agents: int = 1,
        behavior_names: Sequence[str] = ("Chain",),
        max_episode_steps: Optional[int] = None,
        seed: int = 0,
    ) -> None:
        """
        Args:
            length: number of states (>= 2); the reward is in the last one.
            one_hot: observe the one-hot position (else the scalar position in [0, 1]).
            slip: probability that a move goes the opposite way.
            num_agents: agents per behavior.
            behavior_names: one behavior per name, all with the same spec.
            max_episode_steps: time limit (``interrupted=True``); default ``2 x length``;
                0 = none.
            seed: seeds the slip draws.
        """
        env = type(self).__name__
        self._length = check_int(env, "length", length, 2)
        if not isinstance(one_hot, (bool, np.bool_)):
            raise EnvError(f"{env}: env_args.one_hot must be true or false, got {one_hot!r}")
        self._one_hot = bool(one_hot)
        self._slip = check_float(env, "slip", slip, 0.0, 1.0)
        num_agents = check_int(env, "num_agents", num_agents, 1)
        names = check_names(env, behavior_names)
        if max_episode_steps is None:
            max_episode_steps = 2 * self._length
        max_episode_steps = check_int(env, "max_episode_steps", max_episode_steps, 0)
        seed = check_int(env, "seed", seed, 0)
        obs_size = self._length if self._one_hot else 1
        spec = BehaviorSpec((ObservationSpec((obs_size,), "position"),), ActionSpec(0, (2,)))
        super().__init__(spec, names, num_agents, max_episode_steps, seed)

    def optimal_return(self) -> float:
        """Undiscounted return of a perfect episode (1.0)."""
        return 1.0

    def _init_state(self, n: int) -> _ChainState:
        return _ChainState(n)

    def _reset_rows(self, state: BehaviorState, rows: np.ndarray) -> None:
        assert isinstance(state, _ChainState)
        state.position[rows] = 0

    def _advance(self, state: BehaviorState, action: ActionTuple) -> Tuple[np.ndarray, np.ndarray]:
        assert isinstance(state, _ChainState)
        move = np.where(action.discrete[:, 0] == RIGHT, 1, -1)
        if self._slip > 0.0:
            move = np.where(self._rng.random(state.n) < self._slip, -move, move)
        state.position = np.clip(state.position + move, 0, self._length - 1)
        done = state.position == self._length - 1
        return done.astype(np.float32), done

    def _observe(self, state: BehaviorState) -> List[np.ndarray]:
        assert isinstance(state, _ChainState)
        if self._one_hot:
            obs = np.zeros((state.n, self._length), np.float32)
            obs[np.arange(state.n), state.position] = 1.0
        else:
            obs = (state.position / (self._length - 1)).astype(np.float32)[:, None]
        return [obs]

    def _expert(self, state: BehaviorState, rows: np.ndarray) -> ActionTuple:
        return ActionTuple(
            continuous=np.zeros((len(rows), 0), np.float32),
            discrete=np.full((len(rows), 1), RIGHT, np.int32),
        )
