"""`Sorter`: visit a variable number of numbered tiles in ascending order (entity observations).

A small, geometry-free version of ML-Agents' Sorter example: every episode an agent
faces ``k`` tiles, ``k`` drawn uniformly in ``[1, num_tiles]`` (``num_tiles``, as the
game's environment parameter, is at most ``max_tiles``), each with a distinct value drawn
from ``0 .. num_values - 1``. Its entity observation ``[max_tiles, num_values + 1]`` has
one row per tile (as Unity's BufferSensor: the ``k`` present tiles in the first rows, in
a random order; the rest zero rows): the one-hot of the tile's value and a last column
that is 1 once the tile is visited. A vector observation ``[1]`` holds the fraction of
the episode's tiles visited. One discrete branch of ``num_values`` actions: "visit the
tile of value ``v``". Visiting the smallest unvisited tile gives +1 and marks it visited;
any other action gives -1 and ends the episode (ML-Agents' Sorter: +1 right tile, -1
wrong tile). The episode ends when all ``k`` tiles are visited.

Why it needs the entity encoder: the right action is the minimum over a set of unvisited
tiles whose size and order change every episode; the return of a perfect policy is
``k`` (mean ``(1 + num_tiles) / 2``), a uniformly random one is below -0.8 on average
(a right first pick has probability ``1 / num_values``).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, ObservationKind, ObservationSpec
from envs.builtin._base import BehaviorState, BuiltinEnv, check_int, check_names
from envs.exceptions import EnvError


class _SorterState(BehaviorState):
    def __init__(self, n: int, max_tiles: int) -> None:
        super().__init__(n)
        self.values = np.zeros((n, max_tiles), np.int64)  # tile values, first `count` rows
        self.visited = np.zeros((n, max_tiles), bool)
        self.count = np.ones(n, np.int64)  # k, the episode's tiles


class Sorter(BuiltinEnv):
    """Visit the tiles in ascending order (see the module docstring)."""

    ENV_PARAMETERS = {"num_tiles": (1.0, 64.0, "the most tiles an episode draws (ML-Agents' Sorter's)")}

    def __init__(
        self,
        max_tiles: int = 4,
        num_values: int = 8,
        num_tiles: Optional[int] = None,
        num_agents: int = 8,
        behavior_names: Sequence[str] = ("Sorter",),
        max_episode_steps: Optional[int] = None,
        seed: int = 0,
    ) -> None:
        """
        Args:
            max_tiles: rows of the entity observation (the most tiles there can be).
            num_values: tile values ``0 .. num_values - 1`` (>= ``max_tiles``); also the
                number of actions.
            num_tiles: the most tiles an episode draws (default ``max_tiles``); the
                environment parameter ``num_tiles`` overrides it per episode (capped at
                ``max_tiles``).
            num_agents: agents per behavior.
            behavior_names: one behavior per name, all with the same spec.
            max_episode_steps: time limit (default ``max_tiles``, never reached); 0 = none.
            seed: seeds the tiles.
        """
        env = type(self).__name__
        self._max_tiles = check_int(env, "max_tiles", max_tiles, 1)
        self._num_values = check_int(env, "num_values", num_values, 2)
        if self._num_values < self._max_tiles:
            raise EnvError(
                f"{env}: env_args.num_values must be >= max_tiles ({self._max_tiles}) so tiles differ, got {num_values}"
            )
        self._num_tiles = check_int(env, "num_tiles", self._max_tiles if num_tiles is None else num_tiles, 1)
        if self._num_tiles > self._max_tiles:
            raise EnvError(f"{env}: env_args.num_tiles must be <= max_tiles ({self._max_tiles}), got {num_tiles}")
        num_agents = check_int(env, "num_agents", num_agents, 1)
        names = check_names(env, behavior_names)
        limit = check_int(env, "max_episode_steps", self._max_tiles if max_episode_steps is None else max_episode_steps, 0)
        spec = BehaviorSpec(
            (
                ObservationSpec((1,), "progress"),
                ObservationSpec((self._max_tiles, self._num_values + 1), "tiles", ObservationKind.ENTITIES),
            ),
            ActionSpec(0, (self._num_values,)),
        )
        super().__init__(spec, names, num_agents, limit, seed)

    def optimal_return(self) -> float:
        """Mean return of a perfect policy with the constructor's ``num_tiles``: ``(1 + num_tiles) / 2``."""
        return (1.0 + self._num_tiles) / 2.0

    def _init_state(self, n: int) -> _SorterState:
        return _SorterState(n, self._max_tiles)

    def _reset_rows(self, state: BehaviorState, rows: np.ndarray) -> None:
        assert isinstance(state, _SorterState)
        most = self._parameter("num_tiles", rows)
        cap = np.full(len(rows), self._num_tiles) if most is None else np.clip(np.rint(most), 1, self._max_tiles)
        state.count[rows] = np.floor(self._rng.random(len(rows)) * cap).astype(np.int64) + 1
        state.visited[rows] = False
        state.values[rows] = 0
        for r in rows:  # distinct values in a random order (Generator.permutation per row)
            state.values[r, : state.count[r]] = self._rng.permutation(self._num_values)[: state.count[r]]

    def _targets(self, state: _SorterState) -> np.ndarray:
        """``[n]``: the smallest unvisited value of each agent (``num_values`` when none)."""
        present = np.arange(self._max_tiles)[None, :] < state.count[:, None]
        pending = np.where(present & ~state.visited, state.values, self._num_values)
        return pending.min(axis=1)

    def _advance(self, state: BehaviorState, action: ActionTuple) -> Tuple[np.ndarray, np.ndarray]:
        assert isinstance(state, _SorterState)
        choice = action.discrete[:, 0].astype(np.int64)
        right = choice == self._targets(state)
        hit = right[:, None] & (state.values == choice[:, None]) & (np.arange(self._max_tiles)[None, :] < state.count[:, None])
        state.visited |= hit
        finished = state.visited.sum(axis=1) >= state.count
        reward = np.where(right, 1.0, -1.0).astype(np.float32)
        return reward, ~right | finished

    def _observe(self, state: BehaviorState) -> List[np.ndarray]:
        assert isinstance(state, _SorterState)
        n = state.n
        tiles = np.zeros((n, self._max_tiles, self._num_values + 1), np.float32)
        present = np.arange(self._max_tiles)[None, :] < state.count[:, None]
        agent, slot = np.nonzero(present)
        tiles[agent, slot, state.values[agent, slot]] = 1.0
        tiles[:, :, -1] = state.visited & present
        progress = (state.visited.sum(axis=1) / state.count).astype(np.float32)[:, None]
        return [progress, tiles]

    def _expert(self, state: BehaviorState, rows: np.ndarray) -> ActionTuple:
        assert isinstance(state, _SorterState)
        target = np.minimum(self._targets(state)[rows], self._num_values - 1)
        return ActionTuple(np.zeros((len(rows), 0), np.float32), target.astype(np.int32)[:, None])
