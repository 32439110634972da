"""A collection's rules, kept with the collection: what every process that opens it must honour.

The rules are what decide what a collection stores and who may read it: the fields every search must pin to
one value (``required_filter``, tenancy), whether writes keep a keyword index, and its analyzer's language.
They are written with the collection when it is made (pgvector: the table's comment; Qdrant: the collection's
metadata; memory: the collection object) and read back by every process that opens it, whatever its own
settings say, so no process can search a tenant's collection unscoped or drop its keyword index by omission.

Which wins, when a process's settings and the stored rules meet (``settle``):

- settings that say nothing of a rule (the collection undeclared, or the key left out) take the stored one;
- settings that state a rule the collection does not hold are a ConfigError naming both values and the
  command that changes it (``vectorsync collections set``), never silence;
- a collection made before rules were kept records the first declaring process's rules; until then, what its
  table shows (its keyword terms and their analyzer) stands, and no required filter.

Size, metric and precision are the stored vectors' own type, refused at open by each backend when they differ.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from store.errors import ConfigError
from store.settings import CollectionSettings
from store.settings.search import LANGUAGES
from store.vectors.keyword.analyzer import Analyzer, analyzer
from store.vectors.tenancy import required_fields

__all__ = ["Declared", "Rules", "settle", "shown_by", "terms_by"]


@dataclass(frozen=True, slots=True)
class Rules:
    """The rules a collection holds; the defaults are a collection made by settings that declare nothing."""

    #: Fields every search must pin to one value (``store.vectors.tenancy``).
    required_filter: tuple[str, ...] = ()
    #: Whether writes keep the keyword index (terms, statistics, postings) that keyword and hybrid search read.
    keywords: bool = False
    #: The keyword analyzer's language.
    language: str = "english"

    def to_json(self) -> dict[str, Any]:
        return {"required_filter": list(self.required_filter), "keywords": self.keywords, "language": self.language}

    @classmethod
    def from_json(cls, value: object, *, where: str) -> Rules:
        """The rules a collection's metadata holds; a value this vectorsync cannot read is a ConfigError naming
        ``where`` it was read (a newer release's rules are never guessed at)."""
        if not isinstance(value, Mapping) or set(value) - {f.name for f in fields(cls)}:
            raise ConfigError(
                f"the rules stored with {where} are {json.dumps(value)[:200]}, which this vectorsync cannot read: "
                "upgrade vectorsync on this machine"
            )
        try:
            return checked(
                cls(
                    tuple(value.get("required_filter", ())),
                    value.get("keywords", False),
                    value.get("language", "english"),
                )
            )
        except (ConfigError, TypeError) as exc:
            raise ConfigError(f"the rules stored with {where} cannot be read ({exc}): upgrade vectorsync") from exc

    def describe(self) -> str:
        """The rules in one line, as messages and ``collections list`` show them."""
        scoped = ", ".join(self.required_filter) or "none"
        words = f"on ({self.language})" if self.keywords else "off"
        return f"required filter: {scoped}; keywords: {words}"


@dataclass(frozen=True, slots=True)
class Declared:
    """The rules one process's settings state for a collection; None where they say nothing."""

    required_filter: tuple[str, ...] | None = None
    keywords: bool | None = None
    language: str | None = None

    @classmethod
    def from_settings(cls, settings: CollectionSettings) -> Declared:
        """What ``[collections.NAME]`` states: a key left out states nothing (pydantic's ``model_fields_set``)."""
        search = settings.search
        said = search.model_fields_set
        return cls(
            required_fields(settings.required_filter) if "required_filter" in settings.model_fields_set else None,
            search.keeps_keywords if said & {"keywords", "mode"} else None,
            search.language if "language" in said else None,
        )

    def over(self, held: Rules) -> Declared:
        """What these settings state, and ``held``'s rules where they state nothing."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return Declared(**{key: getattr(held, key) if value is None else value for key, value in values.items()})

    def rules(self, base: Rules = Rules()) -> Rules:
        """``base`` with what these settings state in place of its values."""
        stated = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return checked(replace(base, **stated))


def checked(rules: Rules) -> Rules:
    """``rules`` with their values checked: field names, a bool, a known language."""
    if not isinstance(rules.keywords, bool):
        raise ConfigError(f"keywords {rules.keywords!r} is not allowed: use true or false")
    if rules.language not in LANGUAGES:
        raise ConfigError(f"language {rules.language!r} is not allowed: use one of {', '.join(LANGUAGES)}")
    return replace(rules, required_filter=required_fields(rules.required_filter))


def settle(name: str, stored: Rules | None, declared: Declared | None, *, shown: Rules | None = None) -> Rules:
    """The rules ``name`` is opened with (see the module docstring). ``stored`` None: none recorded yet;
    ``shown``: what such a collection's data shows (its terms), else the defaults. Raises ConfigError when
    ``declared`` states a rule ``stored`` does not hold, naming both and the fix."""
    if stored is None:
        base = shown or Rules()
        return declared.rules(base) if declared is not None else base
    if declared is not None:
        disagreements = [
            (f.name, getattr(stored, f.name), getattr(declared, f.name))
            for f in fields(declared)
            if getattr(declared, f.name) is not None and getattr(declared, f.name) != getattr(stored, f.name)
        ]
        if disagreements:
            raise ConfigError(_disagreement(name, disagreements))
    return stored


def _disagreement(name: str, found: list[tuple[str, Any, Any]]) -> str:
    def shown(value: Any) -> str:
        return json.dumps(list(value) if isinstance(value, tuple) else value)

    parts = "; ".join(f"{key} is {shown(held)} there, {shown(said)} in these settings" for key, held, said in found)
    return (
        f"collection {name!r} holds its own rules and these settings disagree: {parts}. The collection's rules "
        f"hold for every process: change them with `vectorsync collections set {name} ...` (it says what it "
        f"costs), or make [collections.{name}] say the same (or leave the key out)"
    )


def shown_by(identity: str | None) -> Rules:
    """The rules a collection made before rules were kept shows by the analyzer identity of its terms
    (``language/version``; None: it keeps none). No required filter: none was ever stored."""
    if identity is None:
        return Rules()
    language = identity.split("/")[0]
    return Rules(keywords=True, language=language if language in LANGUAGES else "english")


def terms_by(rules: Rules) -> Analyzer | None:
    """The analyzer that makes the terms a collection under ``rules`` keeps; None when it keeps none."""
    return analyzer(rules.language) if rules.keywords else None
