"""Speed on a CPU (not the paper): glibc's malloc hands large freed blocks back to the system (those above its
mmap threshold, 32 MB at most, and a heap top above its trim threshold), so a training step's activations and
gradients come back next step as fresh pages that the kernel faults in and zeroes, and element-wise work on them
runs slower. Raising both thresholds keeps the freed memory for the next step: the same numbers, 5–6 % more tokens
a second at the shipped shape and 2–5 % at base (benchmarks/RESULTS.md). Python exposes no `mallopt`, and PyTorch's
CPU allocator is malloc itself, hence ctypes; elsewhere (not glibc) nothing changes.

The same holds for kernels: oneDNN, which computes bf16 matrix products on a CPU, builds a kernel for each shape it
meets (about 2 ms) and keeps the last 1,024. A step's products have as many shapes as its batch has rows, and
token-budget batches vary in rows, so a run meets a few thousand shapes, evicts them before they come back and
builds most kernels again at every step: on a Xeon with AMX a run in bf16 went slower than in float32 while a
static batch ran 1.8× faster. Keeping 16,384 costs little memory. oneDNN reads the capacity when it builds its
first kernel, so it is set before the precision probe's first bf16 product.
"""

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
KEPT_BYTES = 256 << 20  # blocks up to this size come from (and go back to) the heap; twice as much free is kept
KEPT_KERNELS = 16384  # oneDNN's kernels kept, one a shape of a product (its default: 1,024)


def keep_freed_memory() -> bool:
    """Raise this process's malloc thresholds to KEPT_BYTES; whether it could (glibc only)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):  # no C library by that name, or one without mallopt
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, KEPT_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, 2 * KEPT_BYTES))


def keep_kernels() -> int:
    """Have oneDNN keep KEPT_KERNELS kernels, unless ONEDNN_PRIMITIVE_CACHE_CAPACITY is set already; the capacity.
    Takes effect only before this process's first oneDNN product."""
    return int(os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(KEPT_KERNELS)))
