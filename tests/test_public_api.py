"""The public API as a user's type checker sees it: a literal ``__all__`` and typed re-exports."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import graphprof

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "graphprof" / "__init__.py"


def _type_checking_imports() -> dict[str, str]:
    """``name -> module`` (``module:defined`` where the package exports a name under the job's name, as
    ``calibrate_device`` for ``graphprof.calibrate.calibrate``) for the imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(INIT.read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    found: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        for alias in node.names:
            assert alias.asname is not None, f"{alias.name}: re-export it explicitly (`import X as X`)"
            found[alias.asname] = node.module if alias.asname == alias.name else f"{node.module}:{alias.name}"
    return found


def test_all_is_a_literal_and_every_name_is_typed_and_importable() -> None:
    tree = ast.parse(INIT.read_text())
    assigned = next(n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__")
    literal = ast.literal_eval(assigned.value)  # raises if __all__ is built at run time
    assert literal == graphprof.__all__
    assert len(set(literal)) == len(literal)
    typed = _type_checking_imports()
    runtime = graphprof._EXPORTS  # type: ignore[attr-defined]  # only defined when not type checking
    assert set(literal) - {"__version__"} == set(typed) == set(runtime)
    assert typed == runtime  # each name comes from the same module for the type checker and at run time
    for name in runtime:
        assert getattr(graphprof, name) is not None
    assert sorted(dir(graphprof)) == sorted(literal)
    with pytest.raises(AttributeError, match="no attribute 'profle_model'"):
        graphprof.profle_model  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.slow  # mypy reads graphprof and torch: about half a minute
def test_a_users_mypy_strict_sees_real_types(tmp_path: Path) -> None:
    (tmp_path / "wrong.py").write_text('import graphprof\n\ngraphprof.profile_model(123, batch_size="x")\n')
    (tmp_path / "right.py").write_text(
        "import graphprof\n\n"
        'profile: graphprof.Profile = graphprof.profile_model("resnet18", batch_size=2)\n'
        "macs: int = profile.total_macs\n"
        "observer: graphprof.Observer = graphprof.Observer()\n"
    )
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # this checkout's graphprof, whatever is installed
    command = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental"]
    command += ["--config-file", os.devnull, "wrong.py", "right.py"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 1, result.stdout + result.stderr
    assert all(line.startswith("wrong.py:3:") for line in errors), result.stdout  # the right file passes
    assert any('Argument 1 to "profile_model" has incompatible type "int"' in line for line in errors), result.stdout
    assert any('"batch_size" to "profile_model" has incompatible type "str"' in line for line in errors), result.stdout
