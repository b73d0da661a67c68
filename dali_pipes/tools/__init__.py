"""The command-line tools beside training: bench, doctor, scan, pack."""
