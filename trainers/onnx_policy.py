"""Kept for one release: the ONNX policy moved to `trainers.export.onnx_policy`."""
from trainers.export.onnx_policy import ModelError, OnnxPolicy, _dims, _Session  # noqa: F401
