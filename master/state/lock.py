"""One master per state directory, and a state directory that is the operator's alone.

How it works. Before a master starts or resumes a run it checks the state directory
(:func:`check_state_dir`): it must be a directory of the user running the master, not writable by
group or others, and none of the names the master reads or writes there (the lock, the journal and
its WAL, the logs and the join tokens and what is in them, the keys, the report, the copies of the bag and config, the
status socket) may be a symbolic link or another user's. A directory another user made first (with
links to the operator's files, or to a folder of its own to collect the logs) is refused with one
line naming what is wrong, never used. Once the check passes, the directory is made 0700: from
then on no other user can add, rename or swap anything in it, so the checks cannot be raced.

Then the master takes an exclusive ``flock`` on ``master.lock`` (opened without following a link,
created 0600) and writes its pid into it; the kernel lets the lock go when the process ends,
however it ends, so a ``kill -9`` leaves nothing to clean up. A second ``bats-master`` on the same
state directory (a second ``--resume`` of a live run, or two fresh starts racing) does not get the
lock and stops before it writes anything, naming the pid that holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from pathlib import Path

LOCK_NAME = "master.lock"
# what the master reads or writes in a state dir (``logs`` and ``join`` are directories, checked one level down)
STATE_NAMES = (LOCK_NAME, "journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm", "journal.sqlite-mark", "logs", "master.key",
               "master.key_secret", "report.json", "bag.txt", "config.toml", "control.json", "control.sock", "join",
               "events.msgpack")
_held: list[int] = []  # the descriptors this process holds (released at exit by the kernel)


class StateDirBusy(Exception):
    """Another master holds the state directory."""


class UnsafeStateDir(Exception):
    """The state directory (or something in it) could be changed by another user; one line says what."""


def _check_entry(path: Path, uid: int, directory: bool = False) -> os.stat_result | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeStateDir(f"{path}: a symbolic link; the master follows none in its state dir "
                             "(remove it, or choose another --state-dir)")
    if st.st_uid != uid:
        raise UnsafeStateDir(f"{path}: belongs to another user (uid {st.st_uid}); everything in a state dir "
                             "must be yours (choose another --state-dir)")
    if directory and not stat.S_ISDIR(st.st_mode):
        raise UnsafeStateDir(f"{path}: not a directory")
    return st


def check_state_dir(state_dir: str | os.PathLike[str]) -> None:
    """Raise :class:`UnsafeStateDir` unless ``state_dir`` is safe to run in (see the module
    docstring); then make it 0700. A state dir that does not exist yet passes (the master makes it)."""
    path = Path(state_dir)
    uid = os.geteuid()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):  # the operator's own link to a directory is fine; another user's is not
        if st.st_uid != uid:
            raise UnsafeStateDir(f"{path}: a symbolic link of another user (uid {st.st_uid}); choose another "
                                 "--state-dir")
        st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeStateDir(f"{path}: not a directory")
    if st.st_uid != uid:
        raise UnsafeStateDir(f"{path}: belongs to another user (uid {st.st_uid}); a state dir must be yours "
                             "(choose another --state-dir)")
    if st.st_mode & 0o022:
        raise UnsafeStateDir(f"{path}: writable by other users (mode {stat.S_IMODE(st.st_mode):o}); anything "
                             "in it could be swapped under the master: chmod 700 it, or choose another --state-dir")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)  # first: from here on nobody else reaches what is in it
    for name in STATE_NAMES:
        folder = name in ("logs", "join")
        entry = _check_entry(path / name, uid, directory=folder)
        if entry is not None and folder:
            with os.scandir(path / name) as entries:
                for inner in entries:
                    _check_entry(Path(inner.path), uid)
            if stat.S_IMODE(entry.st_mode) != 0o700:  # ours, made under a loose umask: private now
                os.chmod(path / name, 0o700)


def lock_state_dir(state_dir: str | os.PathLike[str]) -> None:
    """Take ``state_dir``'s lock for the rest of this process, or raise :class:`StateDirBusy`."""
    path = Path(state_dir) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with contextlib.suppress(OSError):
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StateDirBusy(f"{state_dir}: in use by another bats-master (pid {holder}); wait for it to "
                           "end, or stop it first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held.append(fd)


def release_all() -> None:
    """Let go of every lock this process holds (for tests that run masters in-process)."""
    while _held:
        os.close(_held.pop())
