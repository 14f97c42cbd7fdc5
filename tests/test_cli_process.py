"""graphprof_cli.process: the console script's process ends with the command's exit code, its output
flushed and its ``atexit`` handlers run, without the interpreter's teardown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env_path = f"{ROOT}:{ROOT / 'cli'}"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}
    )


@pytest.mark.parametrize(("code", "status"), [("None", 0), ("0", 0), ("3", 3), ("'a message'", 1)])
def test_end_process_keeps_sys_exits_rule_flushes_and_runs_atexit(code: str, status: int) -> None:
    done = _run(
        "import atexit, sys\n"
        "from graphprof_cli.process import end_process\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "sys.stdout.write('buffered, no newline')\n"
        f"end_process({code})\n"
        "print('not reached')\n"
    )
    assert done.returncode == status
    assert done.stdout == "buffered, no newlineatexit ran\n"
    assert done.stderr == ("a message\n" if status == 1 else "")


def test_a_running_thread_gets_pythons_own_exit() -> None:
    done = _run(
        "import threading, time\n"
        "from graphprof_cli.process import end_process\n"
        "t = threading.Thread(target=lambda: (time.sleep(0.5), print('thread done')))\n"
        "t.start()\n"
        "end_process(4)\n"
    )
    assert done.returncode == 4 and done.stdout == "thread done\n"  # the thread was waited for


def test_heap_settles_once_and_gives_the_thresholds_back() -> None:
    done = _run(
        "import gc\n"
        "from graphprof.base.collector import defer_full_collections\nfrom graphprof_cli.process import settle_heap\n"
        "default = gc.get_threshold()\n"
        "defer_full_collections(); assert gc.get_threshold()[2] > 10**6\n"
        "settle_heap(); assert gc.get_threshold() == default and gc.get_freeze_count() > 0\n"
        "frozen = gc.get_freeze_count(); settle_heap(); assert gc.get_freeze_count() == frozen\n"
        "print('ok')\n"
    )
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


@pytest.mark.slow  # a subprocess that imports torch
def test_the_console_script_exits_with_the_commands_code() -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "graphprof_cli.main", "--model", "alexnet", "--top", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert ok.returncode == 0 and "alexnet" in ok.stdout.lower(), ok.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "graphprof_cli.main", "--model", "no-such-model"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert bad.returncode == 3 and bad.stderr.startswith("graphprof: error: unknown model")
