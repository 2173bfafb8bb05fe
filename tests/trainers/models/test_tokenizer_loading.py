"""The trained tokenizer comes back unchanged from a local directory, whoever loads it."""

from trainers.backends.hf import HFBackend
from trainers.models.loading import load_tokenizer
from trainers.models.tiny import build_tiny_model, build_tokenizer

TEXT = 'What is 1234 + 56? <tool_call>{"name": "calculator", "arguments": {"expression": "1+2"}}</tool_call>'


def test_tokenizer_whose_merges_cross_spaces_loads_as_trained(tmp_path):
    trained = build_tokenizer(split_words=False)
    trained.save_pretrained(tmp_path)
    assert load_tokenizer(tmp_path)(TEXT).input_ids == trained(TEXT).input_ids


def test_backend_from_a_path_uses_the_trained_tokenizer(tmp_path):
    path = build_tiny_model(tmp_path / "tiny", split_words=False)
    expected = build_tokenizer(split_words=False)(TEXT).input_ids
    assert HFBackend(path, device="cpu").tokenizer(TEXT).input_ids == expected


def test_isolated_grid_symbols_are_one_token_each_and_survive_loading(tmp_path):
    grid = "#####\n#__O#\n#_X_#\n#P__#\n#####"
    corpus = [f"Push the box X onto O.\n{grid}\nreward: -0.1"] * 50
    trained = build_tokenizer(corpus, 400, split_words=False, isolated="#_OXP\n")
    trained.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    ids = loaded(grid).input_ids
    assert [loaded.decode([i]) for i in ids] == list(grid)  # no "__" or "#\n" merges shift the columns
    assert loaded.decode(loaded("Push the box X onto O.").input_ids) == "Push the box X onto O."
    merged = build_tokenizer(corpus, 400, split_words=False)
    assert len(merged(grid).input_ids) < len(ids)  # without isolation, runs of cells merge
