"""Translating and scoring (§6.1): `translation` (text in, text out), `scoring` (BLEU of a test set),
`greedy_decoding` (the auto-regressive loop written out by hand), `ctranslate2_engine` (translating
with CTranslate2 instead of PyTorch, optional), the offline `vaswani_bleu` metric in metrics/, and
for the scripts `progress` (their progress bar).
"""
