"""The cloud provisioners' tests share one stand-in for AWS: moto's EC2 server on 127.0.0.1, started
once per test file (each test resets it through its file's ``aws`` fixture)."""

from __future__ import annotations

import pytest
from helpers.cloud_harness import moto_fixture


@pytest.fixture(scope="module")
def moto():
    yield from moto_fixture()
