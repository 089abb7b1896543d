"""Translating and scoring (§6.1), the hand-written greedy loop, and the CTranslate2 engine."""
