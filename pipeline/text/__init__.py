"""Article text and text made safe: Markdown and hashes, what a complete article is, the disclosure, redaction, inert display, whole-file writes.
"""
