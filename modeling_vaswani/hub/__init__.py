"""Sharing a model on the Hub: the model card, the repository folder, the explorer Space."""
