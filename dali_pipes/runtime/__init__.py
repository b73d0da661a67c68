"""The process's place: devices, distributed ranks and cores, preemption signals, and pools
of worker processes."""
