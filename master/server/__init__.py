"""The real-time driver: the ZeroMQ server around a core (:mod:`.loop`), provisioner calls off the
dispatch path (:mod:`.calls`) and transport security (:mod:`.security`)."""

from .loop import Server

__all__ = ["Server"]
