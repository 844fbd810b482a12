"""Claims: what the model *says* it did, and whether the ledger agrees (pure text processing, no litellm).

One private module per job, and this package exports what the rest of the pipeline uses: ``_lexicon`` (how
text claims a capability), ``_layouts`` (JSON, tables and checklists flattened into status lines), ``_numbers``
(scores in words and digits), ``_text_calls`` (tool calls written as text), ``_extraction`` (sentences, clauses,
claims and their verdicts against the facts).
"""

from ._extraction import MISMATCH, UNBACKED, VERIFIED, ClaimFound, ClaimRules, facts_from_mapping
from ._layouts import normalise_layout
from ._lexicon import Lexicon
from ._numbers import parse_number, scores_in
from ._text_calls import text_tool_calls

__all__ = ["MISMATCH", "UNBACKED", "VERIFIED", "ClaimFound", "ClaimRules", "Lexicon", "facts_from_mapping",
           "normalise_layout", "parse_number", "scores_in", "text_tool_calls"]
