"""The provisioners that come with BaTS are found without reading the installed entry points, by the
same names and classes as the entry points declare."""

from __future__ import annotations

import tomllib

import pytest
from helpers.paths import REPO

from bats import provisioners


def test_the_built_in_table_is_the_entry_points_of_pyproject():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][provisioners.GROUP]
    assert provisioners.BUILT_IN == declared
    assert set(declared) <= set(provisioners.available())


def test_a_built_in_provisioner_loads_by_name_and_an_unknown_name_says_what_is_installed():
    from bats.provisioners.local import LocalProvisioner

    assert provisioners.load("local") is LocalProvisioner
    with pytest.raises(KeyError, match=r"unknown provisioner 'nope' \(installed: ec2, flaky, libcloud, local"):
        provisioners.load("nope")
