"""Speed of `modeling_vaswani` beside transformers' `MarianMTModel` configured to the same computation, so any
difference in time is implementation overhead; the two always run alternately. `python -m benchmarks.run`;
results, commands and readings in RESULTS.md. Figures 1, 1b, 5: `training` (also `python -m benchmarks.training
--baseline REV`, this checkout's step against a commit's); 2, 3: `decoding`; 4, 7 and the Q/K/V appendix:
`speedups`; 6: `memory`; 8: `translation`. `harness` holds what they share, `profiling` the torch.profiler tables,
`report` the targets and tables. `table3/` re-trains Table 3 in miniature (scripts/table3.py, docs/table3.md).
"""
