"""ML-Agents' own example configs (fixtures with their keys as they are in ML-Agents) load,
and train end to end on `builtin:LookAlike` with the game's behavior names and spaces.

The spaces are those of ML-Agents' ``docs/Learning-Environment-Examples.md`` (Release 22).
The runs shrink only what sets their length (``max_steps``, ``buffer_size``,
``batch_size``, ``hidden_units``, ``time_horizon``, ``summary_freq``) so that each does a
few updates in seconds; every other key is the file's.
"""
from __future__ import annotations

import copy
import csv
import os
from typing import Any, Dict

import pytest
import yaml

from trainers.config import load_settings

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "data", "configs")

#: fixture -> LookAlike ``env_args`` (the game's behaviors, spaces and parameter names).
EXAMPLES: Dict[str, Dict[str, Any]] = {
    "release_22_PyramidsRND.yaml": {"behaviors": {"Pyramids?team=0": {"vector": [148], "discrete": [4]}}},
    # Sorter: 4 floats (position, orientation), a BufferSensor of up to 20 tiles x 23 floats
    # (Learning-Environment-Examples.md; the game's SorterAgent), 3 discrete branches of 3;
    # the curriculum's environment parameter num_tiles.
    "release_22_Sorter_curriculum.yaml": {
        "behaviors": {"Sorter?team=0": {"vector": [4], "entities": [[20, 23]], "discrete": [3, 3, 3]}},
        "parameters": ["num_tiles"],
    },
}


def _shrunk(doc: Dict[str, Any]) -> Dict[str, Any]:
    doc = copy.deepcopy(doc)
    for settings in doc["behaviors"].values():
        settings["max_steps"] = 300
        settings["time_horizon"] = 32
        settings["summary_freq"] = 100
        settings["checkpoint_interval"] = 300
        hp = settings.setdefault("hyperparameters", {})
        hp["buffer_size"], hp["batch_size"] = 100, 25
        settings.setdefault("network_settings", {})["hidden_units"] = 16
    return doc


@pytest.mark.parametrize("fixture", sorted(EXAMPLES))
def test_example_config_loads_as_written(fixture: str) -> None:
    warnings: list = []
    options = load_settings(os.path.join(DATA, fixture), on_warning=warnings.append)
    assert warnings == []  # every key is honoured
    with open(os.path.join(DATA, fixture)) as stream:
        doc = yaml.safe_load(stream)
    assert set(options.behaviors) == set(doc["behaviors"])


@pytest.mark.parametrize("fixture", sorted(EXAMPLES))
def test_example_config_trains_on_a_look_alike(fixture: str, run_cli, tmp_path) -> None:
    with open(os.path.join(DATA, fixture)) as stream:
        doc = _shrunk(yaml.safe_load(stream))
    doc["env_settings"] = {"env_path": "builtin:LookAlike", "env_args": EXAMPLES[fixture], "seed": 1}
    path = tmp_path / fixture
    path.write_text(yaml.safe_dump(doc))
    code, out, err = run_cli(str(path), "--run-id=example")
    assert code == 0, err
    for name in doc["behaviors"]:
        folder = run_cli.results / "example" / name
        assert (folder / "checkpoint-300.index").exists()
        with open(folder / "stats.csv") as stream:
            tags = {row["tag"] for row in csv.DictReader(stream)}
        assert "Losses/Policy Loss" in tags  # it updated on the game's spaces
        if "rnd" in doc["behaviors"][name].get("reward_signals", {}):
            assert "Losses/RND Loss" in tags  # the predictor trained in the same run
