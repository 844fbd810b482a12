"""pipeline: a scheduled content pipeline whose LLM agent can never report work that did not happen."""

__version__ = "0.1.0"
