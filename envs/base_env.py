"""The environment API, shaped like ML-Agents' low-level Python API.

An environment holds one or more *behaviors*; each behavior has many *agents*. Every
`step()` all agents of every behavior that are alive request a decision. After `step()`:

* agents whose episode ended in that step appear in ``TerminalSteps`` (with their final
  observation, last reward and ``interrupted`` = "ended by a time limit, not a true
  terminal state");
* agents that need an action appear in ``DecisionSteps``. An agent that terminated is reset
  by the environment and shows up again in ``DecisionSteps`` under a **new agent id**.

Observations are float32; visual observations are ``[H, W, C]`` in ``[0, 1]``.
``action_mask`` follows ML-Agents: one ``[n_agents, branch_size]`` bool array per discrete
branch, ``True`` meaning the action is *not* available; `allowed_mask` turns it into the
trainer's ``[n_agents, sum(branches)]`` float32 with 1 = allowed.
"""
from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np


class ObservationKind(str, enum.Enum):
    """Vector observations are flat ``[size]``; visual ones are images ``[H, W, C]``;
    entity observations (Unity's BufferSensor, ML-Agents' variable-length observations:
    dimension properties ``(VARIABLE_SIZE, NONE)``) are ``[max_entities, entity_size]``,
    one row per entity, absent entities all-zero rows."""

    VECTOR = "vector"
    VISUAL = "visual"
    ENTITIES = "entities"


@dataclass(frozen=True)
class BehaviorId:
    """A behavior name as an environment reports it, split as ML-Agents splits it.

    Unity games (ML-Agents 0.14 and later) name every behavior ``Name?team=N``
    (``3DBall?team=0``), self-play or not; ML-Agents keys the config section, the
    results folder, the TensorBoard run and the exported model by ``Name``
    (`BehaviorIdentifiers.from_name_behavior_id`). Names without the suffix (built-in
    and Gymnasium envs, older games) are team 0.

    Attributes:
        name: the behavior name without its team suffix (the config's section name).
        team: the team id (``N`` of ``?team=N``; 0 without a suffix).
        full: the name exactly as the environment reported it.
    """

    name: str
    team: int
    full: str

    @classmethod
    def parse(cls, full: str) -> "BehaviorId":
        """Splits ``Name?team=N``; a name without a well-formed suffix is kept whole, team 0."""
        name, sep, query = full.rpartition("?team=")
        if sep and name and query.lstrip("-").isdigit():
            return cls(name, int(query), full)
        return cls(full, 0, full)


def behavior_ids(full_names: Iterable[str]) -> Dict[str, List[str]]:
    """An environment's behavior ids grouped by name (`BehaviorId.name`), in the env's order:
    ``["Striker?team=0", "Striker?team=1"]`` -> ``{"Striker": [both]}``."""
    groups: Dict[str, List[str]] = {}
    for full in full_names:
        groups.setdefault(BehaviorId.parse(full).name, []).append(full)
    return groups


def specs_by_name(specs: Mapping[str, "BehaviorSpec"]) -> Dict[str, "BehaviorSpec"]:
    """An environment's behavior specs keyed by name (teams of one behavior share its spec,
    as every team of a Unity behavior runs the same Agent code): what config sections,
    trainers, results folders and exported models are keyed by."""
    return {name: specs[ids[0]] for name, ids in behavior_ids(specs).items()}


@dataclass(frozen=True)
class ObservationSpec:
    """One observation of a behavior.

    Attributes:
        shape: per-agent shape, ``(size,)`` for vector, ``(H, W, C)`` for visual,
            ``(max_entities, entity_size)`` for entities.
        name: a human-readable name (sensor name in Unity).
        kind: vector, visual or entities.
    """

    shape: Tuple[int, ...]
    name: str = "obs"
    kind: ObservationKind = ObservationKind.VECTOR

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "kind", ObservationKind(self.kind))
        if self.kind == ObservationKind.VISUAL and len(self.shape) != 3:
            raise ValueError(f"visual observation {self.name!r} needs shape (H, W, C), got {self.shape}")
        if self.kind == ObservationKind.VECTOR and len(self.shape) != 1:
            raise ValueError(f"vector observation {self.name!r} needs shape (size,), got {self.shape}")
        if self.kind == ObservationKind.ENTITIES and (len(self.shape) != 2 or min(self.shape) < 1):
            raise ValueError(
                f"entity observation {self.name!r} needs shape (max_entities, entity_size), got {self.shape}"
            )


@dataclass(frozen=True)
class ActionSpec:
    """Continuous and/or discrete actions (hybrid when both are present).

    Attributes:
        continuous_size: number of continuous action dimensions (values in [-1, 1]).
        discrete_branches: size of each discrete branch, e.g. ``(3, 2)``.
    """

    continuous_size: int = 0
    discrete_branches: Tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "continuous_size", int(self.continuous_size))
        object.__setattr__(self, "discrete_branches", tuple(int(b) for b in self.discrete_branches))

    @property
    def discrete_size(self) -> int:
        """Number of discrete branches."""
        return len(self.discrete_branches)

    @property
    def is_continuous(self) -> bool:
        return self.continuous_size > 0

    @property
    def is_discrete(self) -> bool:
        return self.discrete_size > 0

    def empty_action(self, n_agents: int) -> "ActionTuple":
        """Zeros for ``n_agents`` agents."""
        return ActionTuple(
            continuous=np.zeros((n_agents, self.continuous_size), dtype=np.float32),
            discrete=np.zeros((n_agents, self.discrete_size), dtype=np.int32),
        )

    def random_action(self, n_agents: int, rng: np.random.Generator) -> "ActionTuple":
        """Uniform random actions: continuous in [-1, 1], discrete uniform per branch."""
        cont = rng.uniform(-1.0, 1.0, size=(n_agents, self.continuous_size)).astype(np.float32)
        disc = np.zeros((n_agents, self.discrete_size), dtype=np.int32)
        for i, b in enumerate(self.discrete_branches):
            disc[:, i] = rng.integers(0, b, size=n_agents)
        return ActionTuple(continuous=cont, discrete=disc)


@dataclass(frozen=True)
class BehaviorSpec:
    """What a behavior observes and how it acts."""

    observation_specs: Tuple[ObservationSpec, ...]
    action_spec: ActionSpec

    def __post_init__(self) -> None:
        object.__setattr__(self, "observation_specs", tuple(self.observation_specs))


@dataclass
class ActionTuple:
    """Actions for a batch of agents.

    Attributes:
        continuous: ``[n_agents, continuous_size]`` float32.
        discrete: ``[n_agents, num_branches]`` int32.
    """

    continuous: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    discrete: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int32))

    def __post_init__(self) -> None:
        self.continuous = np.asarray(self.continuous, dtype=np.float32)
        self.discrete = np.asarray(self.discrete, dtype=np.int32)
        if self.continuous.ndim == 1:
            self.continuous = self.continuous.reshape(-1, 1) if self.continuous.size else self.continuous.reshape(0, 0)
        if self.discrete.ndim == 1:
            self.discrete = self.discrete.reshape(-1, 1) if self.discrete.size else self.discrete.reshape(0, 0)

    @classmethod
    def trusted(cls, continuous: np.ndarray, discrete: np.ndarray) -> "ActionTuple":
        """From arrays already 2-D float32 / int32 (the trainer's own outputs), unchecked:
        the per-step path skips ``__post_init__``'s conversions."""
        action = cls.__new__(cls)
        action.continuous = continuous
        action.discrete = discrete
        return action

    def __len__(self) -> int:
        return max(self.continuous.shape[0], self.discrete.shape[0])


def _group_fields(
    n: int, group_id: Optional[np.ndarray], group_reward: Optional[np.ndarray]
) -> Tuple[np.ndarray, np.ndarray]:
    """Steps' ``group_id`` ``[n]`` int32 and ``group_reward`` ``[n]`` float32: None gives
    zeros (no group: built-in and Gymnasium envs), anything else is taken as those dtypes
    (no copy when it already is one)."""
    gid = np.zeros(n, np.int32) if group_id is None else np.asarray(group_id, np.int32)
    grew = np.zeros(n, np.float32) if group_reward is None else np.asarray(group_reward, np.float32)
    if gid.shape != (n,) or grew.shape != (n,):
        raise ValueError(f"group_id {gid.shape} and group_reward {grew.shape} must be [{n}], one per agent")
    return gid, grew


@dataclass
class DecisionSteps:
    """Agents of one behavior that need an action now.

    Attributes:
        obs: one array per observation spec, ``[n_agents, *shape]`` float32.
        reward: ``[n_agents]`` float32, reward received since the last decision.
        agent_id: ``[n_agents]`` int32.
        action_mask: ``None`` or one ``[n_agents, branch_size]`` bool array per discrete
            branch; ``True`` = action unavailable.
        group_id: ``[n_agents]`` int32, the agent's multi-agent group (Unity's
            ``SimpleMultiAgentGroup``); 0 = in no group, as ML-Agents. None (the default)
            becomes zeros.
        group_reward: ``[n_agents]`` float32, the reward of the agent's group since the last
            decision (every member receives the same); None (the default) becomes zeros.
    """

    obs: List[np.ndarray]
    reward: np.ndarray
    agent_id: np.ndarray
    action_mask: Optional[List[np.ndarray]] = None
    group_id: np.ndarray = None  # type: ignore[assignment]  # None -> zeros in __post_init__
    group_reward: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.group_id, self.group_reward = _group_fields(len(self), self.group_id, self.group_reward)

    def __len__(self) -> int:
        return int(self.agent_id.shape[0])

    @staticmethod
    def empty(spec: BehaviorSpec) -> "DecisionSteps":
        return DecisionSteps(
            obs=[np.zeros((0,) + o.shape, np.float32) for o in spec.observation_specs],
            reward=np.zeros(0, np.float32),
            agent_id=np.zeros(0, np.int32),
            action_mask=None,
        )


@dataclass
class TerminalSteps:
    """Agents of one behavior whose episode ended in the last step.

    Attributes:
        obs: final observations, one ``[n_agents, *shape]`` float32 array per spec.
        reward: ``[n_agents]`` float32, the last reward of the episode.
        interrupted: ``[n_agents]`` bool; True when a time limit ended the episode (the
            state is not terminal, so value targets bootstrap).
        agent_id: ``[n_agents]`` int32.
        group_id: ``[n_agents]`` int32, the agent's group (0 = none); None becomes zeros.
        group_reward: ``[n_agents]`` float32, the group's reward since the agent's last
            decision (a group that ends its episode gives its last reward here, to every
            member); None becomes zeros.
    """

    obs: List[np.ndarray]
    reward: np.ndarray
    interrupted: np.ndarray
    agent_id: np.ndarray
    group_id: np.ndarray = None  # type: ignore[assignment]  # None -> zeros in __post_init__
    group_reward: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.group_id, self.group_reward = _group_fields(len(self), self.group_id, self.group_reward)

    def __len__(self) -> int:
        return int(self.agent_id.shape[0])

    @staticmethod
    def empty(spec: BehaviorSpec) -> "TerminalSteps":
        return TerminalSteps(
            obs=[np.zeros((0,) + o.shape, np.float32) for o in spec.observation_specs],
            reward=np.zeros(0, np.float32),
            interrupted=np.zeros(0, bool),
            agent_id=np.zeros(0, np.int32),
        )


class BaseEnv(ABC):
    """An environment with one or more behaviors, each with one or more agents."""

    @property
    @abstractmethod
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        """Behavior name -> spec. Fixed for the lifetime of the env."""

    @abstractmethod
    def reset(self) -> None:
        """Start new episodes for every agent."""

    @abstractmethod
    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        """The agents of ``behavior_name`` that need a decision / just terminated."""

    @abstractmethod
    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        """Actions for the agents of the last ``DecisionSteps``, in the same order."""

    @abstractmethod
    def step(self) -> None:
        """Advance the simulation one step with the actions set."""

    @abstractmethod
    def close(self) -> None:
        """Release resources. Idempotent."""

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """Environment parameters (name -> `envs.parameters.ParameterValue`), taken from the
        next episode start of each agent on (the env's own rule; see its docstring).

        Raises:
          EnvError: the env takes no parameters, or not these (one line naming them). This
            default: an env that declares none.
        """
        if values:
            from envs.exceptions import EnvError  # the bottom module imports nothing of envs

            raise EnvError(
                f"{type(self).__name__}: takes no environment parameters (got {', '.join(map(str, values))})"
            )

    def __enter__(self) -> "BaseEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


StepResult = Dict[str, Tuple[DecisionSteps, TerminalSteps]]


def all_steps(env: BaseEnv, behavior_names: Optional[Sequence[str]] = None) -> StepResult:
    """``get_steps`` for every behavior (or those named), as one dict."""
    names = list(env.behavior_specs) if behavior_names is None else list(behavior_names)
    return {name: env.get_steps(name) for name in names}


#: The all-allowed masks `allowed_mask` shares, one per ``(rows, width)``: read-only.
_ALL_ALLOWED: Dict[Tuple[int, int], np.ndarray] = {}


def allowed_mask(
    masks: Union[None, np.ndarray, Sequence[np.ndarray]],
    n: int,
    branches: Sequence[int],
    shared: bool = False,
) -> Optional[np.ndarray]:
    """ML-Agents' action masks -> the trainer's: ``[n, sum(branches)]`` float32, 1 = allowed.

    ML-Agents (`DecisionSteps.action_mask`, a demonstration's ``action_masks``) marks an
    action True when it is *unavailable*; the trainer's policies, buffers and exported
    models take a float mask where 1 means allowed. This is the one place that turns one
    convention into the other.

    Args:
        masks: None (every action allowed); one ``[n, branch_size]`` bool array per
            discrete branch (`DecisionSteps.action_mask`); or one ``[n, sum(branches)]``
            bool array with the branches side by side (`Demonstration.action_masks`).
        n: rows (agents asking for a decision, or a demonstration's steps).
        branches: the discrete branch sizes (`ActionSpec.discrete_branches`).
        shared: with ``masks`` None, return one cached read-only all-ones array per
            ``(n, width)`` instead of a new one: the training loop asks on every env step,
            and nothing writes into mask arrays.
    Returns:
        ``[n, sum(branches)]`` float32 (1 = allowed, 0 = not), or None when there are no
        discrete branches.
    Raises:
        ValueError: a flat ``masks`` array that is not ``[n, sum(branches)]``.
    """
    if not branches:
        return None
    width = sum(branches)
    if masks is None:
        if not shared:
            return np.ones((n, width), np.float32)
        key = (n, width)
        if key not in _ALL_ALLOWED:
            _ALL_ALLOWED[key] = np.ones(key, np.float32)
            _ALL_ALLOWED[key].setflags(write=False)
        return _ALL_ALLOWED[key]
    if isinstance(masks, np.ndarray):
        if masks.shape != (n, width):
            raise ValueError(f"action mask of shape {masks.shape}, expected {(n, width)} (branches {list(branches)})")
        unavailable = masks
    else:
        unavailable = np.concatenate(masks, axis=1)
    return 1.0 - unavailable.astype(np.float32)
