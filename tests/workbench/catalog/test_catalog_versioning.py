"""The catalog versioning base, exercised through a real catalog model (tool schemas):
edits make new immutable versions, names are unique among live items, delete is soft."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from workbench.catalog import selectors, services
from workbench.catalog.models import ImmutableVersionError
from workbench.toolschemas.models import ToolSchema, ToolSchemaVersion

PARAMETERS = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}


def calculator_version(description: str = "Evaluate arithmetic.") -> ToolSchemaVersion:
    return ToolSchemaVersion(
        function_name="calculator",
        description=description,
        parameters=PARAMETERS,
        implementation="builtin",
        builtin="calculator",
    )


@pytest.fixture
def tool(team, member):
    version = services.catalog_item_create(
        item=ToolSchema(team=team, name="calc"), version=calculator_version(), user=member
    )
    return version.item


def test_the_first_version_is_number_one_and_records_its_author(tool, member):
    version = tool.latest_version()
    assert (version.number, version.created_by, tool.created_by) == (1, member, member)


def test_an_edit_adds_the_next_version_and_leaves_the_old_one_unchanged(tool, member):
    services.catalog_version_create(item=tool, version=calculator_version("Evaluate maths."), user=member)
    assert [v.number for v in selectors.catalog_versions(item=tool)] == [2, 1]
    assert tool.versions.get(number=1).description == "Evaluate arithmetic."
    assert tool.latest_version().description == "Evaluate maths."


def test_a_saved_version_cannot_be_changed_or_deleted(tool):
    version = tool.latest_version()
    version.description = "sneaky edit"
    with pytest.raises(ImmutableVersionError):
        version.save()
    with pytest.raises(ImmutableVersionError):
        version.delete()


def test_version_next_number_follows_the_highest(tool, member):
    services.catalog_version_create(item=tool, version=calculator_version("v2"), user=member)
    assert services.version_next_number(item=tool) == 3


def test_a_viewer_cannot_create_or_edit(team, viewer, tool):
    with pytest.raises(PermissionDenied):
        services.catalog_item_create(
            item=ToolSchema(team=team, name="x"), version=calculator_version(), user=viewer
        )
    with pytest.raises(PermissionDenied):
        services.catalog_version_create(item=tool, version=calculator_version("v2"), user=viewer)


def test_a_duplicate_live_name_in_the_team_is_refused_and_nothing_is_saved(team, member, tool):
    with pytest.raises(ValidationError):
        services.catalog_item_create(
            item=ToolSchema(team=team, name="calc"), version=calculator_version(), user=member
        )
    assert ToolSchema.objects.count() == 1


def test_the_same_name_in_another_team_is_fine(other_team, outsider, tool):
    services.catalog_item_create(
        item=ToolSchema(team=other_team, name="calc"), version=calculator_version(), user=outsider
    )
    assert ToolSchema.objects.filter(name="calc").count() == 2


def test_soft_delete_hides_the_item_keeps_its_versions_and_frees_the_name(team, member, tool):
    services.catalog_item_soft_delete(item=tool, user=member)
    assert list(selectors.catalog_items_for(model=ToolSchema, user=member)) == []
    assert ToolSchemaVersion.objects.filter(item=tool).count() == 1
    services.catalog_item_create(
        item=ToolSchema(team=team, name="calc"), version=calculator_version(), user=member
    )


def test_list_selector_shows_live_items_of_the_users_teams_with_the_latest_number(tool, member, outsider):
    services.catalog_version_create(item=tool, version=calculator_version("v2"), user=member)
    [listed] = selectors.catalog_items_for(model=ToolSchema, user=member)
    assert listed.latest_number == 2
    assert list(selectors.catalog_items_for(model=ToolSchema, user=outsider)) == []


def test_latest_versions_offers_the_newest_version_of_each_live_item(team, member, tool):
    services.catalog_version_create(item=tool, version=calculator_version("v2"), user=member)
    gone = services.catalog_item_create(
        item=ToolSchema(team=team, name="gone"), version=calculator_version(), user=member
    )
    services.catalog_item_soft_delete(item=gone.item, user=member)
    assert [(v.item.name, v.number) for v in selectors.latest_versions(ToolSchemaVersion)] == [("calc", 2)]


def test_versions_are_scoped_through_their_item(tool, member, outsider):
    from workbench.accounts.access import team_queryset

    assert team_queryset(ToolSchemaVersion, member).count() == 1
    assert team_queryset(ToolSchemaVersion, outsider).count() == 0


def test_version_diff_marks_added_removed_and_unchanged_lines():
    lines = services.version_diff(old_text="a\nb\nc", new_text="a\nB\nc")
    assert [(line.kind, line.text) for line in lines] == [
        ("hunk", "@@ -1,3 +1,3 @@"),
        ("same", " a"),
        ("del", "-b"),
        ("add", "+B"),
        ("same", " c"),
    ]


def test_version_diff_of_equal_texts_is_empty():
    assert services.version_diff(old_text="same\n", new_text="same\n") == []
