from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SpaceTypeProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPACE_TYPE_DISCRETE: _ClassVar[SpaceTypeProto]
    SPACE_TYPE_CONTINUOUS: _ClassVar[SpaceTypeProto]

class CompressionTypeProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPRESSION_TYPE_NONE: _ClassVar[CompressionTypeProto]
    COMPRESSION_TYPE_PNG: _ClassVar[CompressionTypeProto]

class ObservationTypeProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OBSERVATION_TYPE_DEFAULT: _ClassVar[ObservationTypeProto]
    OBSERVATION_TYPE_GOAL_SIGNAL: _ClassVar[ObservationTypeProto]
SPACE_TYPE_DISCRETE: SpaceTypeProto
SPACE_TYPE_CONTINUOUS: SpaceTypeProto
COMPRESSION_TYPE_NONE: CompressionTypeProto
COMPRESSION_TYPE_PNG: CompressionTypeProto
OBSERVATION_TYPE_DEFAULT: ObservationTypeProto
OBSERVATION_TYPE_GOAL_SIGNAL: ObservationTypeProto

class DemonstrationMetaProto(_message.Message):
    __slots__ = ("api_version", "demonstration_name", "number_steps", "number_episodes", "mean_reward")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    DEMONSTRATION_NAME_FIELD_NUMBER: _ClassVar[int]
    NUMBER_STEPS_FIELD_NUMBER: _ClassVar[int]
    NUMBER_EPISODES_FIELD_NUMBER: _ClassVar[int]
    MEAN_REWARD_FIELD_NUMBER: _ClassVar[int]
    api_version: int
    demonstration_name: str
    number_steps: int
    number_episodes: int
    mean_reward: float
    def __init__(self, api_version: _Optional[int] = ..., demonstration_name: _Optional[str] = ..., number_steps: _Optional[int] = ..., number_episodes: _Optional[int] = ..., mean_reward: _Optional[float] = ...) -> None: ...

class CameraResolutionProto(_message.Message):
    __slots__ = ("width", "height", "gray_scale")
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    GRAY_SCALE_FIELD_NUMBER: _ClassVar[int]
    width: int
    height: int
    gray_scale: bool
    def __init__(self, width: _Optional[int] = ..., height: _Optional[int] = ..., gray_scale: bool = ...) -> None: ...

class ActionSpecProto(_message.Message):
    __slots__ = ("num_continuous_actions", "num_discrete_actions", "discrete_branch_sizes", "action_descriptions")
    NUM_CONTINUOUS_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    NUM_DISCRETE_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    DISCRETE_BRANCH_SIZES_FIELD_NUMBER: _ClassVar[int]
    ACTION_DESCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    num_continuous_actions: int
    num_discrete_actions: int
    discrete_branch_sizes: _containers.RepeatedScalarFieldContainer[int]
    action_descriptions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, num_continuous_actions: _Optional[int] = ..., num_discrete_actions: _Optional[int] = ..., discrete_branch_sizes: _Optional[_Iterable[int]] = ..., action_descriptions: _Optional[_Iterable[str]] = ...) -> None: ...

class BrainParametersProto(_message.Message):
    __slots__ = ("vector_observation_size", "num_stacked_vector_observations", "vector_action_size", "camera_resolutions", "vector_action_descriptions", "vector_action_space_type", "brain_name", "is_training", "action_spec")
    VECTOR_OBSERVATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_STACKED_VECTOR_OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_ACTION_SIZE_FIELD_NUMBER: _ClassVar[int]
    CAMERA_RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_ACTION_DESCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_ACTION_SPACE_TYPE_FIELD_NUMBER: _ClassVar[int]
    BRAIN_NAME_FIELD_NUMBER: _ClassVar[int]
    IS_TRAINING_FIELD_NUMBER: _ClassVar[int]
    ACTION_SPEC_FIELD_NUMBER: _ClassVar[int]
    vector_observation_size: int
    num_stacked_vector_observations: int
    vector_action_size: _containers.RepeatedScalarFieldContainer[int]
    camera_resolutions: _containers.RepeatedCompositeFieldContainer[CameraResolutionProto]
    vector_action_descriptions: _containers.RepeatedScalarFieldContainer[str]
    vector_action_space_type: SpaceTypeProto
    brain_name: str
    is_training: bool
    action_spec: ActionSpecProto
    def __init__(self, vector_observation_size: _Optional[int] = ..., num_stacked_vector_observations: _Optional[int] = ..., vector_action_size: _Optional[_Iterable[int]] = ..., camera_resolutions: _Optional[_Iterable[_Union[CameraResolutionProto, _Mapping]]] = ..., vector_action_descriptions: _Optional[_Iterable[str]] = ..., vector_action_space_type: _Optional[_Union[SpaceTypeProto, str]] = ..., brain_name: _Optional[str] = ..., is_training: bool = ..., action_spec: _Optional[_Union[ActionSpecProto, _Mapping]] = ...) -> None: ...

class ObservationProto(_message.Message):
    __slots__ = ("shape", "compression_type", "compressed_data", "float_data", "compressed_channel_mapping", "dimension_properties", "observation_type", "name")
    class FloatData(_message.Message):
        __slots__ = ("data",)
        DATA_FIELD_NUMBER: _ClassVar[int]
        data: _containers.RepeatedScalarFieldContainer[float]
        def __init__(self, data: _Optional[_Iterable[float]] = ...) -> None: ...
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_DATA_FIELD_NUMBER: _ClassVar[int]
    FLOAT_DATA_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_CHANNEL_MAPPING_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    compression_type: CompressionTypeProto
    compressed_data: bytes
    float_data: ObservationProto.FloatData
    compressed_channel_mapping: _containers.RepeatedScalarFieldContainer[int]
    dimension_properties: _containers.RepeatedScalarFieldContainer[int]
    observation_type: ObservationTypeProto
    name: str
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., compression_type: _Optional[_Union[CompressionTypeProto, str]] = ..., compressed_data: _Optional[bytes] = ..., float_data: _Optional[_Union[ObservationProto.FloatData, _Mapping]] = ..., compressed_channel_mapping: _Optional[_Iterable[int]] = ..., dimension_properties: _Optional[_Iterable[int]] = ..., observation_type: _Optional[_Union[ObservationTypeProto, str]] = ..., name: _Optional[str] = ...) -> None: ...

class AgentInfoProto(_message.Message):
    __slots__ = ("stacked_vector_observation", "visual_observations", "text_observation", "stored_vector_actions", "stored_text_actions", "memories", "reward", "done", "max_step_reached", "id", "action_mask", "observations", "group_id", "group_reward")
    STACKED_VECTOR_OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    VISUAL_OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    TEXT_OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    STORED_VECTOR_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    STORED_TEXT_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    MAX_STEP_REACHED_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_MASK_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_REWARD_FIELD_NUMBER: _ClassVar[int]
    stacked_vector_observation: _containers.RepeatedScalarFieldContainer[float]
    visual_observations: _containers.RepeatedScalarFieldContainer[bytes]
    text_observation: str
    stored_vector_actions: _containers.RepeatedScalarFieldContainer[float]
    stored_text_actions: str
    memories: _containers.RepeatedScalarFieldContainer[float]
    reward: float
    done: bool
    max_step_reached: bool
    id: int
    action_mask: _containers.RepeatedScalarFieldContainer[bool]
    observations: _containers.RepeatedCompositeFieldContainer[ObservationProto]
    group_id: int
    group_reward: float
    def __init__(self, stacked_vector_observation: _Optional[_Iterable[float]] = ..., visual_observations: _Optional[_Iterable[bytes]] = ..., text_observation: _Optional[str] = ..., stored_vector_actions: _Optional[_Iterable[float]] = ..., stored_text_actions: _Optional[str] = ..., memories: _Optional[_Iterable[float]] = ..., reward: _Optional[float] = ..., done: bool = ..., max_step_reached: bool = ..., id: _Optional[int] = ..., action_mask: _Optional[_Iterable[bool]] = ..., observations: _Optional[_Iterable[_Union[ObservationProto, _Mapping]]] = ..., group_id: _Optional[int] = ..., group_reward: _Optional[float] = ...) -> None: ...

class AgentActionProto(_message.Message):
    __slots__ = ("vector_actions", "value", "continuous_actions", "discrete_actions")
    VECTOR_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CONTINUOUS_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    DISCRETE_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    vector_actions: _containers.RepeatedScalarFieldContainer[float]
    value: float
    continuous_actions: _containers.RepeatedScalarFieldContainer[float]
    discrete_actions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, vector_actions: _Optional[_Iterable[float]] = ..., value: _Optional[float] = ..., continuous_actions: _Optional[_Iterable[float]] = ..., discrete_actions: _Optional[_Iterable[int]] = ...) -> None: ...

class AgentInfoActionPairProto(_message.Message):
    __slots__ = ("agent_info", "action_info")
    AGENT_INFO_FIELD_NUMBER: _ClassVar[int]
    ACTION_INFO_FIELD_NUMBER: _ClassVar[int]
    agent_info: AgentInfoProto
    action_info: AgentActionProto
    def __init__(self, agent_info: _Optional[_Union[AgentInfoProto, _Mapping]] = ..., action_info: _Optional[_Union[AgentActionProto, _Mapping]] = ...) -> None: ...
