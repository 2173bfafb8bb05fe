"""The demo's SFT conversations and run configs, as the workbench's demo catalog and demo runs use them."""

import asyncio

from trainers.config.loader import validate_config
from trainers.demo.catalog import COLLAPSE_RUN, LEARNING_RUN, expert_conversations


def test_conversations_call_the_real_calculator_and_copy_its_result():
    records = expert_conversations(40)
    calling = [r for r in records if len(r["messages"]) == 4]
    assert 14 < len(calling) < 34  # 60% of them, at random
    for record in calling:
        user, call, tool, answer = record["messages"]
        expression = call["tool_calls"][0]["arguments"]["expression"]
        assert user["content"] == f"What is {expression}?"
        assert float(tool["content"]) == int(record["answer"])  # a division's result reads 6205.0
        assert answer["content"].endswith(f"\\boxed{{{tool['content']}}}")


def test_conversations_can_be_made_inside_a_running_event_loop():
    """Seeding the demo catalog from async code (a Playwright test, an async view) must not fail."""

    async def inside() -> list[dict]:
        return expert_conversations(8)

    assert asyncio.run(inside()) == expert_conversations(8)


def test_both_demo_run_configs_validate_and_end_by_themselves():
    for config in (LEARNING_RUN, COLLAPSE_RUN):
        run = validate_config({**config, "sft": {**config["sft"], "data_path": "experts.jsonl"}})
        assert run.training.steps <= 50 and run.model.tiny.tokenizer_corpus == "sft_data"
