"""The one table of per-element FLOP costs for everything that is not a contraction.

Each entry is a :class:`FlopRate`: FLOPs per element of the op's input and per element of its output.
"Input" is the tensor the op's arithmetic walks over: for a pooling op each element of each window, for
attention each element of the query-key score matrix, for a sort each element at each of its
``ceil(log2 n)`` merge levels. Rows of backward ops name in their section or comment which elements they
count (the gradient produced, grad_output, or the forward op's input).

Conventions behind the numbers (each row carries its own one-line derivation):

* add, sub, mul, div, compare, select, min/max: 1 FLOP each;
* a transcendental or special function (exp, log, sqrt, rsqrt, tanh, erf, sin, pow...) counts 1, as one
  vector-library or special-function-unit evaluation does;
* a reduction over n elements costs n (the accumulator starts from the identity, as kernels do), plus any
  finishing op per output (the divide of a mean);
* activations count the arithmetic of their defining formula, with each transcendental as 1;
* pure data movement (copies, casts, gathers, padding, nearest upsampling, factories) is 0 FLOPs: those
  ops are still counted, for their bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

__all__ = ["FlopRate", "PER_ELEMENT_FLOPS", "ONE_OP_NAMES", "SPECIAL_FUNCTION_NAMES", "COMPLEX_FLOPS", "rate"]


class FlopRate(NamedTuple):
    """FLOPs per input element and per output element (see the module docstring for "input")."""

    per_input: int = 0
    per_output: int = 0


def _out(per_output: int) -> FlopRate:
    return FlopRate(0, per_output)


def _in(per_input: int, per_output: int = 0) -> FlopRate:
    return FlopRate(per_input, per_output)


SPECIAL_FUNCTION_NAMES = (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "erf", "erfc", "erfinv", "lgamma", "digamma", "pow", "float_power",
)  # fmt: skip
ONE_OP_NAMES = (
    "add", "sub", "rsub", "mul", "div", "neg", "abs", "sign", "sgn", "signbit", "copysign",
    "maximum", "minimum", "fmax", "fmin", "floor", "ceil", "round", "trunc", "frac", "heaviside",
    "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "isneginf", "isposinf",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "__and__", "__or__", "__xor__", "__lshift__", "__rshift__",
)  # fmt: skip

#: Real FLOPs per complex element of the arithmetic ops (a complex output; the table's 1 is for real ones):
#: ``(a+bi) + (c+di)``: two adds; ``(a+bi)(c+di) = (ac-bd) + (ad+bc)i``: four multiplies and two adds;
#: ``(a+bi)/(c+di) = ((ac+bd) + (bc-ad)i) / (c^2+d^2)``: six multiplies, three adds and two divides.
COMPLEX_FLOPS: Final[Mapping[str, int]] = MappingProxyType({"add": 2, "sub": 2, "rsub": 2, "neg": 2, "mul": 6, "div": 11})

PER_ELEMENT_FLOPS: Final[Mapping[str, FlopRate]] = MappingProxyType({
    # ---- element-wise arithmetic and logic: per output element ------------------------------------
    **dict.fromkeys(ONE_OP_NAMES, _out(1)),  # one add / mul / divide / compare / bit op per element
    **dict.fromkeys(SPECIAL_FUNCTION_NAMES, _out(1)),  # one special-function evaluation per element
    "floor_divide": _out(2),  # divide, then floor
    "remainder": _out(4),  # a - floor(a / b) * b: divide, floor, multiply, subtract
    "fmod": _out(4),  # a - trunc(a / b) * b: divide, trunc, multiply, subtract
    "hypot": _out(4),  # sqrt(a*a + b*b): two multiplies, add, sqrt
    "polar": _out(4),  # abs * (cos(angle) + i sin(angle)): cos, sin, two multiplies per complex element
    "xlogy": _out(2),  # x * log(y): log, multiply
    "logit": _out(3),  # log(x / (1 - x)): subtract, divide, log
    "addcmul": _out(3),  # self + value * t1 * t2: two multiplies, add
    "addcdiv": _out(3),  # self + value * t1 / t2: divide, multiply, add
    "lerp": _out(3),  # a + w * (b - a): subtract, multiply, add
    "nan_to_num": _out(3),  # isnan, isinf test, select
    "where": _out(1),  # one select per element
    "masked_fill": _out(1),  # one select per element
    "tril": _out(1),  # keep-or-zero select per element
    "triu": _out(1),  # keep-or-zero select per element
    "clamp": _out(1),  # per bound given: max(x, lo) and/or min(x, hi)
    "clamp_min": _out(1),  # max(x, lo)
    "clamp_max": _out(1),  # min(x, hi)
    # ---- activations: per output element --------------------------------------------------------
    "relu": _out(1),  # max(x, 0)
    "threshold": _out(1),  # x > t ? x : v, one compare-select
    "hardtanh": _out(2),  # min(max(x, lo), hi); relu6 is hardtanh(0, 6)
    "leaky_relu": _out(2),  # x > 0 ? x : a * x: multiply, select
    "_prelu_kernel": _out(2),  # x > 0 ? x : w * x: multiply, select
    "elu": _out(4),  # x > 0 ? x : a * (exp(x) - 1): exp, subtract, multiply, select; +1 per non-unit scale
    "celu": _out(5),  # x > 0 ? x : a * (exp(x / a) - 1): divide, exp, subtract, multiply, select
    "sigmoid": _out(4),  # 1 / (1 + exp(-x)): negate, exp, add, divide
    "silu": _out(5),  # x * sigmoid(x): sigmoid 4, multiply
    "hardsigmoid": _out(4),  # min(max(x + 3, 0), 6) / 6: add, max, min, divide
    "hardswish": _out(5),  # x * hardsigmoid(x): hardsigmoid 4, multiply
    "gelu": _out(5),  # 0.5 * x * (1 + erf(x / sqrt 2)): divide, erf, add, two multiplies
    "gelu_tanh": _out(9),  # 0.5x(1 + tanh(c(x + 0.044715x^3))): cube 2, mul, add, mul, tanh, add, 2 mul
    "mish": _out(5),  # x * tanh(softplus(x)): exp, add, log, tanh, multiply
    "softplus": _out(5),  # bx > t ? x : log1p(exp(bx)) / b: multiply, compare, exp, log1p, divide
    "log_sigmoid_forward": _out(6),  # min(x, 0) - log1p(exp(-|x|)): min, abs, negate, exp, log1p, subtract
    "glu": _out(5),  # a * sigmoid(b): sigmoid 4, multiply
    # ---- randomness: per output element ---------------------------------------------------------
    "bernoulli": _out(1),  # compare a uniform draw with p (drawing random bits is not counted)
    "native_dropout": _out(2),  # keep = draw < 1 - p, then x * keep / (1 - p): compare, multiply
    # ---- data movement and factories: counted for their bytes -----------------------------------
    "copy": _out(0),  # copies, casts (_to_copy), clones: data movement only
    "gather": _out(0),  # index_select, gather, embedding, index: data movement only
    "pad": _out(0),  # constant / reflection / replication padding: data movement only
    "factory": _out(0),  # zeros, full, arange, rand...: filled, not computed from data
    # ---- quantization: per output element --------------------------------------------------------
    "quantize": _out(3),  # round(x / scale) + zero_point, then clamp: divide, round-add, clamp
    "dequantize": _out(2),  # (q - zero_point) * scale: subtract, multiply
    "requantize": _out(2),  # an integer kernel's accumulator rescaled to the output scale: multiply, add
    "upsample_nearest": _out(0),  # nearest (and nearest-exact) upsampling copies one source element
    # ---- reductions: per input element (+ per output element) -----------------------------------
    "sum": _in(1),  # one add per element
    "prod": _in(1),  # one multiply per element
    "mean": _in(1, 1),  # one add per element, one divide per output
    "amax": _in(1),  # one compare per element (amin, max, min, argmax, argmin alike)
    "aminmax": _in(2),  # two compares per element
    "histc": _in(4),  # (x - min) * bins / (max - min): subtract, multiply, floor to a bin, increment it
    "any": _in(1),  # one logical op per element (all, count_nonzero, nonzero alike)
    "cumsum": _in(1),  # one add per element (cumprod: one multiply)
    "var": _in(4, 2),  # mean: add, /n; then (x - m)^2 accumulated: subtract, multiply, add; /(n - c)
    "std": _in(4, 3),  # var, then sqrt per output
    "linalg_vector_norm": _in(2, 1),  # |x|^2 accumulated: multiply, add; sqrt per output (ord 2)
    "logsumexp": _in(4, 2),  # max, subtract, exp, add per element; log, add max per output
    "sort": _in(1),  # one compare per element per merge level (x ceil(log2 n) levels)
    "searchsorted": _in(1),  # one compare per element per bisection step (x ceil(log2 n_boundaries))
    "cdist": _in(3, 1),  # per element pair: subtract, |.|^p, add; root per output distance
    "nll_loss": _in(1, 1),  # per target: gather-and-add; divide per output (mean)
    "mse_loss": _in(3, 1),  # subtract, square, add per element; divide per output (mean)
    "l1_loss": _in(3, 1),  # subtract, abs, add per element; divide per output
    "smooth_l1_loss": _in(6, 1),  # subtract, abs, compare, square-or-shift (2), add; divide per output
    "binary_cross_entropy": _in(8, 1),  # -(t log x + (1-t) log(1-x)): 2 log, 2 mul, 2 sub, add; + sum
    "binary_cross_entropy_with_logits": _in(9, 1),  # (1-t)x + log1p(exp(-|x|)) + max(-x, 0) terms; + sum
    # ---- normalisation: per input element --------------------------------------------------------
    "softmax": _in(5),  # max, subtract, exp, sum, divide
    "log_softmax": _in(5),  # max, subtract, exp, sum, subtract log-sum (one log per row, not counted)
    "safe_softmax": _in(6),  # softmax 5, select zeroing fully masked rows
    "batch_norm_training": _in(6),  # mean 1, var 3 (subtract, square, add); x * scale + shift 2
    "batch_norm_inference": _in(2),  # x * scale + shift, with running stats and affine folded per channel
    "layer_norm": _in(6),  # mean 1, var 3, (x - mean) * rstd 2; weight and bias add 1 each ("mul", "add")
    "group_norm": _in(6),  # mean 1, var 3, x * scale + shift 2 (affine folded per (n, c))
    "rms_norm": _in(3),  # square, add, multiply by rsqrt(mean); weight adds 1 ("mul")
    # ---- attention: per element of the score matrix (query x key, per head) ----------------------
    "attention_scores": _in(6),  # scale (multiply), then softmax 5; a mask adds 1 ("add")
    # ---- pooling: per window element (+ per output element) --------------------------------------
    "max_pool": _in(1),  # one compare per window element
    "avg_pool": _in(1, 1),  # one add per window element, one divide per output
    # ---- interpolation: per output element -------------------------------------------------------
    "upsample_linear": _out(3),  # 2 weights x values, 1 add
    "upsample_bilinear": _out(7),  # 4 weights x values, 3 adds (weights are per row / column)
    "upsample_bicubic": _out(31),  # 16 weights x values, 15 adds
    "upsample_trilinear": _out(15),  # 8 weights x values, 7 adds
    "grid_sample": _in(10),  # per grid point: unnormalise 2 x 2, floor 2, fractional weights 6; + interp
    "col2im": _in(1),  # one add per column element folded back into the image
    "embedding_bag": _in(1, 1),  # per gathered element: add (or compare, for max); divide per output (mean)
    # ---- detection ops (torchvision): per box pair / per sample point -------------------------------
    "nms": _in(13),  # per box pair (n(n-1)/2, an upper bound): intersection 9, union 2, divide, compare
    "roi_align": _in(8, 1),  # per sample point: bilinear 7, accumulate 1; divide per output bin
    # ---- backward of activations: per element of grad_input ---------------------------------------
    "threshold_backward": _out(1),  # x > t ? g : 0, one compare-select
    "hardtanh_backward": _out(2),  # lo < x < hi ? g : 0, two compares
    "leaky_relu_backward": _out(2),  # x > 0 ? g : a * g: multiply, select
    "_prelu_kernel_backward": _out(4),  # grad_input: multiply, select; grad_weight: multiply, select
    "elu_backward": _out(3),  # x > 0 ? g : g * (y + a): add, multiply, select
    "sigmoid_backward": _out(3),  # g * y * (1 - y): subtract, two multiplies
    "tanh_backward": _out(3),  # g * (1 - y^2): multiply, subtract, multiply
    "silu_backward": _out(9),  # s = sigmoid(x) 4; g * s * (1 + x * (1 - s)): sub, mul, add, 2 mul
    "hardsigmoid_backward": _out(3),  # -3 < x < 3 ? g / 6 : 0: two compares, multiply
    "hardswish_backward": _out(6),  # two compares; g * (2x + 3) / 6: multiply, add, multiply, multiply
    "gelu_backward": _out(11),  # g * (cdf + x * pdf): cdf 4 (erf form), pdf 4 (square, mul, exp, mul), 3
    "gelu_tanh_backward": _out(15),  # tanh form: inner 4, tanh, 1 - t^2 2, du 3, combine 5
    "softplus_backward": _out(5),  # z = exp(bx); g * z / (z + 1), threshold test: exp, add, div, mul, compare
    "mish_backward": _out(14),  # softplus 3, tanh 1, sigmoid 4, g * (t + x * s * (1 - t^2)) 6
    "log_sigmoid_backward": _out(6),  # g * (1 - sigmoid(x)), sign handling: sigmoid 4, subtract, multiply
    "glu_backward": _in(9),  # per grad_output: sigmoid 4; g * s 1; g * a * s * (1 - s) 4
    "native_dropout_backward": _out(2),  # g * mask * scale: two multiplies
    "softmax_backward": _out(4),  # y * (g - sum(g * y)): multiply, add, subtract, multiply
    "log_softmax_backward": _out(4),  # g - exp(y) * sum(g): add, exp, multiply, subtract
    # ---- backward of normalisation: per element of the normalised input ---------------------------
    "layer_norm_backward_input": _in(10),  # xhat 2, g = dy * w 1, sum g 1, sum g*xhat 2, combine 4
    "layer_norm_backward_weight": _in(2),  # sum(dy * xhat): multiply, add (xhat shared with grad_input)
    "layer_norm_backward_bias": _in(1),  # sum(dy): add
    "batch_norm_backward_stats": _in(5),  # xhat = (x - mean) * invstd 2, sum(dy * xhat) 2, sum(dy) 1
    "batch_norm_backward_input": _in(4),  # (dy - mean(dy) - xhat * mean(dy * xhat)) * (invstd * w)
    "batch_norm_backward_input_inference": _in(1),  # dy * (invstd * w), scale folded per channel
    "rms_norm_backward_input": _in(7),  # xhat 1, g = dy * w 1, sum(g * xhat) 2, rstd * (g - xhat * m) 3
    "rms_norm_backward_weight": _in(2),  # sum(dy * xhat): multiply, add
    # ---- backward of attention: per score element (+ per element of grad_output) -----------------
    "attention_scores_backward": _in(6, 2),  # P = exp(S*scale - lse) 3, dS = P(dP - D) 2, scale 1; D = rowsum(dO*O) 2
    # ---- backward of pooling / interpolation: per element of grad_output ---------------------------
    "max_pool_backward": _out(1),  # scatter-add each gradient to its argmax
    "avg_pool_backward": _in(1, 1),  # divide per grad_output element, add per window element
    "upsample_nearest_backward": _out(1),  # accumulate each gradient into its source element
    "upsample_linear_backward": _out(4),  # 2 weights x gradient, 2 accumulating adds
    "upsample_bilinear_backward": _out(8),  # 4 weights x gradient, 4 accumulating adds
    "upsample_bicubic_backward": _out(32),  # 16 weights x gradient, 16 accumulating adds
    "upsample_trilinear_backward": _out(16),  # 8 weights x gradient, 8 accumulating adds
    "pad_backward": _out(1),  # reflection / replication: accumulate each gradient into its source
    "embedding_backward": _out(1),  # accumulate each gradient row element into the weight gradient
    "nll_loss_backward": _in(1),  # per target: scatter -w / n into the gradient
    "mse_loss_backward": _in(3),  # 2 * (x - t) * g / n: subtract, two multiplies
    "binary_cross_entropy_backward": _in(6),  # g * (x - t) / (x * (1 - x)) / n: 2 sub, 2 mul, div, mul
    "cdist_backward": _in(3, 1),  # per element pair: subtract, multiply by g / d, accumulate; g / d per distance
    "smooth_l1_loss_backward": _in(5),  # d = x - t; |d| < beta ? d / beta : sign(d); * g / n: sub, abs-compare, select, 2 mul
})  # fmt: skip
"""Per-element FLOPs of every non-contraction cost, keyed by op family (see the module docstring)."""


def rate(name: str) -> FlopRate:
    """The table's rate for ``name``; a missing name is a programming error (KeyError)."""
    return PER_ELEMENT_FLOPS[name]
