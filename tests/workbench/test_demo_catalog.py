import pytest

from workbench.agents.models import AgentProgram
from workbench.datasets.models import Dataset, DatasetKind, DatasetRow
from workbench.demo_catalog import (
    AGENT_NAME,
    DATASET_NAME,
    REWARD_NAME,
    SFT_DATASET_NAME,
    TEMPLATE_NAME,
    TOOL_REWARD_NAME,
    arithmetic_rows,
    seed_demo_catalog,
)
from workbench.prompts.models import PromptTemplate
from workbench.rewards.models import RewardDefinition
from workbench.rewards.services import reward_definition_test
from workbench.toolschemas.models import ToolSchema
from workbench.toolschemas.services import tool_schema_try


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path


def test_arithmetic_rows_are_correct():
    rows = arithmetic_rows()
    assert len(rows) == 200
    for row in rows:
        a, op, b = row["question"].removeprefix("What is ").removesuffix("?").split()
        assert str({"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]) == row["answer"]


def test_seed_is_complete_and_idempotent(team, admin):
    seed_demo_catalog(team=team, user=admin)
    seed_demo_catalog(team=team, user=admin)
    dataset = Dataset.objects.get(team=team, name=DATASET_NAME)
    assert (dataset.latest_version().row_count, dataset.latest_version().eval_count) == (200, 20)
    experts = Dataset.objects.get(team=team, name=SFT_DATASET_NAME)
    assert (experts.kind, experts.latest_version().train_count) == (DatasetKind.CONVERSATIONS, 1000)
    assert DatasetRow.objects.count() == 200 + 1000
    assert sorted(ToolSchema.objects.filter(team=team).values_list("name", flat=True)) == [
        "calculator",
        "python",
    ]
    assert PromptTemplate.objects.get(team=team).name == TEMPLATE_NAME
    agent = AgentProgram.objects.get(team=team)
    assert (agent.name, agent.versions.count()) == (AGENT_NAME, 1)
    assert "def run(task, client):" in agent.latest_version().source
    assert sorted(RewardDefinition.objects.filter(team=team).values_list("name", flat=True)) == sorted(
        [REWARD_NAME, TOOL_REWARD_NAME]
    )


def test_seeded_items_work_together(team, admin):
    seed_demo_catalog(team=team, user=admin)
    calculator = ToolSchema.objects.get(team=team, name="calculator").latest_version()
    assert tool_schema_try(version=calculator, arguments_text='{"expression": "17 * 3"}').output == "51"
    reward = RewardDefinition.objects.get(team=team, name=REWARD_NAME).latest_version()
    call = '{"name": "calculator", "arguments": {"expression": "17*3"}}'
    text = f"<think>17 * 3</think>\n<tool_call>\n{call}\n</tool_call>"
    score = reward_definition_test(
        version=reward, text=text, ground_truth={"answer": "51"}, template="qwen_tool"
    )
    assert score.components == {"correctness": 0.0, "format": 1.0}  # a well-formed call, no answer yet
