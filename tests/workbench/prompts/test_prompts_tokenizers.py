import pytest

from workbench.prompts.tokenizers import TokenizerError, count_tokens, load_tokenizer


def test_tiny_tokenizer_is_built_once_and_splits_digits():
    assert load_tokenizer("tiny") is load_tokenizer("")
    # "<|im_start|>" is one special token and digits are one token each: 1 + 3 digits.
    assert count_tokens("<|im_start|>123", "tiny") == 4


def test_local_path_is_loaded(tmp_path):
    load_tokenizer("tiny").save_pretrained(tmp_path)
    assert count_tokens("<|im_start|>123", str(tmp_path)) == 4


def test_relative_or_missing_paths_are_refused(tmp_path):
    with pytest.raises(TokenizerError, match="not an absolute path to a directory with tokenizer.json"):
        load_tokenizer("Qwen/Qwen2.5-0.5B")
    with pytest.raises(TokenizerError):
        load_tokenizer(str(tmp_path))
