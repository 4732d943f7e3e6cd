"""A tiny random model of ERNIE-4.5's architecture, for tests and for trying the app offline.

Usage::

    python -m engine demo-model ./demo-model            # whole-character tokenizer
    python -m engine demo-model ./demo-bytes --byte-level

It has ERNIE's special tokens and chat template, and random weights: replies are
gibberish. The default tokenizer's tokens are whole characters and words (Chinese and
English), so even random replies never hold U+FFFD. ``--byte-level`` gives a tokenizer
that splits every Chinese character into three byte tokens, for the decoding tests.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

__all__ = ["DEMO_MARKER", "write_demo_model"]

# Written into the model folder so the UI can label a demo model as such.
DEMO_MARKER = "ernie_demo_model.json"

# ERNIE-4.5's named special tokens (reference/ernie-4.5-0.3b-pt/special_tokens.json).
SPECIAL_TOKENS = {
    "pad_token": "<unk>",
    "unk_token": "<unk>",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "cls_token": "<|begin_of_sentence|>",
    "sep_token": "<|end_of_sentence|>",
    "mask_token": "<mask:1>",
}
EXTRA_SPECIAL = ["<mask:4>", "<mask:5>", "<mask:6>", "<mask:7>"]
ORDERED_SPECIAL = [
    "<unk>",
    "<s>",
    "</s>",
    "<|begin_of_sentence|>",
    "<|end_of_sentence|>",
    "<mask:1>",
    *EXTRA_SPECIAL,
]

# ERNIE-4.5's chat template (reference/ernie-4.5-0.3b-pt/chat_template.jinja).
CHAT_TEMPLATE = (
    "{%- if not add_generation_prompt is defined -%}{%- set add_generation_prompt = true -%}"
    "{%- endif -%}"
    '{{- "<|begin_of_sentence|>" -}}'
    "{%- for message in messages -%}"
    '{%- if message["role"] == "user" -%}{{- "User: " + message["content"] + "\\n" -}}'
    '{%- elif message["role"] == "assistant" -%}'
    '{{- "Assistant: " + message["content"] + "<|end_of_sentence|>" -}}'
    '{%- elif message["role"] == "system" -%}{{- message["content"] + "\\n" -}}{%- endif -%}'
    "{%- endfor -%}"
    '{%- if add_generation_prompt -%}{{- "Assistant: " -}}{%- endif -%}'
)

# Every CJK unified ideograph, general, CJK and full-width punctuation, printable ASCII:
# any Chinese or English text a user types has a token for each character.
ALPHABET = (
    [chr(c) for c in range(0x4E00, 0xA000)]
    + [chr(c) for c in range(0x2010, 0x2070)]
    + [chr(c) for c in range(0x3000, 0x3040)]
    + [chr(c) for c in range(0xFF01, 0xFF5F)]
    + list(string.printable)
)
ENGLISH_TEXT = (
    "hello world this is a small demo model of the ernie chat app with random weights "
    "it answers in english and chinese the quick brown fox jumps over the lazy dog "
    "please thank you model engine stream token reply question answer good day"
)
# One pre-token per Chinese character, English word, digit, space or punctuation mark.
_PIECES = r"[A-Za-z]+|\s|[^A-Za-z\s]"


def _word_tokenizer() -> Tokenizer:
    """Tokens are whole characters and words: nothing decodes to half a character."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(_PIECES), behavior="isolated")
    tok.decoder = decoders.Fuse()
    trainer = trainers.BpeTrainer(
        vocab_size=len(ALPHABET) + len(ORDERED_SPECIAL) + 200,
        special_tokens=ORDERED_SPECIAL,
        initial_alphabet=ALPHABET,
        limit_alphabet=len(ALPHABET),
        show_progress=False,
    )
    tok.train_from_iterator([ENGLISH_TEXT] * 4, trainer=trainer)
    return tok


def _byte_tokenizer() -> Tokenizer:
    """Byte-level BPE: every Chinese character is three byte tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=ORDERED_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([ENGLISH_TEXT] * 4, trainer=trainer)
    return tok


def _save_tokenizer(tok: Tokenizer, path: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        additional_special_tokens=EXTRA_SPECIAL,
        chat_template=CHAT_TEMPLATE,
        **SPECIAL_TOKENS,
    )
    fast.save_pretrained(path)


def _save_model(path: Path, vocab_size: int, seed: int) -> None:
    import torch
    from transformers import Ernie4_5Config, Ernie4_5ForCausalLM, GenerationConfig

    torch.manual_seed(seed)
    config = Ernie4_5Config(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,  # vLLM's CPU attention rejects 16; the real model has 128
        max_position_embeddings=131072,  # as the real model
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        tie_word_embeddings=True,
        use_bias=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = Ernie4_5ForCausalLM(config)  # type: ignore[no-untyped-call]
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]
    model.save_pretrained(path)
    GenerationConfig(  # type: ignore[no-untyped-call]
        do_sample=True,
        top_p=0.8,
        temperature=0.8,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        repetition_penalty=1.0,
    ).save_pretrained(path)


def write_demo_model(path: Path, *, byte_level: bool = False, seed: int = 0) -> Path:
    """Write the demo model to ``path`` (created if missing) and return it."""
    path.mkdir(parents=True, exist_ok=True)
    tok = _byte_tokenizer() if byte_level else _word_tokenizer()
    _save_tokenizer(tok, path)
    _save_model(path, tok.get_vocab_size(), seed)
    (path / DEMO_MARKER).write_text(
        json.dumps({"demo": True, "byte_level": byte_level, "weights": "random"}) + "\n"
    )
    return path
