"""The size limits (``MAX_*``): sizes that cannot be built or allocated are refused when
the settings are built, with the YAML path and the limit."""

from __future__ import annotations

from typing import Any

from trainers.config._fields import _InvalidField, _describe


# --------------------------------------------------------------------------------------
# Size limits (issue 30): refused when the settings are built, before any graph or buffer.
#
# Each limit is far above anything ML-Agents ships (the largest values in every config of
# its history, 0.9 to 1.1: hidden_units 512, num_layers 4, memory_size 256,
# sequence_length 64, encoding_size 256, buffer_size 2,000,000 for SAC Pyramids) or a real
# run needs, and low enough that what passes can be built: a larger value either cannot be
# allocated (a TensorFlow or numpy traceback) or builds for many minutes without a word.
# --------------------------------------------------------------------------------------

MAX_HIDDEN_UNITS = 8192
"""Units of one hidden layer (``hidden_units``, a signal's ``encoding_size``): one layer of
8192 x 8192 is already 64 M weights (256 MiB of float32; Adam keeps two more copies)."""
MAX_NUM_LAYERS = 64
"""Hidden layers of one network. Each is built into every network's graph (actor, critic,
each tower), and building takes longer with every layer (README, "Figures behind choices
in the code"): the attack round's 5000 would build for about half an hour."""
MAX_BODY_WEIGHTS = 2**28
"""Hidden weights of one network body (num_layers x hidden_units^2): 1 GiB of float32 per
network, before the critic's copy and Adam's two slots."""
MAX_MEMORY_SIZE = 8192
"""LSTM memory, concat(c, h): 4096 LSTM units; every step in the update buffer also keeps
its memory."""
MAX_SEQUENCE_LENGTH = 1024
"""Steps of one training sequence. The LSTM is unrolled into the update graph step by step
(trainers/tf/lstm.py), and building takes longer with every step (README, "Figures behind
choices in the code"): the attack round's 100000 would build for hours."""
MAX_BUFFER_SIZE = 10**8
"""Experiences one buffer holds (PPO's update buffer; SAC's replay buffer, allocated whole
at its first trajectory). The smallest row is about 28 bytes (a 1-float observation and
its successor, one action, reward, done, mask): 10^8 rows need 2.8 GB at the least and
about 80 GB for a 100-float observation, so more cannot plausibly fit in memory."""
MAX_EVALUATION_EPISODES = 10_000
"""Episodes of one evaluation (``evaluation.episodes``). Training waits while they are
played, one after another on one env; SB3's EvalCallback plays 5, and 10,000 episodes of
1,000 steps already stop training for hours at every evaluation."""


MAX_SELF_PLAY_WINDOW = 1000
"""Snapshots one self-play behavior keeps (``self_play.window``; ML-Agents ships 10). Each
is a copy of the actor's weights in memory and in every checkpoint's ``.self_play.npz``:
1000 of a 2 x 512 actor on 738 observations are about 2.6 GB."""


def _check_at_most(obj: Any, key: str, limit: int, unit: str, why: str) -> None:
    """An integer field (already checked as one) at most `limit`; `why` explains it."""
    value = getattr(obj, key)
    if value > limit:
        raise _InvalidField(key, f"expected at most {limit} {unit}, got {_describe(value)} ({why})")


def _check_hidden_units(obj: Any, key: str) -> None:
    _check_at_most(
        obj, key, MAX_HIDDEN_UNITS, "units",
        f"one layer of {MAX_HIDDEN_UNITS} units is already 256 MiB of weights",
    )


def _check_buffer_size(obj: Any) -> None:
    _check_at_most(
        obj, "buffer_size", MAX_BUFFER_SIZE, "experiences",
        "the buffer is held in memory; 10^8 rows of the smallest observation already need 2.8 GB",
    )
