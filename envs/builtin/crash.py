"""`_Crash`: a hidden built-in env that fails on purpose, for testing env managers.

Registered as ``builtin:_Crash`` but not listed by `envs.registry.describe_env_ids`.
It lives in the package (not in a test file) so that a spawned worker process can
import it by env id. It is `Simple` plus failure switches, counted in ``step()`` calls
since construction (step 1 is the first ``step()``):

* ``raise_at_step=k``: ``step()`` number k raises ``RuntimeError``;
* ``exit_at_step=k``: ``step()`` number k kills the process with ``os._exit(3)``
  (a worker that dies without a word);
* ``hang_at_step=k``: ``step()`` number k sleeps ``hang_seconds``;
* ``hang_on_close=True``: ``close()`` sleeps ``hang_seconds`` (a worker slow to close);
* ``raise_on_init=True``: the constructor raises ``RuntimeError``;
* ``spec_mismatch=True``: the env's vector observation is one wider than asked (a worker
  whose behavior specs differ from the others').

``crash_seed=s`` limits every switch to the env built with seed ``s``; with the managers'
``seed + worker_index`` rule that picks one worker. Any other kwarg goes to `Simple`.
"""
from __future__ import annotations

import os
import time
from typing import Any, Optional

from envs.builtin.simple import Simple


class CrashEnv(Simple):
    """`Simple` that raises, exits or hangs on a chosen step (see the module docstring)."""

    def __init__(
        self,
        raise_at_step: int = -1,
        exit_at_step: int = -1,
        hang_at_step: int = -1,
        hang_seconds: float = 3600.0,
        raise_on_init: bool = False,
        spec_mismatch: bool = False,
        hang_on_close: bool = False,
        crash_seed: Optional[int] = None,
        seed: int = 0,
        **simple_kwargs: Any,
    ) -> None:
        armed = crash_seed is None or int(crash_seed) == int(seed)
        if armed and raise_on_init:
            raise RuntimeError(f"_Crash: raise_on_init (seed {seed})")
        if armed and spec_mismatch:
            simple_kwargs["vec_obs_size"] = int(simple_kwargs.get("vec_obs_size", 1)) + 1
        super().__init__(seed=seed, **simple_kwargs)
        self._raise_at = raise_at_step if armed else -1
        self._exit_at = exit_at_step if armed else -1
        self._hang_at = hang_at_step if armed else -1
        self._hang_seconds = float(hang_seconds)
        self._hang_on_close = bool(hang_on_close) and armed
        self._step_count = 0

    def step(self) -> None:
        self._step_count += 1
        if self._step_count == self._raise_at:
            raise RuntimeError(f"_Crash: raise_at_step {self._raise_at}")
        if self._step_count == self._exit_at:
            os._exit(3)
        if self._step_count == self._hang_at:
            time.sleep(self._hang_seconds)
        super().step()

    def close(self) -> None:
        if self._hang_on_close:
            self._hang_on_close = False  # once
            time.sleep(self._hang_seconds)
        super().close()
