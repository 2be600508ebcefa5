"""MCP over stdio without a thread hop for each line read or written.

The SDK's `stdio_server()` reads stdin and writes stdout through
`anyio.wrap_file`: every line read, every write and every flush is a call on
a worker thread, so a tool call crosses threads three times besides the one
hop into the tool itself, and each crossing waits for a core to be free (on
a busy 2-core machine, most of what MCP added to a call: docs/benchmarks.md).
Here the event loop reads and writes the pipes itself (asyncio's pipe
transports), and the SDK does the rest as before: `stdio_server()` given
these streams parses each line into a JSON-RPC message and writes each
answer, so the messages on the wire are the SDK's own.

As the SDK's transport does, this one claims the process's stdin and stdout
while it serves: fd 0 reads the null device and fd 1 goes to stderr, so
nothing else in the process (a library that prints) can write onto the
wire. Where stdin or stdout is not a pipe or a socket (a regular file: the
event loop cannot wait on one), the SDK's own transport serves instead.
"""

import asyncio
import os
import stat
import sys
from contextlib import asynccontextmanager

from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

LINE_LIMIT = 64 * 1024 * 1024  # the longest request line read (asyncio's default, 64 KiB, is too short)


def serve(server: MCPServer) -> None:
    """Serve `server` over this process's stdin and stdout until stdin closes."""
    if not all(_waitable(fd) for fd in (0, 1)):
        server.run("stdio")
        return
    asyncio.run(_serve(server))


async def _serve(server: MCPServer) -> None:
    async with _claimed_pipes() as (stdin, stdout), stdio_server(stdin=stdin, stdout=stdout) as (read, write):
        # The SDK's own stdio runner does exactly this with its streams (MCPServer.run_stdio_async).
        lowlevel = server._lowlevel_server
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


def _waitable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@asynccontextmanager
async def _claimed_pipes():
    """(lines in, text out) on private copies of fds 0 and 1, which point elsewhere meanwhile."""
    loop = asyncio.get_running_loop()
    sys.stdout.flush()
    saved = os.dup(0), os.dup(1)  # to put back at the end, as the SDK's transport does
    wire_in, wire_out = os.dup(0), os.dup(1)  # the transports own (and close) these
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    try:
        yield _Lines(reader), _Text(writer)
    finally:
        read_transport.close()
        write_transport.close()
        for fd, copy in enumerate(saved):
            os.dup2(copy, fd)
            os.close(copy)


class _Lines:
    """stdin as the SDK's transport iterates it: text lines (undecodable bytes replaced)."""

    def __init__(self, reader: asyncio.StreamReader):
        self.reader = reader

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        line = await self.reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Text:
    """stdout as the SDK's transport writes it: write() queues the text on the pipe (written at
    once when the pipe has room), flush() waits only while the reader lags behind."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()
