"""Unity ML-Agents `.demo` files: our own .proto, generated code, reader and writer.

`load_demonstration` reads every era of Unity's format (see `envs.demo.reader` for how
records become transitions); `DemoWriter` writes the ML-Agents 2.0 format. Never imports
TensorFlow or `trainers`.
"""
from envs.demo.reader import (
    RECORD_FORMATS,
    DemoInfo,
    Demonstration,
    check_demo_spec,
    format_action_spec,
    format_behavior_spec,
    load_demonstration,
)
from envs.demo.writer import DemoWriter

__all__ = [
    "RECORD_FORMATS",
    "DemoInfo",
    "Demonstration",
    "DemoWriter",
    "check_demo_spec",
    "format_action_spec",
    "format_behavior_spec",
    "load_demonstration",
]
