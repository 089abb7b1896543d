"""Sharing a model on the Hugging Face Hub: the model card rendered from measured results
(`model_card`) and the complete repository folder, written and checked in a clean process
(`repository`).
"""
