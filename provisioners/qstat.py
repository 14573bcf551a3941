"""What Grid Engine's ``qstat`` prints, read once for the ``sge`` provisioner: its job states
(:mod:`bats.provisioners.sge`) and its queue's offers (:mod:`bats.provisioners.sge_offers`).

How this works. :func:`jobs` reads ``qstat -xml`` (with ``-r``, the resource requests too): every
``<job_list>``, running (under ``<queue_info>``) or pending (under ``<job_info>``), becomes a
:class:`QstatJob` holding the texts as printed, so each user reads the fields it needs and says
what it expects of them. :func:`free_slots_from_gc` reads the AVAIL column of ``qstat -g c``;
:func:`parse_h_rt` an ``h_rt`` request (seconds or ``[[H:]M:]S``); :func:`array_count` an array
job's ``<tasks>`` (``1-10:2`` is five tasks). Output that cannot be read raises :class:`QstatError`
naming what and where.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass


class QstatError(ValueError):
    """qstat output that cannot be read; the message says what and where."""


@dataclass(frozen=True)
class QstatJob:
    """One ``<job_list>`` of ``qstat -xml``: the texts as printed, stripped; None where absent."""

    number: str | None  # JB_job_number
    listed: str | None  # the job_list's state attribute: "running" or "pending"
    state: str | None  # the state code: "r", "qw", "hqw", "Eqw", "dr", ...
    name: str | None  # JB_name
    slots: str | None
    tasks: str | None  # an array job's task range
    start_time: str | None  # JAT_start_time (running jobs)
    submission_time: str | None  # JB_submission_time (pending jobs)
    requests: tuple[tuple[str, str], ...] = ()  # -r: (name, value) of each <hard_request>, in order

    def request(self, *names: str) -> str | None:
        """The value of the first hard request named one of ``names``."""
        return next((value for name, value in self.requests if name in names), None)


def _text(element: ET.Element, tag: str) -> str | None:
    text = element.findtext(tag)
    return text.strip() if text is not None else None


def jobs(xml_text: str) -> list[QstatJob]:
    """Every job ``qstat -xml`` lists, in its order."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise QstatError(f"qstat -xml printed no valid XML: {exc}") from None
    return [QstatJob(number=_text(job, "JB_job_number"), listed=job.get("state"), state=_text(job, "state"),
                     name=_text(job, "JB_name"), slots=_text(job, "slots"), tasks=_text(job, "tasks"),
                     start_time=_text(job, "JAT_start_time"), submission_time=_text(job, "JB_submission_time"),
                     requests=tuple((req.get("name") or "", req.text.strip())
                                    for req in job.iter("hard_request") if req.text))
            for job in root.iter("job_list")]


def parse_h_rt(text: str) -> float:
    """``3600`` or ``1:00:00`` (``[[H:]M:]S``) to seconds."""
    parts = text.strip().split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise QstatError(f"h_rt: expected seconds or H:M:S, got {text!r}") from None
    if len(values) > 3 or any(v < 0 for v in values):
        raise QstatError(f"h_rt: expected seconds or H:M:S, got {text!r}")
    seconds = 0.0
    for v in values:
        seconds = seconds * 60 + v
    return seconds


def array_count(text: str | None) -> int:
    """How many tasks an array job's ``<tasks>`` names: ``7``, ``1-10:1``, ``1-10:2``, ``3,5-6``."""
    if not text or not text.strip():
        return 1
    total = 0
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+)(?::(\d+))?)?\s*", part)
        if m is None:
            raise QstatError(f"tasks: cannot read {text!r}")
        first, last, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
        total += max(0, (last - first) // max(1, step) + 1)
    return max(1, total)


def free_slots_from_gc(text: str, queue: str | None = None) -> int:
    """The AVAIL column of ``qstat -g c`` (summed over the queues, or of ``queue`` alone)."""
    lines = [line.replace("CLUSTER QUEUE", "CLUSTER_QUEUE").split() for line in text.splitlines()
             if line.strip() and not line.startswith("-")]
    if not lines or "AVAIL" not in lines[0]:
        raise QstatError("qstat -g c: no header with AVAIL")
    col = lines[0].index("AVAIL")
    total = 0
    found = False
    for fields in lines[1:]:
        if len(fields) <= col or (queue is not None and fields[0] != queue):
            continue
        try:
            total += int(fields[col])
        except ValueError:
            raise QstatError(f"qstat -g c: AVAIL of {fields[0]} is not a number: {fields[col]!r}") from None
        found = True
    if queue is not None and not found:
        raise QstatError(f"qstat -g c: no queue {queue!r}")
    return total
