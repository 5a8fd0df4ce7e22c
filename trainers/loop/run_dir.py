"""The run directory as an operator's mistakes meet it: run ids that are names, one process
per run, and `--force` that deletes only what belongs to the run, last.

A run id is a folder name inside the results folder, never a path: an absolute id, ``..``
or ``.`` would make ``--force`` delete a folder outside the run (or every run beside it).
A run directory is locked (``flock`` on the directory itself, so the lock lives exactly as
long as the process and survives ``--force`` emptying the folder) for as long as a process
trains or plays it.
"""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
from typing import Optional

from trainers.exceptions import ConfigError, RunLockedError, TrainerError, shorten

#: Most file systems limit one name to 255 bytes.
MAX_NAME_BYTES = 255


def check_run_id(run_id: str, option: str = "--run-id") -> str:
    """``run_id`` if it is a usable folder name; `ConfigError` naming ``option`` otherwise."""
    shown = shorten(run_id)
    if not run_id or run_id.strip() != run_id:
        raise ConfigError(f"{option}={shown!r}: a run id must be a non-empty name without surrounding spaces")
    if run_id in (".", "..") or "/" in run_id or "\\" in run_id or "\0" in run_id or (
        os.altsep and os.altsep in run_id
    ):
        raise ConfigError(
            f"{option}={shown!r}: a run id is a folder name inside the results folder, not a path "
            "(use --results-dir to choose where runs go)"
        )
    if len(run_id.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise ConfigError(f"{option}={shown!r}: a run id is at most {MAX_NAME_BYTES} bytes (a file name)")
    return run_id


def check_results_dir(results_dir: str) -> None:
    """The results folder exists as a folder we can write, or can be created."""
    if os.path.exists(results_dir) and not os.path.isdir(results_dir):
        raise TrainerError(f"{results_dir}: the results folder is a file, not a folder (--results-dir)")
    parent = results_dir
    while parent and not os.path.exists(parent):  # the nearest folder that exists
        parent = os.path.dirname(parent)
    parent = parent or "."
    if not os.path.isdir(parent):
        raise TrainerError(f"{parent}: not a folder; cannot create the results folder {results_dir}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise TrainerError(f"{parent}: not writable; cannot write runs there (--results-dir)")


class RunLock:
    """An advisory lock on a run directory for this process's lifetime.

    Training takes it exclusively; ``--inference`` shares it with other players but not
    with a trainer. ``created`` is True when this lock created the (empty) folder, so that
    a run that fails before it writes anything leaves no folder behind.
    """

    def __init__(self, run_dir: str, exclusive: bool = True) -> None:
        self.run_dir = run_dir
        self.created = not os.path.isdir(run_dir)
        try:
            os.makedirs(run_dir, exist_ok=True)
            self._fd: Optional[int] = os.open(run_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError as exc:
            raise TrainerError(f"{run_dir}: cannot create the run folder ({exc.strerror})") from None
        try:
            fcntl.flock(self._fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._fd)
            self._fd = None
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise RunLockedError(
                    f"{run_dir}: another trainer-learn process is using this run; wait for it to end "
                    "or choose another --run-id"
                ) from None
            raise

    def release(self, remove_if_empty: bool = False) -> None:
        """Unlocks; ``remove_if_empty``: the folder this lock created goes if nothing was written."""
        if self._fd is None:
            return
        try:
            if remove_if_empty and self.created and not os.listdir(self.run_dir):
                os.rmdir(self.run_dir)
        except OSError:
            pass  # someone else's file appeared: keep the folder
        finally:
            os.close(self._fd)
            self._fd = None


def clear_run(run_dir: str) -> None:
    """``--force``: empties ``run_dir`` (the folder itself stays, with its lock).

    Links inside it are removed, never followed: nothing outside the run is deleted.
    """
    for entry in os.scandir(run_dir):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.remove(entry.path)
