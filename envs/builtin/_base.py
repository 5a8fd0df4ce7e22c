"""Shared machinery of the built-in environments.

A built-in env holds one or more behaviors with the same spec; every behavior has
``num_agents`` agents that all request a decision every step. Subclasses keep their
per-agent state in numpy arrays (one row per agent) and implement four vectorised hooks:
``_reset_rows``, ``_advance``, ``_observe`` and ``_expert``. This base class does the
bookkeeping that every env must get right in the same way: agent ids (a terminated
agent comes back under a new id), the time limit (``interrupted``), ``DecisionSteps``
reward = reward since the last decision (0 right after a reset), action validation.

Every random draw comes from one ``np.random.Generator`` seeded at construction, in a
fixed order (behaviors in declaration order, agents in row order), so the same seed
gives the same trajectories for the same actions.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps, TerminalSteps
from envs.exceptions import EnvError
from envs.parameters import ParameterDraws, check_parameters


def check_int(env: str, key: str, value: object, minimum: int) -> int:
    """``value`` as an int >= ``minimum``, or an `EnvError` naming ``env`` and ``key``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < minimum:
        raise EnvError(f"{env}: env_args.{key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_float(env: str, key: str, value: object, low: float, high: float) -> float:
    """``value`` as a float in ``[low, high]``, or an `EnvError` naming ``env`` and ``key``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise EnvError(f"{env}: env_args.{key} must be a number in [{low}, {high}], got {value!r}")
    if not low <= float(value) <= high:
        raise EnvError(f"{env}: env_args.{key} must be in [{low}, {high}], got {value!r}")
    return float(value)


def check_names(env: str, names: object) -> Tuple[str, ...]:
    """A non-empty list of distinct behavior names."""
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise EnvError(f"{env}: env_args.behavior_names must be a non-empty list of names, got {names!r}")
    out = tuple(str(n) for n in names)
    if len(set(out)) != len(out):
        raise EnvError(f"{env}: env_args.behavior_names has duplicates: {list(out)}")
    return out


class BehaviorState:
    """Per-behavior arrays; subclasses add their own fields in ``_init_state``.

    Attributes:
        agent_id: ``[n]`` int32, the current id of the agent in each row.
        episode_steps: ``[n]`` int64, steps taken in the current episode.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.agent_id = np.zeros(n, np.int32)
        self.episode_steps = np.zeros(n, np.int64)


#: Most observation and action values one step of a built-in env may hold, all agents and
#: behaviors together (2**26 float32: 256 MiB). Far above any useful test (a thousand
#: agents with an 84x84x3 camera hold 21M), it refuses absurd ``vis_obs_size``,
#: ``num_agents`` or ``length`` up front with one line, instead of a numpy allocation error
#: (or the machine swapping) at the first reset.
MAX_STEP_VALUES = 1 << 26


def values_per_agent(spec: BehaviorSpec) -> int:
    """Observation and action values of one agent of ``spec``."""
    per_agent = sum(int(np.prod(o.shape, dtype=object)) for o in spec.observation_specs)
    return per_agent + spec.action_spec.continuous_size + spec.action_spec.discrete_size


def check_step_size(env: str, per_agent: int, num_behaviors: int, num_agents: int) -> None:
    """`EnvError` when one step would hold more than `MAX_STEP_VALUES` values
    (``per_agent``: observation and action values of one agent, as `values_per_agent`).
    Envs call it before they build specs from their arguments as well: a spec with a
    billion discrete branches is itself too big to build."""
    total = per_agent * num_behaviors * num_agents
    if total > MAX_STEP_VALUES:
        raise EnvError(
            f"{env}: one step would hold {total:,} observation and action values ({num_behaviors} behavior(s) x "
            f"{num_agents:,} agent(s) x {per_agent:,} per agent), more than the {MAX_STEP_VALUES:,} allowed; "
            f"lower env_args such as num_agents, vis_obs_size, vec_obs_size or length"
        )


class BuiltinEnv(BaseEnv):
    """Base class of the built-in envs (see the module docstring).

    Environment parameters (`set_env_parameters`): an env declares the ones it takes in
    `ENV_PARAMETERS`; each agent gets a value of each parameter set at its episode start
    (`_parameter`, called from ``_reset_rows``: one draw per agent for a sampler, in row
    order), so a change reaches agents mid-episode only at their next episode. The draws
    come from their own generators (`envs.parameters.ParameterDraws`, seeded with the
    sampler's seed and the env's), never from the env's, so setting no parameter leaves
    every trajectory as it was.
    """

    #: The environment parameters the env takes: name -> (lowest, highest value, meaning).
    ENV_PARAMETERS: Mapping[str, Tuple[float, float, str]] = {}

    def __init__(
        self,
        spec: BehaviorSpec,
        behavior_names: Sequence[str],
        num_agents: int,
        max_episode_steps: int,
        seed: int,
    ) -> None:
        """
        Args:
            spec: the spec of every behavior.
            behavior_names: one behavior per name, all with ``spec``.
            num_agents: agents per behavior.
            max_episode_steps: time limit; an episode that reaches it without terminating
                ends with ``interrupted=True``. 0 means no limit.
            seed: seeds the env's only random generator.
        """
        check_step_size(type(self).__name__, values_per_agent(spec), len(behavior_names), int(num_agents))
        self._spec = spec
        self._names = tuple(behavior_names)
        self._specs: Dict[str, BehaviorSpec] = {name: spec for name in self._names}
        self._num_agents = int(num_agents)
        self._max_steps = int(max_episode_steps)
        self._rng = np.random.default_rng(seed)
        self._state: Dict[str, BehaviorState] = {
            name: self._init_state(self._num_agents) for name in self._names
        }
        self._next_id = 0
        self._actions: Dict[str, ActionTuple] = {}
        self._steps: Dict[str, Tuple[DecisionSteps, TerminalSteps]] = {}
        self._empty_terminal = TerminalSteps.empty(spec)
        self._closed = False
        self._parameters = ParameterDraws(seed)

    # ----------------------------------------------------------------- hooks
    def _init_state(self, n: int) -> BehaviorState:
        """Allocate the state arrays of one behavior with ``n`` agents."""
        return BehaviorState(n)

    def _reset_rows(self, state: BehaviorState, rows: np.ndarray) -> None:
        """Start a new episode for ``rows`` (draws from ``self._rng``)."""
        raise NotImplementedError

    def _advance(self, state: BehaviorState, action: ActionTuple) -> Tuple[np.ndarray, np.ndarray]:
        """Apply one action per agent; return ``reward [n] float32, done [n] bool``."""
        raise NotImplementedError

    def _observe(self, state: BehaviorState) -> List[np.ndarray]:
        """Fresh observation arrays ``[n, *shape]`` float32, one per observation spec."""
        raise NotImplementedError

    def _expert(self, state: BehaviorState, rows: np.ndarray) -> ActionTuple:
        """The optimal actions of the agents in ``rows``."""
        raise NotImplementedError

    # -------------------------------------------------------------- BaseEnv
    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    @classmethod
    def check_env_parameters(cls, values: Mapping[str, Any]) -> None:
        """`EnvError` for a parameter the env does not take or a value out of its range."""
        ranges = {name: (low, high) for name, (low, high, _) in cls.ENV_PARAMETERS.items()}
        check_parameters(f"builtin:{cls.__name__}", values, ranges)

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """Parameters from ``ENV_PARAMETERS``; agents take them at their next episode start."""
        self.check_env_parameters(values)
        changed = list(self._parameters.changed(values))
        self._parameters.update(values)
        if changed:
            for state in self._state.values():
                self._parameters_set(state, changed)

    def _parameters_set(self, state: BehaviorState, names: Sequence[str]) -> None:
        """Hook: ``names`` have new values (allocate per-agent arrays; agents keep the
        values their episode started with)."""

    def _parameter(self, name: str, rows: np.ndarray) -> Optional[np.ndarray]:
        """Values of parameter ``name`` for agents ``rows`` starting an episode (``[len(rows)]``
        float64, within the declared range); None when the parameter is not set."""
        if name not in self._parameters:
            return None
        low, high, _ = self.ENV_PARAMETERS[name]
        return self._parameters.draw(name, len(rows), low, high)

    def reset(self) -> None:
        self._check_open()
        self._actions.clear()
        for name in self._names:
            state = self._state[name]
            rows = np.arange(state.n)
            self._new_ids(state, rows)
            state.episode_steps[:] = 0
            self._reset_rows(state, rows)
            self._steps[name] = (
                DecisionSteps(self._observe(state), np.zeros(state.n, np.float32), state.agent_id.copy()),
                self._empty_terminal,
            )

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        self._check_open()
        if behavior_name not in self._specs:
            raise KeyError(f"unknown behavior {behavior_name!r}; this env has {list(self._names)}")
        if not self._steps:
            raise RuntimeError("call reset() before get_steps()")
        return self._steps[behavior_name]

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._check_open()
        if behavior_name not in self._specs:
            raise KeyError(f"unknown behavior {behavior_name!r}; this env has {list(self._names)}")
        n = self._state[behavior_name].n
        aspec = self._spec.action_spec
        if aspec.continuous_size and action.continuous.shape != (n, aspec.continuous_size):
            raise ValueError(
                f"{behavior_name}: continuous actions must have shape {(n, aspec.continuous_size)}, "
                f"got {action.continuous.shape}"
            )
        if aspec.discrete_size and action.discrete.shape != (n, aspec.discrete_size):
            raise ValueError(
                f"{behavior_name}: discrete actions must have shape {(n, aspec.discrete_size)}, "
                f"got {action.discrete.shape}"
            )
        self._actions[behavior_name] = action

    def step(self) -> None:
        self._check_open()
        if not self._steps:
            raise RuntimeError("call reset() before step()")
        for name in self._names:
            state = self._state[name]
            action = self._actions.pop(name, None)
            if action is None:  # like ML-Agents: agents without an action get zeros
                action = self._spec.action_spec.empty_action(state.n)
            reward, done = self._advance(state, action)
            state.episode_steps += 1
            if self._max_steps > 0:
                interrupted = ~done & (state.episode_steps >= self._max_steps)
                ended = done | interrupted
            else:
                interrupted = np.zeros(state.n, bool)
                ended = done
            terminal = self._empty_terminal
            if ended.any():
                rows = np.flatnonzero(ended)
                final_obs = [o[rows] for o in self._observe(state)]
                terminal = TerminalSteps(
                    obs=final_obs,
                    reward=reward[rows].astype(np.float32),
                    interrupted=interrupted[rows].copy(),
                    agent_id=state.agent_id[rows].copy(),
                )
                self._new_ids(state, rows)
                state.episode_steps[rows] = 0
                self._reset_rows(state, rows)
                reward = reward.copy()
                reward[rows] = 0.0  # a new agent has received nothing yet
            self._steps[name] = (
                DecisionSteps(self._observe(state), reward.astype(np.float32), state.agent_id.copy()),
                terminal,
            )

    def close(self) -> None:
        self._closed = True
        self._steps.clear()

    # -------------------------------------------------------------- experts
    def expert_action(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        """The scripted optimal actions for ``decision_steps`` (rows in the same order).

        Uses the env's private state (e.g. the goal hidden by `Memory`), so it is only
        meant for recording demonstrations and for tests.
        """
        state = self._state[behavior_name]
        ids = decision_steps.agent_id
        if ids.shape == state.agent_id.shape and np.array_equal(ids, state.agent_id):
            rows = np.arange(state.n)
        else:
            row_of = {int(a): r for r, a in enumerate(state.agent_id)}
            try:
                rows = np.array([row_of[int(a)] for a in ids], dtype=np.int64)
            except KeyError as e:
                raise ValueError(f"{behavior_name}: agent id {e.args[0]} is not alive in this env") from None
        return self._expert(state, rows)

    # -------------------------------------------------------------- helpers
    def _new_ids(self, state: BehaviorState, rows: np.ndarray) -> None:
        k = len(rows)
        state.agent_id[rows] = np.arange(self._next_id, self._next_id + k, dtype=np.int32)
        self._next_id += k

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
