"""Token-in/token-out through the agent endpoint: a real agent program in the sandbox, a real HTTP
endpoint on a Unix socket, and a backend whose ids are not what its text re-encodes to."""

from __future__ import annotations

from tests.trainers.agent.conftest import calls_then_answer
from trainers.rewards import RewardContext, RewardDefinition


def test_recorded_ids_are_the_sampled_ids_across_three_tool_turns(agent_rollouts, tiny_tokenizer):
    rollouts, backend = agent_rollouts("tool_loop.py", calls_then_answer(3))
    [traj] = rollouts.run([{"id": "q", "question": "What is 3+1?", "answer": "4"}], 1, seed=0)

    assistant = [t for t in traj.turns if t.role == "assistant"]
    assert len(assistant) == 4 and [len(t.tool_calls) for t in assistant] == [1, 1, 1, 0]
    assert [t.token_ids for t in assistant] == [out.token_ids for out in backend.outputs]
    assert [t.logprobs for t in assistant] == [out.logprobs for out in backend.outputs]
    # the sampled ids are not what their text re-encodes to: nothing was retokenized
    text = assistant[0].text
    assert tiny_tokenizer.encode(text, add_special_tokens=False) != assistant[0].token_ids
    # each request sampled from the recorded ids: the trajectory up to that turn, token for token
    ids, start = traj.token_ids, 0
    for turn, request in zip(assistant, backend.requests, strict=True):
        start = traj.turns.index(turn)
        before = [i for t in traj.turns[:start] for i in t.token_ids]
        assert request.prompt_ids == before
    assert len(ids) == sum(len(t.token_ids) for t in traj.turns)
    # sampled tokens train, the prompt and the tool responses do not
    for turn in traj.turns:
        assert set(turn.loss_mask) == ({1} if turn.role == "assistant" else {0})
    assert [t.role for t in traj.turns] == ["prompt", "assistant", "tool", "assistant", "tool", "assistant",
                                            "tool", "assistant"]  # fmt: skip
    assert traj.final_answer == "4" and traj.metadata["failure"] is None
    assert [r.output for r in traj.tool_results] == ["= 0+1", "= 1+1", "= 2+1"]


def test_the_tool_glue_is_the_built_in_rollouts_glue(agent_rollouts):
    rollouts, _ = agent_rollouts("tool_loop.py", calls_then_answer(1))
    [traj] = rollouts.run([{"id": "q", "question": "q?"}], 1, seed=0)
    tool = next(t for t in traj.turns if t.role == "tool")
    assert tool.text == rollouts.template.render_tool_responses(traj.tool_results, turn_closed=True)


def test_a_posted_reward_combines_with_the_definition(agent_rollouts):
    rollouts, _ = agent_rollouts("tool_loop.py", calls_then_answer(1))
    trajectories = rollouts.run([{"id": "q", "question": "q?", "answer": "4"}], 2, seed=0)
    definition = RewardDefinition.model_validate(
        {
            "components": [
                {"name": "posted"},
                {"name": "correctness", "weight": 2.0, "params": {"mode": "numeric"}},
            ]
        }
    )
    definition.compute(trajectories, RewardContext())
    assert [t.rewards["posted"] for t in trajectories] == [0.5, 0.5]
    assert [t.reward for t in trajectories] == [2.5, 2.5]
    assert rollouts.last_metrics["agent/posted_rewards"] == 2.0
