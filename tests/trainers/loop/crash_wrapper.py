"""Runs ``trainer-learn`` and SIGKILLs itself just before its N-th file event (tests only).

Events: every Python-level file write, rename, removal or folder creation under
``$CRASH_ROOT`` (seen through ``sys.addaudithook``), plus "checkpoint written" after each
TensorFlow checkpoint save (TensorFlow writes its files in C++, out of the hook's sight).
``CRASH_AT=0`` (and no ``CRASH_MATCH``) never kills; every event is appended to
``$CRASH_LOG`` either way, one ``<n>\t<what>`` line each.

Usage: python crash_wrapper.py <trainer-learn arguments...>
"""
from __future__ import annotations

import os
import signal
import sys

ROOT = os.path.abspath(os.environ["CRASH_ROOT"])
KILL_AT = int(os.environ.get("CRASH_AT", "0"))
#: Or: kill at the ``CRASH_MATCH_COUNT``-th (default first) event whose text contains this.
KILL_MATCH = os.environ.get("CRASH_MATCH", "")
KILL_MATCH_COUNT = int(os.environ.get("CRASH_MATCH_COUNT", "1"))
_matches = 0
LOG_FD = os.open(os.environ["CRASH_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # before the hook
_count = 0


def event(what: str) -> None:
    global _count, _matches
    _count += 1
    os.write(LOG_FD, f"{_count}\t{what}\n".encode())  # os.write raises no audit event
    _matches += bool(KILL_MATCH) and KILL_MATCH in what
    if _count == KILL_AT or (KILL_MATCH and _matches == KILL_MATCH_COUNT):
        os.kill(os.getpid(), signal.SIGKILL)


def _inside(path: object) -> bool:
    if isinstance(path, bytes):
        path = path.decode(errors="replace")
    return isinstance(path, str) and os.path.abspath(path).startswith(ROOT + os.sep)


def _rel(path: object) -> str:
    return os.path.relpath(path if isinstance(path, str) else path.decode(), ROOT)


def hook(name: str, args: tuple) -> None:
    if name == "open" and _inside(args[0]):
        mode, flags = args[1], args[2] or 0
        writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(
            flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        )
        if writing:
            event(f"write {_rel(args[0])}")
    elif name in ("os.rename", "os.replace") and _inside(args[1]):
        event(f"rename {_rel(args[0])} -> {_rel(args[1])}")
    elif name == "os.mkdir" and _inside(args[0]) and not os.path.isdir(args[0]):
        event(f"mkdir {_rel(args[0])}")
    elif name in ("os.remove", "os.unlink", "os.rmdir") and _inside(args[0]):
        event(f"{name[3:]} {_rel(args[0])}")
    elif name == "shutil.rmtree" and _inside(args[0]):
        event(f"rmtree {_rel(args[0])}")


def main() -> int:
    from trainers.cli.learn import main as learn_main
    from trainers.ppo.trainer import PPOTrainer

    save = PPOTrainer.save

    def save_and_report(self, directory):  # type: ignore[no-untyped-def]
        event(f"checkpoint {self.step} about to be written")
        prefix = save(self, directory)
        event(f"checkpoint {self.step} written")
        return prefix

    PPOTrainer.save = save_and_report
    sys.addaudithook(hook)
    return learn_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
