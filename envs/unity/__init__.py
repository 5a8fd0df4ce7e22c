"""Unity games (builds or the Editor) through our own implementation of ML-Agents'
communicator protocol: `UnityEnv` (one game; `envs.managers.unity.UnityEnvManager` steps N games on N ports at
once), side channels, and a fake game for tests. Never imports TensorFlow or `trainers`.
"""
from envs.unity.environment import API_VERSION, EngineConfig, UnityEnv, check_communication_version

__all__ = ["API_VERSION", "EngineConfig", "UnityEnv", "check_communication_version"]
