"""trainer-learn: a TensorFlow-1-style static-graph PPO/SAC trainer for ML-Agents users."""

import os

# Before anything imports TensorFlow (tensorboard may): keep its C++ start-up logs quiet.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
