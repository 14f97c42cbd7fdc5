"""What a user types: one name per meaning across the commands, one default per option, moved names
that answer as Python expects, and the small figures of issue 54 written as a reader reads them."""

from __future__ import annotations

import io
import typing
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

import graphprof
from graphprof_cli.main import app, main

#: Options whose default differs between commands on purpose, and why (the help of each says so).
DIFFERENT_DEFAULTS = {
    "--iters": "partition --run times whole pipelined steps over local processes (5); --measure times forwards (50)",
    "--threads": "partition runs one process per stage (1 thread each); calibrate measures with torch's own count",
    "--device": "calibrate measures this machine's CPU unless told cuda; --measure uses cuda when present",
}


def _options() -> dict[str, list[tuple[str, Any, Any]]]:
    """Every ``--long`` option of every command: (command, its type, its default)."""
    found: dict[str, list[tuple[str, Any, Any]]] = defaultdict(list)

    def walk(command: Any, path: str) -> None:
        for param in command.params:
            if getattr(param, "param_type_name", "") != "option":
                continue
            kind = param.type_descriptor.annotation
            args = [a for a in typing.get_args(kind) if a is not type(None)]
            kind = args[0] if len(args) == 1 else kind  # X | None is X
            for name in param.opts:
                if name.startswith("--"):
                    found[name].append((path, kind, param.default))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, name)

    walk(typer.main.get_command(app), "graphprof")
    return found


def test_one_option_name_has_one_type_and_one_default_across_commands() -> None:
    options = _options()
    assert len(options) > 40 and "--optimizer" in options
    for name, uses in options.items():
        kinds = {"str" if kind in (str, Path) else str(kind) for _, kind, _ in uses}  # a path is text as typed
        assert len(kinds) == 1, f"{name} takes {kinds} in {[c for c, _, _ in uses]}"
        defaults = {repr(default) for _, _, default in uses}
        if name not in DIFFERENT_DEFAULTS:
            assert len(defaults) == 1, f"{name} defaults to {defaults} across {[c for c, _, _ in uses]}"


def test_two_names_never_spell_one_word() -> None:
    """``--warm-up`` beside ``--warmup``: two names a user cannot tell apart, for two meanings."""
    by_word: dict[str, set[str]] = defaultdict(set)
    for name in _options():
        by_word[name.replace("-", "")].add(name)
    assert not [names for names in by_word.values() if len(names) > 1]


def test_the_old_capture_warm_up_spelling_is_refused_naming_the_new(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--model", "resnet18", "--warm-up", "always"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--capture-warmup" in err and len(err.strip().splitlines()) == 1


def test_a_policy_given_as_a_warm_up_count_gets_a_hint() -> None:
    done = CliRunner().invoke(app, ["--model", "resnet18", "--warmup", "always"], env={"COLUMNS": "200"})
    assert done.exit_code == 2 and "--capture-warmup always" in done.output and "valid integer" not in done.output


def test_the_optimizer_defaults_to_adamw_everywhere() -> None:
    assert {repr(d) for _, _, d in _options()["--optimizer"]} == {"<Optimizer.ADAMW: 'adamw'>"}


def test_a_graph_sweep_uses_the_main_commands_graph() -> None:
    import inspect

    from graphprof.gnn.scaling import run_graph_scaling
    from graphprof.models.graphs import DEFAULT_NODES
    from graphprof.models.pyg import GraphOptions

    assert inspect.signature(run_graph_scaling).parameters["num_nodes"].default == DEFAULT_NODES == GraphOptions().num_nodes


# ---- Python conventions ------------------------------------------------------------------------------
def test_a_moved_name_answers_hasattr_and_getattr() -> None:
    assert hasattr(graphprof, "set_seed") is False
    assert getattr(graphprof, "RuntimeProfiler", None) is None
    with pytest.raises(ImportError, match=r"graphprof\.set_seed moved: from graphprof\.seed004 import set_seed"):
        from graphprof import set_seed  # noqa: F401
    with pytest.raises(AttributeError, match="from graphprof.seed004 import RuntimeProfiler"):
        graphprof.RuntimeProfiler  # noqa: B018


def test_chisel_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    from graphprof_cli.chisel import main as chisel

    for flag in ("--help", "-h"):
        with pytest.raises(SystemExit) as exit_:
            chisel([flag])
        assert exit_.value.code == 0 and "usage: chisel" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        chisel([])
    assert exit_.value.code == 2


# ---- small figures ----------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0.1, 7.3, 123456.789, 68984.0])
def test_r2_of_a_constant_series_is_never_negative(value: float) -> None:
    from graphprof.scaling.fit import fit_growth, fit_quadratic

    xs = [1, 2, 4, 8, 16]
    assert fit_growth("m", xs, [value] * 5).r2 == 1.0
    assert fit_quadratic("m", xs, [value] * 5).r2 == 1.0  # 123456.789 gave -0.2


def test_a_polynomial_writes_each_sign_once() -> None:
    from graphprof.render.graph_models import _polynomial

    assert _polynomial(68984.0, -0.0, 1.2e-9) == "68,984·x"  # was "68,984·x + -0.0·x²"
    assert _polynomial(12.0, -0.5, -3.2) == "12·x − 0.5·x² − 3"
    assert _polynomial(-2.0, 1.5, 0.0) == "−2·x + 1.5·x²"


def test_an_identical_split_is_the_same_not_faster() -> None:
    from graphprof.render.partition import _gain

    assert (_gain(1.0), _gain(1.004), _gain(4.6428), _gain(0.5)) == ("same", "same", "4.64x faster", "2.00x slower")


def test_seed002_breakdown_sums_to_its_total_operators() -> None:
    import re

    from graphprof.compat.seed002 import seed_report

    report = seed_report(graphprof.profile_model("resnet18", input_shape=(1, 3, 32, 32)))
    total = int(re.search(r"Total Operators:\s+(\d+)", report).group(1))  # type: ignore[union-attr]
    breakdown = report.split("Operation Breakdown:")[1].split("Bottleneck Analysis:")[0]
    assert sum(int(n) for n in re.findall(r"\((\d+) ops,", breakdown)) == total


# ---- the README says what ships ------------------------------------------------------------------------
def test_the_readme_lists_every_json_kind_that_ships() -> None:
    """The kinds named in the README's "JSON files and their schemas" paragraph are the schemas shipped."""
    import re

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## JSON files and their schemas", 1)[1].split("`graphprof.schemas.validate", 1)[0]
    listed = set(re.findall(r"`([a-z0-9-]+)`", section.split("installed with the package", 1)[1]))
    shipped = {p.name.removesuffix(".schema.json") for p in (Path(graphprof.__file__).parent / "schemas").glob("*.schema.json")}
    assert listed - {"local"} == shipped


# ---- every figure states its conditions ----------------------------------------------------------------
def test_a_sweep_page_gives_each_metric_its_own_axis_and_names_device_and_dtype() -> None:
    pytest.importorskip("plotly")
    import re

    from graphprof.render.html import render_sweep_html

    sweep = graphprof.sweep("resnet18", "batch", [1, 2], input_shape=(1, 3, 32, 32), hardware="h100")
    page = render_sweep_html(sweep)
    title = re.search(r"<title>(.*?)</title>", page).group(1)  # type: ignore[union-attr]
    assert "h100" in title and "float32" in title and "lower bound" in title
    assert len(re.findall(r"id='growth-", page)) >= 4  # params, MACs, FLOPs, bytes...: one chart each, not one log axis


def test_a_sweep_table_names_its_time_a_lower_bound() -> None:
    from rich.console import Console

    from graphprof.render.sweep import render_sweep

    sweep = graphprof.sweep("resnet18", "batch", [1, 2], input_shape=(1, 3, 32, 32), hardware="h100")
    console = Console(width=200, record=True, color_system=None, file=io.StringIO())
    console.print(render_sweep(sweep))
    text = console.export_text()
    assert "Lower bound" in text and "roofline lower bounds on h100" in text and "Est. time" not in text


@pytest.mark.slow  # a real generate() of hf:llama on the CPU: about 4 s
def test_a_cpu_generation_measured_against_a_preset_says_the_machines_differ() -> None:
    from graphprof.devices.hardware import get_hardware
    from graphprof.generate.measure import with_measurement

    result = with_measurement("hf:llama", device="cpu", runs=1, prompt_len=8, new_tokens=2, hardware=get_hardware("desktop-cpu"))
    assert any("not for this machine" in n and "desktop-cpu" in n for n in result.notes)
    assert any("not for this machine" in n for n in result.to_dict()["notes"])


@pytest.mark.slow  # FSDP2 over a fake process group at several world sizes: about 5 s
def test_fsdp_auto_says_the_input_it_planned_for() -> None:
    plan = graphprof.plan_ranks("hf:llama", "l4")
    assert plan.notes[0].startswith("planned for the input input_ids: 1x128 int64 per rank")
    assert plan.to_dict()["notes"][0] == plan.notes[0]


def test_a_checkpoint_plan_never_recomputes_a_module_that_frees_nothing() -> None:
    import re

    done = CliRunner().invoke(app, ["fits", "--model", "resnet18", "--memory-budget", "30MB", "--hardware", "l4"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    rows = [line.split() for line in done.output.splitlines() if re.search(r"\s(yes|no)\s*$", line)]
    assert rows and any(r[-1] == "yes" for r in rows)
    assert not [r for r in rows if r[1:3] == ["0", "B"] and r[-1] == "yes"]  # conv1 and fc, 0 B freed, were chosen
    assert "times from predicted" not in done.output


def test_a_memory_breakdown_is_a_mapping_in_one_unit() -> None:
    from collections.abc import Mapping

    from graphprof.measure.result import CATEGORIES, MemoryBreakdown

    mib = 2**20
    b = MemoryBreakdown(3 * mib, 0, 3 * mib, 6 * mib, 2 * mib, 0, 0, 14 * mib, "cpu", "test")
    assert isinstance(b, Mapping) and "parameters" in b and "nonsense" not in b  # was KeyError: 0
    assert dict(b) == {"parameters": 3.0, "buffers": 0.0, "gradients": 3.0, "optimizer_state": 6.0, "activations": 2.0,
                       "temporaries": 0.0, "other": 0.0}  # fmt: skip
    assert list(b) == list(CATEGORIES) and sum(b.values()) == b["peak"] == 14.0 and b["forward_activations"] == 2.0
    assert b.parameters == 3 * mib and b.to_dict()["parameters"] == 3 * mib and b.to_dict()["unit"] == "bytes"
