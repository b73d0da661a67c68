"""The DALI backend: its graph, the loader that runs it, and the graph's checks."""
