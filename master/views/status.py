"""``bats-master status``: ask a running master for its live figures from another terminal.

How it works. While a run is going, the master binds a ZeroMQ REP socket on
``tcp://127.0.0.1:PORT`` (a free port; loopback only, so only this machine can ask) and writes
``STATE_DIR/control.json`` with the endpoint, its pid and the run id. The server's tick (every
0.2 s) answers any request waiting there with the latest snapshot of :mod:`bats.master.views.live`, as
JSON; requests carry nothing. At most a few requests are answered per tick, all with one snapshot,
so a local process flooding the port slows ``status``, never the run. At exit the master removes ``control.json``. A TCP port rather than an
ipc socket file: it works whatever the length of the state dir's path.

``status`` reads ``control.json``, asks, and waits a few seconds. No file: no run is active there.
A file whose pid is gone: the master died without cleaning up (``--resume`` continues the run).
A live pid that does not answer: the master is busy or stuck; said as such.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bats.common.atomic import replace_whole

log = logging.getLogger(__name__)

CONTROL_NAME = "control.json"
ASK_TIMEOUT_S = 5.0
ANSWERS_PER_TICK = 4  # status requests answered per server tick (0.2 s); the rest wait


class StatusError(Exception):
    """No answer to give: the message is one line and says why (no run, master gone, no answer)."""


class ControlServer:
    """The master's side: bind, advertise in ``control.json``, answer on :meth:`serve`."""

    def __init__(self, state_dir: str | os.PathLike[str], run_id: str) -> None:
        import zmq

        self.path = Path(state_dir) / CONTROL_NAME
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._sock: zmq.Socket[bytes] | None = self._context.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind("tcp://127.0.0.1:*")
        self.endpoint = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        info = {"endpoint": self.endpoint, "pid": os.getpid(), "run_id": run_id}
        replace_whole(self.path, (json.dumps(info) + "\n").encode("utf-8"), 0o600)
        log.info("status requests answered on %s (%s)", self.endpoint, self.path)

    def serve(self, figures: Callable[[], dict[str, Any]]) -> int:
        """Answer the requests waiting, at most ``ANSWERS_PER_TICK`` of them, with one snapshot made
        once for all; never blocks. Returns how many were answered. A local process that floods the
        port can only make ``status`` slow, never the run: the rest wait for the next tick."""
        import zmq

        answered = 0
        reply: bytes | None = None
        while self._sock is not None and answered < ANSWERS_PER_TICK:
            try:
                self._sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if reply is None:
                try:
                    reply = json.dumps({"ok": True, "status": figures()}).encode()
                except Exception as exc:  # a status request must never take the run down
                    log.warning("status request: %s", exc)
                    reply = json.dumps({"ok": False, "error": str(exc)}).encode()
            self._sock.send(reply)
            answered += 1
        return answered

    def close(self) -> None:
        if self._sock is None:
            return
        self._sock.close(linger=0)
        self._sock = None
        with contextlib.suppress(OSError):
            self.path.unlink()


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
        endpoint, pid = str(info["endpoint"]), int(info["pid"])
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
        sock.send(b"status")
        if not sock.poll(int(timeout_s * 1000)):
            raise StatusError(f"{directory}: the master (pid {pid}) did not answer within {timeout_s:g} s")
        reply = json.loads(sock.recv())
    finally:
        sock.close(linger=0)
    if not reply.get("ok"):
        raise StatusError(f"{directory}: the master could not give its status: {reply.get('error')}")
    return reply["status"]
