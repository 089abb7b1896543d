"""Training as §5 describes it: BPE (§5.1), token-budget batches (§5.1), Adam and Eq. (3) (§5.3),
§5 written out as a loop to read beside the paper (`paper_loop`), the Trainer that puts them together
for real runs, the loss as other implementations report it (`loss_report`), checkpoint averaging
(§6.1) and the record of a run.

The recipe that scripts/train.py runs is the subpackage `recipe/` (its __init__ says in which
order to read it). A run's clocks are `run_clocks`; its folder, lock and record,
`run_folder`. The Table 3 study, which trains with this code, is `benchmarks/table3/`.

Never copied into checkpoints: this code imports the model, never the other way round.
"""
