import pytest

from workbench.prompts.tokenizers import TokenizerError, count_tokens, load_tokenizer


def test_tiny_tokenizer_is_built_once_and_splits_digits():
    assert load_tokenizer("tiny") is load_tokenizer("")
    # "<|im_start|>" is one special token and digits are one token each: 1 + 3 digits.
    assert count_tokens("<|im_start|>123", "tiny") == 4


@pytest.fixture
def model_root(settings, tmp_path):
    settings.WORKBENCH_MODEL_ROOTS = [str(tmp_path / "models")]
    return tmp_path / "models"


def test_a_path_under_a_model_root_is_loaded(model_root):
    load_tokenizer("tiny").save_pretrained(model_root / "tok")
    assert count_tokens("<|im_start|>123", str(model_root / "tok")) == 4


def test_relative_or_missing_paths_are_refused(model_root):
    with pytest.raises(TokenizerError, match="not an absolute path to a directory with tokenizer.json"):
        load_tokenizer("Qwen/Qwen2.5-0.5B")
    with pytest.raises(TokenizerError, match="not an absolute path to a directory with tokenizer.json"):
        load_tokenizer(str(model_root))


def test_paths_outside_the_model_roots_are_refused_before_they_are_read(model_root, tmp_path):
    load_tokenizer("tiny").save_pretrained(tmp_path / "elsewhere")
    (model_root / "link").parent.mkdir(parents=True, exist_ok=True)
    (model_root / "link").symlink_to(tmp_path / "elsewhere")
    for path in (tmp_path / "elsewhere", model_root / "link", model_root / ".." / "elsewhere"):
        with pytest.raises(TokenizerError, match="is not under a model root"):
            load_tokenizer(str(path))
