"""Watching the instance metadata for a spot interruption notice (EC2's two-minute warning).

How this works. A daemon thread asks the instance metadata service every ``poll_s`` seconds
for ``/latest/meta-data/spot/instance-action``: 404 while nothing is planned, 200 with
``{"action": "terminate", "time": "2024-05-01T12:00:00Z"}`` once the machine is to be taken away
(``stop`` and ``hibernate`` are the other actions). It uses IMDSv2 (a session token from
``PUT /latest/api/token``) and falls back to plain IMDSv1 requests when no token is given. On the
first notice it keeps the action and time, writes one byte to a pipe the worker's poll loop
watches, and stops: the worker then tells its master (``interruption``), which re-queues the
worker's tasks and lets the machine go before the cloud takes it.

The base URL is configurable (``bats-worker --spot-notice URL``) so tests point it at a local HTTP
stand-in. Only the standard library is used: machine images carry no HTTP client.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request

log = logging.getLogger("bats.worker")

NOTICE_PATH = "/latest/meta-data/spot/instance-action"
TOKEN_PATH = "/latest/api/token"
TOKEN_TTL_S = 21600
REQUEST_TIMEOUT_S = 2.0


class SpotWatcher:
    """The watcher thread; :attr:`notice` is ``(action, time)`` once one was seen."""

    def __init__(self, base_url: str, poll_s: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.poll_s = poll_s
        self.notice: tuple[str, str] | None = None
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._stop = threading.Event()
        self._token: str | None = None
        self._token_until = 0.0
        self._thread = threading.Thread(target=self._run, name="spot-watcher", daemon=True)
        self._errors = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=REQUEST_TIMEOUT_S * 2 + 1)
        for fd in (self.read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def drain(self) -> None:
        """Empty the wake-up pipe (the worker's loop calls this when it is readable)."""
        try:
            while os.read(self.read_fd, 64):
                pass
        except (BlockingIOError, OSError):
            pass

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                notice = self.check()
            except Exception as exc:  # the metadata service may be slow or absent; keep watching
                self._errors += 1
                if self._errors in (1, 10) or self._errors % 100 == 0:
                    log.warning("spot notice check at %s failed: %s", self.base_url, exc)
                notice = None
            if notice is not None:
                self.notice = notice
                log.warning("spot interruption notice: %s at %s", *notice)
                try:
                    os.write(self._write_fd, b"!")
                except OSError:
                    pass
                return
            self._stop.wait(self.poll_s)

    def check(self) -> tuple[str, str] | None:
        """One look at the metadata: the notice, or None while there is none."""
        headers = {}
        token = self._session_token()
        if token:
            headers["X-aws-ec2-metadata-token"] = token
        request = urllib.request.Request(self.base_url + NOTICE_PATH, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                body = response.read(4096)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            if exc.code == 401:
                self._token = None  # expired: a new one next time
            raise
        try:
            data = json.loads(body)
            return str(data.get("action", "terminate")), str(data.get("time", ""))
        except (ValueError, AttributeError):
            return "terminate", body.decode("utf-8", errors="replace").strip()[:64]

    def _session_token(self) -> str | None:
        now = time.monotonic()
        if self._token is not None and now < self._token_until:
            return self._token
        request = urllib.request.Request(self.base_url + TOKEN_PATH, method="PUT",
                                         headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_S)})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                self._token = response.read(4096).decode("ascii", errors="replace").strip() or None
        except (urllib.error.URLError, OSError):
            self._token = None  # IMDSv1 only: plain requests
        self._token_until = now + TOKEN_TTL_S / 2
        return self._token
