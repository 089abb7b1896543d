"""Speed of `modeling_vaswani` beside transformers' `MarianMTModel` configured to the same computation
(post-LN §3.1, sinusoids §3.5, tied scaled embeddings §3.4, ReLU FFN Eq. 2, SDPA), so any difference in
time is implementation overhead; the two always run alternately. `python -m benchmarks.run`; results,
commands and readings in RESULTS.md. By figure:

1, 1b, 5. `training`: the training step in fp32 and bf16, tokens/s, and its model FLOP/s over the matmul rate;
   `python -m benchmarks.training --baseline REV` times the step of this checkout against a git commit;
2, 3. `decoding`: §6.1 beam search at a forced length; cached `generate` against recomputing `greedy_decode`;
4, 7. `speedups`: token-budget against fixed-size batches; torch.compile; with 5, one matmul for Q/K/V;
6. `memory`: peak resident memory of training and translating, each in a fresh process;
8. `translation`: the shipped model translating test_2016_flickr in every system, speed and BLEU.

`harness` holds what they share, `profiling` the torch.profiler tables, `report` the targets and tables
(`run` draws figures.png). `table3/` is a study of another kind: Table 3 of the paper re-trained in
miniature (scripts/table3.py, docs/table3.md); like this file it imports nothing.
"""
