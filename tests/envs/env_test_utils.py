"""Helpers shared by the env tests: run episodes with a policy and collect returns."""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

import numpy as np

from envs.base_env import ActionTuple, BaseEnv, DecisionSteps

Policy = Callable[[str, DecisionSteps], ActionTuple]


def run_episodes(env: BaseEnv, policy: Policy, num_steps: int) -> Tuple[List[float], List[bool]]:
    """Step ``env`` (already reset) ``num_steps`` times with ``policy``.

    Returns:
        The undiscounted return and the ``interrupted`` flag of every finished episode.
    """
    returns: Dict[Tuple[str, int], float] = {}
    done_returns: List[float] = []
    interrupted: List[bool] = []
    for _ in range(num_steps):
        for name in env.behavior_specs:
            decision, _ = env.get_steps(name)
            env.set_actions(name, policy(name, decision))
        env.step()
        for name in env.behavior_specs:
            decision, terminal = env.get_steps(name)
            for i, agent in enumerate(terminal.agent_id):
                done_returns.append(returns.pop((name, int(agent)), 0.0) + float(terminal.reward[i]))
                interrupted.append(bool(terminal.interrupted[i]))
            for i, agent in enumerate(decision.agent_id):
                key = (name, int(agent))
                returns[key] = returns.get(key, 0.0) + float(decision.reward[i])
    return done_returns, interrupted


def random_policy(env: BaseEnv, seed: int = 0) -> Policy:
    """Uniform random actions from a seeded generator."""
    rng = np.random.default_rng(seed)

    def act(name: str, decision: DecisionSteps) -> ActionTuple:
        return env.behavior_specs[name].action_spec.random_action(len(decision), rng)

    return act
