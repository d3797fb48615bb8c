"""The API's connections: how many it holds, how long a client may take, and what happens at the cap.

Every connection holds a file descriptor, and so do the state store, its
backups, policy reloads and provider clients, all in the same process under
one RLIMIT_NOFILE. The rules that keep a stranger from spending them:

* **Cap.** The API holds at most

      cap = min(max_connections, soft RLIMIT_NOFILE - descriptors open when the API starts - fd_reserve)

  connections, and never fewer than `MIN_CONNECTIONS` (with a warning: the
  file limit is then too low to keep the reserve) unless `max_connections` is
  lower still. With the defaults (`fd_reserve` 128, `max_connections` 4096) and
  the usual soft limit of 1024, about 880. The reserve is for what the daemon
  opens while it serves: the store and its backups, policy and config reloads,
  provider clients, logs, the API's own event loop and handler threads.
* **At the cap** the connection that has waited longest for its request
  (opened, or kept alive after a response, and no complete request since) is
  closed, and the next client is accepted in its place: idle connections cost
  a real client one eviction, not a timeout. When every connection has a
  request in progress, the listening socket is not read until one closes, so
  later clients wait in the kernel's listen queue, holding no descriptor here.
  The count includes connections accepted but not yet closed, so the process
  never holds more than `cap` client sockets.
* **Deadlines.** A request (request line, headers and body) must arrive in
  full within `read_timeout_s` (10 s) of the moment the server starts waiting
  for it: when the connection opens, or when the previous response on a kept
  alive connection is done. Trickled bytes do not extend it. Past it the
  connection is closed, after a 408 if part of a request came. uvicorn's
  `timeout_keep_alive` (`keep_alive_s`, 5 s) closes an idle kept-alive
  connection sooner. A response the client does not read (the write buffer
  above its high-water mark) for `read_timeout_s` aborts the connection.
* **Accept errors** (EMFILE and the like, should something else have used up
  the reserve) stop accepting for `ACCEPT_RETRY_S` and are logged without a
  traceback, through `burst.logs.RepeatFilter`: one line per distinct message
  per window, with the count of repeats it dropped.

uvicorn's h11 protocol has no deadline before a request is complete (its
keep-alive timer stops at the first byte), and asyncio's accept loop takes up
to `backlog` connections per wakeup whatever the file limit, logging a
traceback for each failed accept. `GuardedServer` is uvicorn's server with
`Acceptor` in place of that loop, serving each connection with
`GuardedProtocol`, uvicorn's h11 protocol with the deadlines above.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

log = logging.getLogger("burst.api")

READ_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5
FD_RESERVE = 128
MAX_CONNECTIONS = 4096
MIN_CONNECTIONS = 8
LISTEN_BACKLOG = 2048  # the kernel's queue of connections not yet accepted (holding no descriptor here)
ACCEPT_BATCH = 64  # accepts per wakeup of the listening socket, so reads and closes interleave with a flood
ACCEPT_RETRY_S = 1.0
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
              b"content-length: 16\r\nconnection: close\r\n\r\nrequest timeout\n")


def descriptors_in_use() -> int:
    """How many file descriptors this process has open (0 where the platform does not say)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(listing)) - 1  # less the listing's own
        except OSError:
            continue
    return 0


@dataclass(frozen=True)
class ConnectionLimits:
    """The API's connection limits (see the module docstring for how each applies)."""

    read_timeout_s: float = READ_TIMEOUT_S
    keep_alive_s: int = KEEP_ALIVE_S
    fd_reserve: int = FD_RESERVE
    max_connections: int = MAX_CONNECTIONS

    def cap(self, soft_limit: int | None = None, in_use: int | None = None) -> int:
        """The most connections the API may hold: `max_connections`, or less to leave `fd_reserve` descriptors
        free under `soft_limit` (the process's soft RLIMIT_NOFILE unless given) beyond the `in_use` ones (the
        descriptors open now unless given)."""
        if soft_limit is None:
            soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft_limit == resource.RLIM_INFINITY or soft_limit < 0:
            return self.max_connections
        if in_use is None:
            in_use = descriptors_in_use()
        room = soft_limit - in_use - self.fd_reserve
        if room < MIN_CONNECTIONS and self.max_connections > room:
            log.warning("api: the file limit (RLIMIT_NOFILE %d, %d open) leaves no room for %d API connections "
                        "beside the %d-descriptor reserve; raise it (ulimit -n, LimitNOFILE=)",
                        soft_limit, in_use, MIN_CONNECTIONS, self.fd_reserve)
        return min(self.max_connections, max(MIN_CONNECTIONS, room))


class GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline and a write-stall deadline, reporting to its `Acceptor`.

    The read deadline is armed while the peer's side of the exchange is idle
    or sending a body (h11's IDLE or SEND_BODY), from the first moment it is,
    and disarmed once the request is complete; the acceptor knows the armed
    ones as the connections waiting for a request, oldest first.
    """

    def __init__(self, config: uvicorn.Config, server_state: ServerState, app_state: dict[str, Any],
                 acceptor: Acceptor, _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.acceptor = acceptor
        self._read_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None
        self.acceptor.closed(self)
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.acceptor.limits.read_timeout_s, self.evict)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def evict(self) -> None:
        """Close the connection at once, dropping whatever it has not sent (displaced, or its reader stalled)."""
        self._disarm()
        self.transport.abort()

    def _watch(self) -> None:
        """Arm the read deadline when a request is due and none is armed; disarm it once the request is in."""
        due = self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing()
        if due and self._read_deadline is None:
            self._read_deadline = self.loop.call_later(self.acceptor.limits.read_timeout_s, self._timed_out)
            self.acceptor.waiting(self)
        elif not due:
            self._disarm()

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None
        self.acceptor.busy(self)

    def _timed_out(self) -> None:
        self._read_deadline = None
        self.acceptor.busy(self)
        if self.transport.is_closing():
            self.transport.abort()  # closing but stuck behind unsent data
            return
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self.transport.write(_TIMED_OUT)  # part of a request came: say why it is refused
        if self.transport.get_write_buffer_size():
            self.transport.abort()
        else:
            self.transport.close()


class Acceptor:
    """Accepts connections on a listening socket, never holding more than `cap` (see the module docstring).

    Stands in for the `asyncio.Server` uvicorn would make: `close` and
    `wait_closed` are what uvicorn's shutdown calls on it.
    """

    def __init__(self, sock: socket.socket, make_protocol: Callable[[Acceptor], GuardedProtocol],
                 limits: ConnectionLimits, cap: int, loop: asyncio.AbstractEventLoop) -> None:
        self.sock = sock
        self.limits = limits
        self.cap = cap
        self.evicted = 0  # connections closed to make room for new ones
        self.live: set[GuardedProtocol] = set()  # accepted and not yet closed
        self._make_protocol = make_protocol
        self._loop = loop
        self._waiting: dict[GuardedProtocol, None] = {}  # waiting for a request, longest first
        self._connecting: set[asyncio.Task[Any]] = set()
        self._reading = False
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    def start(self) -> None:
        self.sock.setblocking(False)
        self._resume()

    def close(self) -> None:
        """Stop accepting (the connections already open are the server's to close)."""
        self._closed = True
        self._pause()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    async def wait_closed(self) -> None:
        return None

    def waiting(self, protocol: GuardedProtocol) -> None:
        """`protocol` waits for a request from now on (the newest of those waiting). Reading the listening socket
        resumes if it paused at the cap with no connection to displace (they were all still connecting, or
        busy): a client queued meanwhile may now take this one's place."""
        self._waiting.pop(protocol, None)
        self._waiting[protocol] = None
        if self._retry is None:
            self._resume()

    def busy(self, protocol: GuardedProtocol) -> None:
        """`protocol` has a request in progress, or is closing: not one to displace."""
        self._waiting.pop(protocol, None)

    def closed(self, protocol: GuardedProtocol) -> None:
        """`protocol`'s connection is closed and its descriptor released."""
        self.live.discard(protocol)
        self._waiting.pop(protocol, None)
        if self._retry is None and len(self.live) < self.cap:
            self._resume()

    def _resume(self) -> None:
        if not self._reading and not self._closed:
            self._loop.add_reader(self.sock.fileno(), self._accept)
            self._reading = True

    def _pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self.sock.fileno())
            self._reading = False

    def _accept(self) -> None:
        for turn in range(ACCEPT_BATCH):
            if len(self.live) >= self.cap:
                if turn == 0:  # woken by a client waiting to be accepted
                    self._make_room()
                return  # otherwise the next wakeup says whether anyone else is waiting
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue  # the client gave up while queued
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    log.error("api: cannot accept connections: %s (%d open; RLIMIT_NOFILE %d); retrying every %g s",
                              exc.strerror or exc, len(self.live), resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                              ACCEPT_RETRY_S)
                else:
                    log.error("api: accept failed: %s; retrying every %g s", exc, ACCEPT_RETRY_S)
                self._pause()
                self._retry = self._loop.call_later(ACCEPT_RETRY_S, self._retried)
                return
            self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        protocol = self._make_protocol(self)
        self.live.add(protocol)
        task = self._loop.create_task(self._loop.connect_accepted_socket(lambda: protocol, conn))
        self._connecting.add(task)
        task.add_done_callback(lambda done: self._connected(done, conn, protocol))

    def _connected(self, task: asyncio.Task[Any], conn: socket.socket, protocol: GuardedProtocol) -> None:
        self._connecting.discard(task)
        if task.cancelled() or task.exception() is not None:
            conn.close()
            self.closed(protocol)

    def _make_room(self) -> None:
        """At the cap: stop reading the listening socket, and displace the connection waiting longest for its
        request, if any; reading resumes when a connection closes (that one, or the next to finish)."""
        self._pause()
        victim = next(iter(self._waiting), None)
        if victim is not None:
            self.evicted += 1
            victim.evict()

    def _retried(self) -> None:
        self._retry = None
        self._resume()


class GuardedServer(uvicorn.Server):
    """uvicorn's server, accepting through `Acceptor` with `GuardedProtocol` connections, `cap` at most.

    Its config must say `ws="none"`: a connection upgraded to a WebSocket
    leaves the protocol the acceptor counts, so its close would never be seen.
    """

    def __init__(self, config: uvicorn.Config, limits: ConnectionLimits, cap: int) -> None:
        if config.ws != "none":
            raise ValueError('GuardedServer serves plain HTTP only: give its config ws="none"')
        super().__init__(config)
        self.limits = limits
        self.cap = cap
        self.acceptor: Acceptor | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if not sockets or len(sockets) != 1:
            raise ValueError("GuardedServer serves exactly one listening socket")
        await super().startup(sockets=[])  # the lifespan, and no listener of uvicorn's own
        loop = asyncio.get_running_loop()
        config, state, app_state = self.config, self.server_state, self.lifespan.state

        def make_protocol(acceptor: Acceptor) -> GuardedProtocol:
            return GuardedProtocol(config, state, app_state, acceptor, _loop=loop)

        self.acceptor = Acceptor(sockets[0], make_protocol, self.limits, self.cap, loop)
        self.servers.append(self.acceptor)  # type: ignore[arg-type]  # close() and wait_closed() are all it needs
        self.acceptor.start()

    @property
    def open_connections(self) -> int:
        """Connections accepted and not yet closed."""
        return len(self.acceptor.live) if self.acceptor is not None else 0
