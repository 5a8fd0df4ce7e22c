"""The command-line front-ends: ``trainer-learn`` (`learn`), ``trainer-export`` (`export`)
and ``trainer-demo`` (`demo`). Only these modules know docopt; each turns its arguments
into the library's calls and every user error into one line and an exit status."""
from __future__ import annotations

import difflib
import re
from typing import Sequence


def usage_error(program: str, doc: str, argv: Sequence[str], exc: Exception) -> str:
    """docopt's usage text, preceded by a line naming the option it did not know (docopt
    itself only prints the usage), with the closest known option."""
    known = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-h)\b", doc)))
    for arg in argv:
        if not arg.startswith("-") or arg == "-":
            continue
        option = arg.split("=", 1)[0]
        if option not in known:
            close = difflib.get_close_matches(option, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; see {program} --help"
            return f"{program}: error: unknown option {option}{hint}\n{exc}"
    return f"{program}: error: the arguments do not match the usage\n{exc}"
