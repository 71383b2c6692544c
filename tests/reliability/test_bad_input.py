"""Bad input, everywhere public: every function of ember.numpy, ember.lax, ember.random
and ember.nn, given a wrong input, raises an Ember error that is a TypeError,
ValueError or IndexError, names what was wrong, and names the user's line.

Cases are found by walking each module: a function is first called with one of a few
plausible argument lists until a call succeeds, then that call is broken one way at a
time:

- ``object``: an array argument replaced by ``object()`` (the error names ``object``);
- ``str-dtype``: an array argument replaced by an array of strings (names the dtype);
- ``float-for-int``: an int / bool array the function needs replaced by a float32 one
  (only where the float32 call was rejected while searching: names ``float32``);
- ``shape``: for a function of two (2, 3) arrays with a (2, 3) result, the second
  replaced by a (5,) array (names the shape);
- ``axis``: ``axis=7`` on a 2-d argument (names the axis);
- ``dtype``: ``dtype="float99"`` (names it).

Known failures (reported, in other areas) are strict xfails listed in ``KNOWN``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import ember
from ember.errors import EmberError

X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
I = np.array([[1, 2, 0], [0, 1, 2]], np.int32)
B = np.array([[True, False, True], [False, True, True]])
KEY = ember.random.key(0)
STRINGS = np.array([["a", "b", "c"], ["d", "e", "f"]])
CANDIDATES = [
    (X,), (X, X), (X, X, X), (X, 1), (X, 0), (X, (0,)), (X, (2, 3)), (X, 2, 3), (X, I),
    (X, I, 0), (I,), (I, I), (I, 3), (B,), (B, B), (B, X, X), ((2, 3),), (3,), (0, 5),
    (KEY,), (KEY, (2, 3)), (KEY, 3), (KEY, 2), (KEY, X), (KEY, X, X),
]
# Functions about dtypes, shapes or Python objects rather than arrays.
NOT_ARRAY_FUNCTIONS = {"numpy.can_cast", "numpy.promote_types", "numpy.result_type",
                       "numpy.isdtype", "numpy.issubdtype", "numpy.finfo", "numpy.iinfo",
                       "numpy.iscomplexobj", "numpy.isrealobj", "numpy.shape", "numpy.ndim",
                       "numpy.size", "numpy.isscalar", "numpy.iterable",
                       "lax.convert_element_type"}
# Host-side I/O and print settings (files, buffers, global options): never probed.
NOT_ARRAY_FUNCTIONS |= {f"numpy.{name}" for name in (
    "save", "savez", "load", "frombuffer", "fromfile", "fromiter", "fromstring",
    "get_printoptions", "set_printoptions", "printoptions")}
# Array parameters that are not broadcast against the others.
NOT_BROADCAST = {"kth", "dtype", "test_elements"}


@dataclass(frozen=True)
class Case:
    name: str  # "module.function"
    kind: str
    fn: Callable = field(compare=False)
    args: tuple = field(compare=False)
    kwargs: dict = field(compare=False)
    words: tuple[str, ...] = ()  # one of them must appear in the message

    @property
    def id(self) -> str:
        return f"{self.name}:{self.kind}"


def call(case: Case) -> Any:
    return case.fn(*case.args, **case.kwargs)  # the user's line


def _valid_call(fn: Callable) -> tuple | None:
    for args in CANDIDATES:
        try:
            fn(*args)
            return args
        except Exception:  # noqa: BLE001 - searching for any call that works
            continue
    return None


def _parameter_name(fn: Callable, args: tuple, index: int) -> str | None:
    """The parameter that receives positional argument ``index``."""
    markers = [object() for _ in args]
    try:
        bound = inspect.signature(fn).bind(*markers).arguments
    except (TypeError, ValueError):
        return None
    return next((name for name, value in bound.items()
                 if value is markers[index] or (isinstance(value, tuple) and markers[index] in value)),
                None)


def _unbound(fn: Callable, args: tuple, name: str) -> bool:
    try:
        signature = inspect.signature(fn)
        return name in signature.parameters and name not in signature.bind(*args).arguments
    except (TypeError, ValueError):
        return False


def _accepts(fn: Callable, args: tuple) -> bool:
    """Whether ``fn`` takes ``args`` (a function that takes float32 where the search
    found an int array does not need an int there)."""
    try:
        fn(*args)
        return True
    except Exception:  # noqa: BLE001 - any rejection
        return False


def _replaced(args: tuple, index: int, value: Any) -> tuple:
    return args[:index] + (value,) + args[index + 1:]


def _result_shape(result: Any) -> tuple[int, ...] | None:
    """The shape of an array result; None for tuples of arrays of different shapes."""
    try:
        return np.shape(result)
    except ValueError:
        return None


def _cases_of(name: str, fn: Callable) -> list[Case]:
    args = _valid_call(fn)
    if args is None:
        return []
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) or a is KEY]
    cases = []
    if arrays:
        first = arrays[0]
        cases.append(Case(name, "object", fn, _replaced(args, first, object()), {}, ("object",)))
        if args[first] is not KEY:
            cases.append(Case(name, "str-dtype", fn, _replaced(args, first, STRINGS), {},
                              ("<U1", "str")))
        needs = next((i for i in arrays if args[i] is I or args[i] is B), None)
        if (needs is not None and all(a is not X for a in args)
                and not _accepts(fn, _replaced(args, needs, X))):
            cases.append(Case(name, "float-for-int", fn, _replaced(args, needs, X), {},
                              ("float32", "f32")))
        two_d = [i for i in arrays if args[i] is not KEY and np.shape(args[i]) == (2, 3)]
        if (len(two_d) >= 2 and _result_shape(fn(*args)) == (2, 3)
                and _parameter_name(fn, args, two_d[1]) not in NOT_BROADCAST):
            bad = np.ones(5, args[two_d[1]].dtype)
            cases.append(Case(name, "shape", fn, _replaced(args, two_d[1], bad), {}, ("5",)))
    if any(np.ndim(a) == 2 for a in args) and _unbound(fn, args, "axis"):
        cases.append(Case(name, "axis", fn, args, {"axis": 7}, ("7",)))
    if _unbound(fn, args, "dtype"):
        cases.append(Case(name, "dtype", fn, args, {"dtype": "float99"}, ("float99",)))
    return cases


def _public_functions(module_name: str) -> list[tuple[str, Callable]]:
    module = getattr(ember, module_name)
    found = []
    for attr in sorted(dir(module)):
        fn = getattr(module, attr)
        name = f"{module_name}.{attr}"
        if (attr.startswith("_") or not callable(fn) or inspect.isclass(fn)
                or inspect.ismodule(fn) or name in NOT_ARRAY_FUNCTIONS):
            continue
        found.append((name, fn))
    return found


MODULES = ("numpy", "lax", "random", "nn")
CASES = [case for module in MODULES for name, fn in _public_functions(module)
         for case in _cases_of(name, fn)]

KNOWN: dict[str, str] = {}  # case id -> what is wrong (reported to the owners)


def _params():
    for case in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[case.id])] if case.id in KNOWN else []
        yield pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", _params())
def test_bad_input_raises_an_ember_error_naming_the_problem(case):
    with pytest.raises(EmberError) as caught:
        call(case)
    error = caught.value
    assert isinstance(error, (TypeError, ValueError, IndexError)), type(error).__mro__
    assert any(word in str(error) for word in case.words), str(error)


def _line_of_call() -> str:
    _, start = inspect.getsourcelines(call)
    return f"{__file__}:{start + 1}"


@pytest.mark.parametrize("module", MODULES)
def test_bad_input_errors_name_the_users_line(module):
    where = _line_of_call()
    missing = []
    for case in CASES:
        if not case.name.startswith(module + ".") or case.id in KNOWN:
            continue
        try:
            call(case)
        except EmberError as error:
            if where not in str(error):
                missing.append(case.id)
    assert not missing, f"{len(missing)} errors do not name {where}: {missing}"


def test_the_walk_covers_every_module():
    covered = {case.name.split(".")[0] for case in CASES}
    assert covered == set(MODULES)
    assert len({case.name for case in CASES}) > 300
    assert {case.kind for case in CASES} == {"object", "str-dtype", "float-for-int", "shape",
                                             "axis", "dtype"}
