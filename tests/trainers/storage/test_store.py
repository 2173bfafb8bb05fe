"""ArtifactStore on a local directory, a file:// URL, fsspec's in-memory filesystem and an S3-compatible
server (these two have no atomic rename, so they take the marker-last path)."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.trainers.storage.s3server import s3_bucket_url, s3_server
from trainers.storage import ArtifactStore
from trainers.storage.store import MARKER


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with s3_server() as endpoint:
        yield endpoint


# The S3 cases start an S3 server and talk HTTP to it: 2-20 s each on a loaded 2-core machine.
@pytest.fixture(params=["path", "file", "memory", pytest.param("s3", marks=pytest.mark.slow)])
def store(request, tmp_path: Path, monkeypatch) -> Iterator[ArtifactStore]:
    if request.param == "s3":
        yield ArtifactStore.from_url(s3_bucket_url(monkeypatch, request.getfixturevalue("s3_endpoint")))
    elif request.param == "memory":
        store = ArtifactStore.from_url(f"memory://store-{uuid.uuid4().hex}")
        yield store
        if store.fs.exists(store.root):
            store.fs.rm(store.root, recursive=True)
    elif request.param == "file":
        yield ArtifactStore.from_url((tmp_path / "store").as_uri())
    else:
        yield ArtifactStore.from_url(str(tmp_path / "store"))


def _tree(root: Path, version: str) -> Path:
    (root / "sub").mkdir(parents=True, exist_ok=True)
    (root / "model.safetensors").write_text(f"weights {version}")
    (root / "sub" / "trainer_state.pt").write_text(f"state {version}")
    return root


def _read(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_put_then_get_round_trips_the_tree(store, tmp_path):
    url = store.put_dir(_tree(tmp_path / "ckpt", "1"), "runs/12/checkpoints/step_000010")
    assert url == store.url_of("runs/12/checkpoints/step_000010")
    assert url.startswith(store.url) and url.endswith("/runs/12/checkpoints/step_000010")
    assert store.exists("runs/12/checkpoints/step_000010")
    got = store.get_dir("runs/12/checkpoints/step_000010", tmp_path / "local" / "step_000010")
    assert _read(got) == {"model.safetensors": "weights 1", "sub/trainer_state.pt": "state 1"}
    assert MARKER not in {p.name for p in got.rglob("*")}


def test_put_replaces_and_get_replaces_the_local_copy(store, tmp_path):
    store.put_dir(_tree(tmp_path / "a", "1"), "runs/1/ckpt")
    b = tmp_path / "b"
    b.mkdir()
    (b / "only.txt").write_text("2")
    store.put_dir(b, "runs/1/ckpt")
    local = tmp_path / "local"
    _tree(local, "stale")
    assert _read(store.get_dir("runs/1/ckpt", local)) == {"only.txt": "2"}


def test_list_dirs_lists_complete_directories_directly_under_the_prefix(store, tmp_path):
    for name in ("step_000020", "step_000010", "best"):
        store.put_dir(_tree(tmp_path / name, name), f"runs/3/checkpoints/{name}")
    store.put_dir(_tree(tmp_path / "other", "x"), "runs/4/checkpoints/step_000010")
    store.put_bytes("runs/3/checkpoints/notes.txt", b"a file, not a directory")
    assert store.list_dirs("runs/3/checkpoints") == [
        "runs/3/checkpoints/best",
        "runs/3/checkpoints/step_000010",
        "runs/3/checkpoints/step_000020",
    ]
    assert store.list_dirs("runs/3/checkpoints/") == store.list_dirs("runs/3/checkpoints")
    assert store.list_dirs("runs/99") == []
    store.put_dir(tmp_path / "best", "top")
    assert store.list_dirs("") == ["top"]


def test_delete_is_recursive_and_missing_is_fine(store, tmp_path):
    store.put_dir(_tree(tmp_path / "a", "1"), "runs/5/checkpoints/step_000010")
    store.delete("runs/5/checkpoints/step_000010")
    assert not store.exists("runs/5/checkpoints/step_000010")
    assert store.list_dirs("runs/5/checkpoints") == []
    with pytest.raises(FileNotFoundError):
        store.get_dir("runs/5/checkpoints/step_000010", tmp_path / "local")
    store.delete("runs/5/checkpoints/step_000010")
    store.delete("never/there")


def test_bytes_round_trip_and_overwrite(store):
    store.put_bytes("runs/7/weights/latest.json", b'{"version": 1}')
    store.put_bytes("runs/7/weights/latest.json", b'{"version": 2}')
    assert store.get_bytes("runs/7/weights/latest.json") == b'{"version": 2}'
    assert store.exists("runs/7/weights/latest.json")
    assert not store.exists("runs/7/weights/other.json")
    with pytest.raises(FileNotFoundError):
        store.get_bytes("runs/7/weights/other.json")
    store.delete("runs/7/weights/latest.json")
    assert not store.exists("runs/7/weights/latest.json")


@pytest.mark.parametrize(
    "key", ["", "/abs/key", "runs/../secrets", "..", "runs/./x", "runs//x", "s3://b/k", "a\\b", ".artifact-x"]
)
def test_keys_outside_the_store_are_refused(store, tmp_path, key):
    (tmp_path / "d").mkdir()
    calls = [
        lambda: store.url_of(key),
        lambda: store.put_dir(tmp_path / "d", key),
        lambda: store.get_dir(key, tmp_path / "x"),
        lambda: store.exists(key),
        lambda: store.delete(key),
        lambda: store.put_bytes(key, b""),
        lambda: store.get_bytes(key),
    ]
    if key:  # '' lists the root
        calls.append(lambda: store.list_dirs(key))
    for call in calls:
        with pytest.raises(ValueError):
            call()


def test_a_reader_never_sees_a_partial_upload(store, tmp_path, monkeypatch):
    """Mid-upload (after the first file), another reader finds no new directory and still reads the old
    copy of a replaced one; an upload that fails half-way leaves nothing visible."""
    store.put_dir(_tree(tmp_path / "old", "old"), "runs/8/replaced")
    reader = ArtifactStore.from_url(store.url)
    seen: list[tuple] = []
    put_file = store.fs.put_file

    def put_file_then_look(lpath, rpath, **kwargs):
        put_file(lpath, rpath, **kwargs)
        listed = reader.list_dirs("runs/8")
        try:
            old = _read(reader.get_dir("runs/8/replaced", tmp_path / f"r{len(seen)}"))
        except FileNotFoundError:
            old = None
        seen.append((reader.exists("runs/8/new"), "runs/8/new" in listed, old))

    monkeypatch.setattr(store.fs, "put_file", put_file_then_look)
    store.put_dir(_tree(tmp_path / "new", "new"), "runs/8/new")
    store.put_dir(_tree(tmp_path / "next", "next"), "runs/8/replaced")
    assert len(seen) == 4
    assert all(not exists and not listed for exists, listed, _ in seen[:2])
    old = {"model.safetensors": "weights old", "sub/trainer_state.pt": "state old"}
    # a local store swaps the finished copy in, an object store drops the old copy first
    assert all(copy == (old if store.local else None) for _, _, copy in seen[2:])
    assert _read(reader.get_dir("runs/8/replaced", tmp_path / "after"))["model.safetensors"] == "weights next"

    def put_file_then_fail(lpath, rpath, **kwargs):
        put_file(lpath, rpath, **kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(store.fs, "put_file", put_file_then_fail)
    with pytest.raises(OSError, match="disk full"):
        store.put_dir(_tree(tmp_path / "broken", "broken"), "runs/8/broken")
    assert not reader.exists("runs/8/broken")
    assert reader.list_dirs("runs/8") == ["runs/8/new", "runs/8/replaced"]


def test_concurrent_readers_get_whole_versions(store, tmp_path):
    """A writer replaces a directory over and over while a reader downloads it: every download is one
    version's files (or, at worst, nothing), never a mix."""
    versions = [_tree(tmp_path / f"v{i}", str(i)) for i in range(2)]
    store.put_dir(versions[0], "runs/9/ckpt")
    done = threading.Event()

    def write():
        for i in range(30):
            store.put_dir(versions[i % 2], "runs/9/ckpt")
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    reads = 0
    while not done.is_set() or reads == 0:
        try:
            files = _read(store.get_dir("runs/9/ckpt", tmp_path / "local"))
        except FileNotFoundError:
            continue
        reads += 1
        version = files["model.safetensors"].split()[-1]
        assert files == {
            "model.safetensors": f"weights {version}",
            "sub/trainer_state.pt": f"state {version}",
        }
    writer.join()


def test_s3_without_s3fs_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "s3fs", None)  # what `import s3fs` meets where it is not installed
    with pytest.raises(ImportError, match="pip install s3fs"):
        ArtifactStore.from_url("s3://bucket/prefix")


def test_key_of_accepts_only_urls_of_this_store(store):
    key = "runs/7/rollout"
    assert store.key_of(store.url_of(key)) == key
    elsewhere = [
        "http://127.0.0.1:8000/runs/7/rollout", f"{store.url}-other/{key}", f"{store.url}/runs/7/../8",
        f"{store.url}/", store.url, f"x{store.url}/{key}", f"{store.url}/.artifact-complete",
    ]  # fmt: skip
    assert [store.key_of(url) for url in elsewhere] == [None] * len(elsewhere)
