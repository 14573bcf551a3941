"""``bats.provisioners``: provisioner plugins, loaded lazily through the ``bats.provisioners`` entry point group.

The provisioners that come with BaTS are found by name in ``BUILT_IN`` (the same table as the entry
points in ``pyproject.toml``; a test keeps the two equal): reading every installed distribution's
entry points takes tens of milliseconds, which every run paid at start-up. Any other name is looked
up among the entry points, as a third-party plugin is.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bats.common.config import OptionSpec

if TYPE_CHECKING:
    from bats.provisioners.base import Provisioner

GROUP = "bats.provisioners"
BUILT_IN = {  # name: "module:class", as registered in pyproject.toml
    "local": "bats.provisioners.local:LocalProvisioner",
    "ec2": "bats.provisioners.ec2:Ec2Provisioner",
    "libcloud": "bats.provisioners.libcloud:LibcloudProvisioner",
    "ssh": "bats.provisioners.ssh:SshProvisioner",
    "sge": "bats.provisioners.sge:SgeProvisioner",
    "slurm": "bats.provisioners.slurm:SlurmProvisioner",
    "manual": "bats.provisioners.manual:ManualProvisioner",
    "flaky": "bats.provisioners.flaky:FlakyProvisioner",
}


def available() -> list[str]:
    from importlib.metadata import entry_points

    return sorted(set(BUILT_IN) | {ep.name for ep in entry_points(group=GROUP)})


def load(name: str) -> type[Provisioner]:
    """The provisioner class registered as ``name``; KeyError with a clear reason otherwise."""
    try:
        if name in BUILT_IN:
            module, _, attr = BUILT_IN[name].partition(":")
            return getattr(importlib.import_module(module), attr)
        from importlib.metadata import entry_points

        matches = [ep for ep in entry_points(group=GROUP) if ep.name == name]
        if not matches:
            raise KeyError(f"unknown provisioner {name!r} (installed: {', '.join(available()) or 'none'})")
        return matches[0].load()
    except ImportError as exc:
        raise KeyError(
            f"provisioner {name!r} needs a package that is not installed ({exc.name or exc}); "
            f"install the matching extra, e.g. pip install 'bats[all]'"
        ) from None


def options_of(name: str) -> OptionSpec:
    return load(name).OPTIONS


def check_installed(names: list[str]) -> None:
    """Raise KeyError naming what to install when a provisioner's optional packages are missing
    (checked when a run is about to use it, not when a config is read: ``bats-sim`` needs none)."""
    for name in dict.fromkeys(names):
        missing = load(name).missing_packages()
        if missing:
            raise KeyError(f"provisioner {name!r} needs a package that is not installed: "
                           f"pip install {' '.join(repr(m) for m in missing)}")
