"""Table 3 of the paper in miniature (scripts/table3.py, docs/table3.md): `rows` (the rows and the scaling
rule), `models` (each row's untrained model), `runs` (each row trained by scripts/train.py in its own process),
`scoring` (dev perplexity and BLEU), `report` (the table, a JSON, a figure). A study using the package like
any user. `rows` and `runs` load with the standard library only and this file imports nothing, so
scripts/table3.py answers --list and --help at once.
"""
