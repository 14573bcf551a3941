"""Cluster names are one safe word, checked when the config is read: a name reaches machine ids,
batch job names and scripts, cloud tags and user data, log and token file names, and the ssh
liveness probe, so a newline, a path or a space in it is refused with the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from bats.common.config import ConfigError, load_config
from bats.master.cli.args import load_cluster_config


def options(_name: str) -> dict:
    return {}


@pytest.mark.parametrize("name, line", [
    ('"a b"', 4), ('"../../x"', 4), ('"a/b"', 4), ('"#$ -l h=evil"', 4), ('"1st"', 4), ('"-x"', 4),
    ('"a\\nb"', None), ('"' + "x" * 64 + '"', 4), ('"é"', 4),
])
def test_a_name_that_is_not_one_safe_word_is_refused_naming_file_and_line(tmp_path: Path, name, line):
    path = tmp_path / "clusters.toml"
    path.write_text(f'[master]\nheartbeat = "1s"\n\n[clusters.{name}]\nprovisioner = "local"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, options)
    message = str(caught.value)
    where = f"{path}:{line}: " if line else f"{path}: "
    assert message.startswith(where + "[clusters.") and "a cluster name is a letter followed by" in message
    assert "\n" not in message


@pytest.mark.parametrize("name", ["a", "cluster1", "spot-m1-small", "c7g_2xlarge", "x" * 63])
def test_ordinary_names_load(tmp_path: Path, name):
    path = tmp_path / "clusters.toml"
    path.write_text(f'[clusters.{name}]\nprovisioner = "local"\nmax = 1\n')
    assert list(load_cluster_config(str(path), None).clusters) == [name]


@pytest.mark.parametrize("key", ["advertise", "listen"])
@pytest.mark.parametrize("value", ['"tcp://10.0.0.5:5555\\nrm -rf /"', '"tcp://10.0.0.5:5555 x"',
                                   '"tcp://10.0.0.5:5555\\u0007"'])
def test_an_endpoint_of_more_than_one_word_is_refused(tmp_path: Path, key, value):
    """``[master] advertise`` lands in machines' start scripts and cloud user data: a newline in it
    would be a line of its own there."""
    path = tmp_path / "clusters.toml"
    path.write_text(f'[master]\n{key} = {value}\n\n[clusters.a]\nprovisioner = "local"\nmax = 1\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, options)
    assert str(caught.value).startswith(f"{path}:2: [master] {key}") and "\n" not in str(caught.value)
