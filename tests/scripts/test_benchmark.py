"""scripts/benchmark.py: a training run stopped by Ctrl-C stops the benchmark instead of
being timed as if it had finished (the trainer takes Ctrl-C as "save and stop" and returns)."""
from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark_script", os.path.join(ROOT, "scripts", "benchmark.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("code", [130, 143])
def test_a_run_stopped_by_a_signal_stops_the_benchmark(monkeypatch, code: int) -> None:
    import trainers.cli.learn as learn

    calls = []

    def stopped(options, *args, **kwargs) -> int:
        calls.append(options.env_settings.seed)
        return code  # what run_training returns after SIGINT (130) / SIGTERM (143)

    monkeypatch.setattr(learn, "run_training", stopped)
    with pytest.raises(KeyboardInterrupt):
        _load().run(os.path.join(ROOT, "config", "ppo", "CartPole.yaml"), 1000, 3)
    assert calls == [3]
