"""One interface to where run artifacts live: a local directory by default, an S3-compatible object store
(MinIO, S3) in a deployment, so a checkpoint written on one worker is found by any other.

A directory is *complete* when its marker file (`.artifact-complete`, written last) is there; readers
look only at complete directories, so they never see a partial upload. On a local filesystem the upload
goes to a hidden sibling and is renamed into place; on an object store (no atomic rename) the old marker
is removed first and the new one written last, and `get_dir` checks the marker's token did not change
while it copied.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path, PurePosixPath

import fsspec
from fsspec.implementations.local import LocalFileSystem

MARKER = ".artifact-complete"  # holds a token that changes with every upload of the directory
RESERVED = ".artifact-"  # names of the store's own: the marker, uploads in progress, replaced copies
S3_ENDPOINT_ENV = "WORKBENCH_ARTIFACTS_S3_ENDPOINT"  # e.g. http://minio:9000
COPY_ATTEMPTS = 3  # a reader retries when a writer replaced the directory under it


def check_key(key: str) -> str:
    """`key` if it is a '/'-separated relative path inside the store, else ValueError."""
    if not key or key.startswith("/") or "\\" in key or "://" in key:
        raise ValueError(f"artifact key {key!r}: give a relative '/'-separated path")
    for part in key.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"artifact key {key!r}: empty, '.' or '..' parts are refused")
        if part.startswith(RESERVED):
            raise ValueError(f"artifact key {key!r}: names starting {RESERVED!r} are the store's own")
    return key


class ArtifactStore:
    """Directories and small files under one root URL (a local path, file://... or s3://bucket/prefix)."""

    def __init__(self, url: str, fs: fsspec.AbstractFileSystem, root: str) -> None:
        self.url = url.rstrip("/")
        self.fs = fs
        self.root = root.rstrip("/")
        self.local = isinstance(fs, LocalFileSystem)

    @classmethod
    def from_url(cls, url: str) -> ArtifactStore:
        """The store at `url`; s3:// needs the s3fs package, and reads its endpoint from
        WORKBENCH_ARTIFACTS_S3_ENDPOINT (credentials come from the usual AWS_* variables)."""
        if "://" not in url:
            url = Path(url).expanduser().resolve().as_uri()
        protocol = url.split("://", 1)[0]
        options: dict = {}
        if protocol in ("s3", "s3a"):
            try:
                import s3fs  # noqa: F401
            except ImportError as error:
                raise ImportError(
                    f"artifact store {url!r} is on S3: install the s3fs package (pip install s3fs)"
                ) from error
            endpoint = os.environ.get(S3_ENDPOINT_ENV)
            if endpoint:
                options["client_kwargs"] = {"endpoint_url": endpoint}
            options["use_listings_cache"] = False  # other workers write too: list what is there now
        fs, root = fsspec.core.url_to_fs(url, **options)
        if isinstance(fs, LocalFileSystem):
            fs.makedirs(root, exist_ok=True)
        return cls(url, fs, root)

    def url_of(self, key: str) -> str:
        return f"{self.url}/{check_key(key)}"

    def key_of(self, url: str) -> str | None:
        """The key of `url` in this store (the inverse of url_of), or None for a URL elsewhere, a local path
        included: a URL from a message (a rollout job's weights) is read only when it is this store's."""
        head, _, key = url.partition(f"{self.url}/")
        if head or not key:
            return None
        try:
            return check_key(key)
        except ValueError:
            return None

    def _path(self, key: str) -> str:
        return f"{self.root}/{check_key(key)}"

    def _sibling(self, path: str, kind: str) -> str:
        parent, name = path.rsplit("/", 1)
        return f"{parent}/{RESERVED}{kind}-{name}-{uuid.uuid4().hex}"

    def _token(self, path: str) -> str | None:
        try:
            return self.fs.cat_file(f"{path}/{MARKER}").decode()
        except (FileNotFoundError, NotADirectoryError):  # no marker, or `path` is a file
            return None

    def _upload_tree(self, local: Path, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)
        for source in sorted(local.rglob("*")):
            target = f"{path}/{source.relative_to(local).as_posix()}"
            if source.is_dir():
                self.fs.makedirs(target, exist_ok=True)
            else:
                self.fs.put_file(str(source), target)
        self.fs.pipe_file(f"{path}/{MARKER}", uuid.uuid4().hex.encode())

    def put_dir(self, local: Path, key: str) -> str:
        """Upload the tree at `local` as `key` (replacing what was there); readers see the old copy or
        nothing until the new one is complete. Returns `url_of(key)`."""
        local, path = Path(local), self._path(key)
        if not local.is_dir():
            raise NotADirectoryError(f"{local} is not a directory")
        if not self.local:
            self.delete(key)
            self._upload_tree(local, path)
            return self.url_of(key)
        staging = self._sibling(path, "partial")
        try:
            self._upload_tree(local, staging)
            for _ in range(COPY_ATTEMPTS):
                if self.fs.exists(path):
                    old = self._sibling(path, "old")
                    os.rename(path, old)
                    shutil.rmtree(old, ignore_errors=True)
                try:
                    os.rename(staging, path)
                    break
                except OSError:  # another writer put the key back in between: move it aside again
                    continue
            else:
                raise OSError(f"could not replace {self.url_of(key)}: other writers keep putting it")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self.url_of(key)

    def get_dir(self, key: str, local: Path) -> Path:
        """Download the complete directory `key` into `local` (replacing it); FileNotFoundError if the
        store holds no complete copy."""
        local, path = Path(local), self._path(key)
        local.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(COPY_ATTEMPTS):
            token = self._token(path)
            if token is None:
                raise FileNotFoundError(f"no complete artifact at {self.url_of(key)}")
            staging = local.parent / f"{RESERVED}partial-{local.name}-{uuid.uuid4().hex}"
            try:
                staging.mkdir()
                for source in self.fs.find(path):
                    relative = source[len(path) + 1 :]
                    if relative == MARKER:
                        continue
                    target = staging / relative
                    target.parent.mkdir(parents=True, exist_ok=True)
                    self.fs.get_file(source, str(target))
                if self._token(path) != token:
                    continue
                if local.is_dir():
                    shutil.rmtree(local)
                elif local.exists():
                    local.unlink()
                staging.rename(local)
                return local
            except FileNotFoundError:  # replaced or deleted while we copied: read the new copy
                continue
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        raise FileNotFoundError(f"{self.url_of(key)} kept changing while it was downloaded")

    def exists(self, key: str) -> bool:
        """A complete directory, or a file, is at `key`."""
        path = self._path(key)
        return self._token(path) is not None or self.fs.isfile(path)

    def list_dirs(self, prefix: str) -> list[str]:
        """Keys of the complete directories directly under `prefix` ('' for the root), sorted."""
        prefix = prefix.rstrip("/")
        path = self._path(prefix) if prefix else self.root
        try:
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        keys = []
        for entry in entries:
            name = PurePosixPath(entry["name"].rstrip("/")).name
            complete = entry["type"] == "directory" and not name.startswith(RESERVED)
            if complete and self._token(f"{path}/{name}") is not None:
                keys.append(f"{prefix}/{name}" if prefix else name)
        return sorted(keys)

    def delete(self, key: str) -> None:
        """Remove `key` and everything under it; a missing key is fine. The marker goes first, so a
        half-deleted directory is never taken for a complete one."""
        path = self._path(key)
        if self.local and Path(path).is_dir():
            old = self._sibling(path, "old")
            try:
                os.rename(path, old)
            except FileNotFoundError:
                return
            shutil.rmtree(old, ignore_errors=True)
            return
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            self.fs.rm_file(f"{path}/{MARKER}")
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path, recursive=True)

    def put_bytes(self, key: str, data: bytes) -> None:
        """Write one file; readers see the old content or the new, never part of it."""
        path = self._path(key)
        if not self.local:  # an object store's put is atomic
            self.fs.pipe_file(path, data)
            return
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        staging = self._sibling(path, "partial")
        try:
            Path(staging).write_bytes(data)
            os.replace(staging, path)
        finally:
            Path(staging).unlink(missing_ok=True)

    def get_bytes(self, key: str) -> bytes:
        return self.fs.cat_file(self._path(key))
