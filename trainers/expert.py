"""Expert data: a demonstration's rows as the trainer's imitation modules read them.

GAIL's discriminator (`trainers.reward_signals.gail`) and behavioral cloning
(`trainers.bc`) both learn from a `.demo` file (or a directory of them); this module reads
it once per module, checks it against the behavior's spec and converts it to the
trainer's conventions: float32 observations, environment-space continuous actions, and
action masks with 1 = allowed (`envs.base_env.allowed_mask`; the file's True means
"unavailable"). Plain numpy: no TensorFlow here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

import numpy as np

from envs.base_env import BehaviorSpec, allowed_mask
from envs.demo import check_demo_spec, load_demonstration
from envs.exceptions import DemoError


@dataclass(frozen=True)
class ExpertData:
    """The demonstration's rows as the discriminator reads them.

    Attributes:
        obs: one ``[T, *shape_i]`` float32 array per observation.
        continuous_action: ``[T, c]`` float32, environment space ([-1, 1]).
        discrete_action: ``[T, b]`` int32.
        done: ``[T]`` float32, 1 where the episode ended after the row's action.
        action_mask: ``[T, sum(branches)]`` float32, 1 = allowed (all ones when the file
            has no masks; ``[T, 0]`` without discrete branches).
    """

    obs: List[np.ndarray]
    continuous_action: np.ndarray
    discrete_action: np.ndarray
    done: np.ndarray
    action_mask: np.ndarray

    def __len__(self) -> int:
        return int(self.done.shape[0])


def load_expert_data(path: str, behavior_name: str, spec: BehaviorSpec) -> ExpertData:
    """Reads ``path`` (a .demo file or a directory of them) and checks it against the
    behavior's spec.

    Args:
        path: the ``demo_path`` of a ``gail`` or ``behavioral_cloning`` section.
        behavior_name: the behavior the demonstration must have been recorded for (named
            in errors; the spec is what is compared).
        spec: the behavior's spec.
    Returns:
        The rows, ``T`` of them (at least one).
    Raises:
        DemoError: unreadable demo, a spec mismatch, or no rows.
    """
    demo = load_demonstration(path)
    check_demo_spec(demo, behavior_name, spec)
    if len(demo) == 0:
        raise DemoError(f"{path}: the demonstration holds no steps")
    mask = allowed_mask(demo.action_masks, len(demo), spec.action_spec.discrete_branches)
    if mask is None:  # no discrete branches: BC's sequences still carry a [T, 0] mask column
        mask = np.ones((len(demo), 0), np.float32)
    return ExpertData(
        [np.asarray(o, np.float32) for o in demo.obs],
        np.asarray(demo.continuous_actions, np.float32),
        np.asarray(demo.discrete_actions, np.int32),
        np.asarray(demo.done, np.float32),
        mask,
    )
