"""Team pages: create teams, invite members (admins), answer invitations, switch the current team."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from workbench.accounts import selectors, services
from workbench.accounts.access import get_scoped_or_404, role_at_least
from workbench.accounts.forms import InvitationForm, MembershipRoleForm, TeamCreateForm
from workbench.accounts.models import Membership, Role, Team


def team_list(request):
    form = TeamCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = services.team_create(name=form.cleaned_data["name"], creator=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Team {team} created; you are its admin.")
            return redirect("accounts:team_detail", pk=team.pk)
    context = {
        "memberships": selectors.memberships_for_user(user=request.user),
        "invitations": selectors.pending_invitations_for(user=request.user),
        "form": form,
    }
    return render(request, "accounts/team_list.html", context)


def team_detail(request, pk: int):
    team = get_scoped_or_404(Team, request.user, pk)
    role = selectors.role_for(user=request.user, team=team)
    context = {
        "team": team,
        "role": role,
        "is_admin": role_at_least(role, Role.ADMIN),
        "memberships": selectors.team_memberships(team=team),
        "invite_form": InvitationForm(),
        "roles": Role.choices,
    }
    return render(request, "accounts/team_detail.html", context)


@require_POST
def invitation_create(request, pk: int):
    team = get_scoped_or_404(Team, request.user, pk, min_role=Role.ADMIN)
    form = InvitationForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give a username and a role.")
        return redirect("accounts:team_detail", pk=team.pk)
    services.invitation_create(actor=request.user, team=team, **form.cleaned_data)
    # The same answer whether or not the user exists: the page does not confirm usernames.
    messages.info(
        request,
        f"If that user exists and is not in {team} yet, they are invited; they join when they accept.",
    )
    return redirect("accounts:team_detail", pk=team.pk)


@require_POST
def invitation_accept(request, pk: int):
    membership = services.invitation_accept(user=request.user, invitation_id=pk)
    role = membership.get_role_display().lower()
    messages.success(request, f"You joined {membership.team} as {role}; switch to it from the team menu.")
    return redirect("accounts:team_list")


@require_POST
def invitation_decline(request, pk: int):
    services.invitation_decline(user=request.user, invitation_id=pk)
    messages.info(request, "Invitation declined.")
    return redirect("accounts:team_list")


@require_POST
def membership_change_role(request, pk: int):
    membership = get_scoped_or_404(Membership, request.user, pk, min_role=Role.ADMIN)
    form = MembershipRoleForm(request.POST)
    if form.is_valid():
        _run_service(
            request,
            services.membership_change_role,
            actor=request.user,
            membership=membership,
            **form.cleaned_data,
        )
    return redirect("accounts:team_detail", pk=membership.team_id)


@require_POST
def membership_remove(request, pk: int):
    membership = get_scoped_or_404(Membership, request.user, pk, min_role=Role.ADMIN)
    _run_service(request, services.membership_remove, actor=request.user, membership=membership)
    if membership.user_id == request.user.pk:
        return redirect("accounts:team_list")
    return redirect("accounts:team_detail", pk=membership.team_id)


@require_POST
def team_switch(request):
    team = get_scoped_or_404(Team, request.user, request.POST.get("team"))
    services.current_team_choose(user=request.user, team=team)
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}, request.is_secure()):
        next_url = reverse("home")
    return HttpResponseRedirect(next_url)


def _run_service(request, service, **kwargs) -> None:
    try:
        service(**kwargs)
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, message)
    else:
        messages.success(request, "Saved.")
