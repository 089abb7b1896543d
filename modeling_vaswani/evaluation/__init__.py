"""Translating and scoring (§6.1): `translation` (text in, text out), `scoring` (BLEU of a test set),
`greedy_decoding` (the auto-regressive loop written out by hand), and the offline `vaswani_bleu`
metric in metrics/.
"""
