"""``ember.numpy``: NumPy's API on Ember arrays, and a conforming implementation of the
Python Array API standard (2024.12).

Every function works eagerly and under transformations (jit, grad, vmap): it is a
composition of ``ember.lax`` primitives. Differences from NumPy are JAX's: arrays are
immutable (``x.at[idx].set(v)`` instead of ``x[idx] = v``), the default dtypes are
float32 / int32 unless ``enable_x64`` is on, Python scalars are weakly typed, functions
whose result *shape* depends on values (``nonzero``, ``unique``, the set functions,
``compress``, ``bincount``, boolean masks) need concrete inputs or a static ``size=`` /
``length=``, out-of-bounds indices are clamped on reads and dropped on writes instead of
raising (see ``ember.numpy.indexing``), and the "in place" functions (``put``, ``place``,
``fill_diagonal``, ``ufunc.at``) return the edited copy (pass ``inplace=False``). The
binary functions JAX makes ufuncs (``add``, ``maximum``, ``logaddexp``, ...) are
``ember.numpy.ufunc`` objects with ``reduce`` / ``accumulate`` / ``outer`` / ``at`` /
``reduceat``.

Integer policy: the default integer is int32 (int64 with x64); integer arithmetic wraps
around on overflow (two's complement); integer ``//`` and ``%`` by zero give 0 (as NumPy's
results); converting floats to integers truncates toward zero, saturates at the integer
range and maps NaN to 0; sums and products of integers narrower than the default
accumulate in the default integer.
"""
from ember.numpy import fft, linalg  # noqa: F401
from ember.numpy._bits import *  # noqa: F401,F403
from ember.numpy._calculus import *  # noqa: F401,F403
from ember.numpy._convolution import *  # noqa: F401,F403
from ember.numpy._covariance import *  # noqa: F401,F403
from ember.numpy._creation import *  # noqa: F401,F403
from ember.numpy._cumulative import *  # noqa: F401,F403
from ember.numpy._dtypes import *  # noqa: F401,F403
from ember.numpy._dtypes import bool_ as bool  # noqa: F401  (Array API name)
from ember.numpy._editing import *  # noqa: F401,F403
from ember.numpy._einsum import *  # noqa: F401,F403
from ember.numpy._floating import *  # noqa: F401,F403
from ember.numpy._functional import *  # noqa: F401,F403
from ember.numpy._histograms import *  # noqa: F401,F403
from ember.numpy._host import *  # noqa: F401,F403
from ember.numpy._index_tricks import *  # noqa: F401,F403
from ember.numpy._info import __array_namespace_info__  # noqa: F401
from ember.numpy._joining import *  # noqa: F401,F403
from ember.numpy._manipulation import *  # noqa: F401,F403
from ember.numpy._math import *  # noqa: F401,F403
from ember.numpy._number_theory import *  # noqa: F401,F403
from ember.numpy._polynomials import *  # noqa: F401,F403
from ember.numpy._products import *  # noqa: F401,F403
from ember.numpy._quantiles import *  # noqa: F401,F403
from ember.numpy._reductions import *  # noqa: F401,F403
from ember.numpy._searching import *  # noqa: F401,F403
from ember.numpy._sets import *  # noqa: F401,F403
from ember.numpy._sorting import *  # noqa: F401,F403
from ember.numpy._ufunc_objects import frompyfunc, ufunc  # noqa: F401
from ember.numpy._ufuncs import *  # noqa: F401,F403
from ember.numpy._vectorize import *  # noqa: F401,F403
from ember.numpy._windows import *  # noqa: F401,F403
from ember.numpy.indexing import take, take_along_axis  # noqa: F401
from ember.numpy._promotion import ndarray  # noqa: F401

__array_api_version__ = "2024.12"

e = 2.718281828459045
pi = 3.141592653589793
inf = float("inf")
nan = float("nan")
newaxis = None
euler_gamma = 0.5772156649015329

# Errors raised anywhere below a public function name the user's line.
from ember.errors import user_errors as _user_errors  # noqa: E402
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
_wrap(fft.__dict__)
_wrap(linalg.__dict__)


def __getattr__(name: str):
    """The ufunc of an elementwise op defined after import (``define_elementwise``)."""
    from ember.numpy._ufuncs import row_ufunc
    from ember.ops.elementwise import ELEMENTWISE_OPS

    for op in ELEMENTWISE_OPS.values():
        if name in op.numpy:
            return _user_errors(row_ufunc(op.name))
    raise AttributeError(f"module 'ember.numpy' has no attribute {name!r}")
