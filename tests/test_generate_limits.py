"""Generation bounded: new tokens beyond the model's positions, generation on a plain module."""

from __future__ import annotations

import pytest
import torch

from graphprof.errors import InvalidInputError


# ---- 9. generation beyond the model's positions -----------------------------------------------------
def test_new_tokens_beyond_the_positions_are_refused_up_front() -> None:
    from graphprof.generate import profile_generation

    for prompt, new in ((1024, 1_000_000), (1024, 4096)):
        with pytest.raises(InvalidInputError, match="2,048 positions"):
            profile_generation("hf:llama", prompt_len=prompt, new_tokens=new)


def test_generate_on_a_plain_module_is_one_line() -> None:
    from graphprof.generate import profile_generation

    with pytest.raises(InvalidInputError, match="decoder-only"):
        profile_generation(torch.nn.Linear(8, 8), prompt_len=4, new_tokens=2)


@pytest.mark.parametrize(
    "args",
    [
        ["generate", "--model", "hf:llama", "--batch-size", "0", "--prompt-len", "8", "--new-tokens", "2"],
        # the graph, the page and the plot were silently not written with --generate: now refused by the parser
        ["generate", "--model", "hf:llama", "--html", "g.html"],
        ["generate", "--model", "hf:llama", "--graph", "g.dot"],
        ["generate", "--model", "hf:llama", "--plot", "g.png"],
        ["--model", "hf:llama", "--generate", "--html", "g.html", "--graph", "g.dot", "--plot", "g.png"],
    ],
)
def test_generate_given_what_it_cannot_do_is_exit_2_and_writes_nothing(tmp_path, monkeypatch, args: list[str]) -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "Predicted" not in result.output
    assert list(tmp_path.iterdir()) == []
