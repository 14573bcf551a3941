"""The repository's folders, for tests that read its files."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
DATA = TESTS / "data"
BENCH = REPO / "bench"
DEPLOY = REPO / "deploy"
CORE = REPO / "master" / "core"
