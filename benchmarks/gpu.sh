#!/usr/bin/env bash
# Figures 1 and 2 of `python -m benchmarks.run` on a CUDA GPU: the base preset (Table 3), bf16
# autocast, SDPA attention, §5.1's 25,000-token batches, against MarianMTModel configured to the
# same computation. Reports tokens/s, ours/Marian, and the training step's model FLOP/s as a
# fraction of the GPU's measured bf16 torch.mm rate (figure 5). Sized to finish in well under 8
# minutes on one data-centre GPU (most of it is training the BPE vocabulary and tokenizing Multi30k).
#
#   benchmarks/gpu.sh     # writes benchmarks/gpu/ (results.json, tables.md, figures.png) and
#                         # the GPU section of benchmarks/RESULTS.md
#   PYTHON=.venv/bin/python benchmarks/gpu.sh --output-dir /tmp/gpu-bench
#
# Without a CUDA device it prints why and exits 0 without running anything (so it is safe to
# call from CI on CPU machines). Exit codes: 0 = ran, or skipped for lack of CUDA; 2 = bad
# arguments (as python -m benchmarks.run); anything else = a failure while benchmarking.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"

if ! reason="$("$PYTHON" - <<'EOF' 2>&1
import sys
try:
    import torch
except ImportError as error:
    print(f"PyTorch is not importable ({error})")
    sys.exit(1)
if not torch.cuda.is_available():
    print(f"PyTorch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False)")
    sys.exit(1)
EOF
)"; then
    echo "benchmarks/gpu.sh: skipped, nothing was run: ${reason}."
    echo "Run it on a machine with an NVIDIA GPU; the CPU figures come from: python -m benchmarks.run"
    exit 0
fi

cd "$ROOT"
exec "$PYTHON" -m benchmarks.run --device cuda --dtype bfloat16 --figures 1,2,5 --presets base \
    --max-tokens 25000 --output-dir benchmarks/gpu --results-md benchmarks/RESULTS.md "$@"
