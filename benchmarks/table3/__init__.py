"""Table 3 of the paper in miniature (scripts/table3.py, docs/table3.md): `rows` (the rows and the scaling
rule), `runs` (each row trained by scripts/train.py in its own process), `models` (each row's untrained model,
and the trained one's dev perplexity and BLEU), `report` (the table, a JSON, a figure). `rows` and `runs` load
with the standard library only and this file imports nothing, so scripts/table3.py answers --help at once."""
