"""CPU time of a loader's process tree, as bench reports it per 1,000 images."""

from __future__ import annotations

import subprocess
import sys
import time

from helpers.warm import python

from dali_pipes.tools.measurement import cpu_seconds

#: Five times, the CPU seconds counted over a thread's 4 ms of work.
FEW_MILLISECONDS = """
import threading, time
from dali_pipes.tools.measurement import cpu_seconds

def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

for _ in range(5):
    before = cpu_seconds()
    worker = threading.Thread(target=spin, args=(0.004,))
    worker.start()
    worker.join()
    print(cpu_seconds() - before)
"""


def test_cpu_time_of_this_process_counts_a_threads_few_milliseconds() -> None:
    """Less than one /proc clock tick (10 ms) of work on another thread shows, every time
    (counted in ticks, it would read 0 about half the time). Measured in a process with no
    children: the test's own process has some (its warm interpreter's commands), and one
    that ends between two readings takes its seconds out of the tree's sum."""
    done = subprocess.run(
        [python(), "-c", FEW_MILLISECONDS], capture_output=True, text=True, check=True
    )
    counted = [float(line) for line in done.stdout.split()]
    assert len(counted) == 5 and all(0.004 <= c < 0.5 for c in counted), counted


def test_cpu_time_of_a_tree_rooted_at_another_process_is_read_from_proc() -> None:
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    child = subprocess.Popen(
        [sys.executable, "-c", burn + "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while cpu_seconds(child.pid) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0.3 <= cpu_seconds(child.pid) < 30
    finally:
        child.communicate(b"")
