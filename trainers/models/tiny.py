"""Build a tiny Qwen2-style policy and its byte-level BPE tokenizer offline, saved for `from_pretrained`.

There is no model hub here: tests and the CPU demo train this model from scratch. Digits are split
one per token so that copying numbers (what a calculator-using policy must do) is easy to learn.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = [
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
    "<answer>", "</answer>", "<output>", "</output>", "<code>", "</code>",
]  # fmt: skip

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def default_corpus() -> list[str]:
    """Arithmetic and template text, enough for a useful small vocabulary."""
    import random

    rng = random.Random(0)
    lines = []
    for _ in range(2000):
        a, b = rng.randint(0, 9999), rng.randint(0, 9999)
        op = rng.choice("+-*/")
        lines.append(
            f"What is {a} {op} {b}? <think>I will use the calculator.</think>"
            f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{a} {op} {b}"}}}}</tool_call>'
            f"<tool_response>{a}</tool_response> The answer is \\boxed{{{b}}}."
        )
    lines.append("system user assistant tool python ```python print() ``` ```output error Error Traceback")
    return lines


def build_tokenizer(
    corpus: Iterable[str] | None = None,
    vocab_size: int = 1024,
    *,
    split_words: bool = True,
    isolated: str = "",
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE with single-digit pre-tokenisation and chat special tokens.

    `split_words=False` lets merges cross spaces, so text repeated verbatim in the corpus (a long
    system prompt) becomes a few tokens: a tiny model on two cores then trains several times faster.
    Every character in `isolated` is a token of its own (a text grid's cell symbols: merged runs such
    as "__" would shift the columns a tiny model has to read).
    """
    tok = Tokenizer(models.BPE())
    steps = [pre_tokenizers.Digits(individual_digits=True)]
    if isolated:
        steps.append(pre_tokenizers.Split(Regex(_char_class(isolated)), behavior="isolated"))
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split_words))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus if corpus is not None else default_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.add_tokens(TAG_TOKENS)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _char_class(chars: str) -> str:
    """A regex character class matching any one of `chars` (newlines and class metacharacters escaped)."""
    escaped = "".join("\\n" if c == "\n" else "\\" + c if c in "\\]^-[" else c for c in chars)
    return f"[{escaped}]"


def build_tiny_model(
    out_dir: str | Path,
    *,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    max_positions: int = 1024,
    seed: int = 0,
    corpus: Iterable[str] | None = None,
    vocab_size: int = 1024,
    split_words: bool = True,
    isolated: str = "",
) -> Path:
    """Create, initialise and save a tiny Qwen2 causal LM and tokenizer in `out_dir`."""
    import torch

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(corpus, vocab_size, split_words=split_words, isolated=isolated)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
