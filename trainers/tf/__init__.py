"""Graph building only: layers, encoders, distributions, normalizer, towers, names, sessions.

Importing this package switches TensorFlow to TF1 graph mode once, for the whole process:
eager execution off, and TF1 control flow (tf2onnx converts loops only in that form).
"""
import tensorflow as _tf  # (trainers/__init__.py has already quietened TF's C++ logs)

tf = _tf.compat.v1
tf.disable_eager_execution()
tf.disable_control_flow_v2()
_tf.get_logger().setLevel("ERROR")

__all__ = ["tf"]
