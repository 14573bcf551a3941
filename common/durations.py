"""Durations as operators write them: a bare number is seconds, or "90s", "60m", "1h", "1.5h", "2d"."""

from __future__ import annotations

import math
import re

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$")


def parse_duration(value: object) -> float:
    """Return ``value`` in seconds; raise ``ValueError`` with a short reason otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float (TOML integers are unbounded)
            raise ValueError("a duration must be a finite number of seconds >= 0, got a number too large") from None
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"expected a duration such as 90, \"90s\", \"60m\" or \"1h\", got {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:
        raise ValueError(f"expected a duration, got {type(value).__name__}")
    if seconds < 0 or not math.isfinite(seconds):
        raise ValueError(f"a duration must be a finite number of seconds >= 0, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """A compact human form: ``42s``, ``3m07s``, ``2h05m``."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
