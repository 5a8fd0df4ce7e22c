"""`LookAlike`: an env with the behavior names and spaces of a Unity game, for configs.

ML-Agents' example configs name the behaviors of its Unity games (``3DBall``,
``SoccerTwos?team=0`` and ``?team=1``, ``Striker`` and ``Goalie``...). A look-alike
reports the behaviors it is given, each with its own observation and action spaces, so
such a config loads and trains end to end without the game: it proves the config's
settings build, act and update on those spaces (tests write the spaces from ML-Agents'
``Learning-Environment-Examples.md``). It does not mimic the game's dynamics.

Each behavior is declared as ``{vector: [sizes], visual: [[H, W, C], ...], entities:
[[max_entities, entity_size], ...], continuous: n, discrete: [branch sizes]}`` (all
optional; at least one observation and one action). Entity observations (a BufferSensor's)
hold 1 to ``max_entities`` present entities each step (drawn uniformly), each with ``s``
first and N(0, 0.1) noise after, in the first rows; the other rows are zeros.
Every episode of an agent lasts ``episode_length`` steps and has a hidden sign
``s`` (-1 or +1, drawn from the env's seeded generator). The first entry of the first
vector observation is ``s`` (every pixel of an image is ``(s + 1) / 2`` without vector
observations); the other entries are N(0, 0.1) noise drawn each step. An action *agrees*
with ``s`` when its first continuous value has the sign of ``s`` (else, its first discrete
branch chooses 1 for ``s = +1`` and 0 for ``s = -1``); each step gives ``+1 /
episode_length`` when it agrees and ``-1 / episode_length`` when not, so returns lie in
[-1, 1] and a trained policy gets more than a random one (0 on average). Episodes end
with ``interrupted=False`` (the task's end, as a game's win or loss). The sign of the last
step's reward is the game's result (win / loss) where teams play. Environment parameters
named in ``parameters`` are accepted and change nothing (a config's curriculum runs).

Groups (``group_size``, for ML-Agents' multi-agent games and the POCA trainer): consecutive
agents of a behavior, ``group_size`` at a time, form a group (ids 1, 2, ... across the
behaviors in order, as Unity numbers its ``SimpleMultiAgentGroup`` objects; 0 = no group),
and each step's ``group_reward`` is the mean of its members' rewards of that step (a group
that agrees all episode long gets a group return of 1). All agents start and end their
episodes together, so a group's episode is its members'. ``group_size`` is one size for
every behavior, or behavior id -> size (a behavior left out, or 0: no groups).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorSpec,
    DecisionSteps,
    ObservationKind,
    ObservationSpec,
    TerminalSteps,
)
from envs.builtin._base import BehaviorState, BuiltinEnv, check_int, check_step_size, values_per_agent
from envs.exceptions import EnvError

_KEYS = ("vector", "visual", "entities", "continuous", "discrete")
NOISE_STD = 0.1


def _int_list(env: str, where: str, value: Any, minimum: int) -> List[int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise EnvError(f"{env}: env_args.{where} must be a list of integers >= {minimum}, got {value!r}")
    return [check_int(env, f"{where}[{i}]", v, minimum) for i, v in enumerate(value)]


def behavior_spec(env: str, name: str, declared: Any) -> BehaviorSpec:
    """``{vector, visual, continuous, discrete}`` of behavior ``name`` -> its spec, or an
    `EnvError` naming the key."""
    where = f"behaviors.{name}"
    if not isinstance(declared, Mapping):
        raise EnvError(f"{env}: env_args.{where} must be a mapping with keys {', '.join(_KEYS)}, got {declared!r}")
    unknown = [k for k in declared if k not in _KEYS]
    if unknown:
        raise EnvError(f"{env}: env_args.{where}.{unknown[0]} is not accepted (accepted: {', '.join(_KEYS)})")
    vector = _int_list(env, f"{where}.vector", declared.get("vector", []), 1)
    visual_raw = declared.get("visual", [])
    if isinstance(visual_raw, (str, bytes)) or not isinstance(visual_raw, Sequence):
        raise EnvError(f"{env}: env_args.{where}.visual must be a list of [H, W, C] shapes, got {visual_raw!r}")
    visual = []
    for i, shape in enumerate(visual_raw):
        dims = _int_list(env, f"{where}.visual[{i}]", shape, 1)
        if len(dims) != 3:
            raise EnvError(f"{env}: env_args.{where}.visual[{i}] must be [H, W, C], got {shape!r}")
        visual.append(tuple(dims))
    entities_raw = declared.get("entities", [])
    if isinstance(entities_raw, (str, bytes)) or not isinstance(entities_raw, Sequence):
        raise EnvError(f"{env}: env_args.{where}.entities must be a list of [max_entities, entity_size] shapes, got {entities_raw!r}")
    entities = []
    for i, shape in enumerate(entities_raw):
        dims = _int_list(env, f"{where}.entities[{i}]", shape, 1)
        if len(dims) != 2:
            raise EnvError(f"{env}: env_args.{where}.entities[{i}] must be [max_entities, entity_size], got {shape!r}")
        entities.append(tuple(dims))
    continuous = check_int(env, f"{where}.continuous", declared.get("continuous", 0), 0)
    discrete = _int_list(env, f"{where}.discrete", declared.get("discrete", []), 2)
    if not vector and not visual and not entities:
        raise EnvError(f"{env}: env_args.{where} needs an observation (vector, visual or entities)")
    if not continuous and not discrete:
        raise EnvError(f"{env}: env_args.{where} needs an action (continuous or discrete)")
    observations = [ObservationSpec((n,), f"vector_{i}") for i, n in enumerate(vector)]
    observations += [ObservationSpec(s, f"camera_{i}", ObservationKind.VISUAL) for i, s in enumerate(visual)]
    observations += [ObservationSpec(s, f"buffer_{i}", ObservationKind.ENTITIES) for i, s in enumerate(entities)]
    return BehaviorSpec(tuple(observations), ActionSpec(continuous, tuple(discrete)))


class _SignState(BehaviorState):
    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.sign = np.ones(n, np.float32)


class _SignTask(BuiltinEnv):
    """One behavior of a `LookAlike` (the task of the module docstring)."""

    def __init__(
        self, name: str, spec: BehaviorSpec, num_agents: int, episode_length: int, seed: int, ids: List[int]
    ) -> None:
        self._length = episode_length
        self._ids = ids  # shared by every behavior of the env: agent ids unique across them
        super().__init__(spec, (name,), num_agents, 0, seed)

    def _init_state(self, n: int) -> _SignState:
        return _SignState(n)

    def _reset_rows(self, state: BehaviorState, rows: np.ndarray) -> None:
        assert isinstance(state, _SignState)
        state.sign[rows] = np.where(self._rng.random(len(rows)) < 0.5, -1.0, 1.0)

    def _agrees(self, state: _SignState, action: ActionTuple) -> np.ndarray:
        if self._spec.action_spec.continuous_size:
            return np.sign(action.continuous[:, 0]) == state.sign
        return (action.discrete[:, 0] == 1) == (state.sign > 0)

    def _advance(self, state: BehaviorState, action: ActionTuple) -> Tuple[np.ndarray, np.ndarray]:
        assert isinstance(state, _SignState)
        reward = np.where(self._agrees(state, action), 1.0, -1.0).astype(np.float32) / self._length
        done = state.episode_steps + 1 >= self._length
        return reward, done

    def _observe(self, state: BehaviorState) -> List[np.ndarray]:
        assert isinstance(state, _SignState)
        out = []
        shown = False
        for o in self._spec.observation_specs:
            if o.kind == ObservationKind.VECTOR:
                values = self._rng.normal(0.0, NOISE_STD, (state.n,) + o.shape).astype(np.float32)
                if not shown:
                    values[:, 0] = state.sign
                    shown = True
                out.append(values)
            elif o.kind == ObservationKind.ENTITIES:
                # 1 to max_entities present (the first rows, as a BufferSensor fills them),
                # each with the sign first; the rest zero rows (absent).
                max_entities = o.shape[0]
                values = self._rng.normal(0.0, NOISE_STD, (state.n,) + o.shape).astype(np.float32)
                values[:, :, 0] = state.sign[:, None]
                count = self._rng.integers(1, max_entities + 1, state.n)
                present = np.arange(max_entities)[None, :] < count[:, None]
                out.append(values * present[:, :, None])
            else:
                fill = (state.sign + 1.0) / 2.0 if not any(
                    s.kind == ObservationKind.VECTOR for s in self._spec.observation_specs
                ) else 0.5
                out.append(np.broadcast_to(np.reshape(fill, (-1, 1, 1, 1)), (state.n,) + o.shape).astype(np.float32))
        return out

    def _expert(self, state: BehaviorState, rows: np.ndarray) -> ActionTuple:
        assert isinstance(state, _SignState)
        a = self._spec.action_spec
        sign = state.sign[rows]
        continuous = np.zeros((len(rows), a.continuous_size), np.float32)
        discrete = np.zeros((len(rows), a.discrete_size), np.int32)
        if a.continuous_size:
            continuous[:, 0] = sign
        elif a.discrete_size:
            discrete[:, 0] = (sign > 0).astype(np.int32)
        return ActionTuple(continuous, discrete)

    def _new_ids(self, state: BehaviorState, rows: np.ndarray) -> None:
        k = len(rows)
        state.agent_id[rows] = np.arange(self._ids[0], self._ids[0] + k, dtype=np.int32)
        self._ids[0] += k


def _group_ids(
    env: str, specs: Mapping[str, BehaviorSpec], num_agents: int, group_size: Union[int, Mapping[str, int]]
) -> Dict[str, np.ndarray]:
    """Behavior id -> ``[num_agents]`` int32 group ids (1, 2, ... over the behaviors in
    order) for the behaviors with groups; an `EnvError` naming the key otherwise."""
    if isinstance(group_size, Mapping):
        unknown = [str(k) for k in group_size if str(k) not in specs]
        if unknown:
            raise EnvError(f"{env}: env_args.group_size names {unknown[0]!r}, not a behavior ({', '.join(specs)})")
        sizes = {name: check_int(env, f"group_size.{name}", group_size.get(name, 0), 0) for name in specs}
    else:
        size = check_int(env, "group_size", group_size, 0)
        sizes = {name: size for name in specs}
    out: Dict[str, np.ndarray] = {}
    first = 1
    for name, size in sizes.items():
        if not size:
            continue
        if num_agents % size:
            raise EnvError(
                f"{env}: env_args.num_agents={num_agents} is not a multiple of the group size {size} of {name}"
            )
        out[name] = (first + np.arange(num_agents, dtype=np.int32) // size).astype(np.int32)
        first += num_agents // size
    return out


class LookAlike(BaseEnv):
    """Behaviors with a Unity game's names and spaces, and a simple task (configs' tests).

    See the module docstring for the task.
    """

    def __init__(
        self,
        behaviors: Optional[Mapping[str, Any]] = None,
        num_agents: int = 1,
        episode_length: int = 20,
        parameters: Sequence[str] = (),
        group_size: Union[int, Mapping[str, int]] = 0,
        seed: int = 0,
    ) -> None:
        """
        Args:
            behaviors: behavior id (``Name`` or ``Name?team=N``) -> ``{vector: [sizes],
                visual: [[H, W, C]], continuous: n, discrete: [branches]}``; default one
                behavior ``LookAlike`` with an 8-wide vector and 2 continuous actions.
            num_agents: agents per behavior.
            episode_length: steps of every episode (>= 1).
            parameters: the environment parameters it accepts (a game's names, e.g.
                3DBall's ``mass``); their values change nothing here.
            group_size: agents per group (0: none), for every behavior or per behavior id;
                ``num_agents`` must be a multiple of it (see the module docstring).
            seed: seeds the signs and the noise (behavior ``i`` draws from ``seed + i``'s
                generator).
        """
        env = type(self).__name__
        if behaviors is None:
            behaviors = {"LookAlike": {"vector": [8], "continuous": 2}}
        if not isinstance(behaviors, Mapping) or not behaviors:
            raise EnvError(f"{env}: env_args.behaviors must be a non-empty mapping of behavior name -> spaces")
        num_agents = check_int(env, "num_agents", num_agents, 1)
        episode_length = check_int(env, "episode_length", episode_length, 1)
        seed = check_int(env, "seed", seed, 0)
        specs = {str(name): behavior_spec(env, str(name), declared) for name, declared in behaviors.items()}
        check_step_size(env, max(values_per_agent(s) for s in specs.values()), len(specs), num_agents)
        ids = [0]
        self._tasks: Dict[str, _SignTask] = {
            name: _SignTask(name, spec, num_agents, episode_length, seed + i, ids)
            for i, (name, spec) in enumerate(specs.items())
        }
        self._specs = specs
        if isinstance(parameters, (str, bytes)) or not isinstance(parameters, Sequence):
            raise EnvError(f"{env}: env_args.parameters must be a list of parameter names, got {parameters!r}")
        self._parameters = tuple(str(p) for p in parameters)
        self.env_parameters: Dict[str, Any] = {}  # the values last given (unused by the task)
        self._group_ids = _group_ids(env, specs, num_agents, group_size)
        self._grouped: Dict[str, Tuple[DecisionSteps, TerminalSteps]] = {}

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def _task(self, behavior_name: str) -> _SignTask:
        if behavior_name not in self._tasks:
            raise KeyError(f"unknown behavior {behavior_name!r}; this env has {list(self._tasks)}")
        return self._tasks[behavior_name]

    def reset(self) -> None:
        for task in self._tasks.values():
            task.reset()
        self._add_groups()

    def step(self) -> None:
        for task in self._tasks.values():
            task.step()
        self._add_groups()

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        steps = self._grouped.get(behavior_name)
        return steps if steps is not None else self._task(behavior_name).get_steps(behavior_name)

    def _add_groups(self) -> None:
        """The grouped behaviors' steps with their group ids and group rewards: the mean of
        each group's rewards of the step (the terminal rows' at an episode end, when the
        decision rows are the next episode's, which has earned nothing yet)."""
        for name, ids in self._group_ids.items():
            decision, terminal = self._tasks[name].get_steps(name)
            size = int(np.count_nonzero(ids == ids[0]))

            def mean(rewards: np.ndarray) -> np.ndarray:
                return np.repeat(rewards.reshape(-1, size).mean(axis=1), size).astype(np.float32)

            # Every agent ends its episode in the same step: terminal rows are all or none.
            self._grouped[name] = (
                replace(decision, group_id=ids, group_reward=mean(decision.reward)),
                replace(terminal, group_id=ids, group_reward=mean(terminal.reward)) if len(terminal) else terminal,
            )

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._task(behavior_name).set_actions(behavior_name, action)

    def expert_action(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        """The actions that agree with every agent's sign (for tests)."""
        return self._task(behavior_name).expert_action(behavior_name, decision_steps)

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """Accepts the declared ``parameters`` (kept in `env_parameters`, unused)."""
        unknown = [str(k) for k in values if str(k) not in self._parameters]
        if unknown:
            accepted = ", ".join(self._parameters) or "none (declare them in env_args.parameters)"
            raise EnvError(f"{type(self).__name__}: unknown environment parameter {unknown[0]!r} (accepted: {accepted})")
        self.env_parameters.update(values)

    def close(self) -> None:
        for task in self._tasks.values():
            task.close()
