"""Registry: env id forms, kwargs, and one-line errors for every user mistake."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from envs.builtin import Chain, Memory, Simple
from envs.exceptions import EnvError
from envs.builtin import LookAlike, Paddles
from envs.builtin.rendezvous import Rendezvous
from envs.builtin.sorter import Sorter
from envs.registry import BUILTIN_ENVS, describe_env_ids, make_env, parse_env_id

ROOT = Path(__file__).resolve().parents[2]


def _error(env_id: str, env_args: Optional[dict] = None, **kw: object) -> str:
    with pytest.raises(EnvError) as info:
        make_env(env_id, env_args, seed=0, **kw)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_builtin_envs_table() -> None:
    assert BUILTIN_ENVS == {
        "Simple": Simple, "Memory": Memory, "Chain": Chain, "LookAlike": LookAlike, "Paddles": Paddles,
        "Rendezvous": Rendezvous, "Sorter": Sorter,
    }


def test_make_builtin_with_kwargs_and_agents_per_env() -> None:
    env = make_env("builtin:Simple", {"discrete": 1, "behavior_names": ["A", "B"]}, seed=3, agents_per_env=4)
    assert isinstance(env, Simple) and list(env.behavior_specs) == ["A", "B"]
    env.reset()
    assert len(env.get_steps("A")[0]) == 4
    env = make_env("builtin:Chain", {"num_agents": 2}, seed=0)
    env.reset()
    assert len(env.get_steps("Chain")[0]) == 2
    assert isinstance(make_env("builtin:Memory", None, seed=0), Memory)


def test_make_gym_passes_kwargs_to_gymnasium_make() -> None:
    env = make_env("gym:CartPole-v1", {"max_episode_steps": 2}, seed=0, agents_per_env=3)
    env.reset()
    env.step()
    env.step()
    _, terminal = env.get_steps("CartPole-v1")
    assert terminal.interrupted.tolist() == [True] * 3


def test_unknown_id_lists_builtins_and_forms() -> None:
    message = _error("Nope")
    for word in ("Nope", "builtin:<Name>", "gym:<Gymnasium id>", "Simple", "Memory", "Chain"):
        assert word in message
    assert "did you mean builtin:Simple" in _error("Simple")
    assert "did you mean gym:CartPole-v1" in _error("CartPole-v1")


def test_unknown_builtin_name_suggests() -> None:
    message = _error("builtin:Simpel")
    assert "builtin:Simpel" in message and "did you mean builtin:Simple" in message


@pytest.mark.parametrize("env_id", ["builds/3DBall", "3DBall.x86_64", "Walker.exe", "Crawler.app", "C:\\b\\x"])
def test_missing_unity_builds_are_named(env_id: str) -> None:
    assert f"Unity build {env_id!r} not found" in _error(env_id)


def test_existing_file_is_a_unity_build(tmp_path: Path) -> None:
    build = tmp_path / "MyGame"
    build.write_text("")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert parse_env_id("MyGame") == ("unity", "MyGame")
    finally:
        os.chdir(cwd)


def test_unknown_gym_id_is_named() -> None:
    message = _error("gym:NoSuchEnv-v0")
    assert "gym:NoSuchEnv-v0" in message and "not a registered Gymnasium environment id" in message
    assert "gym:" in _error("gym:")


def test_bad_gym_kwarg_is_one_line() -> None:
    assert "bogus" in _error("gym:CartPole-v1", {"bogus": 1})


def test_bad_builtin_kwarg_names_key_and_accepted_ones() -> None:
    message = _error("builtin:Simple", {"continous": 2})
    assert "'continous'" in message and "did you mean continuous" in message
    for key in ("continuous", "discrete", "num_vector", "vec_obs_size", "num_visual", "vis_obs_size",
                "step_size", "num_agents", "behavior_names", "max_episode_steps"):
        assert key in message
    assert "env_settings.seed" in _error("builtin:Chain", {"seed": 3})


def test_num_agents_conflict_and_bad_counts() -> None:
    assert "agents_per_env" in _error("builtin:Simple", {"num_agents": 2}, agents_per_env=3)
    assert "agents_per_env" in _error("builtin:Simple", None, agents_per_env=0)
    with pytest.raises(EnvError, match="seed"):
        make_env("builtin:Simple", None, seed=-5)
    with pytest.raises(EnvError, match="mapping"):
        make_env("builtin:Simple", ["continuous"], seed=0)  # type: ignore[arg-type]


def test_describe_env_ids_lists_public_envs_and_kwargs() -> None:
    text = describe_env_ids()
    for word in ("builtin:Simple", "builtin:Memory", "builtin:Chain", "gym:", "Unity", "step_size", "length"):
        assert word in text
    assert "_Crash" not in text


def test_hidden_crash_env_is_reachable() -> None:
    env = make_env("builtin:_Crash", {"raise_at_step": 2}, seed=0)
    env.reset()
    env.step()
    with pytest.raises(RuntimeError, match="raise_at_step 2"):
        env.step()


def test_envs_package_imports_no_trainers_tensorflow_or_gymnasium() -> None:
    code = (
        "import sys, envs.managers, envs.registry, envs.builtin; "
        "bad = [m for m in ('trainers', 'tensorflow', 'gymnasium') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


@pytest.mark.parametrize("env_id", ["gym:a:b:c", "gym::CartPole-v1", "gym:module:"])
def test_a_malformed_gym_module_id_is_refused_by_its_form(env_id: str) -> None:
    # Checked before any worker starts (Gymnasium itself raised "too many values to unpack").
    with pytest.raises(EnvError) as info:
        parse_env_id(env_id)
    assert str(info.value) == f"{env_id!r}: expected gym:<id> or gym:<module>:<id>, e.g. gym:CartPole-v1"


def test_a_missing_gym_module_is_one_line_naming_module_and_id() -> None:
    # It was a ModuleNotFoundError traceback from gymnasium.make.
    assert _error("gym:no_such_module_xyz:Foo-v0") == (
        "gym:no_such_module_xyz:Foo-v0: no module named 'no_such_module_xyz' to import for env 'Foo-v0' "
        "(is it installed, or on PYTHONPATH?)"
    )
