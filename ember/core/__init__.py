"""Core: primitives and rule registries, abstract values, tracing, pytrees, dtypes."""
