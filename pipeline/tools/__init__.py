"""Capabilities as tools: the ``@capability`` declaration and the dispatcher, the catalog that finds every capability, the claims
a model makes about them, and the prompts the system sends.
"""
