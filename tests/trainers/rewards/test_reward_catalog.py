from trainers.rewards import REWARDS, describe_components, schedule_schema

BRIEF = {"correctness", "format", "torl", "toolrl", "tool_n1", "artist", "otc", "overlong", "env"}


def test_every_component_of_the_brief_is_registered():
    assert set(REWARDS.names()) >= BRIEF


def test_catalog_gives_each_component_a_description_and_params_schema():
    catalog = {c["name"]: c for c in describe_components()}
    assert set(catalog) == set(REWARDS.names())
    assert all(c["description"] for c in catalog.values())
    assert catalog["otc"]["params_schema"]["properties"]["variant"]["enum"] == ["grpo", "ppo"]
    assert catalog["otc"]["params_schema"]["additionalProperties"] is False


def test_schedule_schema_lists_the_kinds():
    kinds = set(schedule_schema()["discriminator"]["mapping"])
    assert kinds == {"constant", "linear", "step", "toolrl_dynamic"}
