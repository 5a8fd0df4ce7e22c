"""Deterministic built-in test environments (ML-Agents' test environments:
docs/ML-AGENTS-FACTS.md#4-test-environments-used-to-prove-learning; `Simple` and `Memory`
are by default ML-Agents Release 22's ``SimpleEnvironment`` and ``MemoryEnvironment``).

* `Simple`: move to the goal shown in the observations (vector and/or visual, continuous,
  discrete or hybrid actions, several agents and behaviors).
* `Memory`: `Simple` with the goal hidden after the first observations (needs an LSTM).
* `Chain`: sparse reward at the far end of a chain (needs exploration, e.g. curiosity).
* `LookAlike`: the behavior names and spaces of a Unity game (ML-Agents' example
  configs train end to end on it) and a simple sign-matching task.
* `Paddles`: a two-team adversarial paddle game (``Name?team=0`` vs ``?team=1``, +1 / -1 /
  0 results), for self-play.
* `Rendezvous` (`envs.builtin.rendezvous`): groups of agents that must all reach a meeting
  point, members leaving as they arrive; a group reward only (multi-agent groups, POCA).
* `Sorter` (`envs.builtin.sorter`): visit a variable number of numbered tiles in ascending
  order; the tiles are an entity observation (variable-length, attention).

Every env draws from one seeded ``np.random.Generator`` and has
``expert_action(behavior_name, decision_steps)`` (scripted optimal actions, for demos) and
``optimal_return()``. `CrashEnv` (``builtin:_Crash``) fails on purpose, for manager tests.
"""
from envs.builtin._base import BuiltinEnv
from envs.builtin.chain import Chain
from envs.builtin.crash import CrashEnv
from envs.builtin.lookalike import LookAlike
from envs.builtin.paddles import Paddles
from envs.builtin.simple import Memory, Simple

__all__ = ["BuiltinEnv", "Chain", "CrashEnv", "LookAlike", "Memory", "Paddles", "Simple"]
