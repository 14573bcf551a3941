"""``bats.common``: what the master and the worker share: protocol, config, durations, the bag file."""

__version__ = "0.1.0"
