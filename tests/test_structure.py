"""The floor plan (docs/architecture.md), checked from the source: no import cycle between files, no long function or module.

Both trees count: the library (``graphprof/``) and the command line (``cli/graphprof_cli/``). Every
import counts, wherever it is written (module level, inside a function, under ``TYPE_CHECKING``): a
lazy or type-only import still ties the two files together, so each file must sit on one floor.

Two rules keep the graph about files rather than about Python's import machinery:

* ``from pkg import name``, where ``pkg/__init__.py`` re-exports ``name`` from a module, depends on
  that module (the facade is a doorway, not a floor);
* a package's ``__init__.py`` importing its own children is that re-export, not a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = (ROOT / "graphprof", ROOT / "cli" / "graphprof_cli")

#: The longest function body allowed, in lines, docstring aside (docs/architecture.md).
MAX_BODY = 60


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # path:line of the import


def _modules(trees: tuple[Path, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under each tree (a tree is a top-level package)."""
    found: dict[str, Path] = {}
    for tree in trees:
        for path in sorted(tree.rglob("*.py")):
            parts = list(path.relative_to(tree.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module an ``ImportFrom`` names, with a relative import resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest module of ours that ``name`` (``a.b.c``) refers to, or ``None`` for a foreign one."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _reexports(modules: dict[str, Path]) -> dict[str, dict[str, str]]:
    """For each package: the names its ``__init__.py`` imports from a module of ours -> that module."""
    out: dict[str, dict[str, str]] = {}
    for name, path in modules.items():
        if path.name != "__init__.py":
            continue
        table = out.setdefault(name, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                source = _known(_absolute(node, name), modules)
                if source is not None and source != name:
                    for alias in node.names:
                        table[alias.asname or alias.name] = source
    return out


def _targets(
    node: ast.Import | ast.ImportFrom, package: str, modules: dict[str, Path], reexports: dict[str, dict[str, str]]
) -> Iterator[str]:
    """The modules of ours that one import statement depends on."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _known(alias.name, modules)
            if target is not None:
                yield target
        return
    base = _absolute(node, package)
    for alias in node.names:
        submodule = _known(f"{base}.{alias.name}", modules)
        if submodule == f"{base}.{alias.name}":
            yield submodule  # ``from pkg import module``
            continue
        through = reexports.get(base, {}).get(alias.name)
        target = through or _known(base, modules)
        if target is not None:
            yield target


def import_graph(trees: tuple[Path, ...] = TREES) -> list[Edge]:
    """Every import between two of our files, as written in the source."""
    modules = _modules(trees)
    reexports = _reexports(modules)
    edges: list[Edge] = []
    for name, path in modules.items():
        package = _package_of(name, path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, package, modules, reexports):
                own_child = path.name == "__init__.py" and target.startswith(name + ".")
                if target != name and not own_child:
                    edges.append(Edge(name, target, f"{_shown(path)}:{node.lineno}"))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected groups of two or more files (Tarjan's algorithm), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def long_functions(trees: tuple[Path, ...] = TREES, limit: int = MAX_BODY) -> list[str]:
    """``path:line name: N lines`` for every function (methods and nested ones too) whose body, from its
    first statement after the docstring to its last line, is longer than ``limit`` lines."""
    found: list[str] = []
    for path in _modules(trees).values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body
            if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            lines = (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1
            if lines > limit:
                found.append(f"{_shown(path)}:{node.lineno} {node.name}: {lines} lines")
    return sorted(found)


def _describe(group: list[str], edges: list[Edge]) -> str:
    inside = sorted({(e.source, e.target, e.where) for e in edges if e.source in group and e.target in group})
    return " <-> ".join(group) + "".join(f"\n    {s} imports {t} ({where})" for s, t, where in inside)


def test_no_import_cycle_between_files() -> None:
    edges = import_graph()
    found = cycles(edges)
    report = "\n".join(_describe(group, edges) for group in found)
    assert not found, f"{len(found)} import cycle(s) between files:\n{report}"


def test_no_function_body_over_the_limit() -> None:
    found = long_functions()
    assert not found, f"{len(found)} function(s) with a body over {MAX_BODY} lines:\n" + "\n".join(found)


# ---- the checker itself, on a planted tree ---------------------------------------------------------------


def test_the_checker_sees_every_kind_of_import_and_a_long_body(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.low import helper\nfrom pkg.sub import deep\n")  # re-exports only
    (pkg / "low.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg.high import High\n"  # type-only: still an edge
        "def helper():\n" + "    x = 1\n" * (MAX_BODY + 1)  # one line too many
    )
    (pkg / "high.py").write_text("def run():\n    from . import low\n    return low\n")  # lazy and relative
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("from pkg import helper\n")  # through the facade: to pkg.low
    (pkg / "sub" / "other.py").write_text("from ..sub import deep\nimport os\n")
    edges = import_graph((pkg,))
    assert {(e.source, e.target) for e in edges} == {
        ("pkg.low", "pkg.high"),
        ("pkg.high", "pkg.low"),
        ("pkg.sub.deep", "pkg.low"),
        ("pkg.sub.other", "pkg.sub.deep"),
    }
    assert cycles(edges) == [["pkg.high", "pkg.low"]]
    (found,) = long_functions((pkg,))
    assert found.endswith(f"low.py:4 helper: {MAX_BODY + 1} lines")


# ---- floors: a lower floor never imports a higher one --------------------------------------------------
#: The floor plan, lowest first. A module's floor is that of the longest prefix listed here; each floor
#: may import its own and the floors below. ``graphprof`` (the package's front door) and the command
#: line sit on top.
FLOORS: tuple[tuple[str, ...], ...] = (
    # 0: facts every layer shares, torch-free or nearly: errors, the shared leaves, the JSON Schemas
    ("graphprof.version", "graphprof.errors", "graphprof.schemas", "graphprof.base"),
    # 1: the op-cost registry and the devices (presets, the local preset, the predictor)
    ("graphprof.formulas", "graphprof.devices"),
    # 2: resolving models and capturing them
    ("graphprof.models", "graphprof.capture"),
    # 3: the run loop, its observers, and what a run costs (the pure result records)
    ("graphprof.run", "graphprof.cost"),
    # 4: the passes over a session: the dry run, real runs, graphs
    ("graphprof.session", "graphprof.profile", "graphprof.measure", "graphprof.graph"),
    # 5: the façade over one prepared model
    ("graphprof.prepared",),
    # 6: the jobs built on prepared models
    ("graphprof.profiler", "graphprof.compare", "graphprof.sharding", "graphprof.scaling", "graphprof.calibrate",
     "graphprof.crosscheck", "graphprof.generate", "graphprof.partition", "graphprof.gnn", "graphprof.training"),
    # 7: renderers: pure functions of results
    ("graphprof.render",),
    # 8: the seeds' compatibility, at the edge
    ("graphprof.compat", "graphprof.seed004"),
    # 9: the package's front door and the command line
    ("graphprof", "graphprof_cli"),
)  # fmt: skip

#: Imports allowed to run upward, each with its reason. The issue's bound is 2; keep it as short as you can.
UPWARD_ALLOWED: frozenset[tuple[str, str]] = frozenset()


def floor_of(module: str) -> int:
    """The floor of ``module``: that of the longest prefix in :data:`FLOORS` (a ``KeyError`` for none)."""
    best: tuple[int, int] | None = None
    for level, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), level)
    if best is None:
        raise KeyError(f"{module} is on no floor: add it to FLOORS in tests/test_structure.py")
    return best[1]


def upward_imports(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if floor_of(e.target) > floor_of(e.source)]


def test_every_module_is_on_a_floor() -> None:
    for name in _modules(TREES):
        floor_of(name)


def test_no_import_runs_from_a_lower_floor_to_a_higher_one() -> None:
    found = [e for e in upward_imports(import_graph()) if (e.source, e.target) not in UPWARD_ALLOWED]
    report = "\n".join(
        f"  {e.source} (floor {floor_of(e.source)}) imports {e.target} (floor {floor_of(e.target)}) at {e.where}" for e in found
    )
    assert not found, f"{len(found)} upward import(s):\n{report}"
    assert len(UPWARD_ALLOWED) <= 2


def test_the_core_never_imports_the_seeds_compatibility() -> None:
    """``graphprof/compat/`` (and ``graphprof.seed004``, its import path for seed 004) is the edge: only
    the command line and the edge itself import it."""
    edge = ("graphprof.compat", "graphprof.seed004")
    found = [
        e for e in import_graph()
        if e.target.startswith(edge) and not e.source.startswith((*edge, "graphprof_cli"))
    ]  # fmt: skip
    assert not found, "\n".join(f"{e.source} imports {e.target} at {e.where}" for e in found)


def test_renderers_consume_results_and_never_classify_predict_or_run() -> None:
    """A renderer reads a result (a profile carries its roofline); it never classifies, predicts or
    dry-runs again: no renderer imports the classifier, the predictor, or anything that runs a model."""
    forbidden = ("graphprof.devices.predict", "graphprof.prepared", "graphprof.profile", "graphprof.session", "graphprof.run.loop")
    found = [e for e in import_graph() if e.source.startswith("graphprof.render") and e.target.startswith(forbidden)]
    for path in sorted((ROOT / "graphprof" / "render").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "graphprof.cost.roofline":
                names = {a.name for a in node.names}
                if names & {"classify", "with_roofline", "predict_ops"}:
                    found.append(Edge(path.stem, "graphprof.cost.roofline.classify", f"{_shown(path)}:{node.lineno}"))
    assert not found, "\n".join(f"{e.source} imports {e.target} at {e.where}" for e in found)


# ---- size and the one engine -----------------------------------------------------------------------------

#: The longest module allowed, in lines (docs/architecture.md).
MAX_MODULE = 600


def long_modules(trees: tuple[Path, ...] = TREES, limit: int = MAX_MODULE) -> list[str]:
    """``path: N lines`` for every module longer than ``limit`` lines."""
    found = []
    for path in _modules(trees).values():
        lines = len(path.read_text().splitlines())
        if lines > limit:
            found.append(f"{_shown(path)}: {lines} lines")
    return sorted(found)


def test_no_module_over_the_limit() -> None:
    found = long_modules()
    assert not found, f"{len(found)} module(s) over {MAX_MODULE} lines:\n" + "\n".join(found)


def dispatch_modes(trees: tuple[Path, ...] = TREES) -> list[str]:
    """``module.Class`` for every class that subclasses ``TorchDispatchMode`` by that name."""
    found = []
    for name, path in _modules(trees).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if "TorchDispatchMode" in bases:
                    found.append(f"{name}.{node.name}")
    return sorted(found)


#: The dispatch modes that see every aten call, besides the run loop's own tap: none. The dry run, the
#: training plan's step, the sharded step and calibration's costs are all observers of the one loop (issue 50).
OUTSIDE_THE_LOOP: frozenset[str] = frozenset()


def test_one_dispatch_mode_sees_the_run() -> None:
    """The run loop's tap is the one ``TorchDispatchMode`` of a run; no new one appears beside it."""
    found = set(dispatch_modes())
    assert "graphprof.run.dispatch.OpTap" in found
    extra = found - OUTSIDE_THE_LOOP - {"graphprof.run.dispatch.OpTap"}
    assert not extra, f"a new TorchDispatchMode beside the run loop's (make it an observer): {sorted(extra)}"
    gone = OUTSIDE_THE_LOOP - found
    assert not gone, f"no longer a dispatch mode: remove from OUTSIDE_THE_LOOP: {sorted(gone)}"


def test_the_size_checkers_see_a_long_module_and_a_dispatch_mode(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "big.py").write_text("x = 1\n" * (MAX_MODULE + 1))
    (pkg / "tap.py").write_text("from torch.utils._python_dispatch import TorchDispatchMode\nclass T(TorchDispatchMode):\n    pass\n")
    assert long_modules((pkg,)) == [f"{_shown(pkg / 'big.py')}: {MAX_MODULE + 1} lines"]
    assert dispatch_modes((pkg,)) == ["pkg.tap.T"]


def roofline_parameters(folder: Path = ROOT / "graphprof" / "render") -> list[str]:
    """``path:line name`` for every public function (or method) under ``folder`` with a parameter named
    ``roofline``: a renderer takes the result alone, and a profile carries its roofline."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                a = node.args
                names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p is not None}
                if "roofline" in names:
                    found.append(f"{_shown(path)}:{node.lineno} {node.name}")
    return found


def test_renderers_take_the_result_alone(tmp_path: Path) -> None:
    """No renderer takes a roofline beside the profile (the second way to give it, which could disagree
    with the one the profile carries): attach it with ``graphprof.cost.roofline.with_roofline`` instead."""
    found = roofline_parameters()
    assert not found, "renderers taking a roofline beside the result (read profile.roofline):\n" + "\n".join(found)
    (tmp_path / "r.py").write_text("def render(profile, *, roofline=None): ...\ndef _helper(profile, roofline): ...\n")
    assert roofline_parameters(tmp_path) == [f"{_shown(tmp_path / 'r.py')}:1 render"]
