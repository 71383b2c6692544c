"""The Graph IR: typed SSA graphs, printer, parser, verifier, interpreter."""
