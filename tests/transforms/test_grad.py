"""Reverse mode: vjp, grad, value_and_grad, Jacobians, and their errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.ops.rules import float0
from ember.test_util import check_grads


def test_vjp_matches_the_jacobian_transpose(x64):
    x = np.array([0.5, -1.0, 2.0])
    out, vjp_fn = ember.vjp(lambda x: jnp.sin(x) * x[::-1], x)
    ct = np.array([1.0, 2.0, 3.0])
    jac = np.diag(np.cos(x) * x[::-1]) + np.diag(np.sin(x))[:, ::-1]
    (grad_x,) = vjp_fn(ct)
    np.testing.assert_allclose(grad_x, jac.T @ ct)


def test_grad_over_a_pytree_of_parameters(x64):
    params = {"w": np.array([[1.0, 2.0], [3.0, 4.0]]), "b": [np.array([0.1, 0.2])]}
    x = np.array([0.5, -0.5])

    def loss(p, x):
        return jnp.sum(jnp.tanh(p["w"] @ x + p["b"][0]) ** 2)

    grads = ember.grad(loss)(params, x)
    assert set(grads) == {"w", "b"} and isinstance(grads["b"], list)
    check_grads(loss, (params, x), order=2)


def test_argnums_has_aux_and_value_and_grad(x64):
    def f(x, y):
        return jnp.sum(x * y ** 2), {"norm": jnp.sum(x ** 2)}

    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    (dx, dy), aux = ember.grad(f, argnums=(0, 1), has_aux=True)(x, y)
    np.testing.assert_allclose(dx, y ** 2)
    np.testing.assert_allclose(dy, 2 * x * y)
    assert float(aux["norm"]) == 5.0
    (value, aux), grad_y = ember.value_and_grad(f, argnums=1, has_aux=True)(x, y)
    assert float(value) == 41.0
    np.testing.assert_allclose(grad_y, dy)


def test_grad_of_grad(x64):
    f = lambda x: jnp.sin(x) * x ** 3  # noqa: E731
    x = np.array(0.7)
    expected = -np.sin(x) * x ** 3 + 6 * np.cos(x) * x ** 2 + 6 * np.sin(x) * x
    np.testing.assert_allclose(ember.grad(ember.grad(f))(x), expected)
    check_grads(f, (x,), order=3)


def test_vjp_of_integer_argument_is_float0(x64):
    _, vjp_fn = ember.vjp(lambda x, n: x * n, np.array(2.0), np.array(3))
    dx, dn = vjp_fn(np.array(1.0))
    assert float(dx) == 3.0 and np.asarray(dn).dtype == float0


@pytest.mark.parametrize("fun", [lambda x: x, lambda x: 1.0], ids=["identity", "constant"])
def test_a_gradient_is_an_array_even_where_no_op_made_it(fun):
    """The seed passed through as the gradient, or a zero gradient, is an ember Array as
    JAX's is, not the NumPy array the transpose started from; so is such a tangent."""
    gradient = ember.grad(fun)(2.0)
    assert isinstance(gradient, ember.Array)
    assert float(gradient) == (1.0 if fun(3.0) == 3.0 else 0.0)
    _, tangent = ember.jvp(fun, (2.0,), (np.float32(1.0),))
    assert isinstance(tangent, ember.Array)
    assert float(tangent) == float(gradient)


def test_grad_of_non_scalar_output_names_the_shape():
    with pytest.raises(TypeError, match=r"scalar output.*\(3,\).*vjp.*jacrev"):
        ember.grad(jnp.sin)(np.ones(3, np.float32))


def test_grad_with_respect_to_an_integer_names_the_dtype():
    with pytest.raises(TypeError, match="argument 0 has dtype int32"):
        ember.grad(lambda n: n * 2.0)(np.array(3, np.int32))


def test_grad_of_a_tuple_output_is_an_error():
    with pytest.raises(TypeError, match="single scalar"):
        ember.grad(lambda x: (jnp.sum(x), jnp.sum(x)))(np.ones(2, np.float32))


def test_vjp_cotangent_shape_is_checked():
    _, vjp_fn = ember.vjp(jnp.sin, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="cotangent of shape \\(2,\\)"):
        vjp_fn(np.ones(2, np.float32))


def test_jacobians_agree_with_each_other_and_the_formula(x64):
    def f(x, y):
        return {"a": jnp.sin(x) * y[0], "b": jnp.sum(x ** 2) + y}

    x, y = np.array([0.1, 0.2, 0.3]), np.array([2.0, 3.0])
    fwd = ember.jacfwd(f, argnums=(0, 1))(x, y)
    rev = ember.jacrev(f, argnums=(0, 1))(x, y)
    for key in ("a", "b"):
        for i in range(2):
            np.testing.assert_allclose(fwd[key][i], rev[key][i], atol=1e-12)
    np.testing.assert_allclose(fwd["a"][0], np.diag(np.cos(x) * y[0]))
    assert np.shape(fwd["b"][0]) == (2, 3) and np.shape(rev["a"][1]) == (3, 2)


def test_jacobian_of_a_matrix_function_has_output_then_input_axes(x64):
    w = np.arange(6.0).reshape(2, 3)
    jac = ember.jacrev(lambda w: jnp.tanh(w) * 2.0)(w)
    assert np.shape(jac) == (2, 3, 2, 3)
    np.testing.assert_allclose(np.asarray(jac).reshape(6, 6),
                               np.diag(2 * (1 - np.tanh(w.ravel()) ** 2)))


def test_hessian(x64):
    x = np.array([0.5, -1.5])
    hess = ember.hessian(lambda x: jnp.sum(x ** 3) + x[0] * x[1])(x)
    np.testing.assert_allclose(hess, [[6 * x[0], 1.0], [1.0, 6 * x[1]]])


def test_stop_gradient_in_reverse_mode(x64):
    grad = ember.grad(lambda x: jnp.sum(x * ember.stop_gradient(x ** 2)))(np.array([2.0]))
    np.testing.assert_allclose(grad, [4.0])


@pytest.mark.parametrize("jacobian", [ember.jacfwd, ember.jacrev])
def test_jacobians_with_aux(x64, jacobian):
    x = np.array([1.0, 2.0])
    jac, aux = jacobian(lambda x: (x ** 2, {"sum": jnp.sum(x), "tag": "t"}), has_aux=True)(x)
    np.testing.assert_allclose(jac, np.diag(2 * x))
    assert float(aux["sum"]) == 3.0 and aux["tag"] == "t"
