"""Run a command with the PostgreSQL and Redis the tests need, starting throwaway ones when none answers.

    python -m tests.services [--throwaway] -- python -m pytest tests

The tests talk to DATABASE_URL and REDIS_URL (defaults: the local servers on 127.0.0.1:5432 and :6379).
When a default server does not answer, a throwaway one is started from the installed binaries, in a
temporary directory on a free loopback port, its URL is exported to the command, and it is stopped
(and its files removed) when the command ends, however it ends. A URL set explicitly is used as it
is: if it does not answer, that is the caller's mistake and reported as such. Missing binaries fail at
once with one line saying what to install. `--throwaway` starts throwaway servers even when the
local ones answer (an isolated run, and how the start-up path itself is tested).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/workbench"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
INSTALL_HINT = (
    "install Debian's packages (apt-get install postgresql redis-server) "
    "or start the compose services (docker compose -f deploy/docker-compose.yml up -d postgres redis)"
)
START_TIMEOUT_S = 60


class ServiceError(RuntimeError):
    """A service the tests need is not answering and cannot be started here."""


def answers(url: str, default_port: int) -> bool:
    """Whether something accepts TCP connections at the URL's host and port."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), 1):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(ready, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if time.monotonic() > deadline:
            raise ServiceError(f"the throwaway {what} did not answer within {START_TIMEOUT_S} s")
        time.sleep(0.2)


def postgres_binary(name: str) -> str | None:
    """A PostgreSQL server binary from PATH or Debian's versioned directories (newest first)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = glob.glob(f"/usr/lib/postgresql/*/bin/{name}")
    return max(candidates, key=lambda p: int(Path(p).parts[-3]), default=None)


def server_user() -> str | None:
    """PostgreSQL refuses to run as root: run it as `postgres` (or `nobody`) then; None = as we are."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name).pw_name
    raise ServiceError("running as root and there is no `postgres` or `nobody` user to run PostgreSQL as")


def as_user(user: str | None, argv: list[str]) -> list[str]:
    if user is None:
        return argv
    entry = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", *argv]


def run_logged(argv: list[str], log: Path) -> None:
    """Run a start-up step; on failure raise with the last lines of its output and the server log."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        server_log = log.read_text(errors="replace") if log.exists() else ""
        tail = " | ".join((done.stdout + done.stderr + server_log).strip().splitlines()[-3:])
        raise ServiceError(f"{Path(argv[0]).name} failed for the throwaway PostgreSQL: {tail}")


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """initdb + pg_ctl start on a free port (trust auth, no fsync); yields its URL, stops it after."""
    initdb, pg_ctl = postgres_binary("initdb"), postgres_binary("pg_ctl")
    if not (initdb and pg_ctl):
        raise ServiceError(f"PostgreSQL is not answering and its server binaries are missing: {INSTALL_HINT}")
    user, port = server_user(), free_port()
    root = Path(tempfile.mkdtemp(prefix="workbench-test-pg-"))
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        data, log = root / "data", root / "log"
        run_logged(
            as_user(user, [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"]), log
        )
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        run_logged(
            as_user(user, [pg_ctl, "-D", str(data), "-o", options, "-l", str(log), "-w", "start"]), log
        )
        try:
            yield f"postgres://postgres@127.0.0.1:{port}/workbench"
        finally:
            stop = [pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]
            subprocess.run(as_user(user, stop), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def throwaway_redis() -> Iterator[str]:
    """redis-server on a free port, nothing kept on disk; yields its URL, stops it after."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServiceError(f"Redis is not answering and redis-server is missing: {INSTALL_HINT}")
    port = free_port()
    root = Path(tempfile.mkdtemp(prefix="workbench-test-redis-"))
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
            "--dir", str(root)]  # fmt: skip
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: server.poll() is not None or answers(url, 6379), "Redis")
        if server.poll() is not None:
            raise ServiceError(f"the throwaway Redis exited at start (code {server.returncode})")
        yield url
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(10)
        if server.poll() is None:
            server.kill()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def service(variable: str, default: str, port: int, start, throwaway: bool) -> Iterator[None]:
    """Export a URL for `variable`: the one set, the default if it answers, else a throwaway server's."""
    url = os.environ.get(variable) or default
    if not throwaway and answers(url, port):
        os.environ[variable] = url
        yield
        return
    if variable in os.environ and not throwaway:
        raise ServiceError(f"{variable}={url} does not answer")
    with start() as started:
        print(f"tests.services: started a throwaway server for {variable}: {started}", file=sys.stderr)
        os.environ[variable] = started
        yield


def run(argv: list[str], throwaway: bool = False) -> int:
    """Run argv with the services up; Ctrl-C and SIGTERM reach it and still stop the services."""
    with (
        service("DATABASE_URL", DEFAULT_DATABASE_URL, 5432, throwaway_postgres, throwaway),
        service("REDIS_URL", DEFAULT_REDIS_URL, 6379, throwaway_redis, throwaway),
    ):
        child = subprocess.Popen(argv)
        previous = signal.signal(signal.SIGTERM, lambda *_: child.terminate())
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.wait()
            return 130
        finally:
            signal.signal(signal.SIGTERM, previous)


def main() -> int:
    argv = sys.argv[1:]
    throwaway = argv[:1] == ["--throwaway"]
    argv = argv[1:] if throwaway else argv
    argv = argv[1:] if argv[:1] == ["--"] else argv
    if not argv:
        print("usage: python -m tests.services [--throwaway] -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        return run(argv, throwaway)
    except ServiceError as error:
        print(f"tests.services: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
