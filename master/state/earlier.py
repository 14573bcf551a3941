"""The task runtimes an earlier run of a bag measured, read from its state directory without writing
to it (``bats-master --dry-run --state-dir DIR``): the journal is opened read-only, and a run going on
there is not disturbed.

Per cluster: the complete sample set the run journaled when it offered its options (the sample's
runtimes translated to every cluster, seed 000 §2.2), else the runtimes of the tasks that succeeded
on that cluster's machines.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from .journal import APPLICATION_ID, JOURNAL_NAME


class EarlierRunError(ValueError):
    """No runtimes can come from that state directory; the message says why, in one line."""


@dataclass
class EarlierRuntimes:
    """What an earlier run measured: runtimes per cluster, and where each set comes from."""

    state_dir: str
    runtimes: dict[str, list[float]] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)  # cluster -> "sample" or "results"


def earlier_runtimes(state_dir: str | Path, bag_sha256: str) -> EarlierRuntimes:
    """The runtimes the run in ``state_dir`` measured, if it ran the bag with ``bag_sha256``."""
    path = Path(state_dir) / JOURNAL_NAME
    if not path.is_file():
        raise EarlierRunError(f"{state_dir}: holds no run (no {JOURNAL_NAME})")
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise EarlierRunError(f"{path}: cannot open the journal: {exc}") from None
    try:
        if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            raise EarlierRunError(f"{path}: not a BaTS journal")
        meta = {key: json.loads(value) for key, value in conn.execute("SELECT key, value FROM meta")}
        if meta.get("bag_sha256") != bag_sha256:
            raise EarlierRunError(f"{state_dir}: its run is of another bag (or the bag changed since)")
        found = EarlierRuntimes(str(state_dir))
        sets = (meta.get("sample") or {}).get("sets") if isinstance(meta.get("sample"), dict) else None
        for name, values in (sets or {}).items():
            runtimes = [float(v) for v in values if isinstance(v, (int, float)) and v > 0]
            if runtimes:
                found.runtimes[str(name)], found.source[str(name)] = runtimes, "sample"
        rows = conn.execute("SELECT m.cluster, r.runtime_s FROM results r JOIN machines m ON r.machine = m.machine_id "
                            "WHERE r.status = 'done' AND r.runtime_s > 0")
        measured: dict[str, list[float]] = {}
        for cluster, runtime in rows:
            measured.setdefault(str(cluster), []).append(float(runtime))
    except sqlite3.Error as exc:
        raise EarlierRunError(f"{path}: cannot read the journal: {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise EarlierRunError(f"{path}: a damaged meta value: {exc}") from None
    finally:
        conn.close()
    for name, runtimes in measured.items():
        if name not in found.runtimes:
            found.runtimes[name], found.source[name] = runtimes, "results"
    return found
