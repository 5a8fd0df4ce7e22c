"""ML-Agents Release 22's ``config/poca/*.yaml`` (fixtures with their keys as they are
there) load as written, and start on `builtin:LookAlike` with the game's behavior ids,
spaces and multi-agent groups (``group_size``; SoccerTwos and StrikersVsGoalie with their
``self_play``).

Spaces from ML-Agents' ``docs/Learning-Environment-Examples.md`` (Release 22): every game's
actions are as documented (one branch of 7; SoccerTwos and StrikersVsGoalie three branches
of 3); Striker 294, Goalie 738 and SoccerTwos 336 vector observations. Where the document
gives no size (DungeonEscape's ray sensor beside its 1-wide "holding the key" vector,
PushBlockCollab's grid sensor, a ``[H, W, C]`` grid of tags) the sizes here are ours. Groups
as in the games: three agents (DungeonEscape, PushBlockCollab), two per team (SoccerTwos),
two strikers against one goalie. Runs are shrunk as in ``test_example_configs.py`` (and
self-play's step counts with them); every other key is the file's.
"""
from __future__ import annotations

import copy
import csv
import os
from typing import Any, Dict

import pytest
import yaml

from test_example_configs import DATA, _shrunk  # same folder: the shrinking of the other example configs
from trainers.config import load_settings
from trainers.config.schema import TRAINER_KINDS

#: fixture -> LookAlike ``env_args``.
POCA_EXAMPLES: Dict[str, Dict[str, Any]] = {
    "release_22_DungeonEscape.yaml": {
        "behaviors": {"DungeonEscape?team=0": {"vector": [1, 56], "discrete": [7]}},
        "num_agents": 3, "group_size": 3,
    },
    "release_22_PushBlockCollab.yaml": {
        "behaviors": {"PushBlockCollab?team=0": {"visual": [[20, 20, 6]], "discrete": [7]}},
        "num_agents": 3, "group_size": 3,
    },
    "release_22_SoccerTwos.yaml": {
        "behaviors": {"SoccerTwos?team=0": {"vector": [336], "discrete": [3, 3, 3]},
                      "SoccerTwos?team=1": {"vector": [336], "discrete": [3, 3, 3]}},
        "num_agents": 2, "group_size": 2,
    },
    "release_22_StrikersVsGoalie.yaml": {
        "behaviors": {"Striker?team=0": {"vector": [294], "discrete": [3, 3, 3]},
                      "Goalie?team=1": {"vector": [738], "discrete": [3, 3, 3]}},
        "num_agents": 2, "group_size": {"Striker?team=0": 2, "Goalie?team=1": 1},
    },
}


@pytest.mark.parametrize("fixture", sorted(POCA_EXAMPLES))
def test_poca_example_config_loads_as_written(fixture: str) -> None:
    warnings: list = []
    options = load_settings(os.path.join(DATA, fixture), on_warning=warnings.append)
    assert warnings == []  # every key is honoured
    with open(os.path.join(DATA, fixture)) as stream:
        doc = yaml.safe_load(stream)
    assert set(options.behaviors) == set(doc["behaviors"])
    for name, section in doc["behaviors"].items():
        assert options.behaviors[name].trainer_type == "poca"
        assert (options.behaviors[name].self_play is not None) == ("self_play" in section)


def _shrunk_poca(doc: Dict[str, Any]) -> Dict[str, Any]:
    doc = _shrunk(copy.deepcopy(doc))
    for settings in doc["behaviors"].values():
        if "self_play" in settings:  # snapshots, swaps and team changes within the run
            settings["self_play"].update(save_steps=100, swap_steps=50, team_change=200)
    return doc


#: Each run builds POCA's graphs for 16-25 s on 2 cores: one in the default run, the others slow.
_RUNS = [
    "release_22_DungeonEscape.yaml",
    pytest.param("release_22_PushBlockCollab.yaml", marks=pytest.mark.slow),
    pytest.param("release_22_SoccerTwos.yaml", marks=pytest.mark.slow),
    # The goalie is alone in its group, as in the game (no groupmates: [B, 0, 738]).
    pytest.param("release_22_StrikersVsGoalie.yaml", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("fixture", _RUNS)
def test_poca_example_config_starts_on_a_grouped_look_alike(fixture: str, run_cli, tmp_path) -> None:
    assert "poca" in TRAINER_KINDS
    with open(os.path.join(DATA, fixture)) as stream:
        doc = _shrunk_poca(yaml.safe_load(stream))
    doc["env_settings"] = {"env_path": "builtin:LookAlike", "env_args": POCA_EXAMPLES[fixture], "seed": 1}
    path = tmp_path / fixture
    path.write_text(yaml.safe_dump(doc))
    code, out, err = run_cli(str(path), "--run-id=example")
    assert code == 0, err
    assert "group reward" not in out  # POCA is the multi-agent trainer: no PPO/SAC warning
    for name in doc["behaviors"]:
        folder = run_cli.results / "example" / name
        assert (folder / "checkpoint-300.index").exists()
        with open(folder / "stats.csv") as stream:
            tags = {row["tag"] for row in csv.DictReader(stream)}
        assert "Losses/Policy Loss" in tags  # it updated on the game's spaces and groups
    if any("self_play" in s for s in doc["behaviors"].values()):
        assert "ELO:" in out
