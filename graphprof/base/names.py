"""Readable module names for graph nodes.

Graphs captured by ``torch.fx.symbolic_trace``, ``torch._dynamo.export`` and ``torch.export`` name
modules in different ways:

* FX ``symbolic_trace``: a ``call_module`` node's *target* is the module path (``layer1.0.conv1``), its
  *name* is that path with dots replaced (``layer1_0_conv1``), and a repeated name gets a numeric
  suffix (``relu_1``).
* Dynamo mangles a Python source expression into an identifier by replacing every character that is
  not a letter or digit with ``_``: ``L['self'].layer1[0].conv1`` becomes ``L__self___layer1_0__conv1``,
  ``getattr(X, '0')`` becomes ``getattr_X___0__`` (the ``getattr_`` piles up at the front), and FX
  snake-cases node names, so a ``get_attr`` node whose target is ``L__self___conv1_weight`` is named
  ``l__self___conv1_weight``. Older releases used ``self_``, ``G['model']`` (``g__model___``) and
  ``getattr(L['self'].model, '23')`` spellings.
* ``node.meta["nn_module_stack"]`` holds the truth, as an ordered mapping from an opaque key to
  ``(path, module type)``, outermost module first. With torch 2.14:

  - ``torch._dynamo.export``: key ``str(id(module))``, path ``"L['self'].layer1.0.conv1"``, type a class.
  - ``torch.export.export``: key ``"L__self__layer1.0"`` (or ``str(id(...))`` when strict), path
    ``"layer1.0"``, type a dotted string ``"torchvision.models.resnet.BasicBlock"``; the root module
    itself appears with path ``""``.
  - ``torch.fx.symbolic_trace``: key and path both ``"layer1.0.conv1"``, type a class.

:func:`module_path` reads that metadata and returns a path that :meth:`torch.nn.Module.get_submodule`
accepts. :func:`abbreviate` turns any of the spellings above into a short display name, by heuristics
only (it sees a string, not a model); see its docstring for what it can and cannot tell apart.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from graphprof.errors import InvalidInputError

if TYPE_CHECKING:
    from torch import fx, nn

__all__ = ["abbreviate", "normalize_path", "module_path", "module_type", "functional_op", "called_op"]

# The root of a Dynamo source expression: ``L['self']``, ``G['model']`` or a bare ``self``.
_SOURCE_ROOT = re.compile(r"""^(?:[LG]\[['"][^'"]*['"]\]|self)(?=[.\[]|$)""")
# ``getattr(X, 'k')`` with no parenthesis inside X, so the innermost call is rewritten first.
_SOURCE_GETATTR = re.compile(r"""getattr\(([^()]*?),\s*['"]([^'"]*)['"]\)""")
# ``X._modules['k']`` (and the parameter and buffer dicts): the same as attribute ``k``.
_SOURCE_DICT_ITEM = re.compile(r"""\.(?:_modules|_parameters|_buffers)\[['"]([^'"]*)['"]\]""")
# ``X['k']`` or ``X["k"]``.
_SOURCE_STRING_ITEM = re.compile(r"""\[['"]([^'"]*)['"]\]""")
_SOURCE_INT_ITEM = re.compile(r"\[(\d+)\]")

# Mangled prefixes, stripped repeatedly from the front of a name.
_MANGLED_PREFIXES = (
    # ``getattr_`` from ``getattr(...)``, but not FX's own ``getattr_1`` node name.
    re.compile(r"^getattr_(?!\d+$)"),
    # ``L['self'].``, ``L['yolo_model'].``, ``G['model'].`` mangled: ``L__self___``, ``g__model___``.
    re.compile(r"^[LlGg]__\w+?___"),
    # ``self.`` mangled by older releases, but keep real names such as ``self_attn``.
    re.compile(r"^self___"),
    re.compile(r"^self_(?!attn|attention)"),
)
# A whole name that is a mangled local, as Dynamo names its placeholders: ``l_x_`` is ``L['x']``.
_MANGLED_LOCAL = re.compile(r"^[Ll]_([A-Za-z]\w*?)_$")
# ``getattr(X, '0')`` mangled, after its ``getattr_`` has been stripped: ``X___0__``.
_MANGLED_GETATTR_INDEX = re.compile(r"___(\d+)__")
# A path component that is an index: ``0``, or ``0[1][2]`` once getattr indices are decoded.
_INDEX_WORD = re.compile(r"^\d+(?:\[\d+\])*$")
# Parameter and buffer names that end a mangled ``get_attr`` target, longest first.
_LEAF_NAMES = ("num_batches_tracked", "in_proj_weight", "in_proj_bias", "running_mean", "running_var", "weight", "bias")
_ELLIPSIS = "..."


def abbreviate(name: str, max_len: int = 48) -> str:
    """Return a short, readable dotted name for an FX or Dynamo node or attribute name.

    The steps, in order:

    1. A source expression (it contains ``.``, ``[``, ``(`` or a quote) loses its root (``L['self']``,
       ``G['model']``, ``self``); ``getattr(X, 'k')`` and ``X._modules['k']`` become ``X.k``, or
       ``X[k]`` when ``k`` is a number.
    2. Any other name is read as a mangled identifier. The prefixes ``getattr_``, ``L__<var>___``,
       ``l__self___``, ``g__model___``, ``self___`` and ``self_`` are stripped, ``___0__`` (a mangled
       ``getattr(X, '0')``) becomes ``[0]``, and an underscore next to a number component becomes a
       dot (``_23_`` -> ``.23.``). When the name showed any sign of mangling, a trailing
       ``_weight``/``_bias``/``_running_mean``/... becomes ``.weight``/...
    3. A repeated leading component is folded: ``model.model.X`` -> ``model.X``. This is for display
       only; use :func:`module_path` for a path to look a module up with.
    4. A name longer than ``max_len`` is cut in the middle, keeping its start and its end.

    Known limits, since Dynamo maps ``.`` and ``_`` to the same character:

    * An underscore is read as a separator only next to a number component, so
      ``l__self___features_denseblock1_conv1`` stays ``features_denseblock1_conv1``, while the real
      underscores of ``conv_dw`` or ``running_mean`` are kept.
    * A trailing ``_3`` is kept, because FX uses it to number repeated names (``relu_1``); so the
      FX name ``layer1_0_downsample_0`` gives ``layer1.0.downsample_0``.
    * A module whose own name is a word, an underscore and a number (``layer_1``) is split
      (``layer.1``); a root parameter such as ``pos_bias`` under ``L['self']`` becomes ``pos.bias``;
      a top-level module whose name starts with ``self_`` loses that prefix unless it is
      ``self_attn...`` or ``self_attention...``.

    The result is a fixed point: ``abbreviate(abbreviate(x)) == abbreviate(x)``.

    Args:
        name: a node name, a ``get_attr`` target, or an ``nn_module_stack`` path.
        max_len: the longest result; at least 5 (one character, ``...``, one character).

    Raises:
        InvalidInputError: ``max_len`` is below 5.

    Examples:
        >>> abbreviate("layer1.0.conv1")
        'layer1.0.conv1'
        >>> abbreviate("g__model___model_0_conv")
        'model.0.conv'
        >>> abbreviate("getattr_getattr_L__yolo_model___model_23_cv3_0___0_____0___conv")
        'model.23.cv3.0[0][0].conv'
        >>> abbreviate("l__self___layer1_0_conv1_weight")
        'layer1.0.conv1.weight'
        >>> abbreviate("getattr(L['self'].model, '23').cv3")
        'model[23].cv3'
        >>> abbreviate("blocks.10.attn.qkv.proj", max_len=16)
        'blocks...kv.proj'
    """
    if max_len < 2 + len(_ELLIPSIS):
        raise InvalidInputError(f"abbreviate: max_len must be at least 5, got {max_len}")
    text = _fold_repeated_head(_decode(name, split_leaves=True))
    return _truncate(text, max_len)


def normalize_path(path: str) -> str:
    """Return the ``named_modules()`` spelling of a module path from a graph.

    Accepts what the tracers write into ``nn_module_stack`` (``L['self'].layer1.0.conv1``,
    ``L['self'].layer1[0].conv1``, ``getattr(L['self'].model, '23').cv3``, ``layer1.0.conv1``) and,
    on a best-effort basis with the limits given in :func:`abbreviate`, mangled identifiers
    (``L__self___layer1_0_conv1``). Nothing is folded or truncated. The root module is ``""``.

    Examples:
        >>> normalize_path("L['self'].layer1[0].conv1")
        'layer1.0.conv1'
        >>> normalize_path("getattr(getattr(L['self'].model, '23').cv3[0], '0')")
        'model.23.cv3.0.0'
        >>> normalize_path("L__self___layer1_0_conv1")
        'layer1.0.conv1'
        >>> normalize_path("L['self']")
        ''
    """
    return _SOURCE_INT_ITEM.sub(r".\1", _decode(path, split_leaves=False)).lstrip(".")


def module_path(node: fx.Node) -> str | None:
    """Return the dotted path of the innermost module ``node`` belongs to, or ``None``.

    A ``call_module`` node answers with its target. Any other node answers with the innermost entry
    of ``node.meta["nn_module_stack"]``, normalised by :func:`normalize_path`, so the result is a key
    of ``dict(root.named_modules(remove_duplicate=False))`` for the module that was traced (a ``DetectionModel``'s
    ``model.0.conv`` keeps its ``model.``). A module registered under several names (ultralytics shares
    one ``SiLU`` among all its ``Conv`` blocks) answers with the name it was called through, which
    ``named_modules(remove_duplicate=False)`` lists and the default ``named_modules()`` may not. A
    ``get_attr`` node of ``symbolic_trace``, which carries no stack, answers with the module that owns
    its dotted target. ``None`` means the node belongs to the root module itself or to no module at
    all (placeholders, outputs).

    Example:
        >>> import torch
        >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
        >>> gm = torch.fx.symbolic_trace(net)
        >>> [module_path(n) for n in gm.graph.nodes]
        [None, '0', '1', None]
    """
    if node.op == "call_module":
        return normalize_path(str(node.target)) or None
    stack = node.meta.get("nn_module_stack")
    if stack:
        innermost = next(reversed(stack.values()))
        return normalize_path(str(innermost[0])) or None
    if node.op == "get_attr" and isinstance(node.target, str) and "." in node.target:
        return node.target.rpartition(".")[0]
    return None


def module_type(node: fx.Node, root: nn.Module | None = None) -> str | None:
    """Return the class name of the innermost module ``node`` belongs to, or ``None``.

    Read from ``node.meta["nn_module_stack"]`` (a class, or a dotted class name as ``torch.export``
    writes it); for a ``call_module`` node without that metadata, looked up in ``root``.

    Example:
        >>> import torch
        >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
        >>> gm = torch.fx.symbolic_trace(net)
        >>> [module_type(n) for n in gm.graph.nodes]
        [None, 'Linear', 'ReLU', None]
    """
    stack = node.meta.get("nn_module_stack")
    if stack:
        kind = next(reversed(stack.values()))[1]
        if isinstance(kind, type):
            return kind.__name__
        return str(kind).rpartition(".")[2] or None
    if node.op == "call_module" and root is not None:
        try:
            return type(root.get_submodule(str(node.target))).__name__
        except AttributeError:
            return None
    return None


def _decode(name: str, *, split_leaves: bool) -> str:
    """Decode a source expression or a mangled identifier; indices stay as ``[k]``."""
    if any(mark in name for mark in ".[('\""):
        return _decode_source(name)
    return _decode_mangled(name, split_leaves=split_leaves)


def _decode_source(text: str) -> str:
    """``getattr(L['self'].model, '23').cv3[0]`` -> ``model.23.cv3[0]``."""
    previous = None
    while previous != text:
        previous = text
        text = _SOURCE_GETATTR.sub(lambda m: _join(m.group(1), m.group(2)), text)
    text = _SOURCE_ROOT.sub("", text)
    text = _SOURCE_DICT_ITEM.sub(lambda m: _join("", m.group(1)), text)
    text = _SOURCE_STRING_ITEM.sub(lambda m: _join("", m.group(1)), text)
    return text.lstrip(".")


def _join(head: str, key: str) -> str:
    """Access ``key`` on ``head``: ``head[0]`` for a number, ``head.key`` otherwise."""
    return f"{head}[{key}]" if key.isdigit() else f"{head}.{key}"


def _decode_mangled(name: str, *, split_leaves: bool) -> str:
    """``getattr_L__m___model_23_cv3_0___0__`` -> ``model.23.cv3.0[0]``."""
    text = name
    local = _MANGLED_LOCAL.match(text)
    if local:
        text = local.group(1)
    previous = None
    while previous != text:
        previous = text
        for prefix in _MANGLED_PREFIXES:
            text = prefix.sub("", text)
    text = _MANGLED_GETATTR_INDEX.sub(r"[\1]", text)

    # Split into words and the underscore runs between them; a run touching an index word is a
    # separator, unless the index is the last word (FX's ``relu_1`` numbering) and plain digits.
    parts = re.split(r"(_+)", text)
    words = parts[0::2]
    last = len(words) - 1
    mangled = text != name
    for i in range(1, len(parts), 2):
        before, after = words[i // 2], words[i // 2 + 1]
        after_is_index = bool(_INDEX_WORD.match(after)) and (i // 2 + 1 < last or not after.isdigit())
        if before and after and (bool(_INDEX_WORD.match(before)) or after_is_index):
            parts[i] = "."
            mangled = True
    text = "".join(parts)

    if split_leaves and mangled:
        for leaf in _LEAF_NAMES:
            if text.endswith("_" + leaf) and len(text) > len(leaf) + 1:
                text = f"{text[: -len(leaf) - 1]}.{leaf}"
                break
    return text


def _fold_repeated_head(text: str) -> str:
    """``model.model.X`` -> ``model.X``; index components are never folded."""
    head, sep, rest = text.partition(".")
    while sep and head.isidentifier() and rest.split(".", 1)[0] == head:
        text = rest
        head, sep, rest = text.partition(".")
    return text


def _truncate(text: str, max_len: int) -> str:
    """Cut the middle out of ``text`` so that ``start...end`` fits in ``max_len`` characters."""
    if len(text) <= max_len:
        return text
    keep = max_len - len(_ELLIPSIS)
    tail = (keep + 1) // 2  # the end names the leaf module, so it gets the odd character
    return f"{text[: keep - tail]}{_ELLIPSIS}{text[-tail:]}"


def functional_op(name: str) -> str:
    """An op's name without its in-place underscore, to match a real run's op with the dry run's:
    ``out += x`` runs ``aten::add_`` where a traced graph has ``add``.

    >>> functional_op("aten::add_"), functional_op("relu"), functional_op("aten._to_copy")
    ('aten::add', 'relu', 'aten._to_copy')
    """
    return name[:-1] if name.endswith("_") else name


#: The kernels one public op dispatches to, by backend: a graph node is named by the op the model called
#: (``F.scaled_dot_product_attention``), not by the kernel the machine happened to pick for it.
_KERNEL_OF_CALL = {
    kernel: "scaled_dot_product_attention"
    for kernel in (
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable",
        "_scaled_dot_product_attention_math",
    )
}


def called_op(name: str) -> str:
    """The public op a backend kernel implements (``aten._scaled_dot_product_flash_attention_for_cpu`` ->
    ``aten.scaled_dot_product_attention``); any other name as it is.

    >>> called_op("aten._scaled_dot_product_flash_attention_for_cpu"), called_op("mm")
    ('aten.scaled_dot_product_attention', 'mm')
    """
    prefix, _, short = name.rpartition(".")
    called = _KERNEL_OF_CALL.get(short)
    return name if called is None else (f"{prefix}.{called}" if prefix else called)
