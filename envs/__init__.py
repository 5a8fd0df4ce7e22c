"""Everything that produces experience: the env API, built-in envs, Gymnasium, demos.

This package never imports `trainers` or TensorFlow.
"""
