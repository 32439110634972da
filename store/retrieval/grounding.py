"""Grounded answers: the prompt that confines a chat model to numbered passages, and the check of its citations.

The model answers ``{answer, sources: [numbers], answered}``. ``answered:
false`` is its way out when the passages do not hold the answer. Citations are
checked against the passages it was shown: numbers that do not exist are
dropped (an invented source never reaches the caller), and an answer that
claims to be answered but cites no real passage is reported as not answered,
with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from store.retrieval.twins import sync_misuse
from store.vectors.records import VectorMatch

__all__ = ["ANSWER_SCHEMA", "Citation", "GroundedAnswer", "check_answer", "messages"]

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "sources": {"type": "array", "items": {"type": "integer"}},
        "answered": {"type": "boolean"},
    },
    "required": ["answer", "sources", "answered"],
    "additionalProperties": False,
}
SYSTEM = (
    "You answer questions using only the numbered passages the user gives you, never other knowledge. "
    "Cite the numbers of the passages your answer uses in `sources`. If the passages do not contain the "
    "answer, set `answered` to false and say briefly what is missing; do not guess. "
    "Reply with a JSON object that follows this schema: {schema}"
)


@dataclass(frozen=True, slots=True)
class Citation:
    """A passage the answer cites: its number in the prompt, where it comes from, and what it says."""

    number: int
    chunk_id: str
    record_id: str
    excerpt: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroundedAnswer:
    """An answer with the passages it cites; ``answered`` is False (with ``reason``) when there is none.
    Awaiting one is a TypeError naming ``aanswer`` (``answer`` is synchronous)."""

    answer: str
    answered: bool
    sources: list[Citation]
    reason: str = ""
    model: str = ""

    def __await__(self) -> Generator[Any, None, NoReturn]:
        raise TypeError(sync_misuse("answer"))


def excerpt(match: VectorMatch, chars: int) -> str:
    """The first ``chars`` characters of a passage, on whole words where possible."""
    text = match.text.strip()
    if len(text) <= chars:
        return text
    cut = text[:chars]
    return cut[: cut.rfind(" ")] if " " in cut[chars // 2 :] else cut


def messages(question: str, passages: Sequence[VectorMatch], *, chars: int) -> list[dict[str, str]]:
    """The system and user messages: the rules, then the question and the numbered passages."""
    numbered = "\n\n".join(
        f"[{number}] (record {match.metadata.get('record_id', match.id)})\n{excerpt(match, chars)}"
        for number, match in enumerate(passages, 1)
    )
    return [
        {"role": "system", "content": SYSTEM.format(schema=json.dumps(ANSWER_SCHEMA))},
        {"role": "user", "content": f"Question: {question}\n\nPassages:\n\n{numbered}"},
    ]


def check_answer(
    reply: Mapping[str, Any], passages: Sequence[VectorMatch], *, chars: int, model: str
) -> GroundedAnswer:
    """The reply with its citations checked; see the module docstring."""
    answer = reply.get("answer")
    answered = reply.get("answered")
    cited = reply.get("sources")
    if not isinstance(answer, str) or not isinstance(answered, bool) or not isinstance(cited, list):
        return GroundedAnswer("", False, [], reason=f"model {model!r} answered in the wrong shape", model=model)
    numbers = list(
        dict.fromkeys(n for n in cited if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= len(passages))
    )
    sources = [_citation(number, passages[number - 1], chars) for number in numbers]
    if not answered:
        return GroundedAnswer(
            answer, False, sources, reason=answer or "the passages do not contain the answer", model=model
        )
    if not sources:
        return GroundedAnswer(
            answer,
            False,
            [],
            model=model,
            reason=f"model {model!r} cited no passage it was shown ({cited!r}): not grounded",
        )
    return GroundedAnswer(answer, True, sources, model=model)


def _citation(number: int, match: VectorMatch, chars: int) -> Citation:
    record_id = match.metadata.get("record_id")
    return Citation(
        number=number,
        chunk_id=match.id,
        record_id=str(record_id if record_id is not None else match.id),
        excerpt=excerpt(match, chars),
        score=match.score,
        metadata=dict(match.metadata),
    )
