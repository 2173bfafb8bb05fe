"""Invitations: nobody is put in a team by someone else, and only the user changes their current team.

The attack these close: anyone could create a team, add any user to it, and the victim's next login
made that team (first by name) their current one, so their uploads and runs landed in it.
"""

import pytest
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import Http404
from django.test import Client

from tests.workbench.support.users import PASSWORD
from workbench.accounts import services
from workbench.accounts.models import Invitation, InvitationStatus, Membership
from workbench.accounts.selectors import current_membership, role_for
from workbench.datasets.models import DatasetUpload


def logged_in(user) -> Client:
    """A client logged in through the real login form, as a fresh browser would be."""
    client = Client()
    response = client.post("/login/", {"username": user.username, "password": PASSWORD})
    assert response.status_code == 302, response.content.decode()
    return client


def invite(client: Client, team, username: str, role: str = "member") -> list[str]:
    """Invite through the team page; the messages the page then shows."""
    response = client.post(f"/teams/{team.pk}/invite/", {"username": username, "role": role}, follow=True)
    assert response.redirect_chain == [(f"/teams/{team.pk}/", 302)]
    return [str(message) for message in response.context["messages"]]


def upload_dataset(client: Client, name: str) -> DatasetUpload:
    data = {"name": name, "description": "", "split_method": "ratio", "eval_ratio": "0.2", "split_seed": "1"}
    content = b'{"question": "1 + 1?", "answer": "2"}\n'
    data |= {"split_column": "", "note": "", "file": SimpleUploadedFile("d.jsonl", content)}
    assert client.post("/datasets/new/", data).status_code == 302
    return DatasetUpload.objects.get(name=name)


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


# The capture, end to end through the real pages ---------------------------------------------------


def test_a_stranger_cannot_capture_a_users_team(make_user, member, team):
    attacker = make_user("mallory")
    attacker_client = logged_in(attacker)
    attacker_client.post("/teams/", {"name": "aaa-capture"})  # sorts before the victim's team
    capture = attacker.memberships.get().team
    invite(attacker_client, capture, member.username)

    victim = logged_in(member)
    assert victim.get("/").context["current_team"] == team
    assert role_for(user=member, team=capture) is None
    assert upload_dataset(victim, "secret-data").team == team


def test_accepting_an_invitation_leaves_the_current_team_alone_across_logins(make_user, member, team):
    attacker = make_user("mallory")
    capture = services.team_create(name="aaa-capture", creator=attacker)
    services.invitation_create(actor=attacker, team=capture, username=member.username)

    victim = logged_in(member)
    invitation = Invitation.objects.get(invitee=member)
    assert victim.post(f"/teams/invitations/{invitation.pk}/accept/").status_code == 302
    assert role_for(user=member, team=capture) == "member"

    again = logged_in(member)
    assert again.get("/").context["current_team"] == team
    assert upload_dataset(again, "still-mine").team == team


def test_the_users_own_switch_is_kept_across_logins(member, team, other_team):
    Membership.objects.create(user=member, team=other_team, role="viewer")
    logged_in(member).post("/teams/switch/", {"team": other_team.pk})
    assert logged_in(member).get("/").context["current_team"] == other_team


# Inviting -----------------------------------------------------------------------------------------


def test_invite_answers_the_same_whether_or_not_the_username_exists(client_for, admin, team, make_user):
    make_user("newcomer")
    client = client_for(admin)
    assert invite(client, team, "newcomer") == invite(client, team, "no-such-user")
    assert invite(client, team, admin.username) == invite(client, team, "no-such-user")
    page = client.get(f"/teams/{team.pk}/").content.decode()
    assert "newcomer" not in page and "no such user" not in page.lower()


def test_an_invitation_is_not_a_membership(admin, team, make_user):
    newcomer = make_user("newcomer")
    invitation = services.invitation_create(actor=admin, team=team, username="newcomer", role="viewer")
    assert (invitation.status, invitation.role, invitation.inviter) == ("pending", "viewer", admin)
    assert role_for(user=newcomer, team=team) is None


def test_only_admins_invite(client_for, member, team, make_user):
    make_user("newcomer")
    with pytest.raises(PermissionDenied):
        services.invitation_create(actor=member, team=team, username="newcomer")
    assert client_for(member).post(f"/teams/{team.pk}/invite/", {"username": "newcomer"}).status_code == 403
    assert not Invitation.objects.exists()


def test_inviting_again_updates_the_pending_invitation(admin, team, make_user):
    make_user("newcomer")
    services.invitation_create(actor=admin, team=team, username="newcomer", role="viewer")
    services.invitation_create(actor=admin, team=team, username="newcomer", role="admin")
    assert list(Invitation.objects.values_list("role", "status")) == [("admin", "pending")]


def test_unknown_users_and_members_get_no_invitation(admin, member, team):
    assert services.invitation_create(actor=admin, team=team, username="nobody") is None
    assert services.invitation_create(actor=admin, team=team, username=member.username) is None
    assert not Invitation.objects.exists()


# Answering -----------------------------------------------------------------------------------------


def test_the_invitee_sees_pending_invitations_and_accepts_one(client_for, admin, team, make_user):
    newcomer = make_user("newcomer")
    invitation = services.invitation_create(actor=admin, team=team, username="newcomer", role="viewer")
    client = client_for(newcomer)
    page = client.get("/teams/").content.decode()
    assert 'id="invitations"' in page and team.name in page and admin.username in page
    assert client.get("/").context["pending_invitations"] == 1
    client.post(f"/teams/invitations/{invitation.pk}/accept/")
    assert role_for(user=newcomer, team=team) == "viewer"
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.ACCEPTED and invitation.responded_at is not None
    assert client.get("/").context["pending_invitations"] == 0


def test_a_user_with_no_team_gets_the_accepted_one_as_current(admin, team, make_user):
    newcomer = make_user("newcomer")
    invitation = services.invitation_create(actor=admin, team=team, username="newcomer")
    services.invitation_accept(user=newcomer, invitation_id=invitation.pk)
    assert current_membership(user=newcomer).team == team


def test_declining_creates_no_membership_and_cannot_be_undone_by_accepting(admin, team, make_user):
    newcomer = make_user("newcomer")
    invitation = services.invitation_create(actor=admin, team=team, username="newcomer")
    services.invitation_decline(user=newcomer, invitation_id=invitation.pk)
    with pytest.raises(Http404):
        services.invitation_accept(user=newcomer, invitation_id=invitation.pk)
    assert role_for(user=newcomer, team=team) is None
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.DECLINED


def test_nobody_else_can_answer_an_invitation(client_for, admin, team, make_user, outsider):
    make_user("newcomer")
    invitation = services.invitation_create(actor=admin, team=team, username="newcomer")
    client = client_for(outsider)
    assert client.post(f"/teams/invitations/{invitation.pk}/accept/").status_code == 404
    assert client.post(f"/teams/invitations/{invitation.pk}/decline/").status_code == 404
    assert role_for(user=outsider, team=team) is None
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.PENDING


def test_choosing_a_team_one_is_not_in_is_refused(member, other_team):
    with pytest.raises(PermissionDenied):
        services.current_team_choose(user=member, team=other_team)
