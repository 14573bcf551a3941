"""Loading a ``bench/`` script as a module in the tests (``bench/`` is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from helpers.paths import BENCH


def load_bench_script(name: str) -> ModuleType:
    """``bench/NAME.py`` as the module ``bench_NAME``; ``bench/`` goes on ``sys.path`` so the
    script's own imports of its neighbours (``sections``, ``seed003``) resolve."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"bench_{name}"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module
