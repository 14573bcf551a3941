"""``--dashboard PORT``: a read-only web page with the run's live figures, on 127.0.0.1 only.

The standard library's ``ThreadingHTTPServer`` runs in a daemon thread beside the master's loop.
It serves two things, both read-only (anything but GET is refused):

- ``/status.json``: the latest snapshot of :mod:`bats.master.views.live` (what ``bats-master status
  --json`` prints), taken by the loop every half second; the server thread only reads it;
- ``/``: a small self-contained page (no external scripts or styles) whose script fetches
  ``/status.json`` every second and redraws the figures: tasks done/failed/total with a bar, rate,
  estimated and planned finish, money spent and committed against the budget with a bar, machines
  per cluster with their ATU phase, the last re-plan and why.

Port 0 picks a free port; the URL is logged. Bound to the loopback address: nobody else on the
network can read it (forward it with ``ssh -L`` to watch from elsewhere). A request whose ``Host``
is not a loopback name (``127.0.0.1``, ``localhost``, ``[::1]``, any port) is refused with 403: a web
page elsewhere whose name an attacker points at 127.0.0.1 (DNS rebinding) cannot read the figures.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>BaTS run</title>
<style>
body { font-family: sans-serif; max-width: 56em; margin: 1.5em auto; padding: 0 1em; color: #222; }
.bar { background: #eee; height: 0.9em; width: 100%; border-radius: 3px; overflow: hidden; }
.bar > div { background: #3a7bd5; height: 100%; width: 0; }
.bar.money > div { background: #d58a3a; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.muted { color: #777; } #error { color: #b00; }
</style></head>
<body>
<h1>BaTS run <span id="run_id"></span></h1>
<p id="error"></p>
<p><b>phase</b> <span id="phase">-</span> <span id="stopping" class="muted"></span></p>
<h2>Tasks</h2>
<p><span id="done">-</span> done, <span id="failed">-</span> failed, <span id="running">-</span> running,
 of <span id="total">-</span> &middot; <span id="rate">-</span> tasks/s</p>
<div class="bar"><div id="tasks_bar"></div></div>
<p>finish: estimated <span id="eta">-</span>; planned <span id="planned">-</span></p>
<h2>Money</h2>
<p>spent <span id="spent">-</span>, committed <span id="committed">-</span>, budget <span id="budget">-</span></p>
<div class="bar money"><div id="money_bar"></div></div>
<h2>Machines</h2>
<table><thead><tr><th>cluster</th><th>up</th><th>booting</th><th>busy slots</th><th>tasks</th><th>ATU phase</th></tr></thead>
<tbody id="clusters"></tbody></table>
<p id="replan" class="muted"></p>
<p class="muted">updated <span id="updated">never</span> (every second, read-only)</p>
<script>
"use strict";
function dur(s) {
  if (s === null || s === undefined) return "-";
  s = Math.max(0, s);
  if (s < 60) return s.toFixed(1) + "s";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = Math.floor(s % 60);
  return h ? h + "h" + String(m).padStart(2, "0") + "m" : m + "m" + String(r).padStart(2, "0") + "s";
}
function money(x) { return x === null || x === undefined ? "-" : x.toFixed(2); }
function set(id, text) { document.getElementById(id).textContent = text; }
function show(s) {
  const t = s.tasks, m = s.money;
  set("run_id", s.run_id); set("phase", s.phase + (s.waiting_for ? " (waiting for " + s.waiting_for + ")" : "")); set("stopping", s.stopping ? "stopping: " + s.stopping : "");
  set("done", t.done); set("failed", t.failed); set("running", t.running); set("total", t.total);
  set("rate", s.rate_per_s.toFixed(2));
  document.getElementById("tasks_bar").style.width = (100 * (t.done + t.failed) / Math.max(1, t.total)) + "%";
  set("eta", s.estimated_finish_at ? "in " + dur(s.estimated_finish_at - s.now) : "-");
  set("planned", s.planned_finish_at ? "in " + dur(s.planned_finish_at - s.now) : "-");
  set("spent", money(m.spent) + " (sampling " + money(m.sampling) + ", execution " + money(m.execution) + ")"
      + (m.sampling_apart ? "; against the budget " + money(m.against_budget) : ""));
  set("committed", money(m.committed));
  set("budget", m.budget === null ? "none" : money(m.budget) + (m.cushion ? " + cushion " + money(m.cushion) : "")
      + (m.sampling_apart ? " (the sampling paid apart)" : " (the sampling paid from it)"));
  document.getElementById("money_bar").style.width =
    m.budget ? Math.min(100, 100 * m.against_budget / (m.budget + (m.cushion || 0))) + "%" : "0";
  const body = document.getElementById("clusters");
  body.replaceChildren();
  for (const [name, c] of Object.entries(s.clusters)) {
    const row = document.createElement("tr");
    const phases = c.machines.map(r => r.atu + ":" + Math.round(100 * r.atu_elapsed_s / r.atu_s) + "%"
                                       + (r.release_in_s !== null ? "v" : "")).join(" ");
    const tasks = c.machines.reduce((n, r) => n + r.nt, 0);
    const slots = c.slots || 1, busy = (c.busy_slots || 0) + " of " + slots * (c.up + c.booting);
    for (const cell of [name + (slots > 1 ? " (" + slots + " slots each)" : ""), c.up, c.booting, busy, tasks,
                        phases || "-"]) {
      const td = document.createElement("td"); td.textContent = cell; row.appendChild(td);
    }
    row.id = "cluster-" + name;
    body.appendChild(row);
  }
  const last = s.last_reconfiguration;
  set("replan", last ? "re-planned " + s.reconfigurations + " time(s); last at " + dur(last.at_s) + ": " + last.reason : "");
  set("updated", new Date().toLocaleTimeString());
}
async function poll() {
  try {
    const answer = await fetch("status.json", {cache: "no-store"});
    const body = await answer.json();
    if (body.ok) { show(body.status); set("error", ""); } else { set("error", body.error); }
  } catch (e) {
    set("error", "the master does not answer (the run may be over)");
  }
}
poll();
setInterval(poll, 1000);
</script>
</body></html>
"""


class Dashboard:
    """Serve :data:`PAGE` and ``figures()`` as JSON on ``127.0.0.1:port`` until :meth:`close`."""

    def __init__(self, port: int, figures: Callable[[], dict[str, Any] | None]) -> None:
        self.figures = figures
        handler = _handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.5},
                                        name="bats-dashboard", daemon=True)
        self._thread.start()
        log.info("dashboard on %s", self.url)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _loopback_host(host: str | None) -> bool:
    """Whether a request's ``Host`` names this machine's loopback (with any port, for ``ssh -L``)."""
    if not host:
        return False
    name = host.strip().lower()
    if name.startswith("["):
        name = name[:name.find("]") + 1]
    else:
        name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name
    return name in _LOOPBACK_NAMES


def _handler(dashboard: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "bats-dashboard"

        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            path = self.path.split("?", 1)[0]
            if not _loopback_host(self.headers.get("Host")):
                self._send(403, "text/plain; charset=utf-8", b"this page answers only on 127.0.0.1\n")
            elif path in ("/", "/index.html"):
                self._send(200, "text/html; charset=utf-8", PAGE.encode())
            elif path == "/status.json":
                figures = dashboard.figures()
                body = {"ok": True, "status": figures} if figures else {"ok": False, "error": "starting"}
                self._send(200, "application/json", json.dumps(body).encode())
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found\n")

        def do_POST(self) -> None:  # noqa: N802
            self._send(405, "text/plain; charset=utf-8", b"read-only\n")

        do_PUT = do_DELETE = do_PATCH = do_POST  # noqa: N815

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the standard library's name)
            log.debug("dashboard: " + format, *args)

    return Handler
