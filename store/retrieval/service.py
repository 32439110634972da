"""``Retrieval``: rerank search matches, and answer a question from the passages it finds, citing them.

Built from ``[retrieval]``: its ``rerank`` and ``answer`` chains of
``[models.NAME]`` entries fail over through ``store.calls.failover`` with the
embedding chain's retry settings, each model within its shared rate limit.
No rerank chain keeps the search order; no answer chain uses the fake chat
model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import TypeVar, Unpack

from store.calls import accounting
from store.calls.accounting import CallStats
from store.calls.failover import ChainPolicy, Failover, named_entries
from store.calls.ratelimit import rate_limiters
from store.calls.tokens import estimate_tokens
from store.errors import ConfigError, PermanentError
from store.retrieval.base import Chat, Reranker
from store.retrieval.grounding import ANSWER_SCHEMA, GroundedAnswer, check_answer, excerpt, messages
from store.retrieval.options import Allow, AnswerOptions, refuse_unknown
from store.retrieval.providers import FakeChat, FakeReranker, build_chat, build_reranker
from store.retrieval.search import as_filter
from store.settings import RetrievalSettings, Settings
from store.vectors import Collection, VectorMatch, VectorStore

__all__ = ["Retrieval", "allowed"]

M = TypeVar("M", Reranker, Chat)


class Retrieval:
    """Rerank and grounded answers over one store; see the module docstring."""

    def __init__(
        self,
        store: VectorStore,
        *,
        rerankers: Failover[Reranker],
        chats: Failover[Chat],
        settings: RetrievalSettings | None = None,
        declared: AbstractSet[str] = frozenset(),
    ) -> None:
        self.store, self.rerankers, self.chats = store, rerankers, chats
        #: Opens the collection an answer reads (None: ``store.get_collection``, creating a declared one); a
        #: ``store.Client`` reads live generations.
        self.opener: Callable[[str, AbstractSet[str]], Collection] | None = None
        self.settings = settings if settings is not None else RetrievalSettings()
        #: Collections the settings declare: answer may open them before they hold anything.
        self.declared = frozenset(declared)

    @classmethod
    def from_settings(cls, settings: Settings, *, store: VectorStore) -> Retrieval:
        """The chains ``[retrieval] rerank`` and ``answer`` name. Raises ConfigError for a bad chain."""
        section, policy, stats = settings.retrieval, ChainPolicy.from_settings(settings.embeddings), CallStats()
        for name, declared in settings.collections.items():  # on a store not built from these settings too
            if name not in store.declared:
                store.declare(name, declared)
        rerank = named_entries(settings, section.rerank, task="rerank", setting="retrieval.rerank")
        answer = named_entries(settings, section.answer, task="chat", setting="retrieval.answer")
        rerankers: list[Reranker] = [build_reranker(name, model) for name, model in rerank]
        chats: list[Chat] = [build_chat(name, model) for name, model in answer]
        limiters = rate_limiters(
            settings.cache_url, [*rerank, *answer], max_pause=policy.max_wait_seconds, network=settings.network
        )

        def chain(models: list[M], what: str, setting: str) -> Failover[M]:
            return Failover(models, policy=policy, stats=stats, what=what, setting=setting, limiters=limiters)

        return cls(
            store,
            rerankers=chain(rerankers or [FakeReranker()], "rerank", "retrieval.rerank"),
            chats=chain(chats or [FakeChat()], "chat", "retrieval.answer"),
            settings=section,
            declared=frozenset(settings.collections),
        )

    def rerank(
        self, query: str, matches: Sequence[VectorMatch], *, top: int | None = None, user: str | None = None
    ) -> list[VectorMatch]:
        """The ``top`` matches (all when None) that best answer ``query``, best first, scored 0 to 1 by the
        reranker, which reads at most ``passage_chars`` of each. ``user`` names the caller in the cost
        metrics. Raises ConfigError, ProviderError."""
        if user is not None:
            with accounting.attributed_to(user):
                return self.rerank(query, matches, top=top)
        _check_text(query, "query")
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
            raise ConfigError(f"top {top!r} is not allowed: use a whole number of 1 or more, or None for all")
        if not matches:
            return []
        passages = [excerpt(match, self.settings.passage_chars) for match in matches]
        tokens = estimate_tokens(query) * len(passages) + sum(estimate_tokens(passage) for passage in passages)
        scores, _ = self.rerankers.run(
            lambda reranker: _checked(reranker, reranker.scores(query, passages), len(passages)), tokens=tokens
        )
        order = sorted(range(len(matches)), key=lambda index: -scores[index])  # stable: ties keep search order
        return [_rescored(matches[index], scores[index]) for index in order[:top]]

    def answer(self, collection: str, question: str, **options: Unpack[AnswerOptions]) -> GroundedAnswer:
        """Search ``collection`` with the caller's ``filter`` (in search ``mode``; None: the collection's), rerank,
        and ask the chat chain for an answer that cites the passages. ``answered`` is False, with a reason, when
        they do not hold one. ``options``: ``AnswerOptions``, whose defaults are applied here.

        ``allow(matches)`` returns the matches the caller may read (the app's own access rules); the others
        are dropped before any model sees them. ``user`` names the caller in the cost metrics.
        Raises ConfigError, StoreUnavailable, ProviderError.
        """
        refuse_unknown("Retrieval.answer", options, AnswerOptions.__optional_keys__)
        filter, allow = options.get("filter"), options.get("allow")
        _check_text(question, "question")
        wanted = options.get("candidates") or self.settings.candidates
        shown = options.get("top") or self.settings.top
        with accounting.attributed_to(options.get("user")):
            where = as_filter(filter)
            target = (
                self.opener(collection, self.declared)
                if self.opener is not None  # never a table for a typo
                else self.store.get_collection(collection, create=collection in self.declared)
            )
            found = target.search(question, filter=where, limit=wanted, mode=options.get("mode"))
            if allow is not None and found:
                found = allowed(found, allow)
            if not found:  # the same reason when allow dropped them all: it never tells that hidden passages exist
                return GroundedAnswer(
                    "",
                    False,
                    [],
                    reason=f"no passage in {collection!r} matches the question" + (" and the filter" if filter else ""),
                )
            passages = self.rerank(question, found, top=shown)
            prompt = messages(question, passages, chars=self.settings.passage_chars)
            reply, chat = self.chats.run(
                lambda model: model.complete(prompt, schema=ANSWER_SCHEMA, schema_name="grounded_answer"),
                tokens=sum(estimate_tokens(message["content"]) for message in prompt),
            )
        return check_answer(reply, passages, chars=self.settings.passage_chars, model=chat.model)


def allowed(matches: Sequence[VectorMatch], allow: Allow) -> list[VectorMatch]:
    """The matches ``allow`` keeps, in search order; it can drop matches, never add or change one."""
    kept = allow(list(matches))
    if isinstance(kept, str | bytes) or not isinstance(kept, Iterable):
        raise ConfigError(f"allow must return the matches the caller may read, got {kept!r}")
    ids = {match.id for match in kept if isinstance(match, VectorMatch)}
    return [match for match in matches if match.id in ids]


def _check_text(text: object, what: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"the {what} is empty ({text!r}): ask something, e.g. 'how do refunds work?'")


def _checked(reranker: Reranker, scores: Sequence[float], count: int) -> list[float]:
    """A reranker that answers more or fewer scores than passages has failed: the chain moves on."""
    if len(scores) != count:
        raise PermanentError(
            f"rerank model {reranker.model!r} at {reranker.endpoint} returned {len(scores)} scores for {count} passages"
        )
    return list(scores)


def _rescored(match: VectorMatch, score: float) -> VectorMatch:
    return VectorMatch(id=match.id, score=float(score), text=match.text, metadata=match.metadata)
