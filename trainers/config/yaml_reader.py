"""The hardened YAML reader: numbers as ML-Agents users write them, duplicate keys
recorded, and files too large, too deep or expanding too far refused before anything is
built from them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import yaml

from trainers.config._fields import _shorten
from trainers.exceptions import ConfigError


# --------------------------------------------------------------------------------------
# YAML reading.
# --------------------------------------------------------------------------------------


#: Deepest nesting of mappings and lists accepted. ML-Agents' own configs nest at most 6
#: levels (behaviors.X.reward_signals.gail.network_settings.memory); PyYAML composes and
#: constructs recursively, so a file nested thousands deep ended in a 2,999-line
#: RecursionError traceback (issue 30). 64 leaves room for any env_args a user writes.
_MAX_NESTING = 64

#: Most values (scalars, mappings and lists, every alias counted where it is used) one file
#: may expand to. ML-Agents' largest config has a few hundred; aliases that repeat aliases
#: ("billion laughs") would expand to billions when the resolved configuration is written.
_MAX_VALUES = 100_000

#: Largest config file read, in bytes: 37 times ML-Agents' largest shipped config (7 KB).
#: PyYAML's Python reader takes tens of seconds a megabyte of short values, so a larger
#: file is refused before it is parsed (README, "Figures behind choices in the code").
_MAX_FILE_BYTES = 256 * 1024

#: Longest integer literal accepted, in digits. Python refuses to read an int of more than
#: 4300 digits (a ValueError traceback from inside PyYAML); no setting needs more than 20.
_MAX_INT_DIGITS = 100


class _Refused(Exception):
    """A YAML document this loader will not build (too deep, too large); reported with
    the line it was found on."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.line = mark.line + 1 if mark is not None else None


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader that reads ``5.0e4``/``3e-4`` as floats and records duplicate keys.

    A key given twice in one mapping keeps its last value, as PyYAML and ML-Agents do
    (Unity's own 0.10/0.12 configs repeat ``sequence_length`` and ``use_recurrent``);
    ``duplicates`` holds ``(line, key)`` of each repetition, for one warning line each.

    It refuses (`_Refused`) nesting deeper than `_MAX_NESTING` while composing, and an
    integer of more than `_MAX_INT_DIGITS` digits; `_check_expansion` refuses what aliases
    would expand to, between composing and constructing.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.duplicates: List[Tuple[int, Any]] = []
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        # The composer recurses once per level; counting here refuses a deep document
        # before Python's own recursion limit is reached.
        self._depth += 1
        try:
            if self._depth > _MAX_NESTING:
                raise _Refused(
                    f"nesting too deep: more than {_MAX_NESTING} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """SafeConstructor's int, refused past `_MAX_INT_DIGITS` digits (Python's int()
        raises a ValueError over 4300 digits, which PyYAML does not catch)."""
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > _MAX_INT_DIGITS:
            raise _Refused(
                f"an integer of {digits} digits: expected at most {_MAX_INT_DIGITS} digits",
                node.start_mark,
            )
        return super().construct_yaml_int(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable key: SafeConstructor reports it
                continue
            if duplicate:
                self.duplicates.append((key_node.start_mark.line + 1, key))
        return super().construct_mapping(node, deep=deep)


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _ConfigLoader.construct_yaml_int)

# YAML 1.1 (PyYAML) needs a dot and a signed exponent for a float; YAML 1.2 and every
# ML-Agents user do not ("5.0e4", "3e-4").
_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def _check_expansion(root: yaml.Node) -> None:
    """Refuses a recursive alias, and aliases that expand past `_MAX_VALUES` values or
    `_MAX_NESTING` levels (an alias of a deep list placed deep in another one).

    Measures the composed nodes, each shared node once (memoised), so the measure is cheap
    even where the expansion would not be; the walk is as deep as the composed nesting,
    which `_ConfigLoader.compose_node` has bounded.
    """
    measured: Dict[int, Tuple[int, int]] = {}  # id(node) -> (values, levels) it expands to
    open_nodes: set = set()

    def measure(node: yaml.Node) -> Tuple[int, int]:
        key = id(node)
        if key in measured:
            return measured[key]
        if key in open_nodes:
            raise _Refused("a recursive alias (a mapping or list that contains itself)", node.start_mark)
        open_nodes.add(key)
        if isinstance(node, yaml.MappingNode):
            children = [measure(n) for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = [measure(n) for n in node.value]
        else:
            children = []
        open_nodes.discard(key)
        values = 1 + sum(v for v, _ in children)
        levels = 1 + max((d for _, d in children), default=0)
        if values > _MAX_VALUES:
            raise _Refused(
                f"more than {_MAX_VALUES} values, counting each use of an alias (ML-Agents' "
                "configs hold a few hundred)",
                node.start_mark,
            )
        if levels > _MAX_NESTING:
            raise _Refused(
                f"nesting too deep: more than {_MAX_NESTING} levels once aliases are expanded",
                node.start_mark,
            )
        measured[key] = (values, levels)
        return values, levels

    measure(root)


def _key_lines(root: Optional[yaml.Node]) -> Dict[Tuple[str, ...], int]:
    """Line (1-based) of every key of the top-level mapping and of its sections' mappings:
    ``("VisualHallway", "gamma") -> 229``, for warnings that name a line."""
    lines: Dict[Tuple[str, ...], int] = {}
    if not isinstance(root, yaml.MappingNode):
        return lines
    for key_node, value_node in root.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        lines[(key_node.value,)] = key_node.start_mark.line + 1
        if isinstance(value_node, yaml.MappingNode):
            for inner_key, _ in value_node.value:
                if isinstance(inner_key, yaml.ScalarNode):
                    lines[(key_node.value, inner_key.value)] = inner_key.start_mark.line + 1
    return lines


@dataclass
class _YamlFile:
    """A config file as read: the document, the ``(line, key)`` of every duplicate key, and
    the line of the keys of its top two levels (see `_key_lines`)."""

    doc: Any
    duplicates: List[Tuple[int, Any]]
    key_lines: Dict[Tuple[str, ...], int]


def _read_yaml(path: str) -> _YamlFile:
    """Reads and constructs a YAML file; every problem is one-line ConfigError."""
    try:
        with open(path, "r", encoding="utf-8") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > _MAX_FILE_BYTES:
                raise ConfigError(
                    f"{path}: {size} bytes: expected a trainer configuration of at most "
                    f"{_MAX_FILE_BYTES} bytes (256 KiB; ML-Agents' largest is 7 KB)"
                )
            loader = _ConfigLoader(stream)
            try:
                node = loader.get_single_node()
                if node is None:
                    return _YamlFile(None, [], {})
                _check_expansion(node)
                doc = loader.construct_document(node)
                return _YamlFile(doc, loader.duplicates, _key_lines(node))
            finally:
                loader.dispose()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected a YAML file") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not a text file ({error.reason})") from None
    except _Refused as error:
        where = f"line {error.line}: " if error.line is not None else ""
        raise ConfigError(f"{path}: {where}{error.message}") from None
    except RecursionError:
        # Not expected below _MAX_NESTING; kept so that no input gives a traceback.
        raise ConfigError(f"{path}: nesting too deep for this YAML reader") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = _shorten(" ".join(str(error.problem or error.context or "syntax error").split()))
        raise ConfigError(f"{path}: {where}invalid YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML: {_shorten(' '.join(str(error).split()))}") from None
