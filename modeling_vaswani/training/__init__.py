"""Training as §5 describes it: BPE (§5.1), token-budget batches (§5.1), Adam and Eq. (3) (§5.3),
the Trainer that puts them together, checkpoint averaging (§6.1) and the record of a run.

The recipe that scripts/train.py runs is the `recipe*` modules: `recipe_flags` (its command line),
`recipe_checks` (flags that could not run, refused first), `trainer_arguments`, `recipe` (the work),
`recipe_timing` (its clocks and time budget, from `run_clocks`) and `recipe_closing` (§6.1's
averaging and the next command). A run's folder, lock and record are `run_folder` and `run_record`.

Never copied into checkpoints: this code imports the model, never the other way round.
"""
