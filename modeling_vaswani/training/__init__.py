"""Training as §5 describes it: BPE (§5.1), token-budget batches (§5.1), Adam and Eq. (3) (§5.3),
the Trainer that puts them together, checkpoint averaging (§6.1) and the record of a run.

Never copied into checkpoints: this code imports the model, never the other way round.
"""
