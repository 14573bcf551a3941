"""The live terminal view and log lines: a line logged while the view is drawn goes through the view
(printed above it), not into the middle of its drawing, and the log goes back to the terminal after."""

from __future__ import annotations

import io
import logging
import sys

from rich.console import Console

from bats.master.views.live import LiveView


def snap() -> dict:
    return {"tasks": {"total": 10, "done": 3, "failed": 0, "remaining": 7, "running": 2}, "rate_per_s": 1.0,
            "elapsed_s": 3.0, "eta_s": 7.0, "now": 100.0, "estimated_finish_at": 107.0, "planned_finish_at": None,
            "policy": "self", "phase": "running", "clusters": {
                "local": {"up": 2, "booting": 0, "max": 2, "price": 0.0, "atu_s": 3600.0, "slots": 1,
                          "busy_slots": 2, "machines": [
                              {"id": "local-s1-1", "state": "up", "nt": 2, "slots": 1, "busy": 1, "atu": 1,
                               "atu_elapsed_s": 3.0, "atu_s": 3600.0, "release_in_s": None}]}},
            "last_reconfiguration": None, "waiting_for": None, "stopping": None}


def test_a_line_logged_while_the_view_is_drawn_is_printed_through_it(monkeypatch):
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        drawn = io.StringIO()
        view = LiveView(live=True, console=Console(file=drawn, force_terminal=True, width=100))
        view.show(snap())
        assert handler.stream is not terminal  # the view's stand-in for the terminal
        logging.getLogger("bats.test").warning("cluster x: a line in the middle of the run")
        view.show(snap())
        assert "a line in the middle of the run" in drawn.getvalue()  # printed by the view, above it
        assert terminal.getvalue() == ""  # nothing written under the drawing's feet
        view.pause()
        assert handler.stream is terminal
        logging.getLogger("bats.test").warning("after the view")
        assert "after the view" in terminal.getvalue()
        view.close()
    finally:
        root.removeHandler(handler)
