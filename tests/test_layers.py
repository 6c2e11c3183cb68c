"""The layering of the code, read from the source with `ast`.

A layer imports only the layers below it, and a package of layer 1 imports
only what its row below names. A function-level import of a project module
is allowed in `harness.cli` (start-up time) and where the module imported
pulls in a heavy third-party package at its top (pyspark, deltalake, pysail):
never to dodge a cycle. Every `python -m` target the code starts resolves.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("harness", "checkers", "workloads", "nemeses")
HEAVY = ("pyspark", "deltalake", "pysail")

# Each unit of the code, its layer, and what it may import besides itself.
L0 = ("harness.core", "harness.deltalog")
UNITS: dict[str, tuple[int, tuple[str, ...]]] = {
    "harness.core": (0, ()),
    "harness.deltalog": (0, ("harness.core",)),
    "harness.engines": (1, L0),
    "harness.s3proxy": (1, L0),
    "checkers": (1, L0),
    "workloads": (1, (*L0, "harness.engines.base")),
    "nemeses": (1, (*L0, "harness.s3proxy.client")),
    "harness.run": (2, (*L0, "harness.engines", "harness.s3proxy", "checkers", "workloads", "nemeses")),
    # check needs only the run folder: no workload, engine or nemesis.
    "harness.check": (2, (*L0, "checkers")),
    "harness.matrices": (
        3,
        (*L0, "harness.engines", "harness.s3proxy", "checkers", "workloads", "nemeses", "harness.run", "harness.check"),
    ),
    # the results browser: lists run folders and serves their files.
    "harness.serve": (3, (*L0, "harness.check")),
    # reproduce: replays an anomaly's schedule (or a conformance cell) on an
    # engine, judged by the checker (or the cell's verdict) that found it.
    "harness.repro": (
        4,
        (
            *L0,
            "harness.engines",
            "harness.s3proxy",
            "checkers",
            "workloads",
            "nemeses",
            "harness.run",
            "harness.check",
            "harness.matrices",
        ),
    ),
    "harness.bench": (
        3,
        (*L0, "harness.engines", "harness.s3proxy", "checkers", "workloads", "nemeses", "harness.run", "harness.check"),
    ),
    "harness.cli": (
        5,
        tuple(
            u
            for u in (
                "harness.core",
                "harness.deltalog",
                "harness.engines",
                "harness.s3proxy",
                "checkers",
                "workloads",
                "nemeses",
                "harness.run",
                "harness.check",
                "harness.matrices",
                "harness.serve",
                "harness.bench",
                "harness.repro",
            )
        ),
    ),
    "harness": (0, ()),  # the package's own __init__: sets an environment variable, imports nothing
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the project module imported
    line: int
    top: bool  # at module level (also inside a module-level if/try)


def _unit(module: str) -> str:
    return max((u for u in UNITS if module == u or module.startswith(u + ".")), key=len)


def _covers(prefix: str, module: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def modules(root: Path) -> dict[str, Path]:
    """The project's modules: its Python files, and the C extensions by
    their stubs (a .pyi with no .py beside it)."""
    out = {}
    for r in ROOTS:
        for p in sorted((root / r).rglob("*.py")) + sorted((root / r).rglob("*.pyi")):
            if p.suffix == ".pyi" and p.with_suffix(".py").exists():
                continue
            name = ".".join(p.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = p
    return out


def imports(root: Path) -> tuple[list[Import], dict[str, set[str]]]:
    """Every project import, and each module's third-party top-level imports."""
    mods = modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    found: list[Import] = []
    third: dict[str, set[str]] = {}
    for m, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        top: set[int] = set()

        def mark(body: list[ast.stmt], top: set[int] = top) -> None:
            for n in body:
                top.add(id(n))
                if isinstance(n, ast.If):
                    mark(n.body)
                    mark(n.orelse)
                elif isinstance(n, ast.Try):
                    mark(n.body)
                    mark(n.orelse)
                    mark(n.finalbody)
                    for h in n.handlers:
                        mark(h.body)

        mark(tree.body)
        pkg = m if path.name == "__init__.py" else m.rpartition(".")[0]
        third[m] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                names = [f"{base}.{a.name}" for a in node.names]
                # `from pkg import sub` depends on sub; the package itself
                # only where a name is one of its attributes.
                if any(f"{base}.{a.name}" not in mods for a in node.names):
                    names.append(base)
            else:
                continue
            targets: set[str] = set()
            for n in names:
                if n.split(".")[0] not in ROOTS:
                    if id(node) in top:
                        third[m].add(n.split(".")[0])
                    continue
                target = resolve(n)
                if target and target != m:
                    targets.add(target)
            found += [Import(m, t, node.lineno, id(node) in top) for t in sorted(targets)]
    return found, third


def heavy_modules(found: list[Import], third: dict[str, set[str]]) -> set[str]:
    """Project modules that load a heavy package when imported (transitively,
    through their module-level imports)."""
    heavy = {m for m, t in third.items() if t & set(HEAVY)}
    changed = True
    while changed:
        changed = False
        for i in found:
            if i.top and i.target in heavy and i.module not in heavy:
                heavy.add(i.module)
                changed = True
    return heavy


def cycles(found: list[Import]) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for i in found:
        graph.setdefault(i.module, set()).add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def violations(root: Path) -> list[str]:
    found, third = imports(root)
    heavy = heavy_modules(found, third)
    out = []
    for i in found:
        unit, target_unit = _unit(i.module), _unit(i.target)
        where = f"{i.module}:{i.line} imports {i.target}"
        if unit != target_unit:
            layer, allowed = UNITS[unit]
            if not any(_covers(a, i.target) for a in allowed):
                tlayer = UNITS[target_unit][0]
                why = (
                    "a higher layer"
                    if tlayer > layer
                    else "the same layer"
                    if tlayer == layer
                    else "a unit not allowed"
                )
                out.append(f"{where}: L{layer} {unit} imports {why} (L{tlayer} {target_unit})")
        if not i.top and unit != "harness.cli" and i.target not in heavy:
            out.append(f"{where} inside a function, and {i.target} loads no heavy package")
    out += [f"import cycle: {' -> '.join(c)}" for c in cycles(found)]
    return out


def test_the_tree_keeps_its_layers() -> None:
    assert violations(REPO) == []


def test_harness_has_no_loose_module() -> None:
    loose = sorted(p.name for p in (REPO / "harness").glob("*.py") if p.name != "__init__.py")
    assert loose == []
    assert set(UNITS) - {"harness", "checkers", "workloads", "nemeses"} == {
        f"harness.{p.name}" for p in (REPO / "harness").iterdir() if (p / "__init__.py").is_file()
    }


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for r in ROOTS:
        for d in ("", "core", "run", "engines", "check"):
            (tmp_path / r / d).mkdir(parents=True, exist_ok=True)
            (tmp_path / r / d / "__init__.py").write_text("")
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    "files, expected",
    [
        (
            {
                "harness/core/history.py": "from harness.run.runner import Runner\n",
                "harness/run/runner.py": "Runner = 1\n",
            },
            "harness.core.history:1 imports harness.run.runner: "
            "L0 harness.core imports a higher layer (L2 harness.run)",
        ),
        (
            {"checkers/durability.py": "from workloads.append import X\n", "workloads/append.py": "X = 1\n"},
            "checkers.durability:1 imports workloads.append: L1 checkers imports the same layer (L1 workloads)",
        ),
        (
            {"harness/check/pipeline.py": "from workloads import make_workload\n"},
            "harness.check.pipeline:1 imports workloads: L2 harness.check imports a unit not allowed (L1 workloads)",
        ),
        (
            {"harness/run/a.py": "def f():\n    from harness.run.b import g\n", "harness/run/b.py": "def g(): pass\n"},
            "harness.run.a:2 imports harness.run.b inside a function, and harness.run.b loads no heavy package",
        ),
        (
            {"harness/run/a.py": "from harness.run.b import g\n", "harness/run/b.py": "from harness.run.a import f\n"},
            "import cycle: harness.run.a -> harness.run.b",
        ),
    ],
)
def test_a_planted_violation_is_caught(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    """The rules can fail: each planted import breaks one of them."""
    assert expected in violations(_plant(tmp_path, files))


def test_a_function_level_import_of_a_heavy_module_is_allowed(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "harness/engines/__init__.py": "def make():\n    from harness.engines.deltars import C\n",
            "harness/engines/deltars.py": "import deltalake\nC = 1\n",
        },
    )
    assert violations(root) == []


_M_TARGET = re.compile(r"""(?:"-m",\s*"|python_argv\(\s*"|python -m )((?:harness|checkers|workloads|nemeses)[\w.]*)""")


def test_every_python_m_target_resolves() -> None:
    targets = {t.rstrip(".") for path in modules(REPO).values() for t in _M_TARGET.findall(path.read_text())}
    for doc in [REPO / "README.md", *sorted((REPO / "docs" / "src").rglob("*.md"))]:
        targets |= {t.rstrip(".") for t in _M_TARGET.findall(doc.read_text())}
    assert "harness.cli" in targets
    for t in sorted(targets):
        spec = importlib.util.find_spec(t)
        assert spec is not None, f"python -m {t}: no such module"
        if spec.submodule_search_locations is not None:  # a package runs its __main__
            assert importlib.util.find_spec(f"{t}.__main__") is not None, f"python -m {t}: package without __main__"
