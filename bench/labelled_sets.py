"""The quality bench's labelled sets, built mechanically from Debian's documentation packages.

Each set is records (id -> text, chunked and indexed as a collection) and labelled queries
(``store.evaluation.EvalQuery``). How each is cut is stated in ``bench/quality.py``'s docstring.
"""

from __future__ import annotations

import gzip
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from store.evaluation import EvalQuery

__all__ = ["LabelledSet", "debian_faq", "git_faq", "git_options", "man_pages"]

_NUMBERED = re.compile(r"^(?:Chapter\s)?(\d+(?:\.\d+)*)\.\s(.*)$")
_MAN_TITLE = re.compile(r"^(git[\w-]*)\(\d\)$")
_UNDERLINE = re.compile(r"^-{3,}$")
_TERM = re.compile(r"^\S.*[^:]::$")
_DIRECTIVE = re.compile(r"^(include|ifdef|ifndef|endif)::")
_FLAG = re.compile(r"-{1,2}[A-Za-z0-9][A-Za-z0-9-]*")


@dataclass(frozen=True)
class LabelledSet:
    """Records to index (id -> text) and the queries whose relevant records are among them."""

    name: str
    records: dict[str, str]
    queries: list[EvalQuery]

    def summary(self) -> str:
        relevant = {r for q in self.queries for r in q.relevant}
        return (
            f"{len(self.queries)} queries, {len(self.records)} records ({len(relevant)} relevant, "
            f"{len(self.records) - len(relevant)} distractors)"
        )


def _paragraphs(lines: list[str]) -> str:
    """Dedented text with each paragraph's wrapped lines joined into one."""
    body = textwrap.dedent("\n".join(lines)).strip()
    return "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", body) if p.strip())


def debian_faq(doc: Path) -> LabelledSet:
    """Debian's FAQ: a heading with '?' is a question (the query) and its body the one relevant record;
    every other numbered section's body is a distractor. Headings are never part of a record."""
    text = gzip.decompress((doc / "debian" / "FAQ" / "debian-faq.en.txt.gz").read_bytes()).decode("utf-8")
    lines = text.replace("\u00a0", " ").split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("Chapter 1. "))
    sections: list[tuple[str, str, list[str]]] = []
    i = start
    while i < len(lines):
        found = _NUMBERED.match(lines[i])
        if found is None:
            if sections:
                sections[-1][2].append(lines[i])
            i += 1
            continue
        heading, i = [found.group(2)], i + 1
        while i < len(lines) and lines[i].strip() and not lines[i].startswith(" "):
            heading.append(lines[i])  # a heading wraps onto unindented lines
            i += 1
        sections.append((found.group(1), " ".join(" ".join(heading).split()), []))
    records, queries = {}, []
    for number, title, body in sections:
        answer = _paragraphs(body)
        if not answer:
            continue
        records[f"faq-{number}"] = answer
        if "?" in title:
            queries.append(EvalQuery(title, (f"faq-{number}",)))
    return LabelledSet("debian faq", records, queries)


def _man_pages(doc: Path) -> Iterator[tuple[str, list[str]]]:
    for path in sorted((doc / "git-doc").glob("git*.txt")):
        lines = path.read_text(encoding="utf-8").split("\n")
        found = _MAN_TITLE.match(lines[0])
        if found is not None:
            yield found.group(1), lines


def man_pages(doc: Path) -> dict[str, str]:
    """Every git manual page (its AsciiDoc source, as git-doc ships it) by page name."""
    return {name: "\n".join(lines).strip() for name, lines in _man_pages(doc)}


def git_faq(doc: Path) -> LabelledSet:
    """gitfaq(7): each ``[[anchor]]`` question (the query) and its answer (the relevant record); every other
    git manual page, whole, is a distractor."""
    lines = (doc / "git-doc" / "gitfaq.txt").read_text(encoding="utf-8").split("\n")
    records, queries = {}, []
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("[[") and lines[i].endswith("]]")):
            i += 1
            continue
        anchor, question = lines[i][2:-2], lines[i + 1].removesuffix("::")
        i += 2
        body = []
        while (
            i < len(lines)
            and not lines[i].startswith("[[")
            and not (i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) and lines[i].strip())
        ):
            body.append("" if lines[i] == "+" else lines[i])
            i += 1
        records[f"gitfaq-{anchor}"] = _paragraphs(body)
        queries.append(EvalQuery(question, (f"gitfaq-{anchor}",)))
    for name, text in man_pages(doc).items():
        if name != "gitfaq":
            records[f"man-{name}"] = text
    return LabelledSet("git faq", records, queries)


def _options(name: str, lines: list[str]) -> Iterator[tuple[list[str], str]]:
    """(term lines, description) of each entry of a page's OPTIONS section, includes and conditionals dropped."""
    starts = [i for i in range(len(lines) - 1) if lines[i] == "OPTIONS" and _UNDERLINE.match(lines[i + 1])]
    if not starts:
        return
    entry: tuple[list[str], list[str]] | None = None
    for i in range(starts[0] + 2, len(lines)):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and _UNDERLINE.match(lines[i + 1]) and len(lines[i + 1]) == len(line):
            break  # the next section
        if _DIRECTIVE.match(line):
            continue
        if _TERM.match(line):
            if entry is not None and any(s.strip() for s in entry[1]):
                yield entry[0], _paragraphs(entry[1])
                entry = None
            entry = entry or ([], [])
            entry[0].append(line[:-2])
        elif entry is not None:
            entry[1].append("" if line == "+" else line)
    if entry is not None and any(s.strip() for s in entry[1]):
        yield entry[0], _paragraphs(entry[1])


def flag(term: str) -> str | None:
    """The option a user types for an entry's term: ``--[no-]verify`` -> ``--verify``, ``-C <commit>`` -> ``-C``,
    ``--fixup=[(amend|reword):]<commit>`` -> ``--fixup``; None when the term names no option (``<pathspec>``)."""
    found = _FLAG.match(term.strip("`'\" ").replace("[no-]", ""))
    return found.group(0) if found else None


def git_options(doc: Path) -> LabelledSet:
    """One record per option entry of every git manual page; each entry's query names the command and the
    option: ``what does git commit --amend do`` (the entry's first long option, else its first short one)."""
    records: dict[str, str] = {}
    relevant: dict[str, list[str]] = {}
    for name, lines in _man_pages(doc):
        for number, (terms, description) in enumerate(_options(name, lines)):
            flags = [f for f in map(flag, terms) if f is not None]
            if not flags:
                continue
            record = f"opt-{name}-{number}"
            records[record] = f"{name} {', '.join(terms)}\n\n{description}"
            chosen = next((f for f in flags if f.startswith("--")), flags[0])
            query = f"what does {name.replace('-', ' ', 1)} {chosen} do"
            relevant.setdefault(query, []).append(record)
    queries = [EvalQuery(query, tuple(ids)) for query, ids in relevant.items()]
    return LabelledSet("git options", records, queries)


def chunked(labelled: LabelledSet, max_tokens: int = 512, overlap: int = 64) -> list[tuple[str, str, str, int]]:
    """(chunk id, text, record id, chunk number) of every record, as the worker's chunker cuts them."""
    from worker.pipeline.chunker import Chunker

    chunker = Chunker(max_tokens=max_tokens, overlap=overlap)
    return [
        (f"{rid}:{n}", chunk.text, rid, n)
        for rid, text in labelled.records.items()
        for n, chunk in enumerate(chunker.split(text))
    ]
