"""``graphprof trace``: the file's kind and size checked before a byte is read."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphprof_cli.main import app, join_input_shape

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


# ---- graphprof trace: the file's kind and size checked before a byte is read (item 11) ----------------------
@pytest.mark.parametrize("size", [150 * 10**6, 2 * 2**30])
def test_trace_refuses_a_file_above_the_cap_before_reading_it(tmp_path: Path, size: int) -> None:
    path = tmp_path / "big_forward_001.json"
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: no disk used, and reading it would be a parse of NULs or empty lists
    result = invoke("trace", str(path))
    assert result.exit_code == 2, result.output
    assert re.search(r" is [\d.]+ [MG]B, above the 134.22 MB ", result.output)  # the 128 MiB cap, in decimal units
    assert len(result.output.strip().splitlines()) == 1


def test_trace_refuses_dev_zero_and_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # opening it would block for ever
    for path in ("/dev/zero", str(fifo)):
        result = invoke("trace", path)
        assert result.exit_code == 2, result.output
        assert "not a regular file" in result.output


def test_require_file_allows_a_small_trace(tmp_path: Path) -> None:
    from graphprof.base.limits import require_file

    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": []}')
    assert require_file(path, "a Chrome trace", cap=100) == 19
