"""Writes for agent programs: every save is a new version, checked as the trainers check a run's program."""

from django.core.exceptions import ValidationError

from trainers.workbench_api import AgentProgramError, check_agent_program
from workbench.accounts.models import Team
from workbench.agents.models import AgentProgram, AgentProgramVersion
from workbench.catalog.services import catalog_item_create, catalog_version_create

# The name a run's inlined program has (trainers' rollout.agent.source): its errors read the same here.
PROGRAM_FILENAME = "agent_program.py"


def _version(*, source: str, description: str, note: str) -> AgentProgramVersion:
    """The unsaved version; a ValidationError on `source` for a syntax error or no `run(task, client)`."""
    try:
        check_agent_program(source, PROGRAM_FILENAME)
    except AgentProgramError as exc:
        raise ValidationError({"source": str(exc)}) from None
    return AgentProgramVersion(source=source, description=description, note=note)


def agent_program_create(
    *, team: Team, user, name: str, source: str, description: str = "", note: str = ""
) -> AgentProgramVersion:
    version = _version(source=source, description=description, note=note)
    return catalog_item_create(item=AgentProgram(team=team, name=name.strip()), version=version, user=user)


def agent_program_update(
    *, item: AgentProgram, user, source: str, description: str = "", note: str = ""
) -> AgentProgramVersion:
    version = _version(source=source, description=description, note=note)
    return catalog_version_create(item=item, version=version, user=user)
