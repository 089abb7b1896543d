"""Side-by-side speed of `modeling_vaswani` and transformers' `MarianMTModel` (run: `python -m benchmarks.run`).

Marian is the Hugging Face model closest to the paper's architecture: an encoder–decoder with
post-LN sub-layers (§3.1), sinusoidal positions (§3.5), embeddings scaled by √d_model and shared
three ways (§3.4). Configured to the same widths, depth, vocabulary, ReLU feed-forward (Eq. 2),
dropout and SDPA attention, it performs the same computation, so any difference in time is
implementation overhead. What remains different is negligible work: Marian adds a
`final_logits_bias` to the logits and concatenates its sines and cosines instead of interleaving them.

The measurements (the two systems always run alternately, A B A B ..., so slow drifts of the
machine's speed hit both equally; each reports medians and ours/theirs), by figure number:

1. `training.training_step_speed`: forward + backward + Adam (§5.3) in real source+target tokens
   per second, on the same Multi30k token-budget batches (§5.1) for both, at the "small" and
   "base" presets;
2. `decoding.beam_search_speed`: §6.1 beam search over the first 200 sentences of
   test_2016_flickr, both forced to the same output length (min_new_tokens = max_new_tokens) so
   they do the same work;
3. `decoding.cached_vs_recomputing_decoding`: cached `generate` (greedy) against the hand-written
   recomputing `greedy_decode` at forced output lengths 16, 64 and 256;
4. `training.data_pipeline_throughput`: real tokens per second through the §5.1 token-budget
   batches against the Trainer's default random fixed-size batches, and the padding efficiency of each;
5. `training.hardware_efficiency`: analytic model FLOPs of the training step divided by its time,
   as a fraction of this machine's measured fp32 (bf16 on a GPU) matmul rate; with it
   `training.fused_qkv_projection`, whether one matmul on concatenated Q/K/V weights would pay;
6. `memory.peak_memory`: peak resident memory of training and of translating the whole test set,
   each in its own fresh process;
7. `training.compiled_training_step` (optional): `torch.compile` of the training step against eager;
8. `translation.test_set_translation`: the shipped model translating test_2016_flickr in every system
   (ours fp32 with either beam search, bf16, int8, static cache; Marian fp32 and bf16; CTranslate2
   float32 and int8 when installed), sentences/s, tokens/s and BLEU at 1 and 2 threads, with
   `translation.search_speed` (the two beam searches at base) and `translation.compile_payoff`.
   Figure 1 also runs in bf16 (1b) and figure 5 against the bf16 matmul rate (5b).

`training_ab` (its own command) times the training step before and after its speed-ups
(chunked_loss.py, fused Adam), the package at an earlier commit against this checkout, alternating.

`profiling.profiles` writes torch.profiler tables of one training step and one beam-search batch
per system next to the results, with a breakdown of where the time goes. `harness` holds what
they share (the two systems, the sizes, the corpus, timing); `report` turns results into tables.

`table3/` is a study of another kind beside them: Table 3 of the paper re-trained in miniature
(scripts/table3.py, docs/table3.md).
"""
