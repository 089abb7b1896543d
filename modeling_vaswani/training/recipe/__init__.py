"""The training recipe of scripts/train.py: §5 end to end, from a command line to a trained,
evaluated and averaged model.

Read it in the order a run goes through it:

1. `flags`: the command line, grouped by the section of the paper each flag follows.
2. `checks`: the combinations of flags that could not run as asked, refused before any work.
3. `arguments`: the Trainer's arguments, the paper's settings where the Trainer's defaults differ.
4. `run`: the work (data, one shared BPE vocabulary, the model, `VaswaniTrainer`, the run's clocks).
5. `closing`: §6.1's averaging of the last checkpoints and the command to run next.

`flags`, `checks` and `arguments` import only the standard library (and `modeling_vaswani.cli`)
when loaded, so scripts/train.py loads them by file without the package and answers --help or a
wrong flag before torch and transformers are imported. This file imports nothing for that reason.
"""
