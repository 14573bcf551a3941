"""A TCP proxy a test controls, standard library only: the network between workers and master.

How this works. :class:`TcpProxy` listens on 127.0.0.1 (an ephemeral port) and forwards every
connection to ``target``, one thread per connection moving bytes both ways with ``selectors``.
:meth:`TcpProxy.cut` turns one connection into a black hole: the proxy stops reading and writing
it, sends no FIN or RST, and the peers see only silence, as when a cable is pulled or a NAT
forgets a flow. New connections still go through, so a worker that reconnects gets a fresh path.
:meth:`TcpProxy.heal` lets bytes flow again on a cut connection. While :attr:`TcpProxy.refusing` is
set, new connections are closed as soon as they are accepted (the peer retries, as ZeroMQ does),
so a worker cannot get around a cut by reconnecting. Only loopback addresses are used.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Link:
    """One proxied connection: the client's socket and the one to the target."""

    id: int
    client: socket.socket
    server: socket.socket
    cut: threading.Event = field(default_factory=threading.Event)
    closed: bool = False


class TcpProxy:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1") -> None:
        if not host.startswith("127."):
            raise ValueError("the proxy only listens on 127.0.0.0/8")
        self.target = target
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._links: dict[int, Link] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.refusing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._next = 0

    @property
    def connections(self) -> dict[int, Link]:
        """The open connections that are not cut, by id."""
        with self._lock:
            return {i: link for i, link in self._links.items() if not link.closed and not link.cut.is_set()}

    def start(self) -> None:
        thread = threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True)
        thread.start()
        self._threads.append(thread)

    def cut(self, link_id: int) -> None:
        self._links[link_id].cut.set()

    def heal(self, link_id: int) -> None:
        self._links[link_id].cut.clear()

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            links = list(self._links.values())
        for link in links:
            self._close(link)

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.refusing.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError as exc:
                log.warning("proxy: cannot reach %s: %s", self.target, exc)
                client.close()
                continue
            with self._lock:
                self._next += 1
                link = Link(self._next, client, server)
                self._links[link.id] = link
            thread = threading.Thread(target=self._pump, args=(link,), name=f"tcp-proxy-{link.id}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _pump(self, link: Link) -> None:
        peer = {link.client: link.server, link.server: link.client}
        with selectors.DefaultSelector() as sel:
            for sock in peer:
                sock.setblocking(True)
                sel.register(sock, selectors.EVENT_READ)
            while not self._stop.is_set() and not link.closed:
                if link.cut.is_set():  # a black hole: read nothing, write nothing, close nothing
                    self._stop.wait(0.1)
                    continue
                for key, _ in sel.select(timeout=0.1):
                    try:
                        data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                        if not data:
                            self._close(link)
                            return
                        if link.cut.is_set():
                            continue  # cut while reading: these bytes are lost
                        peer[key.fileobj].sendall(data)  # type: ignore[index]
                    except OSError:
                        self._close(link)
                        return

    def _close(self, link: Link) -> None:
        if link.closed:
            return
        link.closed = True
        for sock in (link.client, link.server):
            try:
                sock.close()
            except OSError:
                pass
