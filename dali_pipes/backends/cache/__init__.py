"""``data.cache``: the split decoded once (one copy per node), augmented by torch (``ram``)
or by DALI's graph (``gpu``)."""
