"""``ember.numpy``: NumPy's API (and the Python Array API standard) on Ember arrays."""
from ember.numpy._ufuncs import *  # noqa: F401,F403
from ember.numpy._creation import *  # noqa: F401,F403
