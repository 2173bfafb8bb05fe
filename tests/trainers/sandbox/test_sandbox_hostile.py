"""Hostile snippets: each gets a clear error in bounded time and leaves the host unharmed."""

from __future__ import annotations

import os
import socket
import threading
import uuid

import pytest

from trainers.sandbox import SandboxLimits, WorkerPool
from trainers.sandbox.pool import PROJECT_ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and the uid drop need root")


def host_processes_matching(cmdline: str) -> list[int]:
    """Host pids whose command line is exactly `cmdline` (argv joined by spaces)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if b" ".join(a for a in argv if a).decode(errors="replace") == cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def listening_port() -> int:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    yield port
    server.close()


def test_python_sockets_are_refused(pool: WorkerPool, listening_port: int) -> None:
    code = f"import socket; socket.create_connection(('127.0.0.1', {listening_port}), timeout=1)"
    result = pool.run(code)
    assert result.status == "error"
    assert "network access is disabled" in result.error_line


def test_raw_syscall_connect_fails_in_the_network_namespace(pool: WorkerPool, listening_port: int) -> None:
    # bypasses the Python-level block with libc calls: only the empty network namespace stops this
    code = f"""
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(2, 1, 0)
addr = struct.pack('<HH4s8x', 2, __import__('_socket').htons({listening_port}), bytes([127, 0, 0, 1]))
rc = libc.connect(fd, addr, len(addr))
print(rc, ctypes.get_errno())
"""
    result = pool.run(code)
    rc, errno = result.stdout.split()
    assert rc == "-1"
    assert int(errno) in (101, 111)  # ENETUNREACH (no interfaces up) or ECONNREFUSED, never connected


def test_shadow_file_is_unreadable(pool: WorkerPool) -> None:
    result = pool.run("open('/etc/shadow').read()")
    assert result.status == "error"
    assert result.error_line.startswith("PermissionError")


def test_project_files_are_hidden(pool: WorkerPool) -> None:
    result = pool.run(f"print(open({str(PROJECT_ROOT / 'pyproject.toml')!r}).read())")
    assert result.status == "error"
    assert result.error_line.startswith("FileNotFoundError")


@pytest.mark.parametrize("path", ["/etc/sandbox-escape", "/var/tmp/escape", "/dev/shm/escape", "/escape"])
def test_writing_outside_the_scratch_dir_fails(pool: WorkerPool, path: str) -> None:
    result = pool.run(f"open({path!r}, 'w').write('x')")
    assert result.status == "error"
    assert result.error_line.split(":")[0] in ("PermissionError", "OSError", "FileNotFoundError")
    assert not os.path.exists(path)


def test_host_tmp_is_not_the_scratch_dir(pool: WorkerPool) -> None:
    name = f"/tmp/sandbox-marker-{uuid.uuid4().hex}"
    assert pool.run(f"open({name!r}, 'w').write('x'); print('wrote')").stdout == "wrote\n"
    assert not os.path.exists(name)


def test_fork_bomb_is_contained(pool: WorkerPool) -> None:
    result = pool.run(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    )
    assert result.status in ("timeout", "killed")  # stopped by the limits, not by finishing
    assert pool.run("print('host still fine')").stdout == "host still fine\n"


def test_memory_hog_gets_memory_error(pool: WorkerPool) -> None:
    result = pool.run("blob = bytearray(2 * 1024**3)")
    assert (result.status, result.error_line) == ("error", "MemoryError")


def test_infinite_loop_hits_the_wall_clock(pool: WorkerPool) -> None:
    result = pool.run("import time\nwhile True:\n    time.sleep(0.01)")
    assert (result.status, result.error_line) == ("timeout", "TimeoutError: wall time limit exceeded")


def test_cpu_burn_hits_the_cpu_limit() -> None:
    burner = WorkerPool(SandboxLimits(wall_s=30.0, cpu_s=1), size=1)  # wall slack for a loaded machine
    try:
        result = burner.run("while True:\n    pass")
    finally:
        burner.close()
    assert (result.status, result.error_line) == ("timeout", "TimeoutError: CPU time limit exceeded")


def test_big_file_hits_the_file_size_limit(pool: WorkerPool) -> None:
    result = pool.run("open('big', 'wb').write(b'x' * (8 * 1024 * 1024))")
    assert result.status == "error"
    assert "File too large" in result.error_line


def test_signals_cannot_reach_the_host(pool: WorkerPool) -> None:
    code = f"""
import os, signal
for pid in ({os.getpid()}, {os.getppid()}):
    try:
        os.kill(pid, signal.SIGKILL)
        print('sent', pid)
    except (ProcessLookupError, PermissionError) as exc:
        print(type(exc).__name__)
os.kill(-1, signal.SIGKILL)
"""
    result = pool.run(code)
    assert "sent" not in result.stdout
    assert os.getppid() > 1  # the test process and its parent are alive to check
    assert pool.run("print('next call ok')").stdout == "next call ok\n"


def test_killing_pid_one_fails(pool: WorkerPool) -> None:
    result = pool.run("import os, signal\nprint(os.getpid())\nos.kill(1, signal.SIGKILL)")
    assert result.stdout == "2\n"  # the snippet is pid 2; pid 1 is its root-owned init
    assert result.error_line == "PermissionError: [Errno 1] Operation not permitted"


def test_environment_holds_no_host_secrets(pool: WorkerPool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://admin:hunter2@db/prod")
    monkeypatch.setenv("FAKE_API_SECRET", "sk-not-for-the-model")
    code = f"""
import os
print(sorted(os.environ))
pid = {os.getpid()}
for path in ('/proc/self/environ', '/proc/1/environ', f'/proc/{{pid}}/environ', f'/proc/{{pid}}/cmdline'):
    try:
        print(open(path, 'rb').read())
    except OSError as exc:
        print(type(exc).__name__)
"""
    out = pool.run(code).stdout
    assert "hunter2" not in out
    assert "sk-not-for-the-model" not in out
    assert "DATABASE_URL" not in out
    assert out.splitlines()[0] == str(
        sorted(
            [
                "HOME",
                "LANG",
                "MKL_NUM_THREADS",
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "PATH",
                "PYTHONIOENCODING",
                "TMPDIR",
            ]
        )
    )


def test_huge_output_is_capped(pool: WorkerPool) -> None:
    result = pool.run("import sys\nfor _ in range(200):\n    sys.stdout.write('x' * 100_000)")
    assert result.status == "ok"
    assert result.truncated
    assert len(result.stdout) < pool.limits.max_output_bytes + 100
    assert result.stdout.endswith("more bytes]")


def test_detached_children_are_killed_when_the_call_ends(pool: WorkerPool) -> None:
    code = """
import os, subprocess, time
subprocess.Popen(['sleep', '987'], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/bin/sleep', ['sleep', '988'])
    os._exit(0)
time.sleep(0.2)
print('spawned')
"""
    assert pool.run(code).stdout == "spawned\n"
    assert host_processes_matching("sleep 987") == []
    assert host_processes_matching("sleep 988") == []


def sandbox_uid_processes() -> list[int]:
    """Host pids running as one of the pool's sandbox uids (idle warm workers included)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except FileNotFoundError:
                continue
            if 200_000 <= uid < 210_000:
                pids.append(int(entry))
    return pids


def test_nothing_of_a_fork_bomb_outlives_its_call(pool: WorkerPool) -> None:
    before = set(sandbox_uid_processes())
    pool.run("import os\nfor _ in range(4):\n    os.fork()\nimport time\ntime.sleep(30)")  # 16 sleepers
    new = set(sandbox_uid_processes()) - before
    assert len(new) <= 1  # at most the warm worker started to replace the one just used
