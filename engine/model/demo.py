"""A tiny random model of ERNIE-4.5's architecture, for tests and for trying the app offline.

Usage::

    python -m engine demo-model ./demo-model            # whole-character tokenizer
    python -m engine demo-model ./demo-bytes --byte-level

It has ERNIE's special tokens and chat template, and random weights: replies are
gibberish. The default tokenizer's tokens are whole characters and words (Chinese and
English), so even random replies never hold U+FFFD. ``--byte-level`` gives a tokenizer
that splits every Chinese character into three byte tokens, for the decoding tests.
``--scripted`` gives a model whose every reply is ``SCRIPTED_REPLY``, then its last line
of Chinese text again and again: the UI tests use it to check rendering and reply lengths.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

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


# The scripted reply, token by token (each token once, so each has one successor): bold
# Chinese text that CommonMark alone would not render, then a loop of one line of text.
# The loop also holds math and money: "$x^2$" renders as math, "$5和$10" stays text. (No
# space: the generation prompt ends with one, and its successor is the reply's start.)
SCRIPTED_REPLY = (
    *("**注意：**", "正", "文", *"一二三四五六七八九十。"),
    *("$x^2$", "，", "$5", "和", "$10", "\n"),
)
SCRIPT_LOOP_FROM = 3
SCRIPT_STRENGTH = 4.0  # logit gap ~ strength * sqrt(hidden): the next token is certain


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

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        additional_special_tokens=EXTRA_SPECIAL,
        chat_template=CHAT_TEMPLATE,
        **SPECIAL_TOKENS,
    )
    fast.save_pretrained(path)


def _script(model: Any, chain: list[tuple[int, int]]) -> None:
    """Make the model answer by a fixed chain: each token's successor is certain.

    Attention and MLP outputs are zeroed, so the last hidden state is the normalised
    embedding of the current token; the (untied) output head maps it to the successor.
    """
    import torch

    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed = model.model.embed_tokens.weight.float()
        head = torch.zeros_like(embed)
        for token, successor in chain:
            head[successor] += SCRIPT_STRENGTH * embed[token] / embed[token].norm()
        model.lm_head.weight.copy_(head)


def _save_model(
    path: Path, vocab_size: int, seed: int, chain: list[tuple[int, int]] | None = None
) -> None:
    import torch
    from transformers import Ernie4_5Config, Ernie4_5ForCausalLM, GenerationConfig
    from transformers.utils import logging as hf_logging

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
        tie_word_embeddings=chain is None,
        use_bias=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = Ernie4_5ForCausalLM(config)
    if chain is not None:
        _script(model, chain)
    model = model.to(torch.bfloat16)
    hf_logging.disable_progress_bar()  # one tiny shard
    model.save_pretrained(path)
    GenerationConfig(
        do_sample=True,
        top_p=0.8,
        temperature=0.8,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        repetition_penalty=1.0,
    ).save_pretrained(path)


def _script_chain(tok: Tokenizer) -> list[tuple[int, int]]:
    tok.add_tokens([AddedToken(t, normalized=False) for t in SCRIPTED_REPLY if len(t) > 1])
    ids: list[int] = []
    for token in SCRIPTED_REPLY:
        token_id = tok.token_to_id(token)
        if token_id is None:
            raise ValueError(f"the demo tokenizer has no token {token!r}")
        ids.append(token_id)
    start = tok.encode("Assistant: ", add_special_tokens=False).ids[-1]
    successors = [*ids[1:], ids[SCRIPT_LOOP_FROM]]
    return [(start, ids[0]), *zip(ids, successors, strict=True)]


def write_demo_model(
    path: Path, *, byte_level: bool = False, scripted: bool = False, seed: int = 0
) -> Path:
    """Write the demo model to ``path`` (created if missing) and return it."""
    path.mkdir(parents=True, exist_ok=True)
    tok = _byte_tokenizer() if byte_level else _word_tokenizer()
    chain = _script_chain(tok) if scripted else None
    _save_tokenizer(tok, path)
    _save_model(path, tok.get_vocab_size(), seed, chain)
    marker = {"demo": True, "byte_level": byte_level, "scripted": scripted, "weights": "random"}
    (path / DEMO_MARKER).write_text(json.dumps(marker) + "\n")
    return path
