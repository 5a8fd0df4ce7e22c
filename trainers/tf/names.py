"""Every tensor name that leaves the graph: inference inputs/outputs and exported model names.

Builders name tensors with these constants outside any tower scope; the exporter reads the
same constants. ML-Agents 2.0 contract
(docs/ML-AGENTS-FACTS.md#6-exported-model-contracts-what-unitys-runtime-loads): inputs ``obs_<i>``,
``action_masks``, ``recurrent_in``; outputs in this order ``version_number``,
``memory_size``, ``continuous_actions``, ``continuous_action_output_shape``,
``deterministic_continuous_actions``, ``discrete_actions``, ``discrete_action_output_shape``,
``deterministic_discrete_actions``, ``recurrent_out``.
"""

from typing import Dict, Sequence

import numpy as np


MODEL_EXPORT_VERSION = 3

ACTION_MASKS = "action_masks"
RECURRENT_IN = "recurrent_in"
# Discrete + LSTM: the previous action, one column per branch (the TF-era input name).
PREV_ACTION = "prev_action"
SEQUENCE_LENGTH = "sequence_length"

VERSION_NUMBER = "version_number"
MEMORY_SIZE = "memory_size"
CONTINUOUS_ACTIONS = "continuous_actions"
CONTINUOUS_ACTION_OUTPUT_SHAPE = "continuous_action_output_shape"
DETERMINISTIC_CONTINUOUS_ACTIONS = "deterministic_continuous_actions"
DISCRETE_ACTIONS = "discrete_actions"
DISCRETE_ACTION_OUTPUT_SHAPE = "discrete_action_output_shape"
DETERMINISTIC_DISCRETE_ACTIONS = "deterministic_discrete_actions"
RECURRENT_OUT = "recurrent_out"

# Trainer-internal outputs of the inference graph (not exported).
LOG_PROBS = "log_probs"
ENTROPY = "entropy"
RAW_CONTINUOUS_ACTIONS = "raw_continuous_actions"

# TF-era (version_number 2) names, for the legacy export option.
LEGACY_VECTOR_OBSERVATION = "vector_observation"
LEGACY_VISUAL_OBSERVATION_PREFIX = "visual_observation_"
LEGACY_ACTION = "action"
LEGACY_ACTION_PROBS = "action_probs"
LEGACY_IS_CONTINUOUS = "is_continuous_control"
LEGACY_ACTION_OUTPUT_SHAPE = "action_output_shape"
LEGACY_VERSION = 2
LEGACY_EPSILON = "epsilon"

# Name of the dynamic batch dimension in exported ONNX models (as ML-Agents writes it).
ONNX_BATCH_DIM = "batch"


def contract_constants(
    continuous_size: int, discrete_branches: Sequence[int], memory_size: int, legacy: bool = False
) -> Dict[str, np.ndarray]:
    """The constant outputs of an exported model, by name, with their dtype and shape: the
    one table the policy graph, the freezer and the export check build or compare.

    ML-Agents 2.0 contract: float32 ``[1]`` ``version_number`` (3), ``memory_size``,
    ``continuous_action_output_shape`` (continuous actions), ``[1, branches]``
    ``discrete_action_output_shape`` (discrete actions). TF-era (``legacy``): int32 ``[1]``
    ``version_number`` (2), ``memory_size`` (0), ``is_continuous_control`` and
    ``action_output_shape`` (continuous size, or the sum of the branch sizes).
    """
    continuous = continuous_size > 0
    if legacy:
        shape = continuous_size if continuous else int(sum(discrete_branches))
        return {
            VERSION_NUMBER: np.array([LEGACY_VERSION], np.int32),
            MEMORY_SIZE: np.array([0], np.int32),
            LEGACY_IS_CONTINUOUS: np.array([int(continuous)], np.int32),
            LEGACY_ACTION_OUTPUT_SHAPE: np.array([shape], np.int32),
        }
    out = {
        VERSION_NUMBER: np.array([MODEL_EXPORT_VERSION], np.float32),
        MEMORY_SIZE: np.array([memory_size], np.float32),
    }
    if continuous:
        out[CONTINUOUS_ACTION_OUTPUT_SHAPE] = np.array([continuous_size], np.float32)
    if len(discrete_branches):
        out[DISCRETE_ACTION_OUTPUT_SHAPE] = np.array([list(discrete_branches)], np.float32)
    return out


def obs_name(index: int) -> str:
    """Name of the ``index``-th observation input (``obs_0``, ``obs_1``, ...)."""
    return f"obs_{index}"


def legacy_visual_name(index: int) -> str:
    """TF-era name of the ``index``-th *visual* observation (``visual_observation_0``, ...)."""
    return f"{LEGACY_VISUAL_OBSERVATION_PREFIX}{index}"


def value_name(signal: str) -> str:
    """Name of a critic head's value estimate in the evaluation graph."""
    return f"value_estimate_{signal}"
