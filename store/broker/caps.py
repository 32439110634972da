"""The caps of a run, refused before it is created or resumed when the ledger could not keep them or they could
not stop it: a cost that is no finite number, a token count past a bigint, a cost cap over a model without a
price, a resumed run's cap at or below what it has spent (``Producer.reindex_all`` and ``resume``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from store.calls.spend import Spent
from store.errors import ConfigError
from store.settings import Settings
from store.state.generations import Generation
from store.state.generations.base import generation_settings

__all__ = ["MAX_TOKENS_CAP", "checked_caps", "checked_prices", "checked_resume_caps", "unpriced_models"]


#: The most tokens a cap may hold: the ledger keeps it in a bigint.
MAX_TOKENS_CAP = 2**63 - 1


def checked_caps(max_tokens: int | None, max_cost: float | None) -> None:
    """Refuse caps the ledger cannot keep or JSON cannot carry, before a run is created: a cost that is not a
    finite number of 0 or more (``inf`` was taken, and ``status --json`` then held ``Infinity``, which strict
    parsers refuse), a token count past a bigint (PostgreSQL refused it after the run was committed, leaving a
    run with no task)."""
    if max_cost is not None and not (isinstance(max_cost, int | float) and math.isfinite(max_cost) and max_cost >= 0):
        raise ConfigError(f"--max-cost {max_cost!r} is not a cost: give a finite number of 0 or more")
    if max_tokens is not None and not (isinstance(max_tokens, int) and 1 <= max_tokens <= MAX_TOKENS_CAP):
        raise ConfigError(f"--max-tokens {max_tokens!r} is not a cap: give a whole number from 1 to {MAX_TOKENS_CAP}")


#: What ``unpriced_models`` calls the model of an empty chain, which no ``[models.NAME]`` declares.
_BUILT_IN_FAKE = "the built-in fake model (embeddings.chain is empty)"


def unpriced_models(settings: Settings, generations: Sequence[Generation]) -> list[str]:
    """The ``[models.NAME]`` entries of the chains that embed ``generations`` that declare no price (an empty chain:
    ``_BUILT_IN_FAKE``); a cost cap cannot count their calls."""
    unpriced: dict[str, None] = {}
    for generation in generations:
        embedded = generation_settings(settings, generation)
        for name in embedded.embeddings.chain or [_BUILT_IN_FAKE]:
            model = embedded.models.get(name)
            if model is None or model.price_per_million_tokens is None:
                unpriced[name] = None
    return list(unpriced)


def checked_prices(max_cost: float | None, unpriced: Sequence[str], collection: str) -> None:
    """Refuse a cost cap on a run whose chain has a model without a declared price: its calls cost nothing against
    the cap, which then stops nothing (a run capped at 0.000001 spent 6,446 tokens)."""
    if max_cost is None or not unpriced:
        return
    one = len(unpriced) == 1
    models = f"model {unpriced[0]!r} declares" if one else f"models {', '.join(map(repr, unpriced))} declare"
    named = next((name for name in unpriced if name != _BUILT_IN_FAKE), "NAME")
    raise ConfigError(
        f"--max-cost {max_cost!r} cannot cap a run of {collection!r}: {models} no price, so calls to "
        f"{'it' if one else 'them'} would cost nothing against the cap: declare [models.{named}] "
        "price_per_million_tokens (what the provider charges for a million tokens) for each model of the chain, or "
        "cap the run with --max-tokens"
    )


def checked_resume_caps(run_id: str, spent: Spent, max_tokens: int | None, max_cost: float | None) -> None:
    """Refuse a resumed run's cap at or below what it has spent already: a cap counts the whole run's spend, so
    such a cap pauses it again at its next call (``--max-tokens 1`` on a run that spent 1,968 said "-1967 left")."""
    if max_tokens is not None and max_tokens <= spent.tokens:
        raise ConfigError(
            f"--max-tokens {max_tokens:,} is not above the {spent.tokens:,} tokens run {run_id} has spent already "
            f"(a cap counts the whole run's spend, not what is left): resume it with a cap above {spent.tokens:,}"
        )
    if max_cost is not None and spent.cost is not None and max_cost <= spent.cost:
        raise ConfigError(
            f"--max-cost {max_cost:g} is not above the {spent.cost:g} run {run_id} has spent already (a cap counts "
            f"the whole run's spend, not what is left): resume it with a cap above {spent.cost:g}"
        )
