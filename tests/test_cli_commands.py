"""Each command parses its options and calls one library function: the call is patched and its arguments
asserted, so these tests build no model and pin the CLI-to-library contract option by option."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from graphprof.base.choices import WarmUp
from graphprof.errors import InvalidInputError

runner = CliRunner()


class _Called(InvalidInputError):
    """Raised by a patched library call after it recorded its arguments (the CLI maps it to exit 2)."""


def _recorder(calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Any:
    def fake(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        raise _Called("stop here")

    return fake


def _invoke(*args: str) -> Any:
    from graphprof_cli.main import app, join_input_shape

    return runner.invoke(app, join_input_shape(list(args)))


def test_main_command_calls_prepare_with_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof

    calls: list[Any] = []
    monkeypatch.setattr(graphprof, "prepare", _recorder(calls))
    result = _invoke("--model", "resnet18", "--input-shape", "2", "3", "64", "64", "--batch-size", "4", "--dtype", "bf16",
                     "--mode", "train", "--capture", "fx", "--allow-unsafe-load")  # fmt: skip
    assert result.exit_code == 2 and "stop here" in result.output
    ((args, kwargs),) = calls
    assert args == ("resnet18",)
    assert kwargs == {
        "input_shape": "2,3,64,64", "batch_size": 4, "dtype": "bf16", "mode": "train", "methods": ("fx.symbolic_trace",),
        "allow_unsafe_load": True, "target": None, "proposals": None, "warm_up": WarmUp.AUTO, "device": None,
    }  # fmt: skip


def test_compare_calls_profile_model_per_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.profile

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.profile, "profile_model", _recorder(calls))
    result = _invoke("compare", "resnet18", "alexnet", "--batch-size", "2", "--mode", "eval", "--capture", "eager")
    assert [c[0] for c in calls] == [("resnet18",), ("alexnet",)]
    assert calls[0][1] == {
        "input_shape": None,
        "batch_size": 2,
        "dtype": None,
        "mode": "eval",
        "methods": ("eager",),
        "allow_unsafe_load": False,
    }
    assert result.exit_code == 2  # every model failed with the patched error (exit 2)


def test_sweep_calls_sweep_with_the_axis_and_values(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.scaling

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.scaling, "sweep", _recorder(calls))
    monkeypatch.setattr(graphprof.scaling, "check_sweep", lambda *a, **k: None)
    result = _invoke("sweep", "--model", "resnet18", "--batch", "1:8:x2", "--hardware", "h100", "--mode", "train")
    assert result.exit_code == 2, result.output
    ((args, kwargs),) = calls
    assert args == ("resnet18", "batch", [1, 2, 4, 8])
    assert kwargs["hardware"] == "h100" and kwargs["mode"] == "train" and kwargs["measure"] is False and kwargs["key"] is None


def test_validate_calls_the_crosscheck_with_its_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.crosscheck

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.crosscheck, "iter_crosschecks", _recorder(calls))
    result = _invoke("validate", "--model", "resnet18", "--against", "torch", "--batch-size", "2")
    assert result.exit_code == 2, result.output
    ((args, kwargs),) = calls
    assert args == (["resnet18"],) and kwargs["against"] == "torch" and kwargs["batch_size"] == 2


def test_hardware_and_list_call_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.devices.hardware
    import graphprof.models

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.devices.hardware, "get_hardware", _recorder(calls))
    assert _invoke("hardware", "h100").exit_code == 2 and calls[-1][0] == ("h100",)
    monkeypatch.setattr(graphprof.models, "list_models", _recorder(calls))
    assert _invoke("list", "--filter", "yolo").exit_code == 2 and calls[-1][0] == ("yolo",)


def test_calibrate_calls_calibrate(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import graphprof.calibrate

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.calibrate, "calibrate", _recorder(calls))
    result = _invoke("calibrate", "--output", str(tmp_path / "local.json"), "--threads", "1")
    assert result.exit_code == 2, result.output
    ((args, kwargs),) = calls
    assert args == ("cpu",) and kwargs["threads"] == 1 and str(kwargs["output"]).endswith("local.json")


def test_generate_calls_profile_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.generate

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.generate, "profile_generation", _recorder(calls))
    result = _invoke("generate", "--model", "hf:llama", "--prompt-len", "64", "--new-tokens", "8", "--kv-dtype", "float8")
    assert result.exit_code == 2, result.output
    ((args, kwargs),) = calls
    assert args == ("hf:llama",) or kwargs.get("model") == "hf:llama"
    assert kwargs["prompt_len"] == 64 and kwargs["new_tokens"] == 8 and kwargs["kv_dtype"] == "float8"


def test_partition_calls_partition_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.partition.report

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.partition.report, "partition_report", _recorder(calls))
    result = _invoke("partition", "--model", "resnet18", "--devices", "cpu:2", "--objective", "throughput")
    assert result.exit_code == 2, result.output
    ((args, kwargs),) = calls
    assert "resnet18" in args or kwargs.get("model_or_name") == "resnet18"
    assert kwargs["objective"] == "throughput" and (kwargs.get("devices") == "cpu:2" or "cpu:2" in args)


def test_trace_calls_read_model_trace(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import graphprof.measure.trace

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.measure.trace, "read_model_trace", _recorder(calls))
    path = tmp_path / "M_forward_001.json"
    path.write_text("{}")
    result = _invoke("trace", str(path), "--name", "M")
    assert result.exit_code == 2, result.output
    ((args, _),) = calls
    assert str(args[0]) == str(path) and args[1] == "M"


def test_fvcore_flag_runs_validates_crosscheck_before_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.crosscheck

    calls: list[Any] = []
    monkeypatch.setattr(graphprof.crosscheck, "crosscheck_model", _recorder(calls))
    result = _invoke("--model", "alexnet", "--fvcore", "--batch-size", "2")
    assert result.exit_code == 2, result.output  # the patched call stopped it, after the dry run
    ((args, kwargs),) = calls
    assert args == ("alexnet",) and kwargs["against"] == "fvcore" and kwargs["batch_size"] == 2


@pytest.mark.slow
def test_fvcore_flag_prints_the_crosscheck_and_keeps_it_in_the_json(tmp_path: Any) -> None:
    import json

    pytest.importorskip("fvcore")
    out = tmp_path / "p.json"
    result = _invoke("--model", "resnet18", "--input-shape", "1,3,64,64", "--fvcore", "--output", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.index("FLOP comparison") < result.stdout.index("Hierarchical graph profile")
    check = json.loads(out.read_text())["crosscheck"]
    assert check["reference"] == "fvcore" and check["status"] == "agrees"


# ---- one command per job: the options that became commands point to them ------------------------------


@pytest.mark.parametrize(
    "argv, command",
    [
        (["--model", "hf:llama", "--generate", "--prompt-len", "8"], "graphprof generate --model M"),
        (["--model", "hf:llama", "--prompt-len=8"], "graphprof generate --model M"),
        (["--model", "hf:llama", "--mode", "train", "--shard", "fsdp:8"], "graphprof shard --model M fsdp:64"),
        (["--model", "resnet18", "--mode", "train", "--fits"], "graphprof fits --model M"),
        (["--model", "resnet18", "--memory-budget=2GB"], "graphprof fits --model M"),
    ],
)
def test_an_option_that_became_a_command_is_refused_with_a_pointer(argv: list[str], command: str, capsys: Any) -> None:
    from graphprof_cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert command in err and len(err.strip().splitlines()) == 1


def test_a_subcommand_keeps_its_own_options() -> None:
    from graphprof_cli.main import moved_option

    assert moved_option(["generate", "--model", "hf:llama", "--cache", "dynamic"]) is None
    assert moved_option(["--model", "resnet18"]) is None
    assert moved_option(["shard", "--model", "resnet18", "fsdp:4", "--fits"]) is None
    assert moved_option(["fits", "--model", "resnet18", "--memory-budget", "2GB"]) is None
