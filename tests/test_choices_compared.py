"""Choices are compared as enum members, never as the strings they stand for (docs/architecture.md).

A record typed with a choice (``Mode``, ``Phase``, ``Bound``, ``OutputFormat``...) and code that compares
it with ``== "train"`` drift apart silently when a value is renamed; ``is Mode.TRAIN`` fails loudly. This
reads the source: every string constant compared (``==``, ``!=``) with something is checked against the
values of every enum the library defines, wherever it is defined.

Two kinds of comparison are not about our choices and are left out by rule: torch's device types
(``device.type == "cuda"``, ``device_type``, a device's name split at its index), which are torch's strings, and the few free-text parameters
of the seeds' APIs listed in :data:`NOT_A_CHOICE`, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = (ROOT / "graphprof", ROOT / "cli" / "graphprof_cli")

#: ``path:line`` -> why the string compared there is not one of our choices.
NOT_A_CHOICE = {
    "graphprof/gnn/estimate.py": "seed 004's mpnn_type / pe_type are its own free strings ('none' among them)",
    "graphprof/gnn/compare.py": "seed 004's pe_type, as its API takes it",
}


def _files(trees: tuple[Path, ...]) -> list[Path]:
    return sorted(p for tree in trees for p in tree.rglob("*.py"))


def _base_names(node: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]


def enum_values(trees: tuple[Path, ...] = TREES) -> dict[str, set[str]]:
    """Every string value of every enum class defined under ``trees`` (an enum: a class whose bases lead,
    by name, to ``Enum``/``StrEnum``) -> the classes that hold it."""
    classes: dict[str, list[ast.ClassDef]] = {}
    for path in _files(trees):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(node)

    def is_enum(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in ("Enum", "StrEnum"):
            return True
        if name in seen or name not in classes:
            return False
        return any(is_enum(b, seen | {name}) for c in classes[name] for b in _base_names(c))

    values: dict[str, set[str]] = {}
    for name, nodes in classes.items():
        if not is_enum(name):
            continue
        for node in nodes:
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                    if isinstance(stmt.value.value, str):
                        values.setdefault(stmt.value.value, set()).add(name)
    return values


def _torch_device_type(side: ast.expr) -> bool:
    """What reads a torch device's type (``x.type``, ``device_type``, ``str(m.device).split(":")[0]``, a
    record's ``"type"`` field): torch's strings, not our choices."""
    text = ast.unparse(side)
    return text.endswith(".type") or "device" in text or "'type'" in text


def literal_comparisons(trees: tuple[Path, ...] = TREES) -> list[str]:
    """``path:line: source  [Enum]`` for every ``==``/``!=`` between a string constant that is some enum's
    value and anything but a torch device type."""
    values = enum_values(trees)
    found = []
    for path in _files(trees):
        shown = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        if shown in NOT_A_CHOICE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Compare) or not any(isinstance(o, (ast.Eq, ast.NotEq)) for o in node.ops):
                continue
            sides = [node.left, *node.comparators]
            constants = [s for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
            others = [s for s in sides if s not in constants]
            if any(_torch_device_type(s) for s in others):
                continue
            for c in constants:
                if c.value in values:
                    enums = ",".join(sorted(values[c.value]))
                    found.append(f"{shown}:{node.lineno}: {ast.unparse(node)}  [{enums}]")
    return sorted(found)


def test_no_choice_is_compared_as_its_string() -> None:
    found = literal_comparisons()
    assert not found, f"{len(found)} comparison(s) of a choice with its string (use the member):\n" + "\n".join(found)


def test_every_exception_names_a_file_that_exists() -> None:
    for path in NOT_A_CHOICE:
        assert (ROOT / path).is_file(), path


def test_the_checker_sees_a_state_literal_and_spares_device_types(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "choices.py").write_text(
        "import enum\nclass Choice(str, enum.Enum):\n    pass\nclass Mode(Choice):\n    TRAIN = 'train'\n    CUDA = 'cuda'\n"
    )
    (pkg / "use.py").write_text(
        "def f(p, d):\n"
        "    a = p.mode == 'train'\n"  # flagged: a choice as its string
        "    b = d.type == 'cuda'\n"  # torch's device type: spared
        "    c = p.mode is Mode.TRAIN\n"  # the member: fine
        "    return 'other' != p.name, a, b, c\n"  # not a choice's value: fine
    )
    assert enum_values((pkg,)) == {"train": {"Mode"}, "cuda": {"Mode"}}
    (found,) = literal_comparisons((pkg,))
    assert found.endswith("use.py:2: p.mode == 'train'  [Mode]")
