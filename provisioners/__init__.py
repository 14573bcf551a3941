"""``bats.provisioners``: provisioner plugins, loaded lazily through the ``bats.provisioners`` entry point group."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from bats.common.config import OptionSpec

if TYPE_CHECKING:
    from bats.provisioners.base import Provisioner

GROUP = "bats.provisioners"


def available() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=GROUP))


def load(name: str) -> type[Provisioner]:
    """The provisioner class registered as ``name``; KeyError with a clear reason otherwise."""
    matches = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not matches:
        raise KeyError(f"unknown provisioner {name!r} (installed: {', '.join(available()) or 'none'})")
    try:
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
