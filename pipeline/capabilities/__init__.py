"""The capabilities, one module each, each declaring itself with ``@capability``.

Tool name = capability name = ledger name. ``pipeline.tools.catalog`` finds them; adding one is
adding a module here (and its prompt, if it calls the model). Modules import their heavy work
lazily, so that listing the capabilities stays cheap.
"""
