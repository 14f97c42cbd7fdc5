"""Careless input to the newer commands and APIs: one clear line and a non-zero exit, never a traceback, an
overflow, a swallowed argument or a folder ignored."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import graphprof
from graphprof.base.limits import MAX_BYTES, parse_memory
from graphprof.errors import InvalidInputError
from graphprof_cli.main import app, join_input_shape, main

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


# ---- sizes: a range check in the one size parser -----------------------------------------------------


@pytest.mark.parametrize("text", ["1e300TiB", 10**400, "inf", "16.1EiB"])
def test_a_size_beyond_any_machine_is_one_line(text: object) -> None:
    with pytest.raises(InvalidInputError, match="more than .* which no machine has|write a positive size"):
        parse_memory(text)  # type: ignore[arg-type]


def test_the_largest_size_still_parses() -> None:
    assert parse_memory(MAX_BYTES) == 2**64 and parse_memory("16EiB".replace("Ei", "Gi")) == 16 * 2**30


def test_plan_memory_with_an_overflowing_budget_is_refused_before_building() -> None:
    from graphprof.training import plan_memory

    with pytest.raises(InvalidInputError, match="no machine has"):
        plan_memory(torch.nn.Linear(4, 4), input_shape=(2, 4), memory_budget=10**400)


def test_fits_with_an_overflowing_budget_is_exit_2() -> None:
    result = runner.invoke(app, ["fits", "--model", "resnet18", "--memory-budget", "1e300TiB"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


# ---- the launcher, the Profiler, generate ------------------------------------------------------------


def test_chisel_with_a_missing_module_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprof.compat.seed003 import CHISEL_ENV
    from graphprof_cli.chisel import main as chisel

    monkeypatch.setenv(CHISEL_ENV, "0")  # the launcher switches the decorator on for the script: put back after
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))

    with pytest.raises(SystemExit) as exit_:
        chisel(["python", "-m", "no_such_module_for_chisel"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.strip() == "chisel: error: no module named 'no_such_module_for_chisel'"


def test_profiler_export_without_a_path_is_graphprofs_error(tmp_path: Path) -> None:
    profiler = graphprof.Profiler(torch.nn.Linear(4, 2))
    profiler(torch.randn(2, 4))
    with pytest.raises(InvalidInputError, match="base path"):
        profiler.export(None)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_generate_on_a_plain_module_logs_no_traceback() -> None:
    """torch's FakeTensor logger would log the failed meta kernel's whole traceback before graphprof's line."""
    from graphprof.generate.estimate import profile_generation

    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        with pytest.raises(graphprof.GraphprofError):
            profile_generation(torch.nn.Linear(8, 2), prompt_len=4, new_tokens=2)
    finally:
        logger.removeHandler(handler)
    assert records == [] and logger.level == level


# ---- shard: the spaced shape, fsdp:auto ------------------------------------------------------------------


def test_the_spaced_input_shape_ends_before_shards_spec() -> None:
    argv = ["shard", "--model", "m.py:f", "--input-shape", "2", "3", "64", "64", "fsdp:4"]
    assert join_input_shape(argv) == ["shard", "--model", "m.py:f", "--input-shape", "2,3,64,64", "fsdp:4"]
    result = runner.invoke(app, join_input_shape(["shard", "--model", "no_such_model_xyz", "--input-shape", "2", "8", "fsdp:4"]))
    assert "Missing argument" not in result.output and result.exit_code == 3, result.output


def test_fsdp_auto_without_fits_points_to_fits() -> None:
    from graphprof.sharding import parse_shard

    with pytest.raises(InvalidInputError, match=r"fsdp:auto .*--fits --hardware"):
        parse_shard("fsdp:auto")
    result = runner.invoke(app, ["shard", "--model", "resnet18", "fsdp:auto"])
    assert result.exit_code == 2 and "--fits" in result.output and "whole number" not in result.output, result.output


def test_partitions_advice_for_a_factory_without_an_input_is_an_option_it_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "noinput.py").write_text("import torch\n\n\ndef make(width=8):\n    return torch.nn.Linear(width, 2)\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["partition", "--model", "noinput.py:make", "--devices", "cpu:2"])
    assert result.exit_code == 2 and "--input-shape" in result.output
    help_text = runner.invoke(app, ["partition", "--help"]).output
    assert "--input-shape" in help_text


# ---- refusals: one prefix, --help's floor, the README's --redact list --------------------------------


@pytest.mark.parametrize("option", ["--generate", "--prompt-len=8", "--shard", "--fits", "--memory-budget=4GB"])
def test_a_moved_option_is_refused_with_the_error_prefix(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--model", "resnet18", option])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.startswith("graphprof: error: ") and len(err.splitlines()) == 1, err


def test_help_keeps_the_reports_floor_of_40_columns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "10")
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "Usage: graphprof [OPTIONS] COMMAND [ARGS]..." in out  # one line, not cut at 10 columns
    assert max(len(line) for line in out.splitlines()) >= 40


def test_the_readme_names_every_command_that_takes_redact() -> None:
    import typer

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    redacting = sorted(name for name, command in commands.items() if any("--redact" in getattr(p, "opts", ()) for p in command.params))
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"`--redact` \(the main command, ([^)]*)\)", readme.replace("\n", " "))
    assert listed is not None
    named = set(re.findall(r"`([\w-]+)`", listed.group(1)))
    assert set(redacting) <= named, sorted(set(redacting) - named)


@pytest.mark.parametrize(
    ("option", "name"), [("--html", "x.html"), ("--graph", "g.json"), ("--plot", "roofline.png"), ("--export-onnx", "m.onnx")]
)
def test_fits_refuses_the_main_commands_outputs_rather_than_dropping_them(option: str, name: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["fits", "--model", "resnet18", option, str(tmp_path / name)])
    assert result.exit_code == 2 and "No such option" in result.output, result.output
    assert list(tmp_path.iterdir()) == []
