"""Config loader hardening (issue 30, items 3 and 6): ML-Agents 0.9.2's behavioral cloning
configs refused by their trainer line, the stray ``gamma`` of 0.10-0.16 SAC configs
accepted with a warning, and hostile or absurd input (deep nesting, alias bombs, huge
integers, sizes that cannot be built or allocated, 4 KB values) refused up front with one
line naming the file, the YAML path and the limit."""
from __future__ import annotations

import os

import pytest

from trainers.exceptions import ConfigError
from trainers.config import (
    MAX_BUFFER_SIZE,
    MAX_HIDDEN_UNITS,
    MAX_MEMORY_SIZE,
    MAX_NUM_LAYERS,
    MAX_SEQUENCE_LENGTH,
    MemorySettings,
    NetworkSettings,
    SACSettings,
    load_settings,
)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "data", "configs")


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def load(path, cli=None):
    warnings: list = []
    options = load_settings(str(path), cli, on_warning=warnings.append)
    return options, warnings


def error(path, cli=None) -> str:
    """The one-line ConfigError of loading `path`."""
    with pytest.raises(ConfigError) as info:
        load_settings(str(path), cli, on_warning=lambda line: None)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message


def write(tmp_path, text: str, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------- item 3: the trainer first


@pytest.mark.parametrize(
    "name, trainer",
    [("mlagents_0.9.2_offline_bc.yaml", "offline_bc"), ("mlagents_0.9.2_online_bc.yaml", "online_bc")],
)
def test_bc_configs_of_0_9_2_are_refused_by_their_trainer_line(name, trainer):
    path = fixture(name)
    kind = "offline" if trainer == "offline_bc" else "online"
    assert error(path) == (
        f"{path}: default.trainer: {trainer}: not supported (the {kind} behavioral cloning trainer "
        "of ML-Agents 0.x); use ppo with behavioral_cloning"
    )


def test_a_behavior_sections_trainer_is_checked_before_its_keys(tmp_path):
    path = write(tmp_path, "default: {trainer: ppo}\nA: {trainer: online_bc, brain_to_imitate: P}\n")
    assert error(path).startswith(f"{path}: A.trainer: online_bc: not supported")
    # A supported trainer still has its keys checked.
    path = write(tmp_path, "default: {trainer: ppo}\nA: {trainer: ppo, brain_to_imitate: P}\n")
    assert error(path) == f"{path}: A.brain_to_imitate: unknown key"


def test_nested_trainer_type_is_checked_before_the_sections_keys(tmp_path):
    path = write(tmp_path, "behaviors:\n  A: {trainer_type: offline_bc, self_play: {window: 10}}\n")
    assert error(path).startswith(f"{path}: behaviors.A.trainer_type: offline_bc: not supported")


# ------------------------------------------------------ item 3: the stray gamma of SAC files


GAMMA_IGNORED = (
    "ignored, as ML-Agents 0.10 to 0.16 ignored it; the discount factor is reward_signals.<signal>.gamma"
)


def test_stray_gamma_of_release_1_sac_config_gives_one_warning_with_file_line_and_key(tmp_path):
    shipped = fixture("mlagents_release_1_sac_gamma.yaml")
    # As shipped, its sections are recurrent SAC (use_recurrent: true), which loads; the
    # gamma warnings are checked on the same file, line for line, with use_recurrent off.
    options, warnings = load(shipped)
    assert len(warnings) == 2 and options.behaviors["Hallway"].network_settings.memory == MemorySettings(128, 32)
    path = str(tmp_path / "mlagents_release_1_sac_gamma.yaml")
    with open(shipped) as f, open(path, "w") as out:
        out.write(f.read().replace("use_recurrent: true", "use_recurrent: false"))
    options, warnings = load(path)
    assert warnings == [
        f"{path}: line 47: VisualHallway.gamma: {GAMMA_IGNORED}",
        f"{path}: line 60: VisualPushBlock.gamma: {GAMMA_IGNORED}",
    ]
    hallway = options.behaviors["VisualHallway"]
    assert hallway.trainer_type == "sac"
    assert hallway.reward_signals["extrinsic"].gamma == 0.99  # from default's reward_signals
    assert hallway.network_settings.memory is None


def test_stray_gamma_warning_is_printed_once_per_key(tmp_path, capsys):
    path = write(
        tmp_path,
        "default:\n  trainer: sac\n  reward_signals: {extrinsic: {gamma: 0.9}}\n"
        "A:\n  gamma: 0.5\nB:\n  gamma: 0.5\n",
    )
    options = load_settings(path)
    assert options.behaviors["A"].reward_signals["extrinsic"].gamma == 0.9
    assert capsys.readouterr().err.splitlines() == [
        f"[WARNING] {path}: line 5: A.gamma: {GAMMA_IGNORED}",
        f"[WARNING] {path}: line 7: B.gamma: {GAMMA_IGNORED}",
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        # Before 0.9 (no reward_signals) a top-level gamma was the discount: not ignored.
        (
            "default: {trainer: ppo, gamma: 0.99}\n",
            "default.gamma: unknown key; did you mean reward_signals.extrinsic.gamma?",
        ),
        # Other unknown keys stay errors.
        ("default: {trainer: sac, reward_signals: {extrinsic: {}}}\nA: {gama: 0.9}\n", "A.gama: unknown key"),
        # The nested format never had it.
        ("behaviors:\n  A: {gamma: 0.99}\n", "behaviors.A.gamma: unknown key"),
    ],
)
def test_gamma_elsewhere_is_still_an_error(tmp_path, text, expected):
    assert expected in error(write(tmp_path, text))


# ------------------------------------------------------------ item 3: hostile YAML documents


def test_deeply_nested_yaml_is_one_line(tmp_path):
    deep = 3000
    flow = write(tmp_path, "behaviors:\n  A:\n    x: " + "[" * deep + "]" * deep + "\n", "flow.yaml")
    assert error(flow) == f"{flow}: line 3: nesting too deep: more than 64 levels"
    levels = 300  # indented: 3000 levels would be a 9 MB file, refused for its size
    keys = "".join("  " * (i + 1) + f"k{i}:\n" for i in range(levels))
    block = "behaviors:\n" + keys + "  " * (levels + 1) + "1\n"
    block_path = write(tmp_path, block, "block.yaml")
    assert error(block_path) == f"{block_path}: line 64: nesting too deep: more than 64 levels"


def test_nesting_within_the_limit_loads(tmp_path):
    # env_args at level 3; 50 more levels of lists stay under the limit of 64.
    path = write(tmp_path, "behaviors: {A: {}}\nenv_settings:\n  env_args: {x: " + "[" * 50 + "]" * 50 + "}\n")
    options, warnings = load(path)
    assert warnings == [] and isinstance(options.env_settings.env_args["x"], list)


def test_alias_bombs_and_recursive_aliases_are_refused(tmp_path):
    lines = ["behaviors: {A: {}}", "env_settings:", "  env_args:", "    a: &a [" + ", ".join(["lol"] * 9) + "]"]
    for i, name in enumerate("bcdefghi"):
        previous = "abcdefghi"[i]
        lines.append(f"    {name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    bomb = write(tmp_path, "\n".join(lines) + "\n", "bomb.yaml")
    assert error(bomb).endswith(
        "more than 100000 values, counting each use of an alias (ML-Agents' configs hold a few hundred)"
    )
    recursive = write(tmp_path, "behaviors: {A: {}}\nenv_settings:\n  env_args: &a {x: *a}\n", "rec.yaml")
    assert error(recursive) == f"{recursive}: line 3: a recursive alias (a mapping or list that contains itself)"
    chain = ["behaviors: {A: {}}", "env_settings:", "  env_args:", "    a0: &a0 " + "[" * 40 + "1" + "]" * 40]
    for i in range(1, 5):
        chain.append(f"    a{i}: &a{i} " + "[" * 40 + f"*a{i - 1}" + "]" * 40)
    deep = write(tmp_path, "\n".join(chain) + "\n", "chain.yaml")
    assert "nesting too deep: more than 64 levels once aliases are expanded" in error(deep)


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path):
    path = write(
        tmp_path,
        "default_settings: &base {max_steps: 100, network_settings: {hidden_units: 64}}\n"
        "behaviors:\n  A: *base\n  B:\n    <<: *base\n    max_steps: 200\n",
    )
    options, warnings = load(path)
    assert warnings == []
    assert options.behaviors["A"].max_steps == 100 and options.behaviors["B"].max_steps == 200
    assert options.behaviors["B"].network_settings.hidden_units == 64


def test_a_file_too_large_for_a_config_is_refused_before_it_is_parsed(tmp_path):
    # 300 KB of list items: parsing them would take ~10 s before the value count refuses them.
    text = "behaviors: {A: {}}\nenv_settings:\n  env_args:\n    data: [" + ", ".join(["1"] * 150_000) + "]\n"
    path = write(tmp_path, text)
    assert error(path) == (
        f"{path}: {len(text)} bytes: expected a trainer configuration of at most 262144 bytes "
        "(256 KiB; ML-Agents' largest is 7 KB)"
    )


def test_an_integer_too_long_for_python_is_one_line(tmp_path):
    path = write(tmp_path, "behaviors:\n  A:\n    max_steps: " + "9" * 5000 + "\n")
    assert error(path) == f"{path}: line 3: an integer of 5000 digits: expected at most 100 digits"


# ------------------------------------------------------------------- item 3: absurd sizes


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "behaviors: {A: {network_settings: {hidden_units: 1000000}}}",
            "behaviors.A.network_settings.hidden_units: expected at most 8192 units, got 1000000 "
            "(one layer of 8192 units is already 256 MiB of weights)",
        ),
        (
            "behaviors: {A: {network_settings: {num_layers: 5000}}}",
            "behaviors.A.network_settings.num_layers: expected at most 64 layers, got 5000 "
            "(every layer is built into the graph; 64 take ~16 s to build)",
        ),
        (
            "behaviors: {A: {network_settings: {hidden_units: 8192, num_layers: 8}}}",
            "behaviors.A.network_settings.num_layers: 8 layers of 8192 units are 536870912 weights; "
            "expected at most 268435456 (1 GiB of float32) per network",
        ),
        (
            "behaviors: {A: {network_settings: {memory: {memory_size: 1000000}}}}",
            "behaviors.A.network_settings.memory.memory_size: expected at most 8192 floats, got 1000000 "
            "(an LSTM of 4096 units)",
        ),
        (
            "behaviors: {A: {network_settings: {memory: {sequence_length: 100000}}}}",
            "behaviors.A.network_settings.memory.sequence_length: expected at most 1024 steps, got 100000 "
            "(the LSTM is unrolled into the graph step by step; 1024 steps take ~1.5 minutes to build)",
        ),
        (
            "behaviors: {A: {trainer_type: sac, hyperparameters: {buffer_size: 1e12}}}",
            "behaviors.A.hyperparameters.buffer_size: expected at most 100000000 experiences, got "
            "1000000000000 (the buffer is held in memory; 10^8 rows of the smallest observation "
            "already need 2.8 GB)",
        ),
        (
            "behaviors: {A: {hyperparameters: {buffer_size: 1e12}}}",
            "behaviors.A.hyperparameters.buffer_size: expected at most 100000000 experiences",
        ),
        (
            "behaviors: {A: {reward_signals: {curiosity: {encoding_size: 100000}}}}",
            "behaviors.A.reward_signals.curiosity.encoding_size: expected at most 8192 units, got 100000",
        ),
        (
            "behaviors: {A: {reward_signals: {gail: {demo_path: d, network_settings: {num_layers: 500}}}}}",
            "behaviors.A.reward_signals.gail.network_settings.num_layers: expected at most 64 layers",
        ),
        # flat format: the path names the section the value comes from
        ("default: {trainer: sac, buffer_size: 1.0e12}\nA: {}", "default.buffer_size: expected at most 100000000"),
        ("default: {}\nA: {hidden_units: 100000}", "A.hidden_units: expected at most 8192 units"),
        (
            "default: {use_recurrent: true, sequence_length: 100000}",
            "default.sequence_length: expected at most 1024 steps",
        ),
    ],
)
def test_absurd_sizes_are_refused_with_the_path_and_the_limit(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert error(path).startswith(f"{path}: {expected}")


def test_sizes_are_refused_in_code_too():
    with pytest.raises(ConfigError, match="num_layers: expected at most 64 layers"):
        NetworkSettings(num_layers=5000)
    with pytest.raises(ConfigError, match="buffer_size: expected at most 100000000"):
        SACSettings(buffer_size=10**12)
    with pytest.raises(ConfigError) as info:
        NetworkSettings(hidden_units=10**5000)  # repr() of this int raises in Python 3.11
    assert str(info.value).startswith(
        "hidden_units: expected at most 8192 units, got an integer of about 5001 digits"
    )


def test_every_size_ml_agents_ships_and_every_limit_itself_loads(tmp_path):
    options, warnings = load(fixture("mlagents_largest_sizes.yaml"))
    assert warnings == []
    assert options.behaviors["PyramidsSAC"].hyperparameters.buffer_size == 2000000
    assert options.behaviors["Crawler"].network_settings.hidden_units == 512
    assert options.behaviors["Hallway"].network_settings.memory == MemorySettings(256, 64)
    assert options.behaviors["Pyramids"].reward_signals["curiosity"].encoding_size == 256
    assert options.behaviors["Match3"].network_settings.num_layers == 4
    path = write(
        tmp_path,
        f"behaviors:\n  A:\n    trainer_type: sac\n    hyperparameters: {{buffer_size: {MAX_BUFFER_SIZE}}}\n"
        f"    network_settings: {{hidden_units: {MAX_HIDDEN_UNITS}, num_layers: 4}}\n"
        # The memory limits, on a (PPO) behavior of their own.
        f"  R:\n    network_settings: {{memory: "
        f"{{memory_size: {MAX_MEMORY_SIZE}, sequence_length: {MAX_SEQUENCE_LENGTH}}}}}\n"
        f"  B:\n    network_settings: {{hidden_units: 32, num_layers: {MAX_NUM_LAYERS}}}\n",
    )
    options, warnings = load(path)
    assert warnings == [] and options.behaviors["B"].network_settings.num_layers == MAX_NUM_LAYERS


# ------------------------------------------------------------ item 3: long values in messages


def test_a_long_value_is_cut_in_the_error_line(tmp_path):
    path = write(tmp_path, "behaviors:\n  A:\n    trainer_type: " + "p" * 4000 + "\n")
    message = error(path)
    assert len(message) < 300 and "... (4000 characters); expected one of ppo, sac, poca" in message
    path = write(tmp_path, "behaviors:\n  A:\n    max_steps: '" + "x" * 5000 + "'\n")
    message = error(path)
    assert len(message) < 250 and message.endswith("... (5000 characters)")


def test_a_long_key_is_cut_in_the_error_line_and_in_warnings(tmp_path):
    name = "B" * 3000
    # An explicit key (`? key`): PyYAML refuses implicit keys over 1024 characters.
    path = write(tmp_path, f"behaviors:\n  ? {name}\n  : {{max_steps: -1}}\n")
    message = error(path)
    assert len(message) < 300 and "... (3000 characters).max_steps: expected an integer >= 0" in message
    path = write(tmp_path, f"behaviors:\n  ? {name}\n  : {{}}\n  ? {name}\n  : {{}}\n")
    _, warnings = load(path)
    assert len(warnings) == 1 and len(warnings[0]) < 300 and "duplicate key" in warnings[0]
    path = write(tmp_path, f"? {name}\n: 1\n")
    message = error(path)
    assert len(message) < 300 and message.startswith(f"{path}: not a trainer configuration")


# --------------------------------------------------------------- item 3: nothing configured


def test_no_behavior_and_no_default_settings_with_max_steps_warns(tmp_path):
    path = write(tmp_path, "behaviors:\nenv_settings: {env_path: 'builtin:Simple'}\n")
    options, warnings = load(path, {"max_steps": 100})
    assert warnings == [
        f"{path}: behaviors: no behavior is configured and there is no default_settings: every "
        "behavior the environment reports trains with the default settings (and --max-steps)"
    ]
    assert options.behavior_settings("Simple").max_steps == 100
    # Without --max-steps there are no default settings: trainers/learn.py refuses every
    # behavior the environment reports (as ML-Agents does since release 17).
    options, warnings = load(path)
    assert warnings == [] and options.behaviors == {} and options.default_settings is None
    # default_settings alone is a choice, not an oversight.
    path = write(tmp_path, "default_settings: {max_steps: 5}\n", "d.yaml")
    options, warnings = load(path, {"max_steps": 100})
    assert warnings == [] and options.default_settings.max_steps == 100
