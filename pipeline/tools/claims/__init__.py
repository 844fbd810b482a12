"""Claims: what the model *says* it did, and whether the ledger agrees (pure text processing, no litellm).

One module per job: ``lexicon`` (how text claims a capability), ``layouts`` (JSON, tables and checklists
flattened into status lines), ``numbers`` (scores in words and digits), ``text_calls`` (tool calls written
as text), ``extraction`` (sentences, clauses, claims and their verdicts against the facts).
"""

from .extraction import MISMATCH, UNBACKED, VERIFIED, ClaimFound, ClaimRules, facts_from_mapping
from .layouts import normalise_layout
from .lexicon import Lexicon
from .numbers import parse_number, scores_in
from .text_calls import text_tool_calls

__all__ = ["MISMATCH", "UNBACKED", "VERIFIED", "ClaimFound", "ClaimRules", "Lexicon", "facts_from_mapping",
           "normalise_layout", "parse_number", "scores_in", "text_tool_calls"]
