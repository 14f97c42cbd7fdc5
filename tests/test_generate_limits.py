"""Generation bounded: new tokens beyond the model's positions, generation on a plain module.
"""

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
