"""Hostile snippets: each gets a clear error in bounded time and leaves the host unharmed.

These run as whatever user runs pytest: as root the pool isolates with namespaces and a per-call uid
("root"), as anyone else with unprivileged user namespaces ("userns"). CI runs as root, so
test_sandbox_unprivileged.py runs this module a second time as an unprivileged user.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tests.support.polling import wait_for
from trainers.sandbox import SandboxLimits, WorkerPool
from trainers.sandbox.pool import PROJECT_ROOT


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


def test_the_pool_reports_the_isolation_it_got(pool: WorkerPool) -> None:
    expected = "root" if os.geteuid() == 0 else "userns"
    iso = pool.isolation()
    assert (pool.mode, iso["mode"]) == (expected, expected)
    assert iso["namespaces"] and iso["filesystem"] and iso["proc"]
    assert iso["uid_dropped"] if expected == "root" else iso["capabilities_dropped"]
    assert iso["seccomp"] is (os.uname().machine in ("x86_64", "aarch64"))


@pytest.mark.parametrize("path", ["/etc/shadow", "/etc/gshadow", "/etc/sudoers"])
def test_host_secrets_in_etc_are_unreadable(pool: WorkerPool, path: str) -> None:
    result = pool.run(f"print(open({path!r}).read())")
    assert result.status == "error"
    assert result.error_line.split(":")[0] in ("FileNotFoundError", "PermissionError")


def test_etc_holds_only_public_files(pool: WorkerPool) -> None:
    names = set(pool.run("import os; print(*sorted(os.listdir('/etc')))").stdout.split())
    allowed = {"alternatives", "group", "hostname", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d"}
    assert names <= allowed | {"localtime", "passwd"}
    assert pool.run("print(open('/etc/hostname').read())").stdout == "sandbox\n\n"


def test_project_files_are_hidden(pool: WorkerPool) -> None:
    result = pool.run(f"print(open({str(PROJECT_ROOT / 'pyproject.toml')!r}).read())")
    assert result.status == "error"
    assert result.error_line.startswith("FileNotFoundError")
    listing = pool.run(f"import os; print(os.listdir({str(PROJECT_ROOT)!r}))")
    venv = Path(sys.prefix)  # the virtual environment may live in the project; nothing else of it shows
    # a checkout under /tmp is not there at all: the sandbox's /tmp is its own scratch
    hidden = listing.status == "error" and listing.error_line.startswith("FileNotFoundError")
    assert hidden or listing.stdout in ("[]\n", f"[{venv.name!r}]\n"), listing


def test_homes_and_host_directories_are_absent(pool: WorkerPool) -> None:
    code = """
import os
for path in ('/home', '/root', '/var', '/run', '/srv', '/mnt', '/sys', '/boot', '/opt'):
    entries = os.listdir(path) if os.path.isdir(path) else None
    print(path, entries)
"""
    prefixes = {sys.prefix, sys.base_prefix}
    for line in pool.run(code).stdout.splitlines():
        path, entries = line.split(" ", 1)
        if entries != "None":  # present only as the way to the interpreter's prefix
            assert any(p.startswith(path + "/") for p in prefixes), line
            assert len(eval(entries)) == 1, line


def test_the_pool_owners_environment_is_unreachable(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's process holds the secrets (DATABASE_URL, the secret key): its /proc entry, and its
    parent's, are out of the sandbox's pid namespace; /proc/1 is the sandbox's own init."""
    monkeypatch.setenv("DJANGO_SECRET_KEY", "django-insecure-not-for-the-model")
    code = f"""
for pid in ({os.getpid()}, {os.getppid()}, 1):
    for name in ('environ', 'cmdline', 'cwd/pyproject.toml', 'root/etc/shadow'):
        try:
            print(pid, name, open(f'/proc/{{pid}}/{{name}}', 'rb').read()[:200])
        except OSError as exc:
            print(pid, name, type(exc).__name__)
"""
    out = pool.run(code).stdout
    assert "not-for-the-model" not in out and "DATABASE_URL" not in out
    for line in out.splitlines():
        pid, name, outcome = line.split(" ", 2)
        if pid != "1":
            assert outcome in ("FileNotFoundError", "ProcessLookupError"), line
        elif name != "cmdline":
            assert outcome in ("PermissionError", "FileNotFoundError"), line


@pytest.mark.parametrize(
    "directory", ["/etc", "/var/tmp", "/dev/shm", "/", "/usr", sys.prefix, sys.base_prefix, str(PROJECT_ROOT)]
)
def test_writing_outside_the_scratch_dir_fails(pool: WorkerPool, directory: str) -> None:
    path = os.path.join(directory, f"sandbox-escape-{uuid.uuid4().hex}")
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


@pytest.mark.slow
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
    """The snippet is pid 2. Its init is pid 1 under another uid ("root": EPERM) or under the same uid
    in the user namespace ("userns": the kernel drops signals an init has no handler for)."""
    code = """
import os, signal, time
print(os.getpid())
try:
    os.kill(1, signal.SIGKILL)
except PermissionError:
    print('refused')
time.sleep(0.2)  # had the init died, the kernel would have killed this process with it
print('init alive', os.getppid())
"""
    result = pool.run(code)
    assert result.status == "ok"
    assert result.stdout in ("2\nrefused\ninit alive 1\n", "2\ninit alive 1\n")


def test_privileges_are_gone(pool: WorkerPool) -> None:
    code = """
fields = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())
print(*(fields[name].strip() for name in ('CapInh', 'CapPrm', 'CapEff', 'CapAmb', 'NoNewPrivs', 'Seccomp')))
"""
    assert pool.run(code).stdout.split() == ["0000000000000000"] * 4 + ["1", "2"]


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="no seccomp table")
def test_seccomp_refuses_namespaces_mounts_and_ptrace(pool: WorkerPool) -> None:
    """Even a process that regains capabilities in a user namespace of its own cannot make one."""
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def errno(ret):
    return ctypes.get_errno() if ret == -1 else ret
print(errno(libc.unshare(0x10000000)))                       # CLONE_NEWUSER
print(errno(libc.unshare(0x00020000)))                       # CLONE_NEWNS
print(errno(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)))
print(errno(libc.ptrace(0, 0, None, None)))                  # PTRACE_TRACEME
pid = os.fork()  # a plain fork still works
if pid == 0:
    os._exit(7)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
    assert pool.run(code).stdout.split() == ["1", "1", "1", "1", "7"]


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


def descendants(root: int) -> set[tuple[int, str]]:
    """(pid, start time) of every live process below `root` (the start time tells a reused pid apart)."""
    parent, started = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parent[int(entry)], started[int(entry)] = int(fields[1]), fields[19]
    found, frontier = set(), [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, ppid in parent.items() if ppid == pid]
        found.update((p, started[p]) for p in children)
        frontier += children
    return found


def alive(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    left = set()
    for pid, start in processes:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[19] == start and fields[0] != "Z":
            left.add((pid, start))
    return left


def test_nothing_of_a_fork_bomb_outlives_its_call(pool: WorkerPool) -> None:
    before = descendants(pool._zygote.pid)
    pool.run("import os\nfor _ in range(4):\n    os.fork()\nimport time\ntime.sleep(30)")  # 16 sleepers
    new = descendants(pool._zygote.pid) - before
    assert len(new) <= 3  # at most the worker started to replace the one just used: launcher, init, snippet


OWNER = """
import os, sys, threading, time
from trainers.sandbox import SandboxLimits, WorkerPool
pool = WorkerPool(SandboxLimits(wall_s=120), size=2)
threading.Thread(target=pool.run, args=('import time; time.sleep(300)',), daemon=True).start()
print(pool._zygote.pid, flush=True)
sys.stdin.readline()
if sys.argv[1] == 'exit':
    os._exit(0)  # no close(), no atexit: the process just ends
time.sleep(300)
"""


@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_every_worker_dies_with_the_pools_process(how: str) -> None:
    """Warm workers and a running call, all of them, however the process that owns the pool ends."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, how], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        zygote = int(owner.stdout.readline())
        started = lambda: found if len(found := descendants(zygote)) >= 9 else None  # noqa: E731
        # a wait for the workers to start, not a speed claim
        workers = wait_for(started, 60, "two warm workers and a running call (launcher, init, snippet each)")
        workers |= {(pid, start) for pid, start in descendants(owner.pid) if pid == zygote}
        if how == "sigkill":
            owner.send_signal(signal.SIGKILL)
        else:
            owner.stdin.write("\n")
            owner.stdin.flush()
        owner.wait(timeout=30)
        wait_for(lambda: not alive(workers), 30, "every worker to die with the pool's process", every=0.05)
    finally:
        owner.kill()
        owner.wait()


@pytest.fixture(scope="module")
def endpoint_pool(tmp_path_factory: pytest.TempPathFactory):
    """A pool whose snippets may reach the Unix sockets of one directory (an agent's session), with a
    listening socket there and another one outside it."""
    root = tmp_path_factory.mktemp("endpoint")
    inside, outside = root / "sockets", root / "elsewhere"
    for directory in (inside, outside):
        directory.mkdir()
        directory.chmod(0o711)
    root.chmod(0o711)
    servers = []
    for path in (inside / "session.sock", outside / "other.sock"):
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        path.chmod(0o666)
        server.listen()
        threading.Thread(
            target=lambda s=server: [s.accept()[0].sendall(b"hello") for _ in iter(int, 1)], daemon=True
        ).start()
        servers.append(server)
    pool = WorkerPool(SandboxLimits(endpoint_dir=str(inside)), size=1)
    yield pool, outside / "other.sock"
    pool.close()
    for server in servers:
        server.close()


def test_an_endpoint_pool_reaches_its_sockets_and_nothing_else(endpoint_pool) -> None:
    pool, other = endpoint_pool
    code = f"""
import os, socket
def attempt(family, address):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.connect(address)
        return s.recv(5).decode()
    except OSError as exc:
        return type(exc).__name__
print(attempt(socket.AF_UNIX, "/endpoint/session.sock"))
print(attempt(socket.AF_UNIX, {str(other)!r}))
print(attempt(socket.AF_UNIX, "/endpoint/../endpoint/session.sock"))
print(attempt(socket.AF_INET, ("127.0.0.1", 5432)))
try:
    open("/endpoint/planted", "w")
except OSError as exc:
    print(type(exc).__name__)
"""
    result = pool.run(code)
    assert result.ok, result.stderr
    assert result.stdout.split() == ["hello", "PermissionError", "hello", "PermissionError", "OSError"]
