"""trainer-learn: a TensorFlow-1-style static-graph PPO/SAC trainer for ML-Agents users."""

__version__ = "0.1.0"
