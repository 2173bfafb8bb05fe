"""Serve an ASGI app on a Unix socket from the running event loop (uvicorn), for as long as needed."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from functools import cache

import uvicorn


@cache
def endpoint_dir() -> str:
    """This process's directory of endpoint sockets: others may traverse it (the sandbox's uid), not
    list it; removed when the process exits."""
    path = tempfile.mkdtemp(prefix="workbench-agent-")
    os.chmod(path, 0o711)
    atexit.register(shutil.rmtree, path, True)
    return path


@contextlib.asynccontextmanager
async def serving(app, path: str, *, start_timeout_s: float = 10.0) -> AsyncIterator[None]:
    """Serve `app` on the Unix socket `path` (connectable by the sandbox's uid) inside the block."""
    config = uvicorn.Config(app, uds=path, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + start_timeout_s
    while not server.started:
        if task.done() or loop.time() > deadline:
            server.should_exit = True
            await task
            raise RuntimeError(f"the agent endpoint did not start on {path}")
        await asyncio.sleep(0.005)
    os.chmod(path, 0o666)
    try:
        yield
    finally:
        server.should_exit = True
        await task
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
