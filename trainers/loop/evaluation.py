"""Evaluation (``evaluation:`` in a behavior's settings): the policy's mode played for whole
episodes on an environment of its own.

`Evaluator.run` resets its env (an `EnvManager` built like the training envs, with one
worker and `evaluation_seed`), then steps it until the evaluated behavior has finished the
episodes asked for; every behavior of the env acts through its actor with
``deterministic=True`` (each distribution's mode), one inference call per behavior and
step, as the controller acts. It returns each episode's return and length
(`EvaluationResult`); the controller (`trainers.loop.controller`) decides when to evaluate,
writes the stats and keeps the best model.

What keeps training exactly as it is without evaluation:

- the training envs are neither stepped nor reset: this is another env instance, seeded
  apart from them (`evaluation_seed`);
- a deterministic act fetches the distributions' modes, which depend on no random op: the
  in-graph sampling ops, whose state advances only when they run, stay where training left
  them; no normalizer is updated, no trajectory is recorded, no episode is counted in the
  trainer's episodes or ``Environment/Cumulative Reward``;
- recurrent actors keep a memory per agent key: evaluation agents are keyed
  ``("evaluation", worker, agent id)``, which no training agent's ``(worker, agent id)``
  equals, and every key used is forgotten when `run` returns, interrupted or not.

The episodes counted are the first ``episodes`` that end (with several agents, those that
end on the same step in agent order); agents still in an episode then are dropped, and the
next evaluation starts from a reset. An evaluation gives up after ``episodes x
MAX_STEPS_PER_EPISODE`` env steps with the episodes that ended by then (an env without a
time limit, as ML-Agents' Simple, and a mode that never reaches the goal); a stop request
(Ctrl-C, SIGTERM) ends it between two steps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, Hashable, List, Mapping, Optional, Sequence, Set, Tuple, cast

import numpy as np

from envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, allowed_mask, behavior_ids
from envs.exceptions import EnvInterrupted, EnvWorkerError
from envs.managers.base import EnvManager, EnvStep
from trainers.loop.trajectory import AgentProcessor, EpisodeEnd

if TYPE_CHECKING:  # annotations only: trainers.policy imports TensorFlow
    from trainers.policy import Actor

#: The evaluation env's seed is the run's seed plus this: far from the training envs'
#: ``seed + i`` (i < `envs.managers.base.MAX_NUM_ENVS`).
EVALUATION_SEED_OFFSET = 10_000
#: Agent keys of evaluation agents start with this (training agents: ``(worker, agent id)``).
EVALUATION_KEY = "evaluation"


#: Env steps an evaluation may take per requested episode before it stops with the
#: episodes that ended (none: no evaluation is written).
MAX_STEPS_PER_EPISODE = 10_000


def evaluation_seed(seed: int) -> int:
    """The evaluation env's seed for a run whose (resolved) seed is ``seed``: ``seed +
    10000``, wrapped to stay below 2**31 (what every env kind accepts)."""
    return (int(seed) + EVALUATION_SEED_OFFSET) % (2**31 - 1)


def evaluation_key(worker: int, agent_id: int) -> Tuple[str, int, int]:
    """An evaluation agent's key for its actor's per-agent memories."""
    return (EVALUATION_KEY, worker, agent_id)


@dataclass(frozen=True)
class EvaluationResult:
    """The episodes of one evaluation, in the order they ended."""

    rewards: Tuple[float, ...]
    """Each episode's return (the sum of its rewards)."""
    lengths: Tuple[int, ...]
    """Each episode's length in steps."""

    @property
    def mean_reward(self) -> float:
        return float(np.mean(self.rewards))

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths))


@dataclass(frozen=True)
class EvaluatedBehavior:
    """What acts for one behavior in the evaluation env."""

    actor: "Actor"
    spec: BehaviorSpec


class Evaluator:
    """Plays deterministic episodes on its own env (which it does not own: the caller
    closes it)."""

    def __init__(self, env: EnvManager) -> None:
        self.env = env
        #: Behavior name -> the env's ids of it (``Name?team=N`` for Unity games).
        self.ids: Dict[str, Tuple[str, ...]] = {
            name: tuple(ids) for name, ids in behavior_ids(env.behavior_specs).items()
        }

    def run(
        self,
        behavior: str,
        episodes: int,
        actors: Mapping[str, EvaluatedBehavior],
        stop: Callable[[], bool],
    ) -> Optional[EvaluationResult]:
        """Plays until ``behavior`` has finished ``episodes`` episodes.

        Args:
            behavior: the behavior evaluated (its episodes are counted).
            episodes: how many.
            actors: every behavior of the env (each needs actions), by name.
            stop: True once the run must stop (checked before every step; also cuts short
                the env's waits for workers in other processes).

        Returns:
            The episodes, or None when ``stop`` ended the evaluation first.
        """
        missing = [name for name in self.ids if name not in actors]
        if behavior not in actors or missing:
            raise ValueError(f"evaluation of {behavior!r}: no actor for {', '.join(missing) or behavior!r}")
        processors = {name: AgentProcessor(a.spec, 1, record=False) for name, a in actors.items() if name in self.ids}
        # An env without a time limit (ML-Agents' Simple) and a policy whose mode never
        # ends an episode would play forever: the evaluation gives up after this many steps.
        step_budget = episodes * MAX_STEPS_PER_EPISODE
        env_steps = 0
        used: Dict[str, Set[Hashable]] = {name: set() for name in processors}
        finished: List[EpisodeEnd] = []
        self.env.set_stop_check(stop)
        try:
            steps = self.env.reset()
            while True:
                for name, processor in processors.items():
                    actor = actors[name].actor
                    for env_step in steps:
                        for bid in self.ids[name]:
                            decision, terminal = env_step.steps[bid]
                            _, ended = processor.add_terminal(env_step.worker_id, terminal)
                            if name == behavior:
                                finished.extend(ended)
                            if actor.use_recurrent and len(terminal):  # the next episode starts from zeros
                                actor.forget_agents(
                                    [evaluation_key(env_step.worker_id, a) for a in terminal.agent_id.tolist()]
                                )
                            processor.add_decision(env_step.worker_id, decision)
                if len(finished) >= episodes or env_steps >= step_budget:
                    break
                if stop():
                    return None
                steps = self.env.step(self._act(steps, actors, processors, used))
                env_steps += 1
        except EnvInterrupted:
            return None  # a stop request ended a wait for the env's workers
        except EnvWorkerError as exc:  # not to be taken for a training env's worker
            raise EnvWorkerError(f"the evaluation env: {exc}") from exc
        finally:
            self.env.set_stop_check(None)
            for name, keys in used.items():
                if keys:
                    actors[name].actor.forget_agents(list(keys))
        done = finished[:episodes]
        return EvaluationResult(tuple(e.reward for e in done), tuple(e.length for e in done))

    def _act(
        self,
        steps: Sequence[EnvStep],
        actors: Mapping[str, EvaluatedBehavior],
        processors: Mapping[str, AgentProcessor],
        used: Dict[str, Set[Hashable]],
    ) -> List[Dict[str, ActionTuple]]:
        """The deterministic actions of every agent asking for one: one inference call per
        behavior (the controller's `_act`, without what training records)."""
        actions: List[Dict[str, ActionTuple]] = [dict() for _ in range(self.env.num_workers)]
        for name, processor in processors.items():
            actor, spec = actors[name].actor, actors[name].spec
            parts = [(env_step.worker_id, bid, env_step.steps[bid][0]) for env_step in steps for bid in self.ids[name]]
            parts = [p for p in parts if len(p[2])]
            if not parts:
                continue
            decisions: List[DecisionSteps] = [d for _, _, d in parts]
            branches = spec.action_spec.discrete_branches
            obs = [np.concatenate([d.obs[i] for d in decisions]) for i in range(len(spec.observation_specs))]
            # With discrete branches every part has a mask.
            masks = (
                np.concatenate([cast(np.ndarray, allowed_mask(d.action_mask, len(d), branches)) for d in decisions])
                if branches
                else None
            )
            keys: Optional[List[Hashable]] = None
            if actor.use_recurrent:
                keys = [evaluation_key(w, a) for w, _, d in parts for a in d.agent_id.tolist()]
                used[name].update(keys)
            info = actor.act(obs, masks, deterministic=True, agent_keys=keys)
            start = 0
            for worker, bid, decision in parts:
                rows = slice(start, start + len(decision))
                start = rows.stop
                actions[worker][bid] = ActionTuple.trusted(info.env_continuous[rows], info.discrete[rows])
                processor.add_actions(
                    worker, decision, [], info.raw_continuous[rows], info.discrete[rows], None, info.log_probs[rows]
                )
        return actions
