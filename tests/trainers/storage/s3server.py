"""An S3-compatible server in a thread (moto's), standing in for a deployment's MinIO in tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from trainers.storage.store import S3_ENDPOINT_ENV


@contextmanager
def s3_server() -> Iterator[str]:
    """Its endpoint URL while it runs (requirements.txt pins s3fs, requirements-dev.txt moto: no skip)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def s3_bucket_url(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> str:
    """A new bucket's s3:// URL on `endpoint`, with the environment a worker would have for it."""
    import s3fs

    monkeypatch.setenv(S3_ENDPOINT_ENV, endpoint)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket = f"artifacts-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}).mkdir(bucket)
    return f"s3://{bucket}/deployment"
