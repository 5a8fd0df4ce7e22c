"""`Paddles`: a two-team adversarial game for self-play (``builtin:Paddles``).

A one-on-one paddle game in the unit square. Team 0's paddle moves along the left line
(x = 0), team 1's along the right one (x = 1); a ball bounces off the top and bottom walls
(y = 0 and y = 1). A paddle returns the ball when the ball reaches its line within
``paddle_size`` of the paddle's centre; a miss loses the game. Each return speeds the ball
up by ``speedup`` (at most ``max_speed_factor`` times ``ball_speed``) and sends it off at an
angle set by where it struck the paddle (the farther from the centre, the steeper), so
rallies between good players end too. A game that reaches ``max_episode_steps`` is a draw.

Like Unity's self-play games (SoccerTwos, Tennis) the behaviors are named ``Name?team=N``
(`envs.base_env.BehaviorId`), one per side, ``num_agents`` games side by side, and the
reward is the game's result on its last step: **+1 win, -1 loss, 0 draw** (every other
step 0; ``interrupted`` is False: a draw is the game's end, and ML-Agents' ELO counts it
as half a win). Two names with one behavior name (``Paddles?team=0``, ``Paddles?team=1``,
the default) make a symmetric game (one policy plays both sides); two behavior names
(``Striker?team=0``, ``Goalie?team=1``) an asymmetric one.

Observations are egocentric, so one policy can play either side: one vector per agent,
``[ball distance from my line (0..1), ball y, ball x-velocity away from me / ball_speed,
ball y-velocity / ball_speed, my paddle y, the opponent's paddle y, ball y - my paddle y,
steps left / max_episode_steps]``, zero-padded to ``vec_obs_size`` (a Unity game's size, e.g.
336 for SoccerTwos; per side with a list: Striker 294, Goalie 738). Actions: the paddle's
velocity in units of ``paddle_speed``, the first continuous action clipped to [-1, 1], or
else the first discrete branch of size k, value v -> ``2 v / (k - 1) - 1`` (size 3: down,
stay, up); further actions are accepted and ignored (so a game's action spaces, e.g.
SoccerTwos' three branches of 3, fit).

Why skill matters: the ball crosses in ``1 / ball_speed`` steps (33 by default) and a
paddle covers ``paddle_speed`` per step (0.05: 1.65 in a crossing), so a paddle that
follows the ball always reaches it at first, while a random one (a random walk of about
0.23 per crossing) returns about one ball in three. `expert_action` (follow the ball's
height) beats the random policy in about 96 % of games and draws against itself in
almost all (``tests/envs/test_paddles.py``); returns struck off-centre leave at a steep
angle (`ANGLE`), faster than a paddle moves, so anticipating where the ball will arrive
beats merely following it.

Every random draw (serves) comes from one generator seeded at construction, in a fixed
order, so the same seed and actions give the same games.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np

from envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorId,
    BehaviorSpec,
    DecisionSteps,
    ObservationSpec,
    TerminalSteps,
)
from envs.builtin._base import check_float, check_int, check_names, check_step_size
from envs.exceptions import EnvError

#: Entries of the game's own observation (the rest of ``vec_obs_size`` is zeros).
GAME_OBS = 8
WIN, LOSS, DRAW = 1.0, -1.0, 0.0
#: A return's y-velocity, in units of ``ball_speed``, at the paddle's very end (x the strike
#: point's offset from the centre, -1 .. 1): up to 2.5 x 0.03 = 0.075 per step, faster than
#: a paddle (0.05), so a player that only follows the ball can be beaten by one that aims.
ANGLE = 2.5


class Paddles(BaseEnv):
    """A two-team paddle game with +1 / -1 / 0 results (see the module docstring)."""

    def __init__(
        self,
        behavior_names: Sequence[str] = ("Paddles?team=0", "Paddles?team=1"),
        vec_obs_size: Union[int, Sequence[int]] = GAME_OBS,
        continuous: int = 0,
        discrete: Sequence[int] = (3,),
        num_agents: int = 1,
        max_episode_steps: int = 400,
        paddle_size: float = 0.1,
        paddle_speed: float = 0.05,
        ball_speed: float = 0.03,
        speedup: float = 1.1,
        max_speed_factor: float = 3.0,
        seed: int = 0,
    ) -> None:
        """
        Args:
            behavior_names: two behavior ids, team 0's side (left) then team 1's (right).
            vec_obs_size: the vector observation's size (>= 8), one for both sides or a
                list of two.
            continuous: continuous actions per agent (the first one moves the paddle).
            discrete: discrete branch sizes (the first one moves the paddle, if no
                continuous action).
            num_agents: games played side by side (agents per behavior).
            max_episode_steps: a game that lasts this long is a draw (>= 1).
            paddle_size: half the paddle's length, in (0, 0.5].
            paddle_speed: the paddle's largest move per step, in (0, 1].
            ball_speed: the ball's x-speed at the serve, in (0, 0.5].
            speedup: the ball's speed factor at every return, in [1, 2].
            max_speed_factor: the ball's x-speed is at most this times ``ball_speed``.
            seed: seeds the serves.
        """
        env = type(self).__name__
        names = check_names(env, behavior_names)
        if len(names) != 2:
            raise EnvError(f"{env}: env_args.behavior_names must name two sides (team 0, team 1), got {list(names)}")
        sizes = [vec_obs_size, vec_obs_size] if isinstance(vec_obs_size, (int, np.integer)) else vec_obs_size
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) != 2:
            raise EnvError(f"{env}: env_args.vec_obs_size must be an integer or a list of two, got {vec_obs_size!r}")
        obs_sizes = [check_int(env, "vec_obs_size", s, GAME_OBS) for s in sizes]
        continuous = check_int(env, "continuous", continuous, 0)
        if isinstance(discrete, (str, bytes)) or not isinstance(discrete, Sequence):
            raise EnvError(f"{env}: env_args.discrete must be a list of branch sizes, got {discrete!r}")
        branches = tuple(check_int(env, "discrete", b, 2) for b in discrete)
        if not continuous and not branches:
            raise EnvError(f"{env}: needs an action (env_args.continuous >= 1 or env_args.discrete)")
        self._games = check_int(env, "num_agents", num_agents, 1)
        self._max_steps = check_int(env, "max_episode_steps", max_episode_steps, 1)
        self._half = check_float(env, "paddle_size", paddle_size, 1e-3, 0.5)
        self._paddle_speed = check_float(env, "paddle_speed", paddle_speed, 1e-4, 1.0)
        self._ball_speed = check_float(env, "ball_speed", ball_speed, 1e-4, 0.5)
        self._speedup = check_float(env, "speedup", speedup, 1.0, 2.0)
        self._max_speed = self._ball_speed * check_float(env, "max_speed_factor", max_speed_factor, 1.0, 100.0)
        seed = check_int(env, "seed", seed, 0)
        check_step_size(env, max(obs_sizes) + continuous + len(branches), 2, self._games)
        action = ActionSpec(continuous, branches)
        self._names = names
        self._teams = [BehaviorId.parse(n).team for n in names]
        self._specs: Dict[str, BehaviorSpec] = {
            n: BehaviorSpec((ObservationSpec((size,), "game"),), action) for n, size in zip(names, obs_sizes)
        }
        self._obs_sizes = obs_sizes
        self._rng = np.random.default_rng(seed)
        g = self._games
        self._ball = np.zeros((g, 2))  # x, y
        self._velocity = np.zeros((g, 2))
        self._paddles = np.zeros((g, 2))  # each side's paddle centre
        self._steps = np.zeros(g, np.int64)
        self._ids = np.zeros((g, 2), np.int32)
        self._next_id = 0
        self._actions: Dict[str, ActionTuple] = {}
        self._out: Dict[str, Tuple[DecisionSteps, TerminalSteps]] = {}
        self._closed = False

    # ----------------------------------------------------------------- BaseEnv

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def reset(self) -> None:
        self._check_open()
        self._actions.clear()
        rows = np.arange(self._games)
        self._serve(rows)
        zeros = np.zeros(self._games, np.float32)
        for side, name in enumerate(self._names):
            self._out[name] = (
                DecisionSteps([self._observe(side)], zeros.copy(), self._ids[:, side].copy()),
                TerminalSteps.empty(self._specs[name]),
            )

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        self._check_open()
        self._check_name(behavior_name)
        if not self._out:
            raise RuntimeError("call reset() before get_steps()")
        return self._out[behavior_name]

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._check_open()
        self._check_name(behavior_name)
        spec = self._specs[behavior_name].action_spec
        n = self._games
        if spec.continuous_size and action.continuous.shape != (n, spec.continuous_size):
            raise ValueError(f"{behavior_name}: continuous actions must have shape {(n, spec.continuous_size)}")
        if spec.discrete_size and action.discrete.shape != (n, spec.discrete_size):
            raise ValueError(f"{behavior_name}: discrete actions must have shape {(n, spec.discrete_size)}")
        self._actions[behavior_name] = action

    def step(self) -> None:
        self._check_open()
        if not self._out:
            raise RuntimeError("call reset() before step()")
        for side, name in enumerate(self._names):  # like ML-Agents: no action = zeros (stay, for size 3)
            action = self._actions.pop(name, None)
            if action is None:
                action = self._specs[name].action_spec.empty_action(self._games)
            moved = self._paddles[:, side] + self._paddle_speed * self._move(name, action)
            self._paddles[:, side] = np.clip(moved, 0.0, 1.0)
        self._steps += 1
        result = self._advance_ball()  # team 0's result per game, NaN while it goes on
        ended = ~np.isnan(result)
        rows = np.flatnonzero(ended)
        rewards = np.zeros((self._games, 2), np.float32)
        rewards[rows, 0] = result[rows]
        rewards[rows, 1] = -result[rows]
        finals = [self._observe(side)[rows] for side in range(2)]
        old_ids = self._ids[rows].copy()
        if len(rows):
            self._serve(rows)
        for side, name in enumerate(self._names):
            reward = rewards[:, side].copy()
            terminal = TerminalSteps.empty(self._specs[name])
            if len(rows):
                terminal = TerminalSteps(
                    obs=[finals[side]], reward=reward[rows], interrupted=np.zeros(len(rows), bool),
                    agent_id=old_ids[:, side],
                )
                reward[rows] = 0.0  # a new game's agent has received nothing yet
            self._out[name] = (DecisionSteps([self._observe(side)], reward, self._ids[:, side].copy()), terminal)

    def close(self) -> None:
        self._closed = True
        self._out.clear()

    # ----------------------------------------------------------------- the game

    def _move(self, name: str, action: ActionTuple) -> np.ndarray:
        """``[games]`` paddle velocity in [-1, 1] from the side's actions."""
        spec = self._specs[name].action_spec
        if spec.continuous_size:
            return np.clip(action.continuous[:, 0].astype(np.float64), -1.0, 1.0)
        size = spec.discrete_branches[0]
        return 2.0 * action.discrete[:, 0].astype(np.float64) / (size - 1) - 1.0

    def _serve(self, rows: np.ndarray) -> None:
        """New games in ``rows``: ball in the middle towards a random side, paddles centred."""
        k = len(rows)
        self._ball[rows, 0] = 0.5
        self._ball[rows, 1] = self._rng.uniform(0.25, 0.75, k)
        self._velocity[rows, 0] = np.where(self._rng.random(k) < 0.5, -1.0, 1.0) * self._ball_speed
        self._velocity[rows, 1] = self._rng.uniform(-1.0, 1.0, k) * self._ball_speed
        self._paddles[rows] = 0.5
        self._steps[rows] = 0
        self._ids[rows] = self._next_id + np.arange(2 * k, dtype=np.int32).reshape(k, 2)
        self._next_id += 2 * k

    def _advance_ball(self) -> np.ndarray:
        """Moves the balls; returns team 0's result per game (+1, -1, 0 draw; NaN: goes on)."""
        ball, v = self._ball, self._velocity
        ball += v
        low, high = ball[:, 1] < 0.0, ball[:, 1] > 1.0  # the walls
        ball[low, 1] = -ball[low, 1]
        ball[high, 1] = 2.0 - ball[high, 1]
        v[low | high, 1] *= -1.0
        result = np.full(self._games, np.nan)
        for side, line in ((0, 0.0), (1, 1.0)):
            arrived = ball[:, 0] <= 0.0 if side == 0 else ball[:, 0] >= 1.0
            if not arrived.any():
                continue
            offset = (ball[:, 1] - self._paddles[:, side]) / self._half
            hit = arrived & (np.abs(offset) <= 1.0)
            miss = arrived & ~hit
            result[miss] = LOSS if side == 0 else WIN
            ball[hit, 0] = 2.0 * line - ball[hit, 0]  # mirrored back into the field
            speed = np.minimum(np.abs(v[hit, 0]) * self._speedup, self._max_speed)
            v[hit, 0] = speed if side == 0 else -speed
            v[hit, 1] = ANGLE * self._ball_speed * offset[hit]  # the angle follows the strike point
        timeout = np.isnan(result) & (self._steps >= self._max_steps)
        result[timeout] = DRAW
        return result

    def _observe(self, side: int) -> np.ndarray:
        """``[games, vec_obs_size]`` float32: the side's view (module docstring)."""
        ball, v, paddles = self._ball, self._velocity, self._paddles
        mine, theirs = paddles[:, side], paddles[:, 1 - side]
        obs = np.zeros((self._games, self._obs_sizes[side]), np.float32)
        obs[:, 0] = ball[:, 0] if side == 0 else 1.0 - ball[:, 0]
        obs[:, 1] = ball[:, 1]
        obs[:, 2] = (v[:, 0] if side == 0 else -v[:, 0]) / self._ball_speed
        obs[:, 3] = v[:, 1] / self._ball_speed
        obs[:, 4] = mine
        obs[:, 5] = theirs
        obs[:, 6] = ball[:, 1] - mine
        obs[:, 7] = (self._max_steps - self._steps) / self._max_steps
        return obs

    # ----------------------------------------------------------------- scripted play

    def expert_action(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        """A scripted player that follows the ball (for tests and demos): moves its paddle
        towards the ball's height. ``decision_steps`` must be this env's latest for the side."""
        self._check_name(behavior_name)
        spec = self._specs[behavior_name].action_spec
        n = len(decision_steps)
        diff = decision_steps.obs[0][:, 6].astype(np.float64)
        move = np.clip(diff / self._paddle_speed, -1.0, 1.0)
        continuous = np.zeros((n, spec.continuous_size), np.float32)
        discrete = np.zeros((n, spec.discrete_size), np.int32)
        if spec.continuous_size:
            continuous[:, 0] = move
        else:
            size = spec.discrete_branches[0]
            discrete[:, 0] = np.rint((move + 1.0) * (size - 1) / 2.0).astype(np.int32)
        return ActionTuple(continuous, discrete)

    @property
    def teams(self) -> List[int]:
        """The team of each side (from the behavior names)."""
        return list(self._teams)

    def _check_name(self, behavior_name: str) -> None:
        if behavior_name not in self._specs:
            raise KeyError(f"unknown behavior {behavior_name!r}; this env has {list(self._names)}")

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
