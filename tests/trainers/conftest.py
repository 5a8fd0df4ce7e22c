"""Fixtures shared by the trainer tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def run_cli(tmp_path, capsys):
    """Runs ``trainer-learn`` in-process (TensorFlow is imported once per test session)."""
    from trainers.cli.learn import main

    def run(*args: str):
        code = main([*args, f"--results-dir={tmp_path / 'results'}"])
        out = capsys.readouterr()
        return code, out.out, out.err

    run.results = tmp_path / "results"
    return run
