"""Table 3 of the paper in miniature: its variations on the base model, re-trained on Multi30k at
the shipped model's size, each scored by dev perplexity and BLEU beside the paper's numbers.

A study that uses the package's training/ and evaluation/ like any user, not a part of the package;
scripts/table3.py runs it and docs/table3.md describes it. Read it in this order:

1. `rows`: the paper's rows (A)–(E) and the rule that scales each to a model that trains on a laptop.
2. `models`: the untrained model each row starts from, over one shared BPE vocabulary.
3. `runs`: the harness, each row trained by scripts/train.py in a process of its own.
4. `scoring`: the two measures of a trained row, dev perplexity per subword and dev BLEU.
5. `report`: the Markdown table in the paper's columns, a JSON and a figure.

`rows` and `runs` import only the standard library when loaded, so scripts/table3.py answers --list
and --help at once. This file, like benchmarks/__init__.py, imports nothing for that reason.
"""
