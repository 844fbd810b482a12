"""The humanize score: how human a text reads, from a language model's token probabilities, calibrated per language.
"""
