"""The access layer: every query for team-owned rows goes through these helpers.

Rules: rows of a team the user is not in do not exist for them (404, by URL, form field or API);
rows of their team with too low a role answer 403. A model says where its team is with a
`team_field` class attribute ("team" by default, e.g. "item__team" for catalog versions).
"""

from functools import wraps

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model, QuerySet
from django.forms import ModelChoiceField
from django.http import Http404
from django.shortcuts import redirect

from workbench.accounts.models import ROLE_RANK, Membership, Role, Team


def role_at_least(role: str | None, min_role: str) -> bool:
    return role is not None and ROLE_RANK[Role(role)] >= ROLE_RANK[Role(min_role)]


def roles_at_least(min_role: str) -> list[str]:
    return [role for role in Role.values if role_at_least(role, min_role)]


def team_field_of(model: type[Model]) -> str | None:
    """Lookup path from the model to its team, or None when the model is not team-owned."""
    if issubclass(model, Team):
        return "id"
    explicit = getattr(model, "team_field", None)
    if explicit:
        return explicit
    field_names = {field.name for field in model._meta.get_fields()}
    return "team" if "team" in field_names else None


def team_id_of(obj: Model) -> int:
    """The id of the team that owns obj, following its model's team_field."""
    path = team_field_of(type(obj))
    if path is None:
        raise TypeError(f"{type(obj).__name__} is not team-owned")
    if path == "id":
        return obj.pk
    *hops, last = path.split("__")
    for hop in hops:
        obj = getattr(obj, hop)
    return getattr(obj, f"{last}_id")


def user_team_ids(user, min_role: str = Role.VIEWER) -> QuerySet:
    """Subquery of the ids of teams where user holds at least min_role."""
    return Membership.objects.filter(user_id=user.pk, role__in=roles_at_least(min_role)).values("team_id")


def team_queryset(model_or_qs: type[Model] | QuerySet, user, min_role: str = Role.VIEWER) -> QuerySet:
    """Only the rows owned by teams where user holds at least min_role (none for anonymous users)."""
    qs = model_or_qs if isinstance(model_or_qs, QuerySet) else model_or_qs._default_manager.all()
    if user is None or not user.is_authenticated:
        return qs.none()
    path = team_field_of(qs.model)
    if path is None:
        raise TypeError(f"{qs.model.__name__} is not team-owned; give it a team_field")
    return qs.filter(**{f"{path}__in": user_team_ids(user, min_role)})


def role_for_team_id(user, team_id: int) -> str | None:
    return Membership.objects.filter(user_id=user.pk, team_id=team_id).values_list("role", flat=True).first()


def request_role_for_team_id(request, team_id: int) -> str | None:
    """The request's user's role in a team; no query when it is the current team (the middleware read it)."""
    if request.team is not None and request.team.pk == team_id:
        return request.team_role
    return role_for_team_id(request.user, team_id)


def require_role(*, user, team: Team | int, min_role: str) -> str:
    """The user's role in team; PermissionDenied (403) when it is below min_role."""
    role = role_for_team_id(user, team if isinstance(team, int) else team.pk)
    if not role_at_least(role, min_role):
        raise PermissionDenied(f"This needs the {min_role} role.")
    return role


def get_scoped_or_404(model_or_qs: type[Model] | QuerySet, user, pk, min_role: str = Role.VIEWER) -> Model:
    """The row with this pk if one of user's teams owns it (else 404) and user's role suffices (else 403).
    One query for a viewer's read: the scoped queryset already holds only teams where user is a viewer."""
    qs = team_queryset(model_or_qs, user)
    try:
        obj = qs.get(pk=pk)
    except (qs.model.DoesNotExist, ValueError, TypeError, ValidationError) as exc:  # unknown or malformed pk
        raise Http404 from exc
    if min_role != Role.VIEWER:
        require_role(user=user, team=team_id_of(obj), min_role=min_role)
    return obj


def scope_choices(qs: QuerySet, *, user, team: Team | None = None) -> QuerySet:
    """Restrict a choice queryset to user's teams (and to one team when given); teams need member role."""
    if issubclass(qs.model, Team):
        return team_queryset(qs, user, Role.MEMBER)
    path = team_field_of(qs.model)
    if path is None:
        return qs
    qs = team_queryset(qs, user)
    return qs.filter(**{path: team}) if team is not None else qs


class TeamScopedFormMixin:
    """Form mixin: every model choice field offers only the user's teams' rows.

    Pass user= (and team= to pin choices to one team). A posted id of another team's row then fails
    validation like any unknown choice, so it can never be attached to this team's object.
    """

    def __init__(self, *args, user, team: Team | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.team = team
        for field in self.fields.values():
            if isinstance(field, ModelChoiceField):
                field.queryset = scope_choices(field.queryset, user=user, team=team)


def team_role_required(min_role: str = Role.VIEWER):
    """View decorator: the current team (request.team) must exist and user's role there be >= min_role."""

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if getattr(request, "team", None) is None:
                return redirect("accounts:team_list")
            if not role_at_least(request.team_role, min_role):
                raise PermissionDenied(f"This needs the {min_role} role in {request.team}.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator
