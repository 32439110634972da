"""store/retrieval/grounding.py: the prompt of numbered passages, and the citation check: a citation of a
passage the model was not shown is dropped, and an answer that cites none it was shown is not grounded."""

from __future__ import annotations

import json

from store.retrieval.grounding import ANSWER_SCHEMA, check_answer, excerpt, messages
from store.vectors.records import VectorMatch

PASSAGES = [
    VectorMatch("r1:0", 0.9, "Refunds are paid within 14 days.", {"record_id": "r1"}),
    VectorMatch("r2:3", 0.7, "Onboarding takes two weeks and starts with a kickoff call.", {"record_id": "r2"}),
]


def test_an_excerpt_keeps_whole_words_where_it_can() -> None:
    match = VectorMatch("a", 1.0, "  onboarding takes two weeks  ", {})
    assert excerpt(match, 100) == "onboarding takes two weeks"
    assert excerpt(match, 20) == "onboarding takes"  # cut at the last space within the limit
    assert excerpt(VectorMatch("b", 1.0, "x" * 30, {}), 10) == "x" * 10  # no space to cut at


def test_the_prompt_numbers_each_passage_with_its_record_and_states_the_schema() -> None:
    system, user = messages("How long are refunds?", PASSAGES, chars=20)
    assert system["role"] == "system" and json.dumps(ANSWER_SCHEMA) in system["content"]
    assert user["content"].startswith("Question: How long are refunds?\n\nPassages:\n\n")
    assert user["content"].endswith("[1] (record r1)\nRefunds are paid\n\n[2] (record r2)\nOnboarding takes")


def test_citations_of_passages_not_shown_are_dropped_and_repeats_kept_once() -> None:
    reply = {"answer": "Within 14 days.", "answered": True, "sources": [1, 3, 1, True, "2"]}
    checked = check_answer(reply, PASSAGES, chars=100, model="m")
    assert checked.answered and checked.model == "m"
    assert [(c.number, c.chunk_id, c.record_id) for c in checked.sources] == [(1, "r1:0", "r1")]


def test_an_answer_citing_no_passage_it_was_shown_is_not_grounded() -> None:
    checked = check_answer({"answer": "Soon.", "answered": True, "sources": [7]}, PASSAGES, chars=100, model="m")
    assert not checked.answered and checked.sources == []
    assert checked.reason == "model 'm' cited no passage it was shown ([7]): not grounded"


def test_a_reply_of_the_wrong_shape_or_without_an_answer_says_why() -> None:
    wrong = check_answer({"answer": 3, "answered": True, "sources": []}, PASSAGES, chars=100, model="m")
    assert (wrong.answered, wrong.reason) == (False, "model 'm' answered in the wrong shape")
    none = check_answer({"answer": "", "answered": False, "sources": []}, PASSAGES, chars=100, model="m")
    assert (none.answered, none.reason) == (False, "the passages do not contain the answer")
