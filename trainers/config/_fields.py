"""Field validation, shared by the settings dataclasses (settings built in code) and the
loader: the one-line error of an invalid field, how values are quoted in messages, and
the "did you mean" suggestions."""

from __future__ import annotations

import difflib
import math
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from trainers.exceptions import SHOWN_CHARS, ConfigError, shorten


# --------------------------------------------------------------------------------------
# Field validation, shared by the dataclasses (settings built in code) and the loader.
# --------------------------------------------------------------------------------------


class _InvalidField(ConfigError):
    """A field of a settings dataclass is invalid; the loader adds the file and YAML path."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


_SHOWN_CHARS = SHOWN_CHARS
_shorten = shorten


def _describe(value: Any) -> str:
    """How a value is shown in an error message (YAML spelling for null and booleans).

    Every message that quotes a value goes through here, so none grows past about
    `_SHOWN_CHARS` characters for the value (see `_shorten`).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if _is_int(value) and value.bit_length() > 3 * _SHOWN_CHARS:
        # repr() of an int over 4300 digits raises ValueError (Python 3.11's limit).
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    if isinstance(value, str):
        shown = repr(value)
        if len(shown) > _SHOWN_CHARS:
            shown = f"{shown[: _SHOWN_CHARS - 3]}... ({len(value)} characters)"
        return shown
    return _shorten(repr(value))


# Common spellings from other RL libraries and from the other ML-Agents format; a suggestion
# is only made when the target is a valid key where the typo was found.
_ALIASES: Dict[str, Tuple[str, ...]] = {
    "lr": ("learning_rate",),
    "lambda": ("lambd",),
    "gae_lambda": ("lambd",),
    "clip_range": ("epsilon",),
    "clip_param": ("epsilon",),
    "clip_epsilon": ("epsilon",),
    "ent_coef": ("beta", "init_entcoef"),
    "entropy_coef": ("beta", "init_entcoef"),
    "n_epochs": ("num_epoch",),
    "epochs": ("num_epoch",),
    "num_epochs": ("num_epoch",),
    "minibatch_size": ("batch_size",),
    "n_steps": ("time_horizon",),
    "total_timesteps": ("max_steps",),
    "trainer": ("trainer_type",),
    "trainer_type": ("trainer",),
    "use_recurrent": ("memory",),
    "pretraining": ("behavioral_cloning",),
    "recurrent": ("memory", "use_recurrent"),
    "layers": ("num_layers",),
    "hidden_size": ("hidden_units",),
    "behavior": ("behaviors",),
    "brains": ("behaviors",),
}


def _suggestion(word: Any, candidates: Iterable[str]) -> str:
    """'; did you mean X?' for the closest candidate, or '' when nothing is close."""
    names = list(candidates)
    text = str(word)
    lowered = {name.lower(): name for name in names}
    for target in _ALIASES.get(text.lower(), ()):
        if target in names:
            return f"; did you mean {target}?"
    if text.lower() in lowered:
        return f"; did you mean {lowered[text.lower()]}?"
    # Abbreviations made of initials: "lr" -> learning_rate.
    initials = [name for name in names if "".join(p[:1] for p in name.split("_")) == text]
    if len(initials) == 1 and len(text) > 1:
        return f"; did you mean {initials[0]}?"
    close = difflib.get_close_matches(text.lower(), list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[close[0]]}?" if close else ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(
    obj: Any, key: str, minimum: Optional[int] = None, *, optional: bool = False
) -> None:
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not _is_int(value):
        raise _InvalidField(key, f"expected an integer, got {_describe(value)}")
    if minimum is not None and value < minimum:
        raise _InvalidField(key, f"expected an integer >= {minimum}, got {_describe(value)}")


def _check_number(
    obj: Any,
    key: str,
    low: Optional[float] = None,
    high: Optional[float] = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    optional: bool = False,
) -> None:
    """A finite number within [low, high]; either bound may be open or absent."""
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not _is_number(value):
        raise _InvalidField(key, f"expected a number, got {_describe(value)}")
    if not math.isfinite(value):
        raise _InvalidField(key, f"expected a finite number, got {_describe(value)}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if not (too_low or too_high):
        return
    if low is not None and high is not None:
        expected = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        expected = f"a number in {expected}"
    elif low is not None:
        expected = f"a number {'>' if low_open else '>='} {low:g}"
    else:
        expected = f"a number {'<' if high_open else '<='} {high:g}"
    raise _InvalidField(key, f"expected {expected}, got {_describe(value)}")


def _check_bool(obj: Any, key: str) -> None:
    value = getattr(obj, key)
    if not isinstance(value, bool):
        raise _InvalidField(key, f"expected true or false, got {_describe(value)}")


def _check_str(obj: Any, key: str, *, optional: bool = False) -> None:
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _InvalidField(key, f"expected a string, got {_describe(value)}")
    if not value.strip():
        raise _InvalidField(key, "expected a non-empty string")


def _check_choice(obj: Any, key: str, choices: Tuple[str, ...], *, optional: bool = False) -> None:
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not isinstance(value, str) or value not in choices:
        raise _InvalidField(key, _choice_message(value, choices))


def _choice_message(value: Any, choices: Tuple[str, ...]) -> str:
    expected = ", ".join(choices)
    if isinstance(value, str):
        return f"unknown value {_describe(value)}; expected one of {expected}{_suggestion(value, choices)}"
    return f"expected one of {expected}, got {_describe(value)}"


def _check_instance(obj: Any, key: str, kind: type, *, optional: bool = False) -> None:
    value = getattr(obj, key)
    if value is None and optional:
        return
    if not isinstance(value, kind):
        raise _InvalidField(key, f"expected {kind.__name__}, got {type(value).__name__}")


def _check_address(key: str, value: Any) -> str:
    """``host:port`` with a port in 1..65535 (YAML may read an unquoted ``a:b`` as a number)."""
    if not isinstance(value, str):
        raise _InvalidField(key, f"expected host:port (quote it), got {_describe(value)}")
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _InvalidField(key, f"expected host:port with a port in 1..65535, got {_describe(value)}")
    return value


def _normalize_device(value: Any) -> Optional[str]:
    """'/gpu:1', 'GPU:1', '/device:GPU:1' -> 'GPU:1'; None when not a device name."""
    if not isinstance(value, str):
        return None
    kind, _, index = value.strip().lstrip("/").rpartition("device:")[2].partition(":")
    if kind.upper() not in ("GPU", "CPU") or not index.isdigit():
        return None
    return f"{kind.upper()}:{int(index)}"
