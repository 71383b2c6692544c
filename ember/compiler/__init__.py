"""The compiler after the graph passes, shared by every code-generating backend."""
