"""A partial action matcher: ``match(Dispatch, task=3)`` equals any ``Dispatch`` whose task is 3, so a
test can state the actions it cares about and leave the rest (a random task, an attempt number)
open, inside an exact list: ``assert actions == [Notify(...), match(Dispatch, machine="a1")]``."""

from __future__ import annotations

import dataclasses
from typing import Any


class match:  # lower case: it reads as a call in an expected list
    """Equal to an instance of ``kind`` whose fields named in ``fields`` have those values."""

    def __init__(self, kind: type, **fields: Any) -> None:
        known = {f.name for f in dataclasses.fields(kind)} if dataclasses.is_dataclass(kind) else None
        unknown = sorted(set(fields) - known) if known is not None else []
        if unknown:
            raise TypeError(f"{kind.__name__} has no field(s) {', '.join(unknown)}")
        self.kind = kind
        self.fields = fields

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.kind) and all(getattr(other, k) == v for k, v in self.fields.items())

    def __hash__(self) -> int:
        return hash(self.kind)

    def __repr__(self) -> str:
        given = "".join(f", {k}={v!r}" for k, v in self.fields.items())
        return f"match({self.kind.__name__}{given})"
