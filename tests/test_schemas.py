"""Every JSON file the commands write validates against its published schema (graphprof/schemas/).

The schemas were inferred from other models' files (scripts/make_schemas.py); these are the commands a
user runs, on other models, each file checked with ``jsonschema`` (draft 2020-12).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphprof.errors import InvalidInputError
from graphprof.schemas import KINDS, SCHEMA_VERSIONS, schema, validate
from graphprof_cli.main import app, join_input_shape

runner = CliRunner()


def test_every_kind_has_a_schema_with_its_version() -> None:
    for kind in KINDS:
        s = schema(kind)
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert s["properties"]["kind"] == {"const": kind}
        assert s["properties"]["schema_version"] == {"const": SCHEMA_VERSIONS[kind]}
        assert {"kind", "schema_version"} <= set(s["required"])


def test_a_file_that_does_not_fit_is_named_where() -> None:
    import torch

    import graphprof
    from graphprof.render.sink import render_result

    data = json.loads(render_result(graphprof.profile_model(torch.nn.Linear(4, 2), input_shape=(1, 4))))
    validate(data)
    with pytest.raises(InvalidInputError, match="profile JSON does not fit its schema at total_macs: 'many'"):
        validate({**data, "total_macs": "many"})
    with pytest.raises(InvalidInputError, match="at schema_version"):
        validate({**data, "schema_version": "0.1"})
    with pytest.raises(InvalidInputError, match="is a required property"):
        validate({k: v for k, v in data.items() if k != "layers"})


@pytest.mark.parametrize(
    "name, argv",
    [
        ("p.json", ["--model", "squeezenet1_0"]),
        ("t.json", ["--model", "mobilenet_v3_small", "--mode", "train", "--hardware", "a100"]),
        ("c.json", ["compare", "squeezenet1_0", "alexnet"]),
        ("s.json", ["sweep", "--model", "squeezenet1_0", "--batch", "1,2"]),
        ("v.json", ["validate", "--model", "squeezenet1_0", "--against", "torch"]),
        ("e.json", ["graph-estimate", "--model", "pyg:gcn"]),
        # slower: a generation profile, a partition plan, a node sweep and a calibration (about a minute)
        *(pytest.param(name, argv, marks=pytest.mark.slow) for name, argv in (
            ("gen.json", ["generate", "--model", "hf:gpt2", "--prompt-len", "8", "--new-tokens", "2"]),
            ("part.json", ["partition", "--model", "mobilenet_v2", "--devices", "a100:2"]),
            ("gs.json", ["sweep", "--model", "pyg:gcn", "--nodes", "100,300"]),
            ("cal.json", ["calibrate", "--threads", "1"]),
        )),
    ],
)  # fmt: skip
def test_the_commands_json_fits_its_schema(tmp_path: Path, name: str, argv: list[str]) -> None:
    path = tmp_path / name
    result = runner.invoke(app, join_input_shape([*argv, "--output", str(path)]))
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text())
    validate(data)  # by its own kind
    assert data["kind"] in KINDS and list(data)[:2] == ["kind", "schema_version"]


def test_the_graph_json_fits_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    result = runner.invoke(app, ["--model", "squeezenet1_0", "--graph", str(path)])
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text())
    validate(data)
    assert data["kind"] == "graph"


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda d: d.update(surprise=1), "an unknown field"),
        (lambda d: d.update(total_macs=-1), "negative MACs"),
        (lambda d: d["layers"][0].pop("name"), "a layer without a name"),
        (lambda d: d.update(mode="inference"), "a mode graphprof does not have"),
    ],
)
def test_the_profile_schema_says_what_a_valid_document_is(damage, why: str) -> None:
    import graphprof
    from graphprof.render.sink import render_result

    doc = json.loads(render_result(graphprof.profile_model("squeezenet1_0"), "json"))
    validate(doc)  # as written: valid
    damage(doc)
    with pytest.raises(InvalidInputError):
        validate(doc)
