"""Graph building only: layers, encoders, distributions, normalizer, towers, names, sessions.

Importing this package switches TensorFlow to TF1 graph mode once, for the whole process:
eager execution off, and TF1 control flow (tf2onnx converts loops only in that form).
"""
import gc as _gc

# The collector stays off while TensorFlow imports: the import creates ~300k objects, and
# each automatic full collection on the way walked them all (6 collections, ~0.4 s of a
# 3-4 s import on the 2-core machine). What the import leaves as garbage is collected
# later, as usual.
_gc_was_enabled = _gc.isenabled()
_gc.disable()
try:
    import tensorflow as _tf  # (trainers/__init__.py has already quietened TF's C++ logs)
finally:
    if _gc_was_enabled:
        _gc.enable()

tf = _tf.compat.v1
tf.disable_eager_execution()
tf.disable_control_flow_v2()
_tf.get_logger().setLevel("ERROR")

__all__ = ["tf"]
