"""Table 3 of the paper in miniature (scripts/table3.py, docs/table3.md): `rows`, `runs` (each row trained by
scripts/train.py in its own process), `models`, `report`. `rows` and `runs` load with the standard library only
and this file imports nothing, so scripts/table3.py answers --help at once."""
