"""Every tensor name that leaves the graph: inference inputs/outputs and exported model names.

Builders name tensors with these constants outside any tower scope; the exporter reads the
same constants. ML-Agents 2.0 contract (FACTS section 6): inputs ``obs_<i>``,
``action_masks``, ``recurrent_in``; outputs in this order ``version_number``,
``memory_size``, ``continuous_actions``, ``continuous_action_output_shape``,
``deterministic_continuous_actions``, ``discrete_actions``, ``discrete_action_output_shape``,
``deterministic_discrete_actions``, ``recurrent_out``.
"""

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


def obs_name(index: int) -> str:
    """Name of the ``index``-th observation input (``obs_0``, ``obs_1``, ...)."""
    return f"obs_{index}"


def legacy_visual_name(index: int) -> str:
    """TF-era name of the ``index``-th *visual* observation (``visual_observation_0``, ...)."""
    return f"{LEGACY_VISUAL_OBSERVATION_PREFIX}{index}"


def value_name(signal: str) -> str:
    """Name of a critic head's value estimate in the evaluation graph."""
    return f"value_estimate_{signal}"
