import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from workbench.catalog.services import version_diff
from workbench.prompts import rendering, services

SIMPLE = "<|im_start|>user\n{{ question }}<|im_end|>\n<|im_start|>assistant\n"


def _create(team, user, source=SIMPLE, name="simple", family="qwen_tool"):
    return services.prompt_template_create(team=team, user=user, name=name, family=family, source=source)


def test_families_and_presets_come_from_the_trainers_registry():
    assert {"qwen_tool", "torl", "artist", "tool_n1"} <= set(rendering.family_names())
    assert "<tool_call>" in rendering.family_source("qwen_tool")


def test_create_renders_in_the_sandbox(team, member):
    version = _create(team, member)
    text = rendering.render(
        family="qwen_tool", source=version.source, question="2+2?", tools=[], observation=None
    )
    assert text == "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"


def test_python_internals_attack_is_refused_with_a_clear_error(team, member):
    with pytest.raises(ValidationError) as exc:
        _create(team, member, source="{{ ''.__class__.__mro__ }}")
    assert exc.value.message_dict == {
        "source": [
            "template uses a forbidden operation: access to attribute '__class__' of 'str' object is unsafe."
        ]
    }


def test_syntax_error_names_the_line(team, member):
    with pytest.raises(ValidationError) as exc:
        _create(team, member, source="line one\n{{ question }}\n{% if %}")
    assert exc.value.message_dict["source"] == [
        "template syntax error on line 3: Expected an expression, got 'end of statement block'"
    ]


def test_unknown_variable_is_an_error(team, member):
    with pytest.raises(ValidationError) as exc:
        _create(team, member, source="{{ questoin }}")
    assert "'questoin' is undefined" in exc.value.message_dict["source"][0]


def test_unknown_family_and_duplicate_name(team, member):
    with pytest.raises(ValidationError) as exc:
        _create(team, member, family="nope")
    assert exc.value.message_dict["family"][0].startswith("unknown template family 'nope'")
    _create(team, member)
    with pytest.raises(ValidationError) as exc:
        _create(team, member)
    assert "This team already has one with that name." in exc.value.messages


def test_viewer_cannot_create(team, viewer):
    with pytest.raises(PermissionDenied):
        _create(team, viewer)


def test_edit_creates_version_two_with_a_diff(team, member):
    first = _create(team, member)
    second = services.prompt_template_update(
        item=first.item, user=member, family="qwen_tool", source=SIMPLE.replace("user", "user (v2)")
    )
    first.refresh_from_db()
    assert (first.number, second.number, first.source) == (1, 2, SIMPLE)
    lines = [
        (d.kind, d.text)
        for d in version_diff(old_text=first.canonical_text(), new_text=second.canonical_text())
    ]
    assert ("del", "-<|im_start|>user") in lines and ("add", "+<|im_start|>user (v2)") in lines


def test_preview_counts_tokens_and_reports_errors():
    common = {"family": "qwen_tool", "tools": [], "observation": None, "tokenizer": "tiny"}
    ok = rendering.preview(source="{{ question }}", question="12", **common)
    assert (ok.text, ok.tokens, ok.error) == ("12", 2, None)  # digits are one token each
    bad = rendering.preview(source="{{ ''.__class__.__mro__ }}", question="q", **common)
    assert bad.error.startswith("template uses a forbidden operation")


def test_empty_source_uses_the_family_prompt_with_tools_and_state():
    spec = rendering.SAMPLE_TOOL
    text = rendering.render(family="qwen_tool", source="", question="Q?", tools=[spec], observation="grid")
    assert '"name": "calculator"' in text and "Current state:\ngrid" in text
