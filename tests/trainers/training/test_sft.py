import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from trainers.models.tiny import build_tokenizer
from trainers.templates.base import TEMPLATES
from trainers.training.sft import render_expert, sft_loss, sft_train

TOOLS = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
MESSAGES = [
    {"role": "system", "content": "ignored: the template writes the system prompt"},
    {"role": "user", "content": "What is 12 * 34?"},
    {
        "role": "assistant",
        "content": "<think>use it</think>",
        "tool_calls": [{"function": {"name": "calculator", "arguments": '{"expression": "12 * 34"}'}}],
    },
    {"role": "tool", "name": "calculator", "content": "408"},
    {"role": "assistant", "content": "<think>done</think>\n\\boxed{408}"},
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def template():
    return TEMPLATES.get("qwen_tool")()


def test_only_assistant_tokens_have_mask_one(tokenizer, template):
    traj = render_expert(MESSAGES, template=template, tokenizer=tokenizer, tools=TOOLS)
    assert [t.role for t in traj.turns] == ["prompt", "assistant", "tool", "assistant"]
    for turn in traj.turns:
        assert set(turn.loss_mask) == ({1} if turn.role == "assistant" else {0})
    policy = [tok for tok, m in zip(traj.response_token_ids, traj.response_loss_mask, strict=True) if m]
    expected_text = (
        '<think>use it</think>\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "12 * 34"}}\n'
        "</tool_call><|im_end|><think>done</think>\n\\boxed{408}<|im_end|>"
    )  # the turn that calls ends the message itself, as in a rollout that stops at the end of the message
    assert tokenizer.decode(policy) == expected_text


def test_glue_is_the_templates_own_tool_response_rendering(tokenizer, template):
    traj = render_expert(MESSAGES, template=template, tokenizer=tokenizer, tools=TOOLS)
    tool_turn = traj.turns[2]
    response = "<tool_response>\n408\n</tool_response>"
    # the policy sampled the turn's end, so the glue leaves it out (turn_closed)
    assert tool_turn.text == f"\n<|im_start|>user\n{response}<|im_end|>\n<|im_start|>assistant\n"
    assert traj.turns[0].text == template.render_prompt(question="What is 12 * 34?", tools=TOOLS)
    assert traj.turns[1].tool_calls[0].arguments == {"expression": "12 * 34"}
    assert traj.turns[1].tool_results[0].output == "408"


def test_conversation_must_start_with_a_user_message(tokenizer, template):
    with pytest.raises(ValueError, match="user message"):
        render_expert(MESSAGES[2:], template=template, tokenizer=tokenizer, tools=TOOLS)


def test_sft_lowers_the_loss_on_the_experts(tokenizer, template):
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config)
    examples = [render_expert(MESSAGES, template=template, tokenizer=tokenizer, tools=TOOLS)] * 2
    with torch.no_grad():
        before = float(sft_loss(model, examples, tokenizer.pad_token_id))
    result = sft_train(
        model, examples, pad_token_id=tokenizer.pad_token_id, steps=15, batch_size=2, warmup_steps=1
    )
    assert result.steps == 15
    with torch.no_grad():
        assert float(sft_loss(model, examples, tokenizer.pad_token_id)) < before - 1.0


def test_a_template_that_stops_at_each_call_adds_no_turn_end(tokenizer):
    torl = TEMPLATES.get("torl")()  # its turns stop at the code block, before the end of the message
    traj = render_expert(MESSAGES, template=torl, tokenizer=tokenizer, tools=TOOLS)
    assert not torl.stops_at_turn_end(TOOLS)
    assert tokenizer.eos_token_id not in traj.turns[1].token_ids
