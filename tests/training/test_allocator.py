"""allocator: on glibc, memory that a step frees is kept for the next step, not handed back and faulted in again."""

import os
import platform
import subprocess
import sys

import pytest

from modeling_vaswani.training import trainer as trainer_module

# Five 40 MB blocks written and freed in turn: 40 MB is above the most glibc's own mmap threshold rises to (32 MB).
PROBE = """
import resource, sys, torch
if sys.argv[1] == "keep":
    from modeling_vaswani.training.allocator import keep_freed_memory
    assert keep_freed_memory()
for _ in range(3):
    torch.ones(10 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    torch.ones(10 << 20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(mode: str) -> int:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MALLOC_")}
    run = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, env=env)
    return int(run.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_a_freed_block_is_used_again_without_new_page_faults():
    # By default each block is faulted in afresh (5 × 10,240 pages of 4 KB); kept, once at most (glibc may move it).
    assert 3 * page_faults("keep") < page_faults("default")


def test_the_trainer_asks_for_it_on_a_cpu(monkeypatch, build_trainer):
    calls = []
    monkeypatch.setattr(trainer_module, "keep_freed_memory", lambda: calls.append("cpu") or False)
    assert build_trainer().keeps_freed_memory is False  # what it could do (not glibc here) is what the log says
    assert calls == ["cpu"]
