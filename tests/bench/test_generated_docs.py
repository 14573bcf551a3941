"""The documents generated from the code are not stale: each header records the hash of its inputs
(bench/fingerprint.py: the generator, the modules it imports from the cores, planner, billing,
simulator and config, the scenario files and its arguments), and it must be the hash of the code as
it is now. Nothing is regenerated here: a failure names the make target that refreshes the document."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.bench_scripts import load_bench_script
from helpers.paths import REPO

fingerprint = load_bench_script("fingerprint")

DOCS = {  # document: (its generator, the make target that writes it with no other arguments)
    "docs/policies.md": ("bench/compare.py", "make compare"),
    "docs/paper-reproduction.md": ("bench/paper.py", "make paper"),
    "docs/pareto-reproduction.md": ("bench/paper_pareto.py", "make paper"),
}


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_a_generated_document_was_made_from_the_code_as_it_is(doc: str):
    script, target = DOCS[doc]
    recorded = fingerprint.recorded((REPO / doc).read_text(encoding="utf-8"))
    assert recorded is not None, f"{doc} records no inputs hash: run `{target}`"
    now, _code, _data = fingerprint.fingerprint(REPO / script, ())
    assert recorded == now, (f"{doc} is stale: the code or scenarios that make its figures changed since it was "
                             f"generated; run `{target}` and commit it")


def test_the_hash_follows_the_code_that_decides_the_figures_and_ignores_docstrings(tmp_path: Path):
    covered = {p.relative_to(REPO).as_posix() for p in fingerprint.sources(REPO / "bench/compare.py")}
    assert {"master/core/billing.py", "master/core/planning/planner.py", "master/sim/driver.py",
            "master/core/bats/policy.py", "common/config.py", "bench/sections.py"} <= covered
    assert not any(p.startswith(("master/cli", "master/server", "master/views", "provisioners", "worker"))
                   for p in covered)
    assert "common/protocol.py" not in covered and "common/files.py" not in covered
    source = tmp_path / "m.py"
    source.write_text('"""One."""\n\ndef f(x):\n    """Doc."""\n    return x + 1  # a comment\n')
    before = fingerprint._code(source)
    source.write_text('"""Two, reworded."""\n\n\ndef f(x):\n    return x + 1\n')
    assert fingerprint._code(source) == before
    source.write_text('def f(x):\n    return x + 2\n')
    assert fingerprint._code(source) != before
    assert fingerprint.arguments(["--out", "x.md", "-q", "--seed", "3"]) == ["--seed", "3"]
    other = fingerprint.line(REPO / "bench/compare.py", ["--seed", "3", "--out", "/tmp/x.md"])
    assert other.endswith("arguments: --seed 3) -->")
    assert fingerprint.recorded(other) != fingerprint.fingerprint(REPO / "bench/compare.py", ())[0]
