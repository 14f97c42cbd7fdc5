"""Seed 002's script, ``python3 cli/profile_graph.py --model resnet50 [--input-shape 1,3,224,224]
[--output profile.json] [--verbose]``, with the seed's report and JSON (:mod:`graphprof.compat.seed002`).

``--model`` is a key of the script's ``MODEL_REGISTRY`` (the seed's extension point: add
``MODEL_REGISTRY['my_model'] = lambda: MyModel()`` to ``cli/profile_graph.py``), else any name graphprof
resolves (torchvision, YOLO, ``hf:``, ``pkg.mod:factory``). The options are the seed's four; graphprof's
others are ``graphprof --model X ...``'s. Errors are one line on stderr and graphprof's exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["SEED_INPUT_SHAPE", "build_parser", "main", "profile_seed_model"]

#: The seed's default input (its table of arguments: ``1,3,224,224``), for a registry model.
SEED_INPUT_SHAPE = "1,3,224,224"


def build_parser(prog: str = "profile_graph.py") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Profile a model (seed 002's script, on graphprof); graphprof --model X takes graphprof's other options."
    )
    parser.add_argument("--model", "-m", default="resnet18", help="a MODEL_REGISTRY key of this script, or any graphprof model name")
    parser.add_argument("--input-shape", nargs="+", default=None, help="1,3,224,224 or 1 3 224 224 (default: the model's)")
    parser.add_argument("--output", "-o", default=None, help="write the seed's JSON here (- for stdout)")
    parser.add_argument("--verbose", "-v", action="store_true", help="detail every layer, not the top 10")
    return parser


def profile_seed_model(name: str, input_shape: str | None, registry: Mapping[str, Callable[[], Any]]) -> Any:
    """The :class:`graphprof.Profile` of a registry key (built by its factory, named by the key) or a graphprof name."""
    import graphprof

    if name in registry:
        return graphprof.profile_model(registry[name](), input_shape=input_shape or SEED_INPUT_SHAPE, model_name=name)
    return graphprof.profile_model(name, input_shape=input_shape)


def main(
    argv: Sequence[str] | None = None, *, registry: Mapping[str, Callable[[], Any]] | None = None, prog: str = "profile_graph.py"
) -> int:
    """Run the script; returns the exit code (0, or the :class:`~graphprof.errors.GraphprofError`'s)."""
    from graphprof.base.atomic import absolute_output, check_path, means_stdout, write_atomic
    from graphprof.compat.seed002 import KIND, seed_json, seed_report
    from graphprof.errors import GraphprofError, ModelNotFoundError
    from graphprof.render.sink import stamped
    from graphprof.schemas import envelope

    args = build_parser(prog).parse_args(argv)
    shape = ",".join(args.input_shape) if args.input_shape else None
    try:
        target = None
        if args.output is not None:
            check_path(args.output)
            target = absolute_output(args.output)
        try:
            profile = profile_seed_model(args.model, shape, registry or {})
        except ModelNotFoundError as exc:
            keys = ", ".join(sorted(registry or {}))
            raise ModelNotFoundError(f"{exc} (this script's MODEL_REGISTRY: {keys or 'empty'})") from exc
        out = sys.stderr if target is not None and means_stdout(target) else sys.stdout
        out.write(seed_report(profile, verbose=args.verbose) + "\n")
        if target is not None:
            head = envelope(KIND)
            text = json.dumps({**head, **{k: v for k, v in stamped(seed_json(profile)).items() if k not in head}}, indent=2) + "\n"
            sys.stdout.write(text) if means_stdout(target) else write_atomic(target, text)
    except GraphprofError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return exc.exit_code
    return 0
