"""Elementwise primitives: math, comparisons, integer and bitwise ops, select, casts.

At this (lax) level operands must already agree in shape and dtype; ``ember.numpy``
broadcasts and promotes before binding. Each primitive is one ``ElementwiseOp`` row
(the table at the end): its name, NumPy reference, accepted dtypes, derivative, cost,
the C-family template that computes it, its ``ember.numpy`` wrapper and whether the
fuzzer draws it. Everything else reads the row: the renderers' op tables
(``ember.codegen.render.OpTemplates``), fusion's cost model, ``ember.lax``,
``ember.numpy`` and the fuzzer, so a new op is one ``define_elementwise`` call.
select_n, clamp and convert_element_type take parameters or mixed operands and are
defined by hand below the table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError, EmberValueError
from ember.ops import rules
from ember.ops.sharding_rules import elementwise_sharding

__all__ = [
    "neg", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "log", "log1p",
    "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
    "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf", "erfc", "erf_inv",
    "lgamma", "digamma", "abs", "bitwise_not", "real", "imag", "conj", "integer_pow",
    "population_count", "square", "add", "sub", "mul", "div", "rem", "pow", "max", "min",
    "atan2", "nextafter", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
    "shift_right_logical", "shift_right_arithmetic", "eq", "ne", "lt", "le", "gt", "ge",
    "select_n", "clamp", "convert_element_type", "ELEMENTWISE",
]

# Every elementwise primitive, by name: fusion and renderers look kernels up here.
ELEMENTWISE: dict[str, Primitive] = {}

# dtype classes a primitive accepts
FLOAT = "float"      # real floating
INEXACT = "inexact"  # real or complex floating
NUMBER = "number"    # ints, floats, complex (not bool)
INT = "int"          # integers
INT_BOOL = "intbool" # integers or bool
ANY = "any"

# ElementwiseOp.jvp values besides one derivative per operand
ZERO = "zero"      # piecewise constant or integer-valued: the derivative is zero
LINEAR = "linear"  # linear: the tangent is the op of the tangents; needs a transpose


@dataclass(frozen=True)
class ElementwiseOp:
    """One elementwise primitive, defined whole (register it with ``define_elementwise``).

    ``jvp``: ``ZERO``, ``LINEAR`` or one derivative per operand, ``f(t, *operands)`` giving
    that operand's tangent contribution (``f(t, ans, *operands)`` with
    ``jvp_uses_output``), as ``jax.interpreters.ad.defjvp``. ``transpose``: the rule of an
    op linear in some operands (see ``ember.ops.rules``).

    ``templates``: what computes the op in generated code, keyed by target: ``"c"`` for
    every C dialect, ``"gpu"`` / ``"cuda"`` / ``"opencl"`` where a target differs; ``None``
    means the target lacks it (it runs as a host call). A template is a string, or
    {dtype name or class ('float', 'int', 'uint', 'bool', 'any'): string}; the fields
    are those of ``ember.codegen.render.Renderer.template_fields``. Without a "c" entry,
    ``math`` names the library function that computes the op on floats (``{f_<math>}``).
    """

    name: str
    reference: Callable[..., Any]  # the NumPy implementation: the reference backend
    accepts: str  # dtype class of the operands (FLOAT, INEXACT, NUMBER, ...)
    nargs: int = 1
    out_dtype: Callable[[np.dtype], np.dtype] | None = None  # None: the operands' dtype
    jvp: str | Sequence[Callable] = ZERO
    jvp_uses_output: bool = False
    transpose: Callable | None = None
    expensive: bool = False  # many instructions: fusion does not recompute it freely
    math: str | None = None
    templates: Mapping[str, Any] = field(default_factory=dict)
    lax_name: str = ""  # the ember.lax function (default: ``name``)
    numpy: tuple[str, ...] = ()  # ember.numpy names of its ufunc (promoted, broadcast)
    promote: str = "same"  # ember.numpy promotion: "same" dtype, or "inexact" (ints -> float)
    fuzzed: bool = True  # the fuzzer draws it (``ember.fuzz.ops``)

    @property
    def lax_function_name(self) -> str:
        return self.lax_name or self.name

    def template(self, targets: Sequence[str]) -> Any:
        """The template of the first of ``targets`` the row names (most specific first),
        else the ``math`` call; None where the target lacks the op."""
        for target in targets:
            if target in self.templates:
                return self.templates[target]
        if self.math is None:
            return None
        operands = ", ".join(f"{{{i}}}" for i in range(self.nargs))
        return {"float": f"{{f_{self.math}}}({operands})"}


# Every op defined by a row, by primitive name.
ELEMENTWISE_OPS: dict[str, ElementwiseOp] = {}


def _accepts(kind: str, dtype: np.dtype) -> bool:
    if kind == ANY:
        return True
    if kind == FLOAT:
        return dtypes.is_floating(dtype)
    if kind == INEXACT:
        return dtypes.is_inexact(dtype)
    if kind == NUMBER:
        return not dtypes.is_bool(dtype)
    if kind == INT:
        return dtypes.is_integer(dtype)
    return dtypes.is_integer(dtype) or dtypes.is_bool(dtype)


def _check_same(name: str, avals: tuple[ShapedArray, ...]) -> None:
    first = avals[0]
    for other in avals[1:]:
        if other.shape != first.shape:
            raise EmberValueError(
                f"{name}: operand shapes {first.shape} and {other.shape} differ; lax-level "
                "operations need equal shapes (ember.numpy broadcasts for you)")
        if other.dtype != first.dtype:
            raise EmberTypeError(
                f"{name}: operand dtypes {first.dtype} and {other.dtype} differ; convert one "
                "with .astype(...) (ember.numpy promotes for you)")


def define_elementwise(op: ElementwiseOp) -> Primitive:
    """Register ``op``: its primitive with abstract eval, reference impl, batching and
    derivative rules. Codegen, ember.lax, ember.numpy and the fuzzer read the row."""
    if op.name in ELEMENTWISE:
        raise EmberValueError(f"an elementwise primitive named {op.name!r} exists already")
    prim = Primitive(op.name)
    name, nargs, out_dtype = op.name, op.nargs, op.out_dtype

    @prim.def_abstract_eval
    def _abstract(*avals: ShapedArray, **params: Any) -> ShapedArray:
        if len(avals) != nargs:
            raise EmberTypeError(f"{name} takes {nargs} operands, got {len(avals)}")
        _check_same(name, avals)
        dtype = avals[0].dtype
        if not _accepts(op.accepts, dtype):
            raise EmberTypeError(f"{name} does not accept dtype {dtype} "
                                 f"(needs {op.accepts} dtypes)")
        return ShapedArray(avals[0].shape, out_dtype(dtype) if out_dtype else dtype)

    @prim.def_impl
    def _impl(*args: np.ndarray, **params: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = op.reference(*args, **params)
        dtype = out_dtype(np.asarray(args[0]).dtype) if out_dtype else np.asarray(args[0]).dtype
        return np.asarray(out, dtype=dtype)

    rules.def_elementwise_batch(prim)
    prim.def_sharding(elementwise_sharding)
    if op.jvp == ZERO:
        rules.defjvp_zero(prim)
    elif op.jvp == LINEAR:
        rules.deflinear(prim, op.transpose)
    elif op.jvp_uses_output:
        rules.defjvp2(prim, *op.jvp)
    else:
        rules.defjvp(prim, *op.jvp)
    if op.transpose is None:
        prim.waive("transpose", "not linear in its operands")
    elif op.jvp != LINEAR:
        prim.def_transpose(op.transpose)
    ELEMENTWISE[name] = prim
    ELEMENTWISE_OPS[name] = op
    return prim


def _to_bool(_: np.dtype) -> np.dtype:
    return dtypes.bool_


def _real_of(dtype: np.dtype) -> np.dtype:
    return {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}.get(dtype, dtype)


# --- reference implementations NumPy lacks --------------------------------------------

def _vectorize_math(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    vectorized = np.vectorize(fn, otypes=[np.float64])

    def apply(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        return vectorized(x.astype(np.float64)).astype(x.dtype) if x.size else x.copy()

    return apply


def _special(name: str, fallback: Callable[[float], float]) -> Callable:
    """``scipy.special.<name>`` when SciPy is installed (faster and exact), else the
    vectorized scalar ``fallback``. SciPy is imported on the first call, not at import
    time: importing ``scipy.special`` costs ~0.2 s of every process's start-up."""
    resolved: list[Callable] = []

    def resolve() -> Callable:
        try:
            import scipy.special as special  # optional: faster and exact
        except ImportError:
            return _vectorize_math(fallback)
        fn = getattr(special, name)
        return lambda x: fn(np.asarray(x, dtype=np.float64)).astype(np.asarray(x).dtype)

    def apply(x):
        if not resolved:
            resolved.append(resolve())
        return resolved[0](x)

    return apply


def _digamma_scalar(x: float) -> float:
    if math.isnan(x) or x == -math.inf:
        return math.nan
    if x <= 0 and x == math.floor(x):
        return math.nan
    result = 0.0
    if x < 0:  # reflection
        return _digamma_scalar(1 - x) - math.pi / math.tan(math.pi * x)
    while x < 6:
        result -= 1 / x
        x += 1
    f = 1 / (x * x)
    return result + math.log(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (
        1 / 240 - f / 132))))


def _erf_inv_scalar(y: float) -> float:
    if math.isnan(y) or y < -1 or y > 1:
        return math.nan
    if y == 1:
        return math.inf
    if y == -1:
        return -math.inf
    # Initial guess (Giles' approximation), then Newton steps on erf.
    w = -math.log((1.0 - y) * (1.0 + y))
    x = math.copysign(math.sqrt(w), y) * 0.88 if w > 5 else y * 1.2
    for _ in range(60):
        err = math.erf(x) - y
        step = err / (2 / math.sqrt(math.pi) * math.exp(-x * x))
        x -= step
        if math.fabs(step) <= 4e-16 * (1.0 if math.fabs(x) < 1.0 else math.fabs(x)):  # converged
            break
    return x


_erf = _special("erf", math.erf)
_erfc = _special("erfc", math.erfc)
_erfinv = _special("erfinv", _erf_inv_scalar)
_lgamma = _special("gammaln", math.lgamma)
_digamma = _special("digamma", _digamma_scalar)


def _round_half_away(x: np.ndarray, rounding_method: int = 0) -> np.ndarray:
    if rounding_method == 1:  # to nearest even, as np.round
        return np.round(x)
    return np.sign(x) * np.floor(np.abs(x) + np.asarray(0.5, x.dtype))


def _logistic(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    positive = x >= 0
    out[positive] = 1 / (1 + np.exp(-x[positive]))
    ex = np.exp(x[~positive])
    out[~positive] = ex / (1 + ex)
    return out


def _c_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Division as C and XLA define it: integers round toward zero."""
    x, y = np.asarray(x), np.asarray(y)
    if dtypes.is_integer(x.dtype):
        safe = np.where(y == 0, 1, y)
        floored = x // safe  # (np.abs would overflow on the most negative integer)
        inexact = (floored * safe != x) & ((x < 0) != (safe < 0))
        quotient = floored + inexact.astype(x.dtype)
        return np.where(y == 0, -1 if dtypes.is_signed(x.dtype) else np.iinfo(x.dtype).max,
                        quotient).astype(x.dtype)
    return np.true_divide(x, y)


def _c_rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Remainder with the sign of the dividend (C fmod semantics, as XLA)."""
    x, y = np.asarray(x), np.asarray(y)
    if dtypes.is_integer(x.dtype):
        safe = np.where(y == 0, 1, y)
        return np.where(y == 0, x, x - _c_div(x, safe) * safe).astype(x.dtype)
    return np.fmod(x, y)


def _shift_left(x, y):
    bits = x.dtype.itemsize * 8
    y_safe = np.where((y < 0) | (y >= bits), 0, y).astype(x.dtype)
    return np.where((y < 0) | (y >= bits), 0, np.left_shift(x, y_safe)).astype(x.dtype)


def _shift_right_logical(x, y):
    bits = x.dtype.itemsize * 8
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    ux = x.view(unsigned) if isinstance(x, np.ndarray) else np.asarray(x).view(unsigned)
    y_safe = np.where((y < 0) | (y >= bits), 0, y).astype(unsigned)
    out = np.where((y < 0) | (y >= bits), 0, np.right_shift(ux, y_safe)).astype(unsigned)
    return out.view(x.dtype)


def _shift_right_arithmetic(x, y):
    bits = x.dtype.itemsize * 8
    y_clamped = np.clip(y, 0, bits - 1).astype(x.dtype)
    out = np.right_shift(x, y_clamped)
    if dtypes.is_unsigned(x.dtype):
        out = np.where(y >= bits, 0, out)
    return out.astype(x.dtype)


def _population_count(x):
    x = np.asarray(x)
    unsigned = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    count = np.zeros(x.shape, dtype=np.uint64)
    for _ in range(x.dtype.itemsize * 8):
        count += unsigned & np.uint64(1)
        unsigned >>= np.uint64(1)
    return count.astype(x.dtype)


def _integer_pow(x, y: int):
    if y == 0:
        return np.ones_like(x)
    if y < 0:
        return np.asarray(1, x.dtype) / np.power(x, -y)
    return np.power(x, y)


def _pow(x, y):
    x_dtype = np.asarray(x).dtype
    if dtypes.is_integer(x_dtype):
        y = np.asarray(y)
        return np.where(y < 0, 0, np.power(x, np.maximum(y, 0))).astype(x_dtype)
    result = np.power(x, y)
    if dtypes.is_complex(x_dtype):
        return result
    # NumPy takes a scalar exponent of 0.5 as sqrt, which gives NaN at -inf and -0 at -0
    # where C99's pow (XLA's, the generated code's) gives +inf and +0
    return np.where((np.asarray(y) == 0.5) & ((x == -np.inf) | (x == 0)), np.abs(x), result)


# --- derivatives the rows name ----------------------------------------------------------

def _zeros_like(x):
    return rules.zeros_like_aval(ShapedArray(np.shape(x), x.dtype))


def _where(pred, on_true, on_false):
    return select_n(pred, on_false, on_true)


def _bcast_to(t, like):
    """A scalar clamp bound's tangent, broadcast to the operand's shape."""
    from ember.ops.structural import broadcast_in_dim

    return broadcast_in_dim(t, np.shape(like), ()) if np.shape(t) != np.shape(like) else t


def _trigamma_positive(x):
    """polygamma(1, x) for x > 0: six steps of the recurrence psi1(x) = psi1(x+1) + 1/x^2,
    then the asymptotic series at x + 6 (error below 1e-9)."""
    total = _zeros_like(x)
    for k in range(6):
        total = add(total, integer_pow(add(x, float(k)), -2))
    z = add(x, 6.0)
    inv = div(add(_zeros_like(z), 1.0), z)
    inv2 = square(inv)
    series = mul(inv2, sub(1.0 / 6.0, mul(inv2, sub(1.0 / 30.0, mul(inv2, sub(
        1.0 / 42.0, mul(inv2, 1.0 / 30.0)))))))
    return add(total, mul(inv, add(add(series, mul(inv, 0.5)), 1.0)))


def _trigamma(x):
    """polygamma(1, x), with the reflection formula for x < 0.5. Each branch gets inputs
    where it is finite, so the unused one puts no NaN into derivatives."""
    small = lt(x, 0.5)
    x_small = _where(small, x, add(_zeros_like(x), 0.25))
    x_large = _where(small, add(_zeros_like(x), 1.0), x)
    # sin(pi x)^2 has period 1: taking x's distance to the nearest integer first (exact)
    # keeps the argument accurate near the poles, where pi * x would lose it in float16
    near_pole = sub(x_small, round(x_small))
    reflected = sub(div(add(_zeros_like(x), math.pi ** 2), square(sin(mul(near_pole, math.pi)))),
                    _trigamma_positive(sub(1.0, x_small)))
    return _where(small, reflected, _trigamma_positive(x_large))


def _abs_jvp(t, x):
    if dtypes.is_complex(x.dtype):  # d|z| = Re(conj(z) dz) / |z|
        return div(real(mul(conj(x), t)), abs(x))
    # (JAX's: the slope at 0 is 1, that of the positive side, and -1 at NaN; PyTorch's
    # and sign(x)'s is 0 there. Formulas with |x| inside that must have another slope
    # at 0 have JVPs of their own: logaddexp, so softplus and log_sigmoid)
    return _where(ge(x, _zeros_like(x)), t, neg(t))


def _integer_pow_jvp(t, x, *, y):
    if y == 0:
        return _zeros_like(x)
    return mul(t, mul(integer_pow(x, y - 1), float(y)))


def _pow_jvp_base(t, x, y):
    # y * x**(y-1), defined as 0 where y == 0 (so x = 0, y = 0 gives no NaN)
    slope = mul(y, pow(x, sub(y, 1.0)))
    return mul(t, _where(eq(y, 0.0), _zeros_like(x), slope))


def _pow_jvp_exponent(t, ans, x, y):
    # log(x) * x**y, defined as 0 where x == 0
    safe_x = _where(eq(x, 0.0), add(_zeros_like(x), 1.0), x)
    return mul(t, _where(eq(x, 0.0), _zeros_like(x), mul(log(safe_x), ans)))


def _balanced(x, y, pick):
    """1 where ``x`` is picked, 0.5 where x == y (max/min split the tangent)."""
    one = add(_zeros_like(x), 1.0)
    half = add(_zeros_like(x), 0.5)
    return _where(pick(x, y), one, _where(eq(x, y), half, _zeros_like(x)))


def _linear_in(x, ct):
    return ct if rules.is_undefined_primal(x) else None


def _mul_transpose(ct, x, y):
    if rules.is_undefined_primal(x) and rules.is_undefined_primal(y):
        raise EmberTypeError("mul of two linear values is not linear: cannot transpose it")
    if rules.is_undefined_primal(x):
        return [mul(ct, y), None]
    return [None, mul(x, ct)]


def _div_transpose(ct, x, y):
    if rules.is_undefined_primal(y):
        raise EmberTypeError("div is not linear in its divisor: cannot transpose it")
    return [div(ct, y), None]


def _select_n_transpose(ct, which, *cases):
    if rules.is_undefined_primal(which):
        raise EmberTypeError("select_n is not linear in its predicate: cannot transpose it")
    zeros = _zeros_like(ct)
    return [None] + [
        select_n(which, *[ct if j == i else zeros for j in range(len(cases))])
        if rules.is_undefined_primal(case) else None
        for i, case in enumerate(cases)]


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n(which, *cases)
    if all(isinstance(t, rules.Zero) for t in tangents[1:]):
        return out, rules.Zero.like(out)
    return out, select_n(which, *[rules.instantiate(t) for t in tangents[1:]])


def _clamp_jvp_lo(t, lo, x, hi):
    return _where(bitwise_and(gt(_bcast_to(lo, x), x), lt(_bcast_to(lo, x), _bcast_to(hi, x))),
                  _bcast_to(t, x), _zeros_like(x))


def _clamp_jvp_x(t, lo, x, hi):
    return _where(bitwise_and(gt(x, _bcast_to(lo, x)), lt(x, _bcast_to(hi, x))), t,
                  _zeros_like(x))


def _clamp_jvp_hi(t, lo, x, hi):
    return _where(lt(_bcast_to(hi, x), x), _bcast_to(t, x), _zeros_like(x))


# --- the table ------------------------------------------------------------------------

_SHIFT_OUT = "(uint64_t)(int64_t){1} >= {BITS}"


def _bitwise(symbol: str) -> dict[str, str]:
    return {cls: f"({{0}} {symbol} {{1}})" for cls in ("bool", "int", "uint")}


def _compare(name: str, reference: Callable, symbol: str) -> ElementwiseOp:
    return ElementwiseOp(name, reference, ANY, 2, _to_bool,
                         templates={"c": {"any": f"({{0}} {symbol} {{1}})"}})


# Unary ops (in the order the fuzzer draws them), then binary ones.
_OPS = [
    ElementwiseOp("neg", np.negative, NUMBER, jvp=LINEAR, transpose=lambda ct, x: [neg(ct)],
                  templates={"c": {"any": "(-{0})"}}),
    ElementwiseOp("abs", np.abs, NUMBER, out_dtype=_real_of, jvp=[_abs_jvp],
                  templates={"c": {"float": "{f_fabs}({0})", "int": "({0} < 0 ? ({T})-{0} : {0})",
                                   "uint": "{0}"}}),
    ElementwiseOp("sign", np.sign, NUMBER, templates={"c": {
        "float": "({0} != {0} ? {0} : ({T})(({0} > 0) - ({0} < 0)))",
        "int": "(({T})(({0} > 0) - ({0} < 0)))", "uint": "(({T})({0} > 0))"}}),
    ElementwiseOp("square", np.square, NUMBER, jvp=[lambda t, x: mul(t, mul(x, 2.0))],
                  templates={"c": {"any": "({0} * {0})"}}, numpy=("square",)),
    ElementwiseOp("exp", np.exp, INEXACT, jvp=[lambda t, ans, x: mul(t, ans)],
                  jvp_uses_output=True, expensive=True, math="exp", numpy=("exp",),
                  promote="inexact"),
    ElementwiseOp("log", np.log, INEXACT, jvp=[lambda t, x: div(t, x)], expensive=True,
                  math="log", numpy=("log",), promote="inexact"),
    ElementwiseOp("sqrt", np.sqrt, INEXACT, jvp=[lambda t, ans, x: div(mul(t, 0.5), ans)],
                  jvp_uses_output=True, math="sqrt", numpy=("sqrt",), promote="inexact"),
    ElementwiseOp("tanh", np.tanh, INEXACT,
                  jvp=[lambda t, ans, x: mul(t, sub(1.0, square(ans)))], jvp_uses_output=True,
                  expensive=True, math="tanh", numpy=("tanh",), promote="inexact"),
    ElementwiseOp("logistic", _logistic, FLOAT,
                  jvp=[lambda t, ans, x: mul(t, mul(ans, sub(1.0, ans)))], jvp_uses_output=True,
                  expensive=True, math="sigmoid"),
    ElementwiseOp("sin", np.sin, INEXACT, jvp=[lambda t, x: mul(t, cos(x))], expensive=True,
                  math="sin", numpy=("sin",), promote="inexact"),
    ElementwiseOp("cos", np.cos, INEXACT, jvp=[lambda t, x: neg(mul(t, sin(x)))],
                  expensive=True, math="cos", numpy=("cos",), promote="inexact"),
    ElementwiseOp("floor", np.floor, FLOAT, math="floor"),
    ElementwiseOp("ceil", np.ceil, FLOAT, math="ceil"),
    # rounding_method 1 (half to even) renders as the renderers' own "round_even" row
    ElementwiseOp("round", _round_half_away, FLOAT, math="round"),
    ElementwiseOp("is_finite", np.isfinite, FLOAT, out_dtype=_to_bool,
                  templates={"c": {"float": "(({0} - {0}) == 0)"}}),
    ElementwiseOp("exp2", np.exp2, INEXACT,
                  jvp=[lambda t, ans, x: mul(t, mul(ans, math.log(2.0)))], jvp_uses_output=True,
                  expensive=True, math="exp2", numpy=("exp2",), promote="inexact"),
    ElementwiseOp("log1p", np.log1p, INEXACT, jvp=[lambda t, x: div(t, add(x, 1.0))],
                  expensive=True, math="log1p", numpy=("log1p",), promote="inexact"),
    ElementwiseOp("expm1", np.expm1, INEXACT, jvp=[lambda t, ans, x: mul(t, add(ans, 1.0))],
                  jvp_uses_output=True, expensive=True, math="expm1", numpy=("expm1",),
                  promote="inexact"),
    ElementwiseOp("tan", np.tan, INEXACT,
                  jvp=[lambda t, ans, x: mul(t, add(1.0, square(ans)))], jvp_uses_output=True,
                  expensive=True, math="tan", numpy=("tan",), promote="inexact"),
    ElementwiseOp("asin", np.arcsin, INEXACT,
                  jvp=[lambda t, x: mul(t, rsqrt(sub(1.0, square(x))))], expensive=True,
                  math="asin", numpy=("arcsin", "asin"), promote="inexact"),
    ElementwiseOp("acos", np.arccos, INEXACT,
                  jvp=[lambda t, x: neg(mul(t, rsqrt(sub(1.0, square(x)))))], expensive=True,
                  math="acos", numpy=("arccos", "acos"), promote="inexact"),
    ElementwiseOp("atan", np.arctan, INEXACT, jvp=[lambda t, x: div(t, add(1.0, square(x)))],
                  expensive=True, math="atan", numpy=("arctan", "atan"), promote="inexact"),
    ElementwiseOp("sinh", np.sinh, INEXACT, jvp=[lambda t, x: mul(t, cosh(x))],
                  expensive=True, math="sinh", numpy=("sinh",), promote="inexact"),
    ElementwiseOp("cosh", np.cosh, INEXACT, jvp=[lambda t, x: mul(t, sinh(x))],
                  expensive=True, math="cosh", numpy=("cosh",), promote="inexact"),
    ElementwiseOp("asinh", np.arcsinh, INEXACT,
                  jvp=[lambda t, x: mul(t, rsqrt(add(square(x), 1.0)))], expensive=True,
                  math="asinh", numpy=("arcsinh", "asinh"), promote="inexact"),
    ElementwiseOp("acosh", np.arccosh, INEXACT,
                  jvp=[lambda t, x: mul(t, rsqrt(mul(sub(x, 1.0), add(x, 1.0))))],
                  expensive=True, math="acosh", numpy=("arccosh", "acosh"), promote="inexact"),
    ElementwiseOp("atanh", np.arctanh, INEXACT, jvp=[lambda t, x: div(t, sub(1.0, square(x)))],
                  expensive=True, math="atanh", numpy=("arctanh", "atanh"), promote="inexact"),
    ElementwiseOp("rsqrt", lambda x: 1 / np.sqrt(x), INEXACT,
                  jvp=[lambda t, ans, x: mul(t, div(mul(ans, -0.5), x))], jvp_uses_output=True,
                  templates={"c": {"float": "(({T})1 / {f_sqrt}({0}))"}}),
    ElementwiseOp("cbrt", np.cbrt, FLOAT,
                  jvp=[lambda t, ans, x: mul(t, div(integer_pow(ans, -2), 3.0))],
                  jvp_uses_output=True, expensive=True, math="cbrt", numpy=("cbrt",),
                  promote="inexact"),
    ElementwiseOp("erf", _erf, FLOAT,
                  jvp=[lambda t, x: mul(t, mul(2.0 / math.sqrt(math.pi), exp(neg(square(x)))))],
                  expensive=True, math="erf"),
    ElementwiseOp("erfc", _erfc, FLOAT,
                  jvp=[lambda t, x: mul(t, mul(-2.0 / math.sqrt(math.pi), exp(neg(square(x)))))],
                  expensive=True, math="erfc"),
    # erf_inv and digamma: ember_special.h on the CPU; host calls on GPUs
    ElementwiseOp("erf_inv", _erfinv, FLOAT,
                  jvp=[lambda t, ans, x: mul(t, mul(math.sqrt(math.pi) / 2.0, exp(square(ans))))],
                  jvp_uses_output=True, expensive=True, templates={
                      "c": {"float64": "ember_erf_inv({0})", "float": "ember_erf_invf({0})"},
                      "gpu": None}),
    ElementwiseOp("lgamma", _lgamma, FLOAT, jvp=[lambda t, x: mul(t, digamma(x))],
                  expensive=True, templates={"c": {  # lgamma(-inf) is -inf, not inf
                      "float": "({0} < 0 && {0} - {0} != 0 ? {0} : {f_lgamma}({0}))"}}),
    ElementwiseOp("digamma", _digamma, FLOAT, jvp=[lambda t, x: mul(t, _trigamma(x))],
                  expensive=True, templates={
                      "c": {"float64": "ember_digamma({0})", "float": "ember_digammaf({0})"},
                      "gpu": None}),
    ElementwiseOp("not", np.invert, INT_BOOL, lax_name="bitwise_not", templates={"c": {
        "bool": "(!{0})", "int": "(({T})~{0})", "uint": "(({T})~{0})"}},
        numpy=("invert", "bitwise_not", "bitwise_invert")),
    ElementwiseOp("population_count", _population_count, INT, templates={
        "c": {"int": "(({T})__builtin_popcountll((uint64_t)({U}){0}))",
              "uint": "(({T})__builtin_popcountll((uint64_t){0}))"},
        "cuda": {"int": "(({T})__popcll((uint64_t)({U}){0}))",
                 "uint": "(({T})__popcll((uint64_t){0}))"},
        "opencl": {"int": "(({T})popcount((uint64_t)({U}){0}))",
                   "uint": "(({T})popcount((uint64_t){0}))"}}),
    ElementwiseOp("real", np.real, INEXACT, out_dtype=_real_of, jvp=LINEAR,
                  transpose=lambda ct, x: [convert_element_type(ct, x.dtype)],
                  templates={"c": {"float": "{0}"}}, fuzzed=False),
    ElementwiseOp("imag", np.imag, INEXACT, out_dtype=_real_of, jvp=LINEAR,
                  transpose=lambda ct, x: [mul(convert_element_type(neg(ct), x.dtype), 1j)],
                  templates={"c": {"float": "(({T})0)"}}, fuzzed=False),
    ElementwiseOp("conj", np.conj, INEXACT, jvp=LINEAR, transpose=lambda ct, x: [conj(ct)],
                  templates={"c": {"float": "{0}"}}, fuzzed=False),
    # rendered by the renderers' integer_power (repeated squaring of the parameter y)
    ElementwiseOp("integer_pow", _integer_pow, NUMBER, jvp=[_integer_pow_jvp], fuzzed=False),

    ElementwiseOp("add", np.add, NUMBER, 2, jvp=[lambda t, x, y: t, lambda t, x, y: t],
                  transpose=lambda ct, x, y: [_linear_in(x, ct), _linear_in(y, ct)],
                  templates={"c": {"any": "({0} + {1})"}}),
    ElementwiseOp("sub", np.subtract, NUMBER, 2,
                  jvp=[lambda t, x, y: t, lambda t, x, y: neg(t)],
                  transpose=lambda ct, x, y: [
                      _linear_in(x, ct), neg(ct) if rules.is_undefined_primal(y) else None],
                  templates={"c": {"any": "({0} - {1})"}}),
    ElementwiseOp("mul", np.multiply, NUMBER, 2,
                  jvp=[lambda t, x, y: mul(t, y), lambda t, x, y: mul(x, t)],
                  transpose=_mul_transpose, templates={"c": {"any": "({0} * {1})"}}),
    ElementwiseOp("max", np.maximum, ANY, 2, jvp=[lambda t, x, y: mul(t, _balanced(x, y, gt)),
                                                 lambda t, x, y: mul(t, _balanced(y, x, gt))],
                  templates={"c": {"any": "(({0} >= {1} || {0} != {0}) ? {0} : {1})"}}),
    ElementwiseOp("min", np.minimum, ANY, 2, jvp=[lambda t, x, y: mul(t, _balanced(x, y, lt)),
                                                 lambda t, x, y: mul(t, _balanced(y, x, lt))],
                  templates={"c": {"any": "(({0} <= {1} || {0} != {0}) ? {0} : {1})"}}),
    ElementwiseOp("div", _c_div, NUMBER, 2,
                  jvp=[lambda t, x, y: div(t, y), lambda t, x, y: div(mul(neg(t), x), square(y))],
                  transpose=_div_transpose, templates={"c": {
                      "float": "({0} / {1})",
                      "int": "({1} == 0 ? ({T})-1 : {1} == -1 ? ({T})(0 - ({U}){0}) : "
                             "({T})({0} / {1}))",
                      "uint": "({1} == 0 ? {MAX} : ({T})({0} / {1}))"}}),
    ElementwiseOp("rem", _c_rem, NUMBER, 2, jvp=[
        lambda t, x, y: t,
        lambda t, x, y: mul(neg(t), mul(sign(div(x, y)), floor(abs(div(x, y)))))],
        expensive=True, templates={"c": {
            "float": "{f_fmod}({0}, {1})",
            "int": "({1} == 0 ? {0} : {1} == -1 ? ({T})0 : ({T})({0} % {1}))",
            "uint": "({1} == 0 ? {0} : ({T})({0} % {1}))"}}),
    # GPUs: an unsigned exponent may be 2^63 or more (ember_upow, see codegen.gpu)
    ElementwiseOp("pow", _pow, NUMBER, 2, jvp=[
        lambda t, ans, x, y: _pow_jvp_base(t, x, y), _pow_jvp_exponent], jvp_uses_output=True,
        expensive=True, templates={
            "c": {"float": "{f_pow}({0}, {1})",
                  "int": "(({T})ember_ipow((uint64_t){0}, (int64_t){1}))",
                  "uint": "(({T})ember_ipow((uint64_t){0}, (int64_t){1}))"},
            "gpu": {"float": "{f_pow}({0}, {1})",
                    "int": "(({T})ember_ipow((uint64_t){0}, (int64_t){1}))",
                    "uint": "(({T})ember_upow((uint64_t){0}, (uint64_t){1}))"}}),
    ElementwiseOp("atan2", np.arctan2, FLOAT, 2, jvp=[
        lambda t, x, y: mul(t, div(y, add(square(x), square(y)))),
        lambda t, x, y: mul(t, div(neg(x), add(square(x), square(y))))],
        expensive=True, math="atan2", numpy=("arctan2", "atan2"), promote="inexact"),
    # (half precision would need the next 16-bit value: not covered)
    ElementwiseOp("nextafter", np.nextafter, FLOAT, 2, expensive=True, templates={"c": {
        "float32": "{f_nextafter}({0}, {1})", "float64": "{f_nextafter}({0}, {1})"}},
        numpy=("nextafter",), promote="inexact"),
    ElementwiseOp("and", np.bitwise_and, INT_BOOL, 2, lax_name="bitwise_and",
                  templates={"c": _bitwise("&")}),
    ElementwiseOp("or", np.bitwise_or, INT_BOOL, 2, lax_name="bitwise_or",
                  templates={"c": _bitwise("|")}),
    ElementwiseOp("xor", np.bitwise_xor, INT_BOOL, 2, lax_name="bitwise_xor",
                  templates={"c": _bitwise("^")}),
    ElementwiseOp("shift_left", _shift_left, INT, 2, templates={"c": {
        "int": f"({_SHIFT_OUT} ? ({{T}})0 : ({{T}})(({{U}}){{0}} << {{1}}))",
        "uint": f"({_SHIFT_OUT} ? ({{T}})0 : ({{T}})({{0}} << {{1}}))"}},
        numpy=("left_shift", "bitwise_left_shift")),
    ElementwiseOp("shift_right_logical", _shift_right_logical, INT, 2, templates={"c": {
        "int": f"({_SHIFT_OUT} ? ({{T}})0 : ({{T}})(({{U}}){{0}} >> {{1}}))",
        "uint": f"({_SHIFT_OUT} ? ({{T}})0 : ({{T}})({{0}} >> {{1}}))"}}),
    ElementwiseOp("shift_right_arithmetic", _shift_right_arithmetic, INT, 2, templates={"c": {
        "int": "({0} >> ({1} < 0 ? 0 : {1} >= {BITS} ? {BITS} - 1 : {1}))",
        "uint": "({1} >= {BITS} ? ({T})0 : ({T})({0} >> {1}))"}}),
    _compare("eq", np.equal, "=="),
    _compare("ne", np.not_equal, "!="),
    _compare("lt", np.less, "<"),
    _compare("le", np.less_equal, "<="),
    _compare("gt", np.greater, ">"),
    _compare("ge", np.greater_equal, ">="),
]
for _op in _OPS:
    define_elementwise(_op)


# --- primitives with parameters or mixed operands ------------------------------------

# select_n(which, *cases): which is bool (2 cases) or int32 (any number of cases).
select_n_p = Primitive("select_n")
ELEMENTWISE["select_n"] = select_n_p


@select_n_p.def_abstract_eval
def _select_n_abstract(which: ShapedArray, *cases: ShapedArray) -> ShapedArray:
    if not cases:
        raise EmberTypeError("select_n needs at least one case")
    _check_same("select_n", cases)
    if which.shape != cases[0].shape and which.shape != ():
        raise EmberValueError(f"select_n: predicate shape {which.shape} differs from case "
                              f"shape {cases[0].shape}")
    if dtypes.is_bool(which.dtype):
        if len(cases) > 2:
            raise EmberTypeError("select_n with a bool predicate takes at most 2 cases")
    elif not dtypes.is_integer(which.dtype):
        raise EmberTypeError(f"select_n predicate must be bool or integer, got {which.dtype}")
    return cases[0]


@select_n_p.def_impl
def _select_n_impl(which: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    which = np.asarray(which)
    if which.dtype == np.bool_:
        which = which.astype(np.int32)
    shape = np.broadcast(which, cases[0]).shape
    return np.choose(np.clip(np.broadcast_to(which, shape), 0, len(cases) - 1),
                     [np.broadcast_to(c, shape) for c in cases])


rules.def_elementwise_batch(select_n_p)
select_n_p.def_sharding(elementwise_sharding)
select_n_p.def_jvp(rules.accepts_symbolic_zeros(_select_n_jvp))
select_n_p.def_transpose(_select_n_transpose)

clamp_p = Primitive("clamp")  # clamp(lo, x, hi)
ELEMENTWISE["clamp"] = clamp_p


@clamp_p.def_abstract_eval
def _clamp_abstract(lo: ShapedArray, x: ShapedArray, hi: ShapedArray) -> ShapedArray:
    for bound in (lo, hi):
        if bound.dtype != x.dtype:
            raise EmberTypeError(f"clamp: bound dtype {bound.dtype} differs from {x.dtype}")
        if bound.shape not in ((), x.shape):
            raise EmberValueError(f"clamp: bound shape {bound.shape} must be () or {x.shape}")
    return x


@clamp_p.def_impl
def _clamp_impl(lo, x, hi):
    return np.minimum(np.maximum(x, lo), hi).astype(np.asarray(x).dtype)


rules.def_elementwise_batch(clamp_p)
clamp_p.def_sharding(elementwise_sharding)
rules.defjvp(clamp_p, _clamp_jvp_lo, _clamp_jvp_x, _clamp_jvp_hi)
clamp_p.waive("transpose", "not linear in its operands")

convert_element_type_p = Primitive("convert_element_type")
ELEMENTWISE["convert_element_type"] = convert_element_type_p


@convert_element_type_p.def_abstract_eval
def _convert_abstract(x: ShapedArray, *, new_dtype: np.dtype) -> ShapedArray:
    return ShapedArray(x.shape, new_dtype)


@convert_element_type_p.def_impl
def _convert_impl(x: np.ndarray, *, new_dtype: np.dtype) -> np.ndarray:
    x = np.asarray(x)
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = x.real
    if dtypes.is_inexact(x.dtype) and dtypes.is_integer(new_dtype):
        # Out-of-range and NaN conversions are undefined in C; define them as XLA does
        # on CPU: NaN -> 0, saturate to the integer range.
        info = np.iinfo(new_dtype)
        with np.errstate(invalid="ignore"):
            x = np.where(np.isnan(x), 0, np.clip(np.trunc(x), info.min, info.max))
        with np.errstate(all="ignore"):
            # info.max may round up in x's float type (2**31 in float32): saturate it too.
            return np.where(x >= info.max, info.max, x.astype(new_dtype)).astype(new_dtype)
    with np.errstate(all="ignore"):
        return x.astype(new_dtype)


rules.def_elementwise_batch(convert_element_type_p)
convert_element_type_p.def_sharding(elementwise_sharding)
rules.deflinear(convert_element_type_p,
                lambda ct, x, *, new_dtype: [convert_element_type(ct, x.dtype)])


# --- lax-level functions (what ember.lax exports) --------------------------------------

def lax_function(name: str) -> Callable:
    """The ember.lax function of the row-defined op ``name``."""
    prim = ELEMENTWISE[name]
    if ELEMENTWISE_OPS[name].nargs == 1:
        def fn(x):
            return prim.bind(x)

        fn.__doc__ = f"Elementwise ``{name}`` (lax level: no broadcasting or promotion)."
    else:
        def fn(x, y):
            x, y = _match_scalars(x, y)
            return prim.bind(x, y)

        fn.__doc__ = f"Elementwise ``{name}``; operands must have equal shapes and dtypes."
    fn.__name__ = name
    return fn



def _match_scalars(x: Any, y: Any) -> tuple[Any, Any]:
    """Let Python scalars take the other operand's dtype (weak typing, as in JAX)."""
    if dtypes.is_weak_scalar(x) and not dtypes.is_weak_scalar(y):
        x = _full_like_scalar(x, y)
    elif dtypes.is_weak_scalar(y) and not dtypes.is_weak_scalar(x):
        y = _full_like_scalar(y, x)
    return x, y


def _full_like_scalar(scalar: Any, like: Any) -> Any:
    from ember.ops.structural import broadcast_in_dim

    aval = like.aval if hasattr(like, "aval") else ShapedArray(np.shape(like),
                                                               np.asarray(like).dtype)
    value = np.asarray(scalar, dtype=aval.dtype)
    return value if aval.shape == () else broadcast_in_dim(value, aval.shape, ())


(neg, sign, floor, ceil, is_finite, exp, exp2, log, log1p, expm1, tanh, logistic, sin, cos,
 tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, sqrt, rsqrt, cbrt, erf, erfc,
 erf_inv, lgamma, digamma, abs, bitwise_not, real, imag, conj, population_count, square,
 add, sub, mul, div, rem, pow, max, min, atan2, nextafter, bitwise_and, bitwise_or,
 bitwise_xor, shift_left, shift_right_logical, shift_right_arithmetic, eq, ne, lt, le, gt,
 ge) = map(lax_function, (
    "neg", "sign", "floor", "ceil", "is_finite", "exp", "exp2", "log", "log1p", "expm1",
    "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf", "erfc", "erf_inv", "lgamma",
    "digamma", "abs", "not", "real", "imag", "conj", "population_count", "square", "add",
    "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "and", "or",
    "xor", "shift_left", "shift_right_logical", "shift_right_arithmetic", "eq", "ne", "lt",
    "le", "gt", "ge"))


def round(x, rounding_method: int = 0):
    """Round to integral values: 0 = half away from zero (default), 1 = half to even."""
    return ELEMENTWISE["round"].bind(x, rounding_method=int(rounding_method))


def integer_pow(x, y: int):
    return ELEMENTWISE["integer_pow"].bind(x, y=int(y))


def select_n(which, *cases):
    return select_n_p.bind(which, *cases)


def clamp(lo, x, hi):
    lo, x = _match_scalars(lo, x)
    hi, x = _match_scalars(hi, x)
    return clamp_p.bind(lo, x, hi)


def convert_element_type(x, new_dtype):
    new_dtype = dtypes.canonicalize(new_dtype)
    if getattr(x, "dtype", None) == new_dtype:
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype)
