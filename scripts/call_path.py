"""Follow one run call by call and count the modules it crosses (issue 37's measure of how a run reads).

    python scripts/call_path.py --model resnet18        # the arguments are graphprof's own

Every Python call made in graphprof's own files (``graphprof/`` and ``cli/graphprof_cli/``) is seen
through ``sys.setprofile``; the module of each call is taken from its file. Consecutive calls in the same
module are one visit. Printed: the visits, the distinct modules crossed, and the returns (a visit to a
module the run had already left at least once). Whatever runs while a module body executes (an import, lazy or
not: its classes, decorators and tables) is not a call of the run, so the figures count the run, not the
loading of the package.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OURS = (str(ROOT / "graphprof") + "/", str(ROOT / "cli" / "graphprof_cli") + "/")


def _module(filename: str) -> str | None:
    for base in OURS:
        if filename.startswith(base):
            rel = Path(filename).relative_to(Path(base).parent).with_suffix("")
            parts = list(rel.parts)
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def main(argv: list[str]) -> int:
    import graphprof  # noqa: F401  (imports first: the trace counts the run)
    import graphprof_cli.main as cli

    visits: list[str] = []
    importing = [0]  # module bodies being executed: everything inside one is an import, not the run

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        if frame.f_code.co_name == "<module>":
            importing[0] += 1 if event == "call" else -1 if event == "return" else 0
            return
        if event != "call" or importing[0]:
            return
        module = _module(frame.f_code.co_filename)
        if module is not None and (not visits or visits[-1] != module):
            visits.append(module)

    sys.setprofile(tracer)
    try:
        cli.main(argv)
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
    seen: set[str] = set()
    returns = 0
    for m in visits:
        returns += m in seen
        seen.add(m)
    print(f"visits {len(visits)}  modules crossed {len(seen)}  returns to a module already left {returns}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
