"""A stand-in for the instance metadata service that :class:`~bats.worker.spot.SpotWatcher` watches.

On EC2 every machine reaches its instance metadata at ``http://169.254.169.254``; a spot machine
that is about to be taken away finds a notice at ``/latest/meta-data/spot/instance-action``
(EC2's two-minute warning). :class:`MetadataStandIn` plays that service on 127.0.0.1 with the
standard library's HTTP server: IMDSv2 session tokens (``PUT /latest/api/token``, then the token
in a header, 401 without it), 404 for the notice until :meth:`MetadataStandIn.arm` is called,
then the notice once, to the first worker that asks (a spot interruption takes one machine).
Point a worker at it with ``bats-worker --spot-notice URL``, or a local cluster with
``metadata_url = URL``. The tests of the ec2 provisioner and the fault-injection suite use it;
it ships beside the real watcher so both change together.
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import Self

from bats.worker.spot import NOTICE_PATH, TOKEN_PATH

TOKEN = "test-token"


class MetadataStandIn:
    """A local HTTP server in place of the instance metadata service: IMDSv2 tokens, and a spot
    interruption notice served once :meth:`arm` is called, to the first worker that asks.
    A context manager; :meth:`stop` shuts it down."""

    def __init__(self, action: str = "terminate", time: str = "2030-01-01T00:02:00Z") -> None:
        stand_in = self
        self.notice = json.dumps({"action": action, "time": time}).encode()
        self.armed = False
        self.served: list[str] = []  # the notices served (once)
        self.asked = 0
        self._lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                if self.path == TOKEN_PATH and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    self._answer(200, TOKEN.encode())
                else:
                    self._answer(400, b"")

            def do_GET(self) -> None:
                if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                    self._answer(401, b"")
                    return
                if self.path != NOTICE_PATH:
                    self._answer(404, b"")
                    return
                with stand_in._lock:
                    stand_in.asked += 1
                    notice = stand_in.armed and not stand_in.served
                    if notice:
                        stand_in.served.append(self.path)
                if notice:
                    self._answer(200, stand_in.notice)
                else:
                    self._answer(404, b"")

            def _answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="metadata-stand-in", daemon=True)
        self._thread.start()

    def arm(self) -> None:
        """Serve the notice to the next worker that asks (and to no other)."""
        self.armed = True

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
