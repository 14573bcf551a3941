"""Inline configs the end-to-end tests run: two emulated clouds with short ATUs."""

from __future__ import annotations

CONFIG = """
[master]
heartbeat = "0.5s"
liveness = "5s"
monitor_interval = "1s"
release_margin = "0.5s"

[sampling]
initial_workers = 2

[clusters.slow]
provisioner = "local"
max = 3
price = 1.0
atu = "4s"
slowdown = 3.0

[clusters.fast]
provisioner = "local"
max = 3
price = 2.0
atu = "4s"
"""


def watched_clouds(initial_workers: int) -> str:
    """Two emulated clouds with 30 s ATUs and a quick heartbeat, for the tests that watch a run
    (``status``, the dashboard) while it samples and executes."""
    return WATCHED.replace("{initial_workers}", str(initial_workers))


WATCHED = """
[master]
heartbeat = "0.5s"
liveness = "10s"
monitor_interval = "1s"
release_margin = "0.5s"

[sampling]
initial_workers = {initial_workers}

[clusters.slow]
provisioner = "local"
max = 2
price = 1.0
atu = "30s"

[clusters.fast]
provisioner = "local"
max = 2
price = 2.0
atu = "30s"
"""
