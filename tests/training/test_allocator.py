"""allocator: on glibc, memory that a step frees is kept for the next step, not handed back and faulted in again;
oneDNN keeps a kernel for each shape a run meets, not the last 1,024."""

import os
import platform
import subprocess
import sys

import pytest

from modeling_vaswani.training import trainer as trainer_module
from modeling_vaswani.training.allocator import KEPT_KERNELS, keep_kernels

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


# More bf16 product shapes than oneDNN's default 1,024 kernels, each met twice, as a run meets a batch's shapes again.
SHAPES = """
import sys
if sys.argv[1] == "keep":
    from modeling_vaswani.training.allocator import keep_kernels
    keep_kernels()
import torch
weight = torch.ones(64, 32, dtype=torch.bfloat16)
for rows in list(range(3, 1203)) * 2:
    torch.mm(torch.ones(rows, 32, dtype=torch.bfloat16), weight.t())
"""


def kernels_built_and_found(mode: str) -> tuple[int, int]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ONEDNN_", "DNNL_"))}
    env["ONEDNN_VERBOSE"] = "profile_create"  # a line for each kernel oneDNN builds or finds in its cache
    run = subprocess.run([sys.executable, "-c", SHAPES, mode], capture_output=True, text=True, check=True, env=env)
    return run.stdout.count("create:cache_miss"), run.stdout.count("create:cache_hit")


def test_onednn_keeps_a_kernel_for_every_shape_a_run_meets():
    built, found = kernels_built_and_found("default")
    if built == 0:
        pytest.skip("this CPU's bf16 products do not go through oneDNN")
    assert found == 0  # 1,200 shapes through 1,024 places: each evicted before it comes back, built again
    assert kernels_built_and_found("keep") == (built // 2, built // 2)  # built once, then found


def test_a_capacity_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
    assert keep_kernels() == 64
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY")
    assert keep_kernels() == KEPT_KERNELS


def test_the_trainer_asks_for_kernels_on_a_cpu(monkeypatch, build_trainer):
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "4096")
    assert build_trainer().kept_kernels == 4096  # what the log says is what oneDNN was told
