"""One sandbox worker: `python -I worker.py CONFIG_JSON`, started warm by the pool, used for one call.

The launcher (this process, trusted) unshares mount/pid/net/ipc/uts namespaces and forks the init,
pid 1 of the new pid namespace. The init hides the host's writable and private paths, mounts a fresh
tmpfs scratch directory, drops to an unprivileged uid, applies rlimits, reports ready and waits for
code. When the init exits the kernel kills every process left in its namespace, setsid ones included.
Protocol on stdin/stdout, one JSON line each: launcher -> {"ready": ...}; pool -> {"code": ...};
launcher -> result. Stdlib only, so it starts fast and imports nothing from the host project.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import sys
import time
import traceback

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG = 38, 1
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def sandbox_env(config: dict) -> dict[str, str]:
    """The whole environment the snippet sees: nothing from the host."""
    home = config["scratch"]
    return {
        "PATH": SAFE_PATH,
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


# --- init side: isolation ------------------------------------------------------------------------
def _hide_paths(config: dict) -> None:
    """Cover private/writable host paths with empty read-only tmpfs; re-expose the interpreter read-only."""
    keep = {p: os.open(p, os.O_PATH) for p in config["expose"] if os.path.exists(p)}
    for hidden in config["hide"]:
        if not os.path.isdir(hidden) or os.path.realpath(hidden) == "/":
            continue
        _mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        for path, fd in keep.items():
            if path == hidden or path.startswith(hidden.rstrip("/") + "/"):
                os.makedirs(path, exist_ok=True)
                _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
                _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        _mount(None, hidden, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for fd in keep.values():
        os.close(fd)


def _isolate_filesystem(config: dict, uid: int) -> dict[str, bool]:
    """Private mounts: host paths hidden, own /proc, a fresh tmpfs scratch, the only rw place."""
    done = {"filesystem": False, "proc": False}
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _hide_paths(config)
    scratch = config["scratch"]
    os.makedirs(scratch, exist_ok=True)
    opts = f"size={config['scratch_mb']}m,mode=0700,uid={uid},gid={uid}"
    _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, opts)
    done["filesystem"] = True
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        done["proc"] = True
    except OSError:
        pass  # some runtimes forbid a fresh procfs; the uid drop still hides other processes' secrets
    return done


def _drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _apply_rlimits(config: dict) -> None:
    mb = 1024 * 1024
    cpu = int(config["cpu_s"])
    limits = {
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_AS: (config["memory_mb"] * mb, config["memory_mb"] * mb),
        resource.RLIMIT_NPROC: (config["max_processes"], config["max_processes"]),
        resource.RLIMIT_FSIZE: (config["max_file_mb"] * mb, config["max_file_mb"] * mb),
        resource.RLIMIT_NOFILE: (config["max_open_files"], config["max_open_files"]),
        resource.RLIMIT_CORE: (0, 0),
    }
    for which, value in limits.items():
        resource.setrlimit(which, value)


def _block_sockets() -> None:
    """Second line of defence when no network namespace could be made: sockets raise."""
    import socket

    def refuse(*_args, **_kwargs):
        raise PermissionError("network access is disabled in the sandbox")

    class NoSocket(socket.socket):
        def __init__(self, *args, **kwargs):
            refuse()

    socket.socket = NoSocket
    for name in ("create_connection", "getaddrinfo", "socketpair", "fromfd", "create_server"):
        setattr(socket, name, refuse)
    sys.modules["_socket"].socket = NoSocket


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _run_snippet(code: str) -> dict:
    """Exec with fresh globals; like a REPL, print the value of a final expression."""
    glb: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    status, error_line = "ok", ""
    try:
        tree = ast.parse(code, "<sandbox>")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<sandbox>", "exec"), glb)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<sandbox>", "eval"), glb)
            if value is not None:
                print(repr(value))
    except SystemExit as exc:
        if exc.code not in (None, 0):
            status, error_line = "error", f"SystemExit: {exc.code}"
    except BaseException as exc:
        status = "error"
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next)  # skip this frame
        error_line = tb[-1].strip()
        sys.stderr.write("".join(tb))
    return {"status": status, "error_line": error_line}


def _init_main(config: dict, fds: dict[str, int], namespaces: bool) -> None:
    """pid 1 of the sandbox namespace: isolate, report ready, run one snippet, exit."""
    iso = {"namespaces": namespaces, "filesystem": False, "proc": False, "uid_dropped": False}
    root = os.geteuid() == 0
    uid = config["uid"]
    if namespaces:
        iso.update(_isolate_filesystem(config, uid))
        os.chdir(config["scratch"])
    else:
        os.chdir(_private_dir(config, uid if root else None))
    os.setsid()  # killpg(0) from the snippet reaches only the sandbox
    if root:
        _drop_privileges(uid)
        iso["uid_dropped"] = True
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # setuid binaries cannot regain root
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # cleared by the uid change, so set after it
    os.environ.clear()
    os.environ.update(sandbox_env(config))
    for name in config["preload"]:
        with contextlib.suppress(ImportError):
            __import__(name)
    _block_sockets()
    _apply_rlimits(config)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fds["out"], 1)
    os.dup2(fds["err"], 2)
    os.write(fds["ctl"], (json.dumps({"ready": True, "isolation": iso}) + "\n").encode())
    code = _read_all(fds["code"]).decode("utf-8", "replace")
    result = _run_snippet(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        os.write(fds["ctl"], (json.dumps(result) + "\n").encode())
    finally:
        os._exit(0)


def _private_dir(config: dict, uid: int | None) -> str:
    """Fallback scratch dir when no mount namespace is allowed."""
    import tempfile

    path = tempfile.mkdtemp(prefix="sandbox-")
    if uid is not None:
        os.chown(path, uid, uid)
    return path


# --- launcher side ------------------------------------------------------------------------------
def _unshare(network: bool) -> bool:
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (0 if network else CLONE_NEWNET)
    return os.geteuid() == 0 and _libc.unshare(ctypes.c_int(flags)) == 0


class _Capture:
    """Reads the snippet's stdout/stderr, keeping the first `cap` bytes and counting the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.data, self.total = cap, bytearray(), 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def text(self) -> str:
        out = self.data.decode("utf-8", "replace")
        if self.total > self.cap:
            out += f"\n[output truncated: {self.total - self.cap} more bytes]"
        return out


def _supervise(pid: int, fds: dict[str, int], config: dict) -> dict:
    """Feed the code, capture output until the init exits or the wall clock runs out."""
    request = json.loads(sys.stdin.readline() or "{}")
    start = time.perf_counter()
    with contextlib.suppress(BrokenPipeError):
        os.write(fds["code"], request.get("code", "").encode())
    os.close(fds["code"])
    pidfd = os.pidfd_open(pid)
    sel = selectors.DefaultSelector()
    caps = {
        fds["out"]: _Capture(config["max_output_bytes"]),
        fds["err"]: _Capture(config["max_output_bytes"]),
    }
    ctl = _Capture(65536)
    for fd in (*caps, fds["ctl"]):
        sel.register(fd, selectors.EVENT_READ)
    sel.register(pidfd, selectors.EVENT_READ)
    deadline, timed_out = start + config["wall_s"], False
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0 and not timed_out:
            os.kill(pid, signal.SIGKILL)
            timed_out = True
        events = sel.select(max(remaining, 0.05) if not timed_out else 1.0)
        if any(key.fd == pidfd for key, _ in events):
            break
        for key, _ in events:
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
            else:
                (caps.get(key.fd) or ctl).feed(chunk)
    _, wait_status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - start
    if not config["namespaces"]:
        _kill_leftovers(pid, config["uid"])
    _drain(caps, ctl, fds)
    cpu_out = usage.ru_utime + usage.ru_stime >= config["cpu_s"]
    return _result(wait_status, timed_out, cpu_out, elapsed, caps, ctl, fds)


def _kill_leftovers(pgid: int, uid: int) -> None:
    """Without a pid namespace: kill the init's process group and every process of the sandbox uid."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    if os.geteuid() != 0:
        return
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass


def _drain(caps: dict, ctl: _Capture, fds: dict[str, int]) -> None:
    """After the init is reaped every process of the namespace is gone, so the pipes end."""
    for fd in (*caps, fds["ctl"]):
        os.set_blocking(fd, False)
        try:
            while chunk := os.read(fd, 65536):
                (caps.get(fd) or ctl).feed(chunk)
        except BlockingIOError:
            pass  # only without a pid namespace can a leftover child keep a pipe open


def _result(
    wait_status: int, timed_out: bool, cpu_out: bool, elapsed: float, caps: dict, ctl: _Capture, fds
) -> dict:
    lines = [ln for ln in bytes(ctl.data).decode("utf-8", "replace").splitlines() if ln.strip()]
    try:
        reported = json.loads(lines[-1]) if lines else {}
    except ValueError:
        reported = {}
    status, error_line = reported.get("status", ""), str(reported.get("error_line", ""))
    sig = os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else 0
    if timed_out:
        status, error_line = "timeout", "TimeoutError: wall time limit exceeded"
    elif sig in (signal.SIGXCPU, signal.SIGKILL) and cpu_out:
        status, error_line = "timeout", "TimeoutError: CPU time limit exceeded"
    elif status not in ("ok", "error"):
        status = "killed"
        error_line = f"killed by signal {signal.Signals(sig).name}" if sig else "sandbox process exited early"
    return {
        "status": status,
        "stdout": caps[fds["out"]].text(),
        "stderr": caps[fds["err"]].text(),
        "error_line": error_line,
        "elapsed_s": round(elapsed, 6),
        "truncated": any(c.total > c.cap for c in caps.values()),
    }


def main() -> None:
    config = json.loads(sys.argv[1])
    namespaces = _unshare(config["network"])
    config["namespaces"] = namespaces
    pipes = {name: os.pipe() for name in ("out", "err", "ctl", "code")}
    pid = os.fork()
    if pid == 0:
        child = {
            "out": pipes["out"][1],
            "err": pipes["err"][1],
            "ctl": pipes["ctl"][1],
            "code": pipes["code"][0],
        }
        for r, w in pipes.values():
            for fd in (r, w):
                if fd not in child.values():
                    os.close(fd)
        try:
            _init_main(config, child, namespaces)
        except BaseException as exc:
            os.write(child["ctl"], (json.dumps({"ready": False, "error": repr(exc)}) + "\n").encode())
        os._exit(1)
    fds = {"out": pipes["out"][0], "err": pipes["err"][0], "ctl": pipes["ctl"][0], "code": pipes["code"][1]}
    for name in ("out", "err", "ctl"):
        os.close(pipes[name][1])
    os.close(pipes["code"][0])
    ready = _read_line(fds["ctl"])
    sys.stdout.write(ready.decode() if ready else json.dumps({"ready": False, "error": "init died"}) + "\n")
    sys.stdout.flush()
    if not ready or not json.loads(ready).get("ready"):
        os.kill(pid, signal.SIGKILL)
        os._exit(1)
    result = _supervise(pid, fds, config)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)


def _read_line(fd: int) -> bytes:
    """Read one line byte by byte, so nothing after it (the snippet's result) is consumed."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            return bytes(line)
        line += byte
    return bytes(line)


if __name__ == "__main__":
    main()
