"""Loads a file of ``scripts/`` as a module (they are not a package)."""
from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py``, registered in ``sys.modules`` under ``name`` (dataclasses
    look their module up by name)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
