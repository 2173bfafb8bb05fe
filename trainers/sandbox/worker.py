"""Sandbox processes: `python -I worker.py CONFIG_JSON SOCKET_FD` starts the zygote of one pool.

zygote (root, long-lived, only forks) -> launcher (one per call: unshares mount/pid/net/ipc/uts
namespaces, forks the init, reaps it) -> init (pid 1 of the new pid namespace, root: hides the host's
private and writable paths, mounts a fresh tmpfs scratch dir, forks the snippet's process and reports
how it ended) -> snippet process (pid 2: drops to an unprivileged uid, applies rlimits, reports ready,
runs one snippet, exits). When the init exits the kernel kills every process left in its namespace,
setsid ones included. The pool talks to the init directly over pipes whose
ends the zygote passes it, so a call costs one round trip. Stdlib only: nothing from the project.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import json
import os
import resource
import signal
import socket
import sys
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
    """Second line of defence behind the network namespace: Python-level sockets raise."""

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
    """pid 1 of the sandbox namespace (stays root): isolate, fork the snippet's process, reap, report.

    The snippet runs as pid 2 under another uid, so it can signal neither its init nor the host."""
    iso = {"namespaces": namespaces, "filesystem": False, "proc": False, "uid_dropped": False}
    if namespaces:
        iso.update(_isolate_filesystem(config, config["uid"]))
        os.chdir(config["scratch"])
    else:
        os.chdir(_private_dir(config, config["uid"] if os.geteuid() == 0 else None))
    os.setsid()  # killpg(0) from the snippet reaches only the sandbox (and not its root-owned init)
    child = os.fork()
    if child == 0:
        _snippet_main(config, fds, iso)
    for name in ("out", "err", "code"):
        os.close(fds[name])
    while True:  # reap orphans the snippet leaves, until the snippet's own process ends
        pid, status, usage = os.wait4(-1, 0)
        if pid == child:
            break
    report = {"exit": status, "cpu_s": usage.ru_utime + usage.ru_stime}
    with contextlib.suppress(BrokenPipeError):
        os.write(fds["ctl"], (json.dumps(report) + "\n").encode())
    os._exit(0)  # the kernel now kills everything left in the namespace


def _snippet_main(config: dict, fds: dict[str, int], iso: dict) -> None:
    """The snippet's process: drop to the sandbox uid, apply limits, report ready, run once, exit."""
    try:
        if os.geteuid() == 0:
            _drop_privileges(config["uid"])
            iso["uid_dropped"] = True
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # setuid binaries cannot regain root
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # cleared by the uid change, so set after it
        os.environ.clear()
        os.environ.update(sandbox_env(config))
        _block_sockets()
        _apply_rlimits(config)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds["out"], 1)
        os.dup2(fds["err"], 2)
        for fd in {null, fds["out"], fds["err"]}:
            os.close(fd)
    except BaseException as exc:
        os.write(fds["ctl"], (json.dumps({"ready": False, "error": repr(exc)}) + "\n").encode())
        os._exit(1)
    os.write(fds["ctl"], (json.dumps({"ready": True, "isolation": iso}) + "\n").encode())
    code = _read_all(fds["code"]).decode("utf-8", "replace")
    os.close(fds["code"])
    result = _run_snippet(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    # alone: nothing but the init and this process is left, so the pool need not wait for the teardown
    result["alone"] = iso["proc"] and _alone()
    try:
        os.write(fds["ctl"], (json.dumps(result) + "\n").encode())
    finally:
        os._exit(0)


def _alone() -> bool:
    """True when this pid namespace holds only its init and this process (our own /proc is mounted)."""
    try:
        return {e for e in os.listdir("/proc") if e.isdigit()} <= {"1", str(os.getpid())}
    except OSError:
        return False


def _private_dir(config: dict, uid: int | None) -> str:
    """Fallback scratch dir when no mount namespace is allowed."""
    import tempfile

    path = tempfile.mkdtemp(prefix="sandbox-")
    if uid is not None:
        os.chown(path, uid, uid)
    return path


# --- launcher side: one per call, forked by the zygote -----------------------------------------
def _unshare(network: bool) -> bool:
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (0 if network else CLONE_NEWNET)
    return os.geteuid() == 0 and _libc.unshare(ctypes.c_int(flags)) == 0


def _kill_leftovers(pgid: int, uid: int) -> None:
    """Without a pid namespace: kill the init's process group and every process of the sandbox uid."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    if os.geteuid() != 0:
        return
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)


def _launcher_main(config: dict, fds: dict[str, int]) -> None:
    """Make the namespaces, fork the init, report its host pid to the pool, and reap the init.

    If the zygote dies (the pool's process is gone) the launcher kills the init before going."""
    namespaces = _unshare(config["network"])
    pid = os.fork()
    if pid == 0:
        try:
            _init_main(config, fds, namespaces)
        except BaseException as exc:
            os.write(fds["ctl"], (json.dumps({"ready": False, "error": repr(exc)}) + "\n").encode())
        os._exit(1)
    for name in ("out", "err", "code"):
        os.close(fds[name])
    signal.signal(signal.SIGTERM, lambda *_: _kill_and_exit(pid))
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    with contextlib.suppress(BrokenPipeError):  # the pool stops listening once it has the result
        os.write(fds["ctl"], (json.dumps({"pid": pid, "namespaces": namespaces}) + "\n").encode())
    os.close(fds["ctl"])
    os.waitpid(pid, 0)
    if not namespaces:
        _kill_leftovers(pid, config["uid"])
    os._exit(0)


def _kill_and_exit(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os._exit(1)


# --- zygote: a root process that only forks launchers -------------------------------------------
def _spawn(config: dict, sock: socket.socket, request: dict) -> None:
    """Fork a launcher for one call and hand the parent its ends of the pipes (SCM_RIGHTS)."""
    pipes = {name: os.pipe() for name in ("out", "err", "ctl", "code")}
    child = {"out": pipes["out"][1], "err": pipes["err"][1], "ctl": pipes["ctl"][1], "code": pipes["code"][0]}
    parent = {
        "out": pipes["out"][0],
        "err": pipes["err"][0],
        "ctl": pipes["ctl"][0],
        "code": pipes["code"][1],
    }
    if os.fork() == 0:
        keep = sorted(child.values())
        os.closerange(3, keep[0])
        for low, high in zip(keep, [*keep[1:], 65536], strict=True):
            os.closerange(low + 1, high)  # nothing of the zygote's (its socket, other calls' pipes) leaks
        _launcher_main({**config, "uid": request["uid"]}, child)
    names = sorted(parent)
    socket.send_fds(sock, [json.dumps(names).encode()], [parent[n] for n in names])
    for fd in (*child.values(), *parent.values()):
        os.close(fd)


def _zygote_main(config: dict, sock_fd: int) -> None:
    """Serve spawn requests until the pool's end of the socket closes (the pool or its process died)."""
    sock = socket.socket(fileno=sock_fd)
    for name in config["preload"]:  # imported once here, inherited by every forked worker
        with contextlib.suppress(ImportError):
            __import__(name)
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        message = sock.recv(4096)
        if not message:
            os._exit(0)
        _spawn(config, sock, json.loads(message))


def main() -> None:
    config, sock_fd = json.loads(sys.argv[1]), int(sys.argv[2])
    _zygote_main(config, sock_fd)


if __name__ == "__main__":
    main()
