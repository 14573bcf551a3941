"""``bats.master.server``: the real-time driver: the ZeroMQ server around a core (:mod:`.loop`), the peers it admits
(:mod:`.peer`), its provisioner side (:mod:`.fleet`, owned as ``Server.fleet``), provisioner calls off
the dispatch path (:mod:`.calls`) and transport security (:mod:`.security`)."""

from .loop import Server

__all__ = ["Server"]
