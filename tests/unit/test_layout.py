"""The architecture, read from the code: the import rule, no import cycles, small modules, a README
that points only inside the repository."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("store", "worker", "producer")
#: Which of our packages each package may import (producer -> store <- worker).
ALLOWED = {"store": {"store"}, "worker": {"store", "worker"}, "producer": {"store", "producer"}}
#: The exceptions: the in-process test kit runs the worker's tasks, and ``vectorsync explain``, ``verify`` and
#: ``--plan`` read records as a worker does (its source, its content hash, its chunks), so each imports the worker,
#: but only inside functions (never when it is imported, so ``import producer.testing`` and the CLI stay as light as
#: producer).
LAZY_EXTRA = {
    "producer.testing": {"worker"},
    "producer.cli.explain": {"worker"},
    "producer.cli.verify": {"worker"},
    "producer.cli.plan": {"worker"},
}
#: A module over this many lines (as ruff format lays them out) holds two concepts. Functions are kept small by
#: ruff's complexity and argument limits (pyproject.toml), which no packing of lines beats.
MAX_LINES = 400
#: Each framework (its top-level modules) and the one adapter package or module that may import it.
FRAMEWORKS = {
    "django": "producer.django",
    "langchain": "store.adapters.langchain",
    "langchain_core": "store.adapters.langchain",
    "llama_index": "store.adapters.llamaindex",
}
#: The adapters: nothing outside them imports them, so the core never loads a framework (what importing the
#: core loads at run time is checked in tests/integration/producer/test_import_weight.py).
ADAPTERS = ("store.adapters", "producer.django")


def modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(path: Path, *, top_level_only: bool) -> Iterator[str]:
    """Names of our modules ``path`` imports; with ``top_level_only``, only those outside functions. Imports
    under ``if TYPE_CHECKING`` count: a type-only import is a dependency all the same, and a cycle through one is
    a cycle (five were, until a Protocol in the lower module broke each)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(ROOT).with_suffix("").parts
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level], base]).strip(".")
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        if top_level_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def ours(name: str, known: dict[str, Path]) -> str | None:
    """The module of ours that an imported name lands in (``a.b.C`` -> ``a.b``), else None."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def test_dependencies_point_one_way_producer_to_store_from_worker() -> None:
    known = modules()
    wrong = []
    for name, path in known.items():
        top = name.split(".")[0]
        allowed = ALLOWED[top] | LAZY_EXTRA.get(name, set())
        for imported in imports(path, top_level_only=False):
            target = imported.split(".")[0]
            if target in PACKAGES and target not in allowed:
                wrong.append(f"{name} imports {imported}")
        for imported in imports(path, top_level_only=True):
            if imported.split(".")[0] in LAZY_EXTRA.get(name, set()):
                wrong.append(f"{name} imports {imported} at import time")
    assert wrong == []


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_only_its_adapter_imports_a_framework_and_only_adapters_import_adapters() -> None:
    known = modules()
    wrong = []
    for name, path in known.items():
        for imported in imports(path, top_level_only=False):
            owner = FRAMEWORKS.get(imported.split(".")[0])
            if owner is not None and not _within(name, owner):
                wrong.append(f"{name} imports {imported}, which only {owner} may import")
            target = ours(imported, known)
            inside = [a for a in ADAPTERS if target is not None and _within(target, a)]
            if inside and not _within(name, inside[0]):
                wrong.append(f"{name} imports the adapter {target}")
    assert wrong == []


def test_the_contract_module_imports_nothing_of_ours() -> None:
    path = modules()["store.contract"]
    assert [i for i in imports(path, top_level_only=False) if i.split(".")[0] in PACKAGES] == []


def _graph(*, lazy: bool, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (``lazy``: inside functions too)."""
    known = modules(packages)
    return {
        name: {target for i in imports(path, top_level_only=not lazy) if (target := ours(i, known)) and target != name}
        for name, path in known.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    return cycles


def test_no_import_cycles_between_modules_counting_imports_inside_functions_and_type_only_ones() -> None:
    # A package's __init__ re-exports its modules: an edge into a package means its __init__ runs.
    graph = _graph(lazy=True)
    for name, allowed in LAZY_EXTRA.items():  # the test kit's lazy worker imports are its job, not a cycle
        graph[name] = {t for t in graph[name] if t.split(".")[0] not in allowed}
    assert _cycles(graph) == []


def test_no_import_cycles_between_bench_modules_counting_imports_inside_functions() -> None:
    """The benchmarks are code too (quality and hybrid_latency imported each other)."""
    graph = _graph(lazy=True, packages=("bench",))
    assert graph and _cycles(graph) == []


def _package(module: str, known: dict[str, Path]) -> str:
    return module if known[module].name == "__init__.py" else module.rpartition(".")[0]


def test_no_import_cycles_between_sibling_packages() -> None:
    """Folders that import each other are one concept cut in two (the ledger and the generations were)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, targets in _graph(lazy=True).items():
        if name in LAZY_EXTRA:
            continue
        here = _package(name, known)
        for target in targets:
            there = _package(target, known)
            nested = here.startswith(there + ".") or there.startswith(here + ".")  # a package and its own parts
            if there != here and not nested:
                graph.setdefault(here, set()).add(there)
        graph.setdefault(here, set())
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, set())
    assert _cycles(graph) == []


def test_store_keeps_at_most_six_modules_at_its_top() -> None:
    """The errors, the settings, the leaf contract, the client, the query helpers and __init__: the rest is
    in folders named for their concern."""
    top = sorted(p.name for p in (ROOT / "store").glob("*.py"))
    assert len(top) <= 6, top


def test_no_module_is_over_the_line_limit() -> None:
    files = [*modules().values(), *sorted((ROOT / "tests").rglob("*.py")), *sorted((ROOT / "bench").glob("*.py"))]
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _typed_imports(tree: ast.Module) -> set[str]:
    """The names imported under the module's ``if TYPE_CHECKING:``: what a lazy ``__getattr__`` serves."""
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for imported in node.body
        if isinstance(imported, ast.ImportFrom)
        for alias in imported.names
    }


def test_every_all_names_what_the_module_defines() -> None:
    missing = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        exported = next(
            (
                node.value
                for node in tree.body
                if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            ),
            None,
        )
        if exported is None:
            continue
        targets = [
            t
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        ]
        defined = {t.id for t in targets if isinstance(t, ast.Name)}
        defined |= {
            node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        defined |= {
            (a.asname or a.name).split(".")[0]
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
            for a in node.names
        }
        if any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body):
            defined |= _typed_imports(tree)  # a package that imports its names on first use (store)
        missing += [f"{name}.{n}" for n in ast.literal_eval(exported) if n not in defined]
    assert missing == []


def test_the_readme_links_only_to_files_in_the_repository() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert "docs/ARCHITECTURE.md" in local
    assert [t for t in local if not (ROOT / t).exists()] == []
    assert "DESIGN.md" not in text  # the team's map is not in the repository; docs/ARCHITECTURE.md is


def test_architecture_names_every_package_folder() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    folders = {
        p.parent.relative_to(ROOT).as_posix() + "/"
        for package in PACKAGES
        for p in (ROOT / package).rglob("__init__.py")
    }  # the full path: store/state/ledger/, not ledger/
    assert sorted(f for f in folders if f not in text) == []


def test_each_core_module_has_a_test_module_at_its_own_path() -> None:
    """Tests mirror the code (``worker/tasks/flow.py`` -> ``tests/unit/worker/tasks/test_flow.py``); the modules tested
    only by scenario so far are listed, and the list only shrinks."""
    listed = {
        line.strip()
        for line in (ROOT / "tests" / "unit" / "unmirrored_modules.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    unmirrored = set()
    for path in modules().values():
        if path.name == "__init__.py":
            continue
        relative = path.relative_to(ROOT)
        mirror = Path(*relative.parts[:-1], f"test_{path.stem}.py")
        if not any((ROOT / "tests" / kind / mirror).exists() for kind in ("unit", "integration")):
            unmirrored.add(str(relative))
    assert sorted(unmirrored - listed) == [], "a new module without its test module"
    assert sorted(listed - unmirrored) == [], "these have their test module now: take them off the list"


def test_the_lowest_versions_step_names_only_tests_that_exist() -> None:
    """scripts/test-lowest runs chosen tests by path; a test moved without it ran nothing there (pytest exit 5)."""
    script = (ROOT / "scripts" / "test-lowest").read_text()
    block = script[script.index("TESTS=(") : script.index("\n)", script.index("TESTS=("))]
    named = [
        line.strip().strip('"') for line in block.splitlines()[1:] if line.strip().startswith(("tests/", '"tests/'))
    ]
    missing = []
    for test in named:
        path, _, name = test.partition("::")
        if not (ROOT / path).exists() or (name and f"def {name}(" not in (ROOT / path).read_text()):
            missing.append(test)
    assert named and missing == []
