"""Sandbox processes: `python -I worker.py CONFIG_JSON SOCKET_FD` starts the zygote of one pool.

zygote (long-lived, only forks) -> launcher (one per call: unshares the call's namespaces, forks the
init, reaps it) -> init (pid 1 of the call's pid namespace: builds a fresh root filesystem, forks the
snippet's process and reports how it ended) -> snippet process (pid 2: gives up its privileges,
applies rlimits and a seccomp filter, reports ready, runs one snippet, exits).

config["mode"] says how the call is isolated:
- "root" (the pool runs as root): mount/pid/net/ipc/uts namespaces; the snippet drops to a per-call uid.
- "userns" (the pool runs as any user): the same namespaces, owned by a new user namespace per call in
  which the pool's uid is 0; the snippet keeps that uid but drops every capability (and its bounding
  set), so it cannot touch what the init set up. Needs unprivileged user namespaces.
- "none": no namespaces; only rlimits and a private temp dir. The pool uses it only when the operator
  set WORKBENCH_SANDBOX_INSECURE=1 and isolation could not be set up.

In "root" and "userns" the zygote pivots once into a new root: an empty read-only tmpfs holding
read-only binds of what Python needs (the interpreter's prefixes, /usr and the library dirs, a few
public /etc files) and a /dev with null/zero/full/random/urandom; the host's tree is detached. Each
call's mount namespace is a copy of that (with a pool's `endpoint_dir`, the agent endpoint's sockets,
bound read-only at /endpoint: the only sockets a snippet may connect to), where the init mounts a
fresh /proc for the call's pid namespace and a size-limited tmpfs at /tmp, the only writable place.
When the init exits the kernel kills every process left in its namespace, setsid ones included. Each
process sets PR_SET_PDEATHSIG=SIGKILL, so zygote, launchers, inits and snippets all die with the
pool's process.
The pool talks to the init directly over pipes whose ends the zygote passes it, so a call costs one
round trip. Stdlib only: nothing from the project.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH, AT_FDCWD, AT_RECURSIVE = 2, -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 22, 24, 28
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
# NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE, each locked, and KEEP_CAPS locked off: an exec as
# uid 0 in the user namespace cannot regain capabilities
SECUREBITS_LOCKED_DOWN = 0b11101111
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
# Public files of /etc the new root shows (ld.so's cache, time zone); with network=True also DNS and CAs.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
)
ETC_NETWORK_FILES = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
)
DEVICES = ("null", "zero", "full", "random", "urandom")
ENDPOINT_MOUNT = "/endpoint"  # where a pool's endpoint directory (agent programs' sockets) appears

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_MACHINE = os.uname().machine
# syscall numbers (x86_64, aarch64) the filters below name; newer syscalls share one number
_NR = {
    "clone": (56, 220),
    "clone3": (435, 435),
    "pivot_root": (155, 41),
    "mount_setattr": (442, 442),
}
_SECCOMP_DENIED = {  # the kernel's big attack surfaces and everything that reaches outside the call
    "unshare": (272, 97),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "open_tree_attr": (467, 467),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "lookup_dcookie": (212, 18),
    "fanotify_init": (300, 262),
    "syslog": (103, 116),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
}
_AUDIT_ARCH = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def _syscall_nr(name: str) -> int | None:
    arch = _AUDIT_ARCH.get(_MACHINE)
    return None if arch is None else _NR[name][arch[1]]


def endpoint_path(config: dict) -> str | None:
    """Where the snippet finds the endpoint directory's sockets: its mount in the sandbox's root, or the
    host path itself in mode "none" (no root of its own); None when the pool has no endpoint."""
    if not config.get("endpoint_dir"):
        return None
    return os.path.normpath(config["endpoint_dir"]) if config["mode"] == "none" else ENDPOINT_MOUNT


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


def diagnose(mode: str) -> str:
    """The switches known to stop sandbox isolation on this machine, in words (for the pool's error)."""
    found = []

    def setting(path: str) -> str | None:
        try:
            with open(path) as fh:
                return fh.read().strip()
        except OSError:
            return None

    if mode == "userns":
        if setting("/proc/sys/kernel/unprivileged_userns_clone") == "0":
            found.append("user namespaces are disabled: kernel.unprivileged_userns_clone=0")
        if setting("/proc/sys/user/max_user_namespaces") == "0":
            found.append("user namespaces are disabled: user.max_user_namespaces=0")
        if setting("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
            found.append(
                "AppArmor gives unprivileged user namespaces no capabilities: "
                "kernel.apparmor_restrict_unprivileged_userns=1"
            )
    status = setting("/proc/self/status") or ""
    if any(line.split() == ["Seccomp:", "2"] for line in status.splitlines()):
        found.append(
            "this process runs under a seccomp filter that may forbid unshare/mount (Docker's default "
            "profile does for a non-root user: see docs/deployment.md)"
        )
    return "; ".join(found) if found else "no known switch explains it"


# --- the snippet's own restrictions ---------------------------------------------------------------
def seccomp_program() -> bytes | None:
    """A BPF filter that fails the denied syscalls with EPERM, clone with any namespace flag with EPERM,
    clone3 with ENOSYS (so libc falls back to clone), and kills a process using another syscall ABI.
    None on architectures without a syscall table here."""
    if _MACHINE not in _AUDIT_ARCH:
        return None
    audit_arch, column = _AUDIT_ARCH[_MACHINE]
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill, errno_ = 0x7FFF0000, 0x80000000, 0x00050000
    ns_flags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
    ns_flags |= CLONE_NEWPID | CLONE_NEWNET
    denied = sorted({numbers[column] for numbers in _SECCOMP_DENIED.values()})
    clone, clone3 = _NR["clone"][column], _NR["clone3"][column]
    # (code, jump-if-true label or 0, jump-if-false label or 0, k); labels resolve below
    prog: list[tuple[int, object, object, int]] = [
        (ld_abs, 0, 0, 4),  # seccomp_data.arch
        (jeq, 0, "kill", audit_arch),
        (ld_abs, 0, 0, 0),  # seccomp_data.nr
    ]
    if _MACHINE == "x86_64":
        prog.append((jge, "deny", 0, 0x40000000))  # the x32 ABI
    prog += [(jeq, "deny", 0, nr) for nr in denied]
    prog += [
        (jeq, "enosys", 0, clone3),
        (jeq, 0, "allow", clone),
        (ld_abs, 0, 0, 16),  # clone's flags: the low half of args[0]
        (jset, "deny", "allow", ns_flags),
    ]
    labels = {"allow": allow, "deny": errno_ | 1, "enosys": errno_ | 38, "kill": kill}
    at = {name: len(prog) + i for i, name in enumerate(labels)}
    prog += [(ret, 0, 0, k) for k in labels.values()]
    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        jt, jf = (at[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        out += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(out)


def install_seccomp() -> bool:
    """Install seccomp_program() on this process (and what it forks); False where it is unavailable."""
    program = seccomp_program()
    if program is None:
        return False
    buffer = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    return _libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(fprog), 0, 0) == 0


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _capabilities() -> tuple[int, int]:
    """(effective, permitted) capability masks of this process."""
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), data), "capget")
    return (
        data[0].effective | data[1].effective << 32,
        data[0].permitted | data[1].permitted << 32,
    )


def _drop_capabilities() -> None:
    """Give up every capability for good: bounding set, ambient set, securebits, then capset to zero."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: none
            _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")
    _check(_libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT)")
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    if _capabilities() != (0, 0):
        raise OSError("capabilities are still held after dropping them")


def _drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _apply_rlimits(config: dict) -> None:
    mb = 1024 * 1024
    cpu = int(config["cpu_s"])
    # RLIMIT_NPROC counts per user (per user namespace): in "userns" the launcher and init share it
    nproc = config["max_processes"] + (2 if config["mode"] == "userns" else 0)
    limits = {
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_AS: (config["memory_mb"] * mb, config["memory_mb"] * mb),
        resource.RLIMIT_NPROC: (nproc, nproc),
        resource.RLIMIT_FSIZE: (config["max_file_mb"] * mb, config["max_file_mb"] * mb),
        resource.RLIMIT_NOFILE: (config["max_open_files"], config["max_open_files"]),
        resource.RLIMIT_CORE: (0, 0),
    }
    for which, value in limits.items():
        resource.setrlimit(which, value)


def _block_sockets(endpoint_dir: str | None) -> None:
    """Second line of defence behind the network namespace: Python-level sockets raise, except Unix
    stream sockets connecting to the endpoint directory's sockets when the pool has one."""

    def refuse(*_args, **_kwargs):
        raise PermissionError("network access is disabled in the sandbox")

    def to_endpoint(address: object) -> bool:
        if endpoint_dir is None or not isinstance(address, (str, bytes)):
            return False
        return os.path.dirname(os.path.normpath(os.fsdecode(address))) == endpoint_dir

    def checked(connect):
        def guarded(self, address):
            if not to_endpoint(address):
                refuse()
            return connect(self, address)

        return guarded

    c_socket = sys.modules["_socket"].socket

    class UnixOnly(c_socket):
        """The C socket type, limited to AF_UNIX sockets that connect to the endpoint's sockets."""

        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if endpoint_dir is None or fileno is not None or family != socket.AF_UNIX:
                refuse()
            c_socket.__init__(self, family, type, proto)

        connect = checked(c_socket.connect)
        connect_ex = checked(c_socket.connect_ex)
        bind = refuse

    class NoSocket(socket.socket):
        connect = checked(socket.socket.connect)
        connect_ex = checked(socket.socket.connect_ex)
        bind = refuse

    sys.modules["_socket"].socket = UnixOnly  # what socket.socket.__init__ calls
    socket.socket = NoSocket
    for name in ("create_connection", "getaddrinfo", "socketpair", "fromfd", "create_server"):
        setattr(socket, name, refuse)


# --- init side: a fresh root filesystem ------------------------------------------------------------
def _make_readonly(path: str) -> None:
    """Make the bind mount at `path` (and every mount below it) read-only, nosuid and nodev."""
    nr = _syscall_nr("mount_setattr")
    if nr is not None:
        attr = struct.pack("=QQQQ", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
        args = (
            ctypes.c_long(AT_FDCWD),
            path.encode(),
            ctypes.c_long(AT_RECURSIVE),
            attr,
            ctypes.c_long(len(attr)),
        )
        ret = _libc.syscall(ctypes.c_long(nr), *args)
        if ret == 0:
            return
        if ctypes.get_errno() not in (38, 1):  # ENOSYS or EPERM (old kernels or filters): remount instead
            _check(-1, f"mount_setattr {path}")
    # A remount in a user namespace must keep the flags the mount is locked with (noexec, atime).
    have = os.statvfs(path).f_flag
    keep = MS_NOEXEC if have & os.ST_NOEXEC else 0
    keep |= MS_NOATIME if have & os.ST_NOATIME else 0
    keep |= MS_NODIRATIME if have & os.ST_NODIRATIME else 0
    keep |= MS_RELATIME if have & os.ST_RELATIME else 0
    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | keep)


def _bind(fd: int, target: str, *, readonly: bool = True) -> None:
    """Bind what `fd` (O_PATH) names at `target` in the new root, creating the mount point."""
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    if readonly:
        _make_readonly(target)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _exposed(config: dict) -> list[str]:
    """The host paths the new root shows: no path twice (one inside another comes with it)."""
    wanted = [*config["expose"], *ETC_FILES, *(ETC_NETWORK_FILES if config["network"] else ())]
    paths: list[str] = []
    for path in sorted({os.path.normpath(p) for p in wanted if p and os.path.normpath(p) != "/"}):
        top_link = os.path.islink(path) and os.path.dirname(path) == "/"
        if (os.path.exists(path) or top_link) and not any(_inside(path, p) for p in paths):
            paths.append(path)
    return paths


def _staging_dir() -> str:
    """An existing directory to mount the new root on (any will do: this mount namespace is ours)."""
    for path in ("/tmp", "/mnt", "/run", "/var/tmp", "/dev"):
        if os.path.isdir(path) and not os.path.islink(path):
            return path
    raise OSError("no directory to build the sandbox's root filesystem on")


def _build_base_root(config: dict) -> None:
    """Zygote, once: enter a mount namespace of its own (in "userns" inside a user namespace of its own
    too, where its uid and gid are 0) and pivot into the sandbox's root filesystem: an empty read-only
    tmpfs holding read-only binds of `_exposed`, a /dev of a few devices, an empty scratch mount point,
    and the host's /proc, which every call covers with its own (a new procfs may only be mounted where
    one is already fully visible). Every call's mount namespace is a copy of this one."""
    _unshare(CLONE_NEWNS, own_user_namespace=config["mode"] == "userns")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    exposed = _exposed(config)
    links = [p for p in exposed if os.path.islink(p) and os.path.dirname(p) == "/"]  # /bin -> usr/bin
    binds = {p: os.open(p, os.O_PATH) for p in exposed if p not in links}
    devices = {d: os.open(f"/dev/{d}", os.O_PATH) for d in DEVICES if os.path.exists(f"/dev/{d}")}
    proc = os.open("/proc", os.O_PATH)
    endpoint = os.open(config["endpoint_dir"], os.O_PATH) if config.get("endpoint_dir") else None
    new = _staging_dir()
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for path, fd in binds.items():
        _bind(fd, new + path)
    for path in links:
        os.symlink(os.readlink(path), new + path)
    for hidden in config["hide"]:  # a hidden path inside an exposed one: cover it, re-expose below it
        target = new + os.path.normpath(hidden)
        if any(_inside(hidden, p) and hidden != p for p in binds) and os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=0755")
            for path, fd in binds.items():
                if _inside(path, hidden):
                    _bind(fd, new + path)
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for fd in binds.values():
        os.close(fd)
    os.makedirs(new + "/etc", exist_ok=True)
    for name, text in _etc_files(config["mode"]).items():
        if os.path.lexists(f"{new}/etc/{name}"):
            continue  # the host's, bound above (network=True)
        with open(f"{new}/etc/{name}", "w") as fh:
            fh.write(text)
    os.makedirs(new + "/dev", exist_ok=True)
    _mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for name, fd in devices.items():
        _bind(fd, f"{new}/dev/{name}", readonly=False)
        os.close(fd)
    for name, target in {"fd": "/proc/self/fd", "stdin": "0", "stdout": "1", "stderr": "2"}.items():
        os.symlink(target if name == "fd" else f"/proc/self/fd/{target}", f"{new}/dev/{name}")
    _mount(None, new + "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    os.makedirs(new + config["scratch"], exist_ok=True)
    if endpoint is not None:  # the agent endpoint's sockets: connectable, not writable
        _bind(endpoint, new + ENDPOINT_MOUNT)
        os.close(endpoint)
    _bind(proc, new + "/proc", readonly=False)
    os.close(proc)
    os.chdir(new)
    _check(_libc.syscall(ctypes.c_long(_syscall_nr("pivot_root")), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the host's root")  # the old root was stacked on /
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _call_root(config: dict, owner: int) -> dict[str, bool]:
    """Init, per call, in its copy of the zygote's mounts: a fresh tmpfs scratch dir owned by `owner` (the
    snippet's uid as this namespace sees it) and a fresh /proc for this pid namespace over the host's.
    Where a fresh procfs is refused, an empty read-only tmpfs covers the host's /proc instead."""
    opts = f"size={config['scratch_mb']}m,mode=0700,uid={owner},gid={owner}"
    _mount("tmpfs", config["scratch"], "tmpfs", MS_NOSUID | MS_NODEV, opts)
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:  # e.g. a container runtime that masks parts of /proc
        flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        _mount("tmpfs", "/proc", "tmpfs", flags, "size=4k,mode=0555")
        return {"filesystem": True, "proc": False}
    return {"filesystem": True, "proc": True}


def _etc_files(mode: str) -> dict[str, str]:
    """Small made-up /etc files, so user and host name lookups answer without the host's. In "userns" the
    snippet's uid is 0 (without capabilities): it is named sandbox there."""
    zero = "sandbox" if mode == "userns" else "root"
    return {
        "passwd": f"{zero}:x:0:0:{zero}:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534::/:/usr/sbin/nologin\n",
        "group": f"{zero}:x:0:\nnogroup:x:65534:\n",
        "hostname": "sandbox\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    }


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


def _die_with_parent(parent_alive) -> None:
    """SIGKILL this process when its parent dies; exit now if the parent is already gone."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if not parent_alive():
        os._exit(1)


def _init_main(config: dict, fds: dict[str, int], life: int) -> None:
    """pid 1 of the sandbox namespace (keeps its privileges): isolate, fork the snippet's process, reap,
    report. The snippet runs as pid 2 without privileges, so it can signal neither its init nor the
    host, nor undo the mounts."""
    # the launcher holds the other end of `life`: readable (EOF) once the launcher is gone
    _die_with_parent(lambda: not select.select([life], [], [], 0)[0])
    os.close(life)
    mode = config["mode"]
    iso = {"mode": mode, "namespaces": mode != "none", "filesystem": False, "proc": False}
    iso.update(uid_dropped=False, capabilities_dropped=False, seccomp=False)
    if mode == "none":
        os.chdir(_private_dir(config["uid"] if os.geteuid() == 0 else None))
    else:
        _libc.sethostname(b"sandbox", 7)
        iso.update(_call_root(config, config["uid"] if mode == "root" else 0))
        os.chdir(config["scratch"])
    os.setsid()  # killpg(0) from the snippet reaches only the sandbox (and not its init)
    init_pid = os.getpid()
    child = os.fork()
    if child == 0:
        _snippet_main(config, fds, iso, init_pid)
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


def _snippet_main(config: dict, fds: dict[str, int], iso: dict, init_pid: int) -> None:
    """The snippet's process: give up privileges, apply limits, report ready, run once, exit."""
    try:
        if config["mode"] == "userns":
            _drop_capabilities()
            iso["capabilities_dropped"] = True
        elif os.geteuid() == 0:
            _drop_privileges(config["uid"])
            iso["uid_dropped"] = True
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _die_with_parent(lambda: os.getppid() == init_pid)  # after the uid change, which clears it
        os.environ.clear()
        os.environ.update(sandbox_env(config))
        _block_sockets(endpoint_path(config))
        _apply_rlimits(config)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds["out"], 1)
        os.dup2(fds["err"], 2)
        for fd in {null, fds["out"], fds["err"]}:
            os.close(fd)
        iso["seccomp"] = install_seccomp()
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


def _private_dir(uid: int | None) -> str:
    """Scratch dir in mode "none" (no mount namespace)."""
    import tempfile

    path = tempfile.mkdtemp(prefix="sandbox-")
    if uid is not None:
        os.chown(path, uid, uid)
    return path


# --- launcher side: one per call, forked by the zygote -----------------------------------------
def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _enter_namespaces(config: dict) -> None:
    """Unshare the call's namespaces; in "userns" also a user namespace where our uid and gid are 0."""
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    flags |= 0 if config["network"] else CLONE_NEWNET
    _unshare(flags, own_user_namespace=config["mode"] == "userns")


def _unshare(flags: int, *, own_user_namespace: bool) -> None:
    """unshare(flags); with `own_user_namespace` also a new user namespace where our uid and gid are 0."""
    if not own_user_namespace:
        _check(_libc.unshare(ctypes.c_int(flags)), "unshare")
        return
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(ctypes.c_int(flags | CLONE_NEWUSER)), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")


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


def _fail(fds: dict[str, int], error: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fds["ctl"], (json.dumps({"ready": False, "error": error}) + "\n").encode())
    os._exit(1)


def _launcher_main(config: dict, fds: dict[str, int]) -> None:
    """Make the namespaces, fork the init, report its host pid to the pool, and reap the init.

    Dies with the zygote (PR_SET_PDEATHSIG), and the init dies with it the same way."""
    zygote = config["zygote_pid"]
    _die_with_parent(lambda: os.getppid() == zygote)
    if config["mode"] != "none":
        try:
            _enter_namespaces(config)
        except OSError as exc:
            _fail(fds, f"sandbox isolation ({config['mode']}) failed: {exc}; {diagnose(config['mode'])}")
        _die_with_parent(lambda: os.getppid() == zygote)  # again: the user namespace changed our creds
    life_r, life_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(life_w)
        try:
            _init_main(config, fds, life_r)
        except BaseException as exc:
            _fail(fds, f"sandbox isolation ({config['mode']}) failed: {exc!r}; {diagnose(config['mode'])}")
        os._exit(1)
    os.close(life_r)
    for name in ("out", "err", "code"):
        os.close(fds[name])
    with contextlib.suppress(BrokenPipeError):  # the pool stops listening once it has the result
        os.write(fds["ctl"], (json.dumps({"pid": pid}) + "\n").encode())
    os.close(fds["ctl"])
    os.waitpid(pid, 0)
    if config["mode"] == "none":
        _kill_leftovers(pid, config["uid"])
    os._exit(0)


# --- zygote: a process that only forks launchers -------------------------------------------------
def _fork_launcher(config: dict, uid: int) -> tuple[int, dict[str, int]]:
    """Fork a launcher for one call; return its pid and the parent's ends of its pipes."""
    pipes = {name: os.pipe() for name in ("out", "err", "ctl", "code")}
    child = {"out": pipes["out"][1], "err": pipes["err"][1], "ctl": pipes["ctl"][1], "code": pipes["code"][0]}
    parent = {
        "out": pipes["out"][0],
        "err": pipes["err"][0],
        "ctl": pipes["ctl"][0],
        "code": pipes["code"][1],
    }
    pid = os.fork()
    if pid == 0:
        keep = sorted(child.values())
        os.closerange(3, keep[0])
        for low, high in zip(keep, [*keep[1:], 65536], strict=True):
            os.closerange(low + 1, high)  # nothing of the zygote's (its socket, other calls' pipes) leaks
        _launcher_main({**config, "uid": uid}, child)
    for fd in child.values():
        os.close(fd)
    return pid, parent


def _spawn(config: dict, sock: socket.socket, request: dict) -> None:
    """Fork a launcher for one call and hand the pool its ends of the pipes (SCM_RIGHTS)."""
    _, parent = _fork_launcher(config, request["uid"])
    names = sorted(parent)
    socket.send_fds(sock, [json.dumps(names).encode()], [parent[n] for n in names])
    for fd in parent.values():
        os.close(fd)


def _self_test(config: dict, uid: int, timeout_s: float) -> dict:
    """Run one empty snippet the way every call runs: what isolation it got, or why it failed."""
    launcher, fds = _fork_launcher(config, uid)
    os.close(fds.pop("code"))  # an empty snippet
    deadline, buffer, answer = time.monotonic() + timeout_s, b"", None
    try:
        while answer is None:
            ready = select.select([fds["ctl"]], [], [], max(0.0, deadline - time.monotonic()))[0]
            chunk = os.read(fds["ctl"], 65536) if ready else b""
            if not chunk:
                break
            buffer += chunk
            for line in buffer.split(b"\n")[:-1]:
                info = json.loads(line)
                if "ready" in info:
                    answer = info
        if answer is None:
            answer = {"ready": False, "error": "the sandbox's self-test gave no answer"}
    finally:
        for fd in fds.values():
            os.close(fd)
        while not os.waitpid(launcher, os.WNOHANG)[0]:  # it ends once its init has (milliseconds)
            if time.monotonic() > deadline:
                os.kill(launcher, signal.SIGKILL)  # its init dies with it (PR_SET_PDEATHSIG)
                os.waitpid(launcher, 0)
                break
            time.sleep(0.001)
    if answer["ready"]:
        return {"ok": True, "mode": config["mode"], "isolation": answer["isolation"]}
    return {"ok": False, "mode": config["mode"], "error": answer["error"]}


def _zygote_main(config: dict, sock_fd: int) -> None:
    """Check isolation, say hello, then serve spawn requests until the pool's end of the socket closes
    (the pool closed, or its process died)."""
    owner, mode = config["owner_pid"], config["mode"]
    _die_with_parent(lambda: os.getppid() == owner)
    sock = socket.socket(fileno=sock_fd)
    config = {**config, "zygote_pid": os.getpid()}
    try:
        if mode != "none":  # before preloading: a process with threads cannot enter a user namespace
            _build_base_root(config)
            _die_with_parent(lambda: os.getppid() == owner)  # again: the user namespace changed our creds
    except OSError as exc:
        hello = {
            "ok": False,
            "mode": mode,
            "error": f"sandbox isolation ({mode}) failed: {exc}; {diagnose(mode)}",
        }
    else:
        for name in config["preload"]:  # imported once here, inherited by every forked worker
            with contextlib.suppress(ImportError):
                __import__(name)
        hello = _self_test(config, config["uid_base"], config["start_timeout_s"])
    sock.send(json.dumps(hello).encode())
    if not hello["ok"]:
        os._exit(0)
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
