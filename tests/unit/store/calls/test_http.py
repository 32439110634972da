"""A model call over HTTP: its failures become the error tree's (a timeout or a lost connection transient, each
status what it stands for, with the server's Retry-After), and keys are scrubbed from what a message quotes."""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Any

import httpx
import pytest

from store.calls import http
from store.calls.http import error_for_status, parse_retry_after, post, scrub
from store.errors import InputError, PermanentError, TransientError


def client(answer: Any) -> httpx.Client:
    """An httpx client whose every request ``answer`` (a request -> response function) handles."""
    return httpx.Client(base_url="http://models.test", transport=httpx.MockTransport(answer))


def call(answer: Any) -> httpx.Response:
    return post(
        client(answer), "/embed", {"input": ["a"]}, model="m", endpoint="http://models.test", detail=lambda r: r.text
    )


def test_an_answer_of_200_is_returned_as_it_came() -> None:
    response = call(lambda request: httpx.Response(200, json={"sent": request.content.decode()}))
    assert response.json() == {"sent": '{"input":["a"]}'}


def test_a_timeout_and_a_lost_connection_are_transient_naming_the_model() -> None:
    def timing_out(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(TransientError, match=r"^model 'm' at http://models.test timed out$"):
        call(timing_out)
    with pytest.raises(TransientError, match=r"could not be reached: ConnectError$"):
        call(refused)


@pytest.mark.parametrize(
    ("status", "error"),
    [(429, TransientError), (503, TransientError), (409, TransientError), (400, InputError), (401, PermanentError)],
)
def test_a_status_is_the_error_it_stands_for_with_the_detail_and_the_wait(status: int, error: type) -> None:
    with pytest.raises(error) as caught:
        call(lambda request: httpx.Response(status, text="nope", headers={"Retry-After": "3"}))
    assert str(caught.value) == f"model 'm' at http://models.test answered {status}: nope"
    if isinstance(caught.value, TransientError):
        assert (caught.value.retry_after, caught.value.rate_limited) == (3.0, status == 429)


def test_413_and_422_refuse_the_input_and_404_the_endpoint() -> None:
    assert isinstance(error_for_status(413, model="m", endpoint="e", detail=""), InputError)
    assert isinstance(error_for_status(422, model="m", endpoint="e", detail=""), InputError)
    assert type(error_for_status(404, model="m", endpoint="e", detail="")) is PermanentError


def test_parse_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert 8 < (parse_retry_after({"Retry-After": formatdate(time.time() + 10, usegmt=True)}) or 0) <= 10
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_scrub_masks_the_given_secrets_and_anything_like_a_key() -> None:
    assert scrub("Incorrect API key provided: sk-proj-abcdef123. More", None) == (
        "Incorrect API key provided: sk-*** More"
    )
    assert scrub("key my-own-secret-value refused; Bearer abcdefgh1", "my-own-secret-value") == (
        "key *** refused; Bearer ***"
    )
    assert scrub("unused stays", "unused") == "unused stays"


def test_a_client_carries_its_base_url_timeout_and_key_and_no_header_without_a_key() -> None:
    keyed = http.client("local", "ollama", "http://127.0.0.1:11434", timeout=7.0, key="sk-secret")
    plain = http.client("local", "http", "http://127.0.0.1:8080", timeout=3.0, key=None)
    try:
        assert str(keyed.base_url) == "http://127.0.0.1:11434" and keyed.timeout.read == 7.0
        assert keyed.headers["Authorization"] == "Bearer sk-secret"
        assert "Authorization" not in plain.headers and plain.timeout.connect == 3.0
    finally:
        keyed.close()
        plain.close()
