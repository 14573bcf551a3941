"""``bats-master status``: ask a running master for its live figures from another terminal.

How it works. While a run is going, the master binds a ZeroMQ ROUTER socket on a Unix socket
(``ipc://``) in a directory only the operator can enter: ``STATE_DIR/control.sock`` when the state
dir (0700) is short enough for a socket path, else a fresh 0700 directory under the system's temp
dir. The socket file is 0600 as well, so another local user cannot even connect. The master writes
``STATE_DIR/control.json`` (0600) with the endpoint, its pid, the run id and a random key; a request
is that key and nothing else. The server's tick (every 0.2 s) answers the requests waiting there
with the latest snapshot of :mod:`bats.master.views.live`, as JSON. What it takes from the socket is
bounded: a request of more than ``MAX_REQUEST_BYTES`` drops its connection inside libzmq (nothing is
buffered), a message that is not one part after the REQ envelope, or that does not carry the key, is
answered with an error or dropped, and at most a few requests are looked at per tick, all answered
with one snapshot, so a process flooding the socket slows ``status``, never the run. A ROUTER has no
send/receive state to get wrong (a REP socket fails with EFSM after a malformed request), and any
ZeroMQ error is logged and the socket made again: nothing on this socket can stop a run.
At exit the master removes ``control.json`` and the socket.

``status`` reads ``control.json``, asks, and waits a few seconds. No file: no run is active there.
A file whose pid is gone: the master died without cleaning up (``--resume`` continues the run).
A live pid that does not answer: the master is busy or stuck; said as such.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bats.common.atomic import replace_whole

log = logging.getLogger(__name__)

CONTROL_NAME = "control.json"
SOCKET_NAME = "control.sock"
ASK_TIMEOUT_S = 5.0
ANSWERS_PER_TICK = 4  # status requests answered per server tick (0.2 s); the rest wait
LOOKED_AT_PER_TICK = 16  # messages taken from the socket per tick, answered or not
MAX_REQUEST_BYTES = 256  # a larger part drops its connection inside libzmq, unread
_QUEUE = 64  # messages libzmq keeps per connection, each way
_IPC_PATH_MAX = 100  # a Unix socket's path is at most 107 bytes on Linux; keep a margin


class StatusError(Exception):
    """No answer to give: the message is one line and says why (no run, master gone, no answer)."""


class ControlServer:
    """The master's side: bind, advertise in ``control.json``, answer on :meth:`serve`."""

    def __init__(self, state_dir: str | os.PathLike[str], run_id: str) -> None:
        import zmq

        directory = Path(state_dir).absolute()
        self.path = directory / CONTROL_NAME
        self._key = secrets.token_hex(16)
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._own_dir: Path | None = None  # a temp directory made for the socket, removed at close
        socket_path = directory / SOCKET_NAME
        if len(os.fsencode(socket_path)) > _IPC_PATH_MAX or stat.S_IMODE(directory.stat().st_mode) & 0o077:
            self._own_dir = Path(tempfile.mkdtemp(prefix="bats-status-"))  # 0700, ours
            socket_path = self._own_dir / SOCKET_NAME
        self._socket_path = socket_path
        self.endpoint = f"ipc://{socket_path}"
        self._sock: zmq.Socket[bytes] | None = None
        try:
            self._open()
            info = {"endpoint": self.endpoint, "pid": os.getpid(), "run_id": run_id, "key": self._key}
            replace_whole(self.path, (json.dumps(info) + "\n").encode("utf-8"), 0o600)
        except BaseException:
            self.close()
            raise
        log.info("status requests answered on %s (%s)", self.endpoint, self.path)

    def _open(self) -> None:
        import zmq

        sock = self._context.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
        sock.setsockopt(zmq.RCVHWM, _QUEUE)
        sock.setsockopt(zmq.SNDHWM, _QUEUE)
        try:
            sock.bind(self.endpoint)
            os.chmod(self._socket_path, 0o600, follow_symlinks=False)
        except BaseException:
            sock.close(linger=0)
            raise
        self._sock = sock

    def serve(self, figures: Callable[[], dict[str, Any]]) -> int:
        """Answer the requests waiting, at most ``ANSWERS_PER_TICK`` of them, with one snapshot made
        once for all; never blocks and never raises. Returns how many were answered."""
        import zmq

        try:
            return self._serve(figures)
        except zmq.ZMQError as exc:  # nothing on this socket may stop the run: make it again
            log.warning("status socket: %s; making it again", exc)
            if self._sock is not None:
                self._sock.close(linger=0)
                self._sock = None
                try:
                    self._open()
                except (zmq.ZMQError, OSError) as again:
                    log.warning("'bats-master status' will not answer any more: %s", again)
            return 0

    def _serve(self, figures: Callable[[], dict[str, Any]]) -> int:
        import zmq

        answered = looked = 0
        reply: bytes | None = None
        key = self._key.encode()
        while self._sock is not None and answered < ANSWERS_PER_TICK and looked < LOOKED_AT_PER_TICK:
            try:
                parts = self._sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            looked += 1
            # a REQ client's message is [its id, empty delimiter, request]; anything else is dropped
            if len(parts) != 3 or parts[1]:
                log.debug("status socket: dropped a message of %d part(s)", len(parts))
                continue
            if not hmac.compare_digest(parts[2], key):
                answer = json.dumps({"ok": False, "error": "not a status request of this run"}).encode()
            else:
                if reply is None:
                    try:
                        reply = json.dumps({"ok": True, "status": figures()}).encode()
                    except Exception as exc:  # a status request must never take the run down
                        log.warning("status request: %s", exc)
                        reply = json.dumps({"ok": False, "error": str(exc)}).encode()
                answer = reply
                answered += 1
            try:
                self._sock.send_multipart([parts[0], b"", answer], zmq.NOBLOCK)
            except zmq.Again:
                pass  # a client that does not read gets no answer
        return answered

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            self._socket_path.unlink()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ask(state_dir: str | os.PathLike[str], timeout_s: float = ASK_TIMEOUT_S) -> dict[str, Any]:
    """The live figures of the run going on in ``state_dir``; :class:`StatusError` otherwise."""
    import zmq

    directory = Path(state_dir)
    if not directory.is_dir():
        raise StatusError(f"{directory}: no such state dir")
    control = directory / CONTROL_NAME
    if not control.is_file():
        has_run = (directory / "journal.sqlite").is_file()
        raise StatusError(f"{directory}: no run is active here"
                          + (" (the last one ended; see report.json or 'bats-master report')" if has_run
                             else " (no run was ever started here)"))
    try:
        info = json.loads(control.read_text())
        endpoint, pid, key = str(info["endpoint"]), int(info["pid"]), str(info.get("key", ""))
    except (OSError, ValueError, KeyError, TypeError):
        raise StatusError(f"{control}: unreadable; is a master running here?") from None
    if not _pid_alive(pid):
        raise StatusError(f"{directory}: no run is active here (its master, pid {pid}, is gone without "
                          "cleaning up; 'bats-master --resume' continues the run)")
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sock = context.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(endpoint)
        sock.send(key.encode())
        if not sock.poll(int(timeout_s * 1000)):
            raise StatusError(f"{directory}: the master (pid {pid}) did not answer within {timeout_s:g} s")
        reply = json.loads(sock.recv())
    finally:
        sock.close(linger=0)
    if not reply.get("ok"):
        raise StatusError(f"{directory}: the master could not give its status: {reply.get('error')}")
    return reply["status"]
