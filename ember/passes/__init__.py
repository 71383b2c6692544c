"""Graph-to-graph optimization passes; pipeline.py lists their order per backend."""
