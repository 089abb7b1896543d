"""The training recipe of scripts/train.py, read in the order a run goes through it: `arguments` (the command
line, checked; loaded by file before torch, so this file imports nothing), `run` (§5 and §6.1)."""
