"""Calling a model: the litellm client, the embedded local model, side calls recorded in the ledger, constrained tool calls, probes.
"""
