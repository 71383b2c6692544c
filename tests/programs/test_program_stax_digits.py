"""A JAX program run on Ember with only its imports changed: a small CNN written with
``stax`` (convolution, ReLU, max pooling) trained by ``optimizers.adam`` on
scikit-learn's bundled 8x8 digits. Where JAX is installed the same code runs on JAX
too, and the two loss curves are compared.

``program`` below is the JAX program verbatim; what a user writes as

    import jax
    import jax.numpy as jnp
    from jax.example_libraries import stax, optimizers

becomes ``import ember as jax; import ember.numpy as jnp; from ember.example_libraries
import stax, optimizers``: the test passes those modules in.
"""
import numpy as np
import pytest

STEPS = 120


def program(jax, jnp, stax, optimizers):
    from sklearn.datasets import load_digits

    digits = load_digits()
    shuffled = np.random.RandomState(1).permutation(len(digits.images))
    images = (digits.images[shuffled] / 16.0).astype(np.float32)[..., None]  # NHWC
    labels = digits.target[shuffled]
    train_images, test_images = images[:1500], images[1500:]
    train_labels, test_labels = labels[:1500], labels[1500:]

    init_random_params, predict = stax.serial(
        stax.Conv(8, (3, 3), padding="SAME"), stax.Relu,
        stax.MaxPool((2, 2), strides=(2, 2)),
        stax.Flatten,
        stax.Dense(32), stax.Relu,
        stax.Dense(10), stax.LogSoftmax)

    def loss(params, batch):
        inputs, targets = batch
        preds = predict(params, inputs)
        return -jnp.mean(jnp.sum(preds * targets, axis=1))

    def accuracy(params, batch):
        inputs, targets = batch
        predicted_class = jnp.argmax(predict(params, inputs), axis=1)
        return jnp.mean(predicted_class == targets)

    opt_init, opt_update, get_params = optimizers.adam(
        optimizers.exponential_decay(5e-3, 100, 0.5))

    @jax.jit
    def update(i, opt_state, batch):
        params = get_params(opt_state)
        value, grads = jax.value_and_grad(loss)(params, batch)
        return opt_update(i, grads, opt_state), value

    _, init_params = init_random_params(jax.random.PRNGKey(0), (-1, 8, 8, 1))
    opt_state = opt_init(init_params)
    order = np.random.RandomState(0).permutation(STEPS * 64) % len(train_images)
    losses = []
    for i in range(STEPS):
        idx = order[i * 64:(i + 1) * 64]
        batch = (train_images[idx], jax.nn.one_hot(train_labels[idx], 10))
        opt_state, value = update(i, opt_state, batch)
        losses.append(float(value))
    test_accuracy = float(accuracy(get_params(opt_state), (test_images, test_labels)))
    return np.array(losses), test_accuracy


def run_on_ember():
    import ember as jax
    import ember.numpy as jnp
    from ember.example_libraries import optimizers, stax

    return program(jax, jnp, stax, optimizers)


@pytest.fixture(scope="module")
def ember_run():
    pytest.importorskip("sklearn")
    return run_on_ember()


def test_the_network_learns_the_digits(ember_run):
    losses, test_accuracy = ember_run
    assert losses[:5].mean() > 2.0  # ten classes start near log(10)
    assert losses[-10:].mean() < 0.3 * losses[:5].mean()
    assert test_accuracy > 0.9  # 297 held-out digits


def test_the_same_program_on_jax_gives_the_same_curve(ember_run):
    jax = pytest.importorskip("jax")
    import jax.numpy as jax_numpy
    from jax.example_libraries import optimizers, stax

    losses, test_accuracy = ember_run
    jax_losses, jax_accuracy = program(jax, jax_numpy, stax, optimizers)
    # Same seeds draw the same parameters, so the curves start together and stay close.
    np.testing.assert_allclose(losses[:10], jax_losses[:10], rtol=1e-3)
    np.testing.assert_allclose(losses, jax_losses, rtol=0.1, atol=0.02)
    assert abs(test_accuracy - jax_accuracy) < 0.03
