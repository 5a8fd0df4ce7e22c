"""Graph building only: layers, encoders, distributions, normalizer, towers, names, sessions.

Importing this package switches TensorFlow to TF1 graph mode once, for the whole process:
eager execution off, and TF1 control flow (tf2onnx converts loops only in that form).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as _tf  # noqa: E402

tf = _tf.compat.v1
tf.disable_eager_execution()
tf.disable_control_flow_v2()
_tf.get_logger().setLevel("ERROR")

__all__ = ["tf"]
