"""Run a command as an unprivileged user (root only): `python as_unprivileged.py UID GID -- CMD...`.

The interpreter, the virtual environment and the repository must be readable by that user; where one of
them lies below a directory only root may enter (a pyenv under /root, say), this helper runs the command
in a private mount namespace whose copy of that directory is an empty tmpfs showing only what is needed.
Nothing outside that namespace changes. Stdlib only.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from pathlib import Path

CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 16384, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    if _libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def closed_ancestor(path: str) -> str | None:
    """The highest directory above `path` that others may not enter, if any."""
    parts = Path(path).parts
    for i in range(2, len(parts)):
        ancestor = str(Path(*parts[:i]))
        if not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return ancestor
    return None


def open_up(paths: list[str]) -> None:
    """In a private mount namespace, cover each closed ancestor with a tmpfs and bind the path back."""
    blocked = {path: closed_ancestor(path) for path in paths}
    blocked = {path: ancestor for path, ancestor in blocked.items() if ancestor}
    if not blocked:
        return
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = {path: os.open(path, os.O_PATH) for path in blocked}
    for ancestor in sorted(set(blocked.values())):
        _mount("tmpfs", ancestor, "tmpfs", 0, "size=64k,mode=0755")
    for path, fd in keep.items():
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)


def main() -> None:
    uid, gid, sep, *command = sys.argv[1:]
    assert sep == "--" and command, __doc__
    repo = str(Path(__file__).resolve().parents[3])
    wanted = sorted({sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)), repo})
    open_up([p for p in wanted if not any(p.startswith(q + "/") for q in wanted)])
    os.setgroups([])
    os.setresgid(int(gid), int(gid), int(gid))
    os.setresuid(int(uid), int(uid), int(uid))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
