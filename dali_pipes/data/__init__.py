"""Datasets: what is listed (folders, shards, the sample set), in which order each rank
reads it, and their specs."""
