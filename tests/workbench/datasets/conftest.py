"""Dataset test fixtures (teams and users come from tests/workbench/conftest.py)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def upload_file():
    """upload_file(name, content) -> an uploaded file as a form would receive it."""

    def make(name: str, content: bytes | str) -> SimpleUploadedFile:
        return SimpleUploadedFile(name, content.encode() if isinstance(content, str) else content)

    return make
