"""The dashboard answers only requests addressed to a loopback name: a page elsewhere whose name
an attacker resolves to 127.0.0.1 (DNS rebinding) gets 403, not the run's figures."""

from __future__ import annotations

import http.client

import pytest

from bats.master.views.dashboard import Dashboard


@pytest.mark.parametrize("host, code", [
    ("127.0.0.1:{port}", 200), ("localhost:{port}", 200), ("LOCALHOST:8080", 200), ("[::1]:{port}", 200),
    ("localhost", 200), ("evil.example:{port}", 403), ("evil.example", 403), ("127.0.0.1.evil.example", 403),
    ("", 403), ("localhost.:{port}", 403),
])
def test_only_loopback_hosts_are_answered(host, code):
    dashboard = Dashboard(0, lambda: {"tasks": {"done": 1}})
    try:
        conn = http.client.HTTPConnection("127.0.0.1", dashboard.port, timeout=10)
        conn.putrequest("GET", "/status.json", skip_host=True)
        if host:
            conn.putheader("Host", host.format(port=dashboard.port))
        conn.endheaders()
        answer = conn.getresponse()
        body = answer.read()
        assert answer.status == code
        assert (b'"done": 1' in body) == (code == 200)
        conn.close()
    finally:
        dashboard.close()
