"""The shape of the documentation: a README that stays a front page and maps every page, a nav that holds
every page, links from the README that land on a real heading, and the facts a page must keep."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.docs_examples import ROOT

README = ROOT / "README.md"
#: "At most about 300 lines": the README is what vectorsync is, the quick start, a tour and the map.
MAX_README_LINES = 300
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, in order."""

    def walk(entries: list[Any]) -> list[str]:
        found: list[str] = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found += walk(value) if isinstance(value, list) else [value]
        return found

    return walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])


def links(path: Path) -> list[str]:
    return [t for t in _LINK.findall(path.read_text()) if "://" not in t and not t.startswith("mailto:")]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs make it (for the headings these pages use)."""
    text = re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", path.read_text())  # a "# comment" in a fence is no heading
    return {slug(h) for h in re.findall(r"(?m)^#{1,6} (.+)$", text)}


def test_the_readme_stays_a_front_page() -> None:
    assert len(README.read_text().splitlines()) <= MAX_README_LINES


def test_the_nav_holds_every_page_once() -> None:
    pages = nav_pages()
    assert sorted(pages) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert len(set(pages)) == len(pages)
    assert "ARCHITECTURE.md" in pages


def test_the_readme_and_the_docs_home_map_every_page() -> None:
    pages = set(nav_pages()) - {"index.md"}
    readme = {t.split("#")[0].removeprefix("docs/") for t in links(README) if t.startswith("docs/")}
    home = {t.split("#")[0] for t in links(ROOT / "docs" / "index.md")}
    assert pages - readme == set()
    assert pages - home == set()


def test_every_link_of_the_readme_lands_on_a_file_and_a_heading() -> None:
    broken = []
    for target in links(README):
        file, _, anchor = target.partition("#")
        path = ROOT / file if file else README
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors(path)):
            broken.append(target)
    assert broken == []


def test_the_django_page_names_the_writes_that_send_no_signal_and_the_remedy() -> None:
    django = (ROOT / "docs" / "frameworks.md").read_text().split("## Django", 1)[1].split("\n## ", 1)[0]
    for needed in ("`queryset.update()`", "`bulk_create`", "raw SQL", 'capture = "trigger"', "vectorsync reindex"):
        assert needed in django, needed
