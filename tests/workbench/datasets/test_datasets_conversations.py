"""Conversations datasets (SFT data): uploads validated message by message, stored normalised, rendered
by the trainers' SFT renderer as stored, and previewed turn by turn."""

from __future__ import annotations

import json

import pytest

from workbench.datasets import services
from workbench.datasets.models import Dataset, DatasetKind, DatasetRow, UploadStatus

CALL = {"type": "function", "function": {"name": "calculator", "arguments": '{"expression": "12 * 34"}'}}
GOOD = {
    "messages": [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "What is 12 * 34?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "name": "calculator", "content": 408},
        {"role": "assistant", "content": "<think>done</think>\n\\boxed{408}"},
    ],
    "answer": 408,
    "source": "hand-written",
}
DIRECT = {"messages": [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}]}


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _upload(team, user, upload_file, rows, name="experts", **kwargs):
    file = upload_file(f"{name}.jsonl", _jsonl(rows))
    upload = services.dataset_upload_create(
        team=team, user=user, name=name, file=file, kind=DatasetKind.CONVERSATIONS, **kwargs
    )
    return services.dataset_upload_process(upload_id=upload.pk)


def test_conversations_are_stored_normalised(team, member, upload_file):
    upload = _upload(team, member, upload_file, [GOOD, DIRECT], eval_ratio=0.0)
    assert upload.status == UploadStatus.DONE, upload.errors
    assert upload.version.item.kind == DatasetKind.CONVERSATIONS
    row = upload.version.rows.get(index=0)
    assert (row.prompt, row.answer, row.metadata) == ("What is 12 * 34?", "408", {"source": "hand-written"})
    assert row.messages[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"name": "calculator", "arguments": {"expression": "12 * 34"}}],
    }
    assert row.messages[3] == {"role": "tool", "content": "408", "name": "calculator"}
    stats = upload.version.statistics["fields"]
    assert stats["messages"]["length"] == {"min": 2.0, "max": 5.0, "mean": 3.5}


def test_a_new_version_keeps_the_kind(team, member, upload_file):
    dataset = _upload(team, member, upload_file, [GOOD]).version.item
    file = upload_file("more.jsonl", _jsonl([DIRECT, GOOD]))
    upload = services.dataset_upload_create(team=team, user=member, name="", file=file, dataset=dataset)
    upload = services.dataset_upload_process(upload_id=upload.pk)
    assert upload.status == UploadStatus.DONE and upload.version.number == 2
    assert upload.version.rows.get(index=0).messages == DIRECT["messages"]


def _turns(*roles_and_contents):
    return [{"role": role, "content": content} for role, content in roles_and_contents]


ASSISTANT_CALLS = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"name": "calculator", "arguments": {}}],
}


def calling(call: dict) -> list[dict]:
    """A well-ordered conversation whose one call is `call`."""
    return [
        *_turns(("user", "q")),
        {**ASSISTANT_CALLS, "tool_calls": [call]},
        *_turns(("tool", "4"), ("assistant", "4")),
    ]


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (None, "field messages: required: a non-empty list of {role, content} messages"),
        ("[1, 2", "field messages: invalid JSON: Expecting ',' delimiter at column 6"),
        (_turns(("assistant", "hi")), "field messages[0].role: the conversation starts with a user message"),
        (_turns(("user", "q"), ("robot", "a")), "field messages[1].role: must be one of system, user"),
        (_turns(("user", "q"), ("assistant", ["a"])), "field messages[1].content: must be text, got list"),
        (_turns(("user", "q")), "field messages[0].role: the conversation ends with an assistant message"),
        (
            _turns(("user", "q"), ("tool", "4"), ("assistant", "4")),
            "field messages[1].role: a tool response answers a call of the assistant message before it",
        ),
        (
            [*_turns(("user", "q")), ASSISTANT_CALLS, *_turns(("assistant", "4"))],
            "field messages[1].tool_calls: 1 call(s) have no tool response",
        ),
        (
            calling({"name": " ", "arguments": {}}),
            "field messages[1].tool_calls[0].name: required: the tool's name",
        ),
        (
            calling({"function": {"name": "c", "arguments": "[1]"}}),
            "field messages[1].tool_calls[0].arguments: must be a JSON object",
        ),
        (
            [{"role": "user", "content": "q", "tool_calls": []}, *_turns(("assistant", "a"))],
            "field messages[0].tool_calls: only assistant messages call tools",
        ),
        (
            _turns(("user", "q"), ("user", "again"), ("assistant", "a")),
            "field messages[1].role: a user message is answered by an assistant message",
        ),
        (
            _turns(("user", "q"), ("system", "late"), ("assistant", "a")),
            "field messages[1].role: system messages come before the first user message",
        ),
    ],
)
def test_malformed_conversations_are_refused_by_line_and_field(team, member, upload_file, messages, error):
    row = {"answer": "1"} if messages is None else {"messages": messages}
    upload = _upload(team, member, upload_file, [DIRECT, row])
    assert upload.status == UploadStatus.FAILED
    assert len(upload.errors) == 1 and upload.errors[0].startswith(f"line 2, {error}"), upload.errors
    assert not Dataset.objects.exists() and not DatasetRow.objects.exists()


@pytest.mark.slow
def test_every_stored_conversation_renders_for_sft(team, member, upload_file):
    """What validation accepts, the worker's SFT renderer takes: assistant tokens trained, the rest not."""
    from trainers.models.tiny import build_tokenizer
    from trainers.templates import TEMPLATES
    from trainers.tools.toolset import Toolset
    from trainers.training.sft import render_expert
    from trainers.workbench_api import demo_expert_conversations

    rows = [GOOD, DIRECT, *demo_expert_conversations(6)]
    version = _upload(team, member, upload_file, rows, eval_ratio=0.0).version
    template, tools = TEMPLATES.get("qwen_tool")(), Toolset.build(["calculator"]).specs()
    tokenizer = build_tokenizer()
    for row in version.rows.all():
        trajectory = render_expert(row.messages, template=template, tokenizer=tokenizer, tools=tools)
        roles = [turn.role for turn in trajectory.turns]
        assert roles[0] == "prompt" and roles[-1] == "assistant"
        assert all(set(t.loss_mask) == {int(t.role == "assistant")} for t in trajectory.turns if t.token_ids)


def test_preview_shows_each_conversation_turn_by_turn(client_for, team, member, upload_file):
    hostile = {"messages": _turns(("user", "<script>alert(1)</script>"), ("assistant", "<b>no</b>"))}
    version = _upload(team, member, upload_file, [GOOD, hostile], eval_ratio=0.0).version
    body = client_for(member).get(version.item.get_absolute_url()).content.decode()
    first = body[body.index('id="conversation-0"') : body.index('id="conversation-1"')]
    classes = [part.split('"')[0].split() for part in first.split('class="turn role-')[1:]]
    assert [c[0] for c in classes] == ["system", "user", "assistant", "tool", "assistant"]
    assert [c[1] for c in classes] == [
        "turn-masked",
        "turn-masked",
        "turn-policy",
        "turn-masked",
        "turn-policy",
    ]
    assert "calculator" in first and "12 * 34" in first and "408" in first
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<b>no</b>" not in body
    partial = client_for(member).get(f"/datasets/{version.item.pk}/v/1/rows/?split=train").content.decode()
    assert 'id="conversation-1"' in partial and 'class="turn role-user turn-masked"' in partial
