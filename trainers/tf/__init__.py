"""Graph building only: layers, encoders, distributions, normalizer, towers, names, sessions.

Importing this package switches TensorFlow to TF1 graph mode once, for the whole process:
eager execution off, and TF1 control flow (tf2onnx converts loops only in that form).
It is also where TensorFlow's start-up lines are kept off the console (see
`_native_log_filter`), unless `trainers.tensorflow_logs_shown()` (``--debug``).
"""
import contextlib as _contextlib
import gc as _gc
import os as _os
import re as _re
import sys as _sys
import tempfile as _tempfile
from typing import Callable as _Callable
from typing import Iterator as _Iterator

from trainers import tensorflow_logs_shown as _tensorflow_logs_shown

# A line of TensorFlow's C++ logging, in absl's format (``I0000 00:00:1796578296.189096
# 6300 cudart_stub.cc:31] ...``) or TensorFlow's older own (``2025-09-17 14:44:05.157831:
# I external/...cc:32] ...``); group 1 or 2 is the severity letter.
_NATIVE_LINE = _re.compile(
    rb"^(?:([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]\s]+:\d+\]"
    rb"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) [^\]\s]+:\d+\])"
)
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}
# absl's notice before its first line in each library that logs before absl is set up.
_ABSL_PREAMBLE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# Lines logged at ERROR level that say only that there is no usable GPU (a CPU machine, or
# a CUDA-enabled wheel without drivers), or that CUDA plugins were registered twice. None
# is an error of the run: a GPU asked for and missing is reported by us (`--num-gpus`,
# `--devices`), in one line.
_NO_GPU_ERRORS = _re.compile(
    rb"failed call to cuInit|Unable to register cu(?:DNN|FFT|BLAS) factory"
    rb"|computation placer already registered"
)


def _native_line_kept(line: bytes, min_level: int) -> bool:
    """Whether a line printed on stderr while TensorFlow loads is shown: everything that is
    not TensorFlow's C++ logging is; its lines are shown from ``min_level``
    (``TF_CPP_MIN_LOG_LEVEL``: 0 INFO, 1 WARNING, 2 ERROR, 3 FATAL) up, as TensorFlow
    itself does once its logging has read that variable, less `_NO_GPU_ERRORS` (from
    ERROR up: TensorFlow's own messages that are not errors of the run)."""
    if line.rstrip(b"\r\n") == _ABSL_PREAMBLE:
        return min_level == 0
    match = _NATIVE_LINE.match(line)
    if match is None:
        return True
    level = _SEVERITY[match.group(1) or match.group(2)]
    if level < min_level:
        return False
    return min_level < 2 or not _NO_GPU_ERRORS.search(line)


def _min_log_level() -> int:
    try:
        return int(_os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def _flush_stderr() -> None:
    try:
        _sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # no stderr, or a closed one
        pass


@_contextlib.contextmanager
def _native_log_filter(kept: _Callable[[bytes], bool]) -> _Iterator[None]:
    """Everything written to file descriptor 2 inside the block (by C++ or by Python) is held
    in a temporary file and written to it at the end, less the lines ``kept`` refuses.

    Why at the descriptor: TensorFlow's shared libraries log through absl while they load,
    and absl writes every line to stderr before it is set up, whatever
    ``TF_CPP_MIN_LOG_LEVEL`` says (TensorFlow reads that later): ``Could not find cuda
    drivers on your machine`` once per library that carries its own absl (two in
    TensorFlow 2.21), each after absl's ``WARNING: All log messages before
    absl::InitializeLog() ...``. Nothing in Python sees those writes. What else is written
    (a Python warning, a genuine error) is shown, in order, when the block ends or raises.
    """
    try:
        saved = _os.dup(2)
    except OSError:  # no descriptor 2 to filter
        yield
        return
    try:
        capture = _tempfile.TemporaryFile()
    except OSError:
        _os.close(saved)
        yield
        return
    with capture:
        _flush_stderr()
        _os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            _flush_stderr()
            _os.dup2(saved, 2)
            _os.close(saved)
            capture.seek(0)
            out = b"".join(line for line in capture.read().splitlines(keepends=True) if kept(line))
            while out:
                try:
                    out = out[_os.write(2, out):]
                except OSError:
                    break


_quiet = not _tensorflow_logs_shown()
_min_level = _min_log_level()

# The collector stays off while TensorFlow imports, and what the import made is frozen
# (`gc.freeze`: never walked again). The import creates ~360k objects that live as long
# as the process, and every full collection walked them all: 6 during the import, then
# one now and then later on (one while the first ONNX export imports tf2onnx), each a
# noticeable pause (README, "Figures behind choices in the code"). The import leaves ~10
# unreachable objects, so freezing without a collection first loses nothing worth a
# collection.
#
# Optional imports of TensorFlow that nothing here uses stay out of it. TensorFlow's
# modules import these inside ``try: ... except ImportError``; a None entry in
# `sys.modules` turns the import into an ImportError that TensorFlow ignores, and the
# entries are removed right after, so a later import (a user's own code, `tf.keras`)
# imports them as usual:
# - keras: TensorFlow's `__init__` imports `keras.src.optimizers` (to register Keras
#   optimizers for SavedModel loading). Nothing here uses Keras (layers are written with
#   `get_variable`), and it cost every process start-up time: Keras 3 pulls in IPython,
#   prompt_toolkit and jedi.
# - scipy, h5py: TensorFlow's legacy `tf.compat.v1.keras` (imported by `tf.compat.v1.layers`)
#   imports `scipy.sparse` for sparse inputs to its `Model.fit` and h5py for its HDF5
#   `save_weights`; neither is used here, nor imported later in a run (tf2onnx, onnx,
#   onnxruntime, TensorBoard's protos and Gymnasium do not).
_blocked = [name for name in ("keras", "scipy", "h5py") if name not in _sys.modules]
_gc_was_enabled = _gc.isenabled()
_gc.disable()
for _name in _blocked:
    _sys.modules[_name] = None  # type: ignore[assignment]
try:
    with _native_log_filter(lambda line: _native_line_kept(line, _min_level)) if _quiet else _contextlib.nullcontext():
        import tensorflow as _tf

        _gc.freeze()
        tf = _tf.compat.v1
        tf.disable_eager_execution()
        tf.disable_control_flow_v2()
        # The first look at the devices loads the CUDA platform, which logs "failed call
        # to cuInit" on a machine without a GPU driver: done here, inside the filter (once
        # per process; the first session would do it anyway).
        _tf.config.list_physical_devices("GPU")
finally:
    for _name in _blocked:
        if _name in _sys.modules and _sys.modules[_name] is None:
            del _sys.modules[_name]
    if _gc_was_enabled:
        _gc.enable()

if _quiet:
    _tf.get_logger().setLevel("ERROR")

__all__ = ["tf"]
