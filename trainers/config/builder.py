"""Building settings dataclasses from YAML (or command-line) values, field by field, with
the file and YAML path of every value for error messages; the config file being loaded
(`_Source`: its directory, its warnings)."""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from trainers.config._fields import _InvalidField, _describe, _is_int, _shorten, _suggestion
from trainers.exceptions import ConfigError


# --------------------------------------------------------------------------------------
# Building dataclasses from YAML values, with paths for error messages.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cli:
    """A value from the command line, reported as ``command line: <flag>``."""

    value: Any
    flag: str


class _Where:
    """Where a YAML value lives: the file and a dotted path, for error messages.

    ``remap`` gives the path of particular keys of this mapping when they live elsewhere
    (flat format: a behavior's key may come from the ``default:`` section).
    """

    def __init__(self, source: str, path: str = "", remap: Optional[Mapping[str, str]] = None):
        self.source = source
        self.path = path
        self.remap = dict(remap or {})

    def _join(self, key: Any) -> str:
        key = str(key)
        if key in self.remap:
            return self.remap[key]
        key = _shorten(key)  # a pasted 4 KB key must not make a 4 KB message
        return f"{self.path}.{key}" if self.path else key

    def dotted(self, key: Any) -> str:
        """'path.key' (no file)."""
        return self._join(key)

    def key(self, key: Any) -> str:
        """'file: path.key'."""
        return f"{self.source}: {self._join(key)}"

    def child(self, key: Any) -> "_Where":
        return _Where(self.source, self._join(key))

    def here(self) -> str:
        return f"{self.source}: {self.path}" if self.path else self.source


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def _as_mapping(raw: Any, where: _Where) -> Dict[Any, Any]:
    """A YAML section as a dict; an empty section (null) is an empty mapping."""
    if raw is None:
        return {}
    if isinstance(raw, _Cli):
        raw = raw.value
    if not isinstance(raw, Mapping):
        raise _fail(where.here(), f"expected a mapping, got {_describe(raw)}")
    return dict(raw)


def _unknown_key(key: Any, candidates: Iterable[str], where: _Where) -> ConfigError:
    if str(key) in _NOT_SUPPORTED:
        return _fail(where.key(key), _NOT_SUPPORTED[str(key)])
    return _fail(where.key(key), f"unknown key{_suggestion(key, candidates)}")


_NOT_SUPPORTED: Dict[str, str] = {}

_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _field_names(cls: type) -> List[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _coerce(raw: Any, hint: Any, where: _Where, key: str) -> Tuple[Any, str]:
    """Converts a YAML (or command-line) value toward a field's type; returns (value, where).

    Only conversions are done here; the dataclass validates the result and reports wrong
    types and ranges.
    """
    location = where.key(key)
    from_cli = isinstance(raw, _Cli)
    if from_cli:
        location = f"command line: {raw.flag}"
        raw = raw.value
    if get_origin(hint) is Union:
        options = [a for a in get_args(hint) if a is not type(None)]
        if raw is None:
            return None, location
        hint = options[0]
    origin = get_origin(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a class (hints are never instances)
        return _build(hint, raw, where.child(key)), location
    if hint is int:
        if from_cli and isinstance(raw, str):
            try:
                raw = int(raw.strip())
            except ValueError:
                pass
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
    elif hint is float:
        if from_cli and isinstance(raw, str):
            try:
                raw = float(raw.strip())
            except ValueError:
                pass
        if _is_int(raw):
            raw = float(raw)
    elif hint is bool:
        if from_cli and isinstance(raw, str):
            raw = {"true": True, "false": False}.get(raw.strip().lower(), raw)
    elif origin is tuple:
        if isinstance(raw, str):
            raw = tuple(part.strip() for part in raw.split(",") if part.strip())
        elif isinstance(raw, list):
            raw = tuple(raw)
    elif origin in (dict, Mapping) or hint is dict:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise _fail(location, f"expected a mapping, got {_describe(raw)}")
        raw = copy.deepcopy(dict(raw))
    return raw, location


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T", bound="DataclassInstance")  # a settings dataclass


def _construct(cls: Type[_T], kwargs: Mapping[str, Any], locate: Callable[[str], str]) -> _T:
    """cls(**kwargs), with a field's validation error reported at that field's location."""
    try:
        return cls(**kwargs)
    except _InvalidField as error:
        raise _fail(locate(error.key), error.message) from None


def _build(
    cls: Type[_T],
    raw: Any,
    where: _Where,
    prebuilt: Optional[Mapping[str, Any]] = None,
) -> _T:
    """Builds a settings dataclass from a YAML mapping, field by field.

    Args:
      cls: the dataclass.
      raw: the YAML value (a mapping, or null for all defaults).
      where: location of `raw`, for error messages.
      prebuilt: fields already built by the caller (special cases); their keys are allowed.
    """
    data = _as_mapping(raw, where)
    prebuilt = prebuilt or {}
    names = _field_names(cls)
    for key in data:
        if key not in names and key not in prebuilt:
            raise _unknown_key(key, names, where)
    hints = _hints(cls)
    kwargs: Dict[str, Any] = {}
    locations: Dict[str, str] = {}
    for f in dataclasses.fields(cls):
        if f.name in prebuilt:
            kwargs[f.name] = prebuilt[f.name]
        elif f.name in data:
            kwargs[f.name], locations[f.name] = _coerce(data[f.name], hints[f.name], where, f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _fail(where.key(f.name), "required key is missing")
    return _construct(cls, kwargs, lambda key: locations.get(key, where.key(key)))


class _Source:
    """The config file: its name as given (for messages), its directory (for demos), and
    the warnings of this load (emitted once the whole file has loaded)."""

    def __init__(self, path: str) -> None:
        self.name = path
        self.dir = os.path.dirname(os.path.abspath(path))
        self.warnings: List[str] = []
        self._warned: set = set()
        # Line of each key of the top two levels (`_key_lines`), for warnings naming a line.
        self.key_lines: Dict[Tuple[str, ...], int] = {}
        # Locations of `network_settings.deterministic: true`, refused unless --inference.
        self.deterministic_at: List[str] = []

    def warn(self, location: str, message: str, once: Any = None) -> None:
        """Records ``'<location>: <message>'``; ``once`` (default: the message) keys the
        de-duplication, so a key that default_settings gives every behavior warns once."""
        token = message if once is None else once
        if token not in self._warned:
            self._warned.add(token)
            self.warnings.append(f"{location}: {message}")

    def resolve_demo(self, demo_path: str) -> str:
        """Config-relative if the file exists there, else CWD-relative if it exists there."""
        path = os.path.expanduser(demo_path)
        if os.path.isabs(path):
            return path
        beside_config = os.path.join(self.dir, path)
        if os.path.exists(beside_config):
            return os.path.abspath(beside_config)
        if os.path.exists(path):
            return os.path.abspath(path)
        return demo_path
