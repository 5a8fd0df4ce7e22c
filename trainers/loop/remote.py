"""Env managers whose workers also *act* (`RemoteActingManager`), and what their steps carry
(`ActedEnvStep`): the contract between `trainers.loop.controller` and remote rollout
workers such as `trainers.loop.ray_rollouts`, without Ray itself.

A remote worker owns environments and an acting copy of every behavior's actor. Each step
of the loop it acts on the decisions it last returned, with the weights the learner last
sent it, steps its envs with those actions, and returns the new steps together with the
actions it took (`ActedEnvStep.acted`: behavior id -> `ActionInfo` for the agents of that
worker's previous `DecisionSteps`, in their order). The controller records them exactly as
the actions it would have computed itself (`TrainerController._add_remote_actions`), so
trajectories, stats, curricula and updates run unchanged.

Weights: before every step the controller has the manager send what changed
(`RemoteActingManager.attach`'s ``version``: the count of finished updates; normalizer
statistics are compared each step), so a worker acts with the weights the local loop
would act with at that step.
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Dict, Mapping, Tuple

from envs.base_env import BehaviorSpec
from envs.managers.base import EnvManager, EnvStep
from trainers.config import TrainerSettings
from trainers.policy import ActionInfo, Actor


@dataclass
class ActedEnvStep(EnvStep):
    """An `EnvStep` from a worker that acted itself.

    Attributes:
        acted: behavior id -> the `ActionInfo` the worker acted with on its previous
            decisions of that id (rows in the order of that `DecisionSteps`: ``[n_i, c]``,
            ``[n_i, b]``, ``[n_i]`` log-probabilities, recurrent ``[n_i, m]``); empty after a
            reset.
        restarted: the worker died and this is its replacement's first step (a reset):
            the agents the learner kept for this worker are gone.
    """

    acted: Dict[str, ActionInfo] = field(default_factory=dict)
    restarted: bool = False


@dataclass(frozen=True)
class RemoteBehavior:
    """What a remote worker needs to act for one behavior: the learner's actor (whose
    weights it copies), the spec and settings its acting copy is built from, and the
    environment's ids of the behavior (``Name`` or ``Name?team=N``)."""

    actor: Actor
    spec: BehaviorSpec
    settings: TrainerSettings
    ids: Tuple[str, ...]


class RemoteActingManager(EnvManager):
    """An env manager whose workers act (see the module docstring).

    `step` / `step_async` ignore the actions given (the workers chose them); `reset` and
    each wait return `ActedEnvStep`s. `attach` must come before the first `reset`.
    """

    steps_in_background = True

    @abstractmethod
    def attach(
        self, behaviors: Mapping[str, RemoteBehavior], deterministic: bool, version: Callable[[], int]
    ) -> None:
        """Builds every worker's acting copies of ``behaviors``' actors.

        Args:
            behaviors: behavior name -> `RemoteBehavior`.
            deterministic: act with the distributions' modes (``--inference``).
            version: a number that changes whenever the learner's acting weights did (the
                finished updates); normalizer statistics are compared at every step.
        """
