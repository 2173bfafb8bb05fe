"""Dataset test fixtures: a team with a member and a viewer, another team, uploads in a temp media dir."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from workbench.accounts.models import Membership, Role, Team


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def team(db):
    return Team.objects.create(name="alpha")


@pytest.fixture
def other_team(db):
    return Team.objects.create(name="beta")


def _user(django_user_model, team, name, role):
    user = django_user_model.objects.create_user(username=name, password=f"pw-{name}-123")
    Membership.objects.create(user=user, team=team, role=role)
    return user


@pytest.fixture
def member(team, django_user_model):
    return _user(django_user_model, team, "ada", Role.MEMBER)


@pytest.fixture
def viewer(team, django_user_model):
    return _user(django_user_model, team, "vic", Role.VIEWER)


@pytest.fixture
def outsider(other_team, django_user_model):
    return _user(django_user_model, other_team, "eve", Role.MEMBER)


@pytest.fixture
def upload_file():
    def make(name: str, content: bytes | str) -> SimpleUploadedFile:
        return SimpleUploadedFile(name, content.encode() if isinstance(content, str) else content)

    return make
