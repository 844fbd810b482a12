"""Which writers a score was validated on, and whether it can judge the writer of the text in front of it.

A humanize score is a measurement of one scorer version (``ModelScorer.version``: method, model sha256 and the
calibration file's digest). Whether it tells people from a given writer is a property of that version, measured
by bench/score_lofo.py on labelled passages it was not calibrated on and recorded in
``pipeline/score/calibration/validity.json``, keyed by the calibration digest. So a stored article's score (its
``scorer`` column, migration 0018) says what it was validated on without a column of its own: the digest in its
scorer id finds the entry.

A writer *family* is validated, per language, when the scorer's AUC against that family's passages, on a test split
by source that calibration never saw, is at least ``BAR`` (0.90) and its TPR at 5 % FPR at least ``TPR_BAR`` (0.50),
on at least ``MIN_PASSAGES`` of its passages, overall and in every register measured on 5 or more.
A writer whose family is not validated — measured and failed, or never measured — is ``unvalidated``: its number
is shown with "unvalidated for <model>" beside it, never as a plain human-likeness.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from importlib import resources
from typing import Any

BAR = 0.90
TPR_BAR = 0.50
MIN_PASSAGES = 10  # fewer measured passages of a family validate nothing


class Standing(StrEnum):
    """What a score can say about its writer (not a ledger state: derived whenever a score is shown)."""

    VALIDATED = "validated"      # the writer's family cleared the bar in this language
    UNVALIDATED = "unvalidated"  # measured and failed, never measured, or a scorer without a record
    UNKNOWN = "unknown"          # no writer named: the record says what it was validated on

# A model name (litellm's provider/model, a GGUF file name, a generator name) -> its family. First match wins.
FAMILIES: tuple[tuple[str, str], ...] = (
    (r"qwen", "qwen"),
    (r"claude|anthropic", "anthropic"),
    (r"smollm", "smollm"),
    (r"gemma", "gemma"),
    (r"gemini", "gemini"),
    (r"\bgpt|openai/|(^|/)o[134]\b|chatgpt", "openai"),
    (r"deepseek", "deepseek"),
    (r"llama", "llama"),
    (r"mistral|mixtral", "mistral"),
    (r"glm|chatglm|zhipu", "glm"),
    (r"moonshot|kimi", "moonshot"),
    (r"yi-|01-ai", "yi"),
    (r"ernie|wenxin", "ernie"),
    (r"phi-?\d", "phi"),
)


def family_of(model: str | None) -> str | None:
    """The family of a model name (``local/qwen2.5-coder-1.5b`` -> qwen, ``anthropic/claude-3-5-sonnet`` ->
    anthropic); None for a name that matches no known family."""
    if not model:
        return None
    name = model.lower()
    # local/… is the embedded Qwen2.5-Coder whatever the tail says (pipeline.model.local.provider)
    if name.startswith(("local/", "local-raw/")):
        return "qwen"
    for pattern, family in FAMILIES:
        if re.search(pattern, name):
            return family
    return None


def validity_file() -> Any:
    return resources.files("pipeline.score") / "calibration" / "validity.json"


_entries: dict[str, dict[str, Any]] | None = None


def entries() -> dict[str, dict[str, Any]]:
    """Calibration digest -> its measured validity ({"languages": {lang: {"families": {family: figures}}}})."""
    global _entries
    if _entries is None:
        f = validity_file()
        _entries = json.loads(f.read_text(encoding="utf-8"))["calibrations"] if f.is_file() else {}
    return _entries


def digest_of(scorer: str | None) -> str | None:
    m = re.search(r"\bcal:([0-9a-f]{8})\b", scorer or "")
    return m.group(1) if m else None


@dataclass(frozen=True)
class Validity:
    """What a score of ``scorer`` in ``language`` was validated on, and what that means for ``writer``."""

    scorer: str
    language: str
    validated_on: tuple[str, ...] = ()          # families that cleared the bar in this language
    failed_on: tuple[str, ...] = ()             # families measured that did not (the score cannot judge them)
    measured: dict[str, dict[str, Any]] = field(default_factory=dict)  # family -> AUC, TPR@5%FPR, passages, ...
    writer: str | None = None                   # the model that wrote the text, when known
    writer_family: str | None = None
    status: Standing = Standing.UNKNOWN
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def label(self) -> str:
        """What to print beside the number: "" when the writer is validated."""
        return "" if self.status == Standing.VALIDATED else self.note


def validity(scorer: str | None, language: str | None, writer: str | None = None) -> Validity:
    """The validity record of a score by ``scorer`` (its version string) for a text in ``language`` by ``writer``."""
    scorer = scorer or ""
    language = language or ""
    fam = family_of(writer)
    entry = entries().get(digest_of(scorer) or "", {}).get("languages", {}).get(language)
    if entry is None:
        why = ("the baseline heuristic is not a measurement" if scorer.startswith("stylometric")
               else "no validity record for this scorer" if scorer else "no scorer recorded")
        return Validity(scorer, language, writer=writer, writer_family=fam, status=Standing.UNVALIDATED if writer else Standing.UNKNOWN,
                        note=f"unvalidated{f' for {writer}' if writer else ''}: {why}")
    measured = entry["families"]
    ok = tuple(sorted(f for f, m in measured.items() if m.get("validated")))
    bad = tuple(sorted(f for f, m in measured.items() if not m.get("validated")))
    if writer is None:
        return Validity(scorer, language, ok, bad, measured, None, None, Standing.UNKNOWN,
                        f"validated on {', '.join(ok) or 'no writer'}; the writer is not known")
    if fam in ok:
        return Validity(scorer, language, ok, bad, measured, writer, fam, Standing.VALIDATED, f"validated for {writer}")
    if fam in measured:
        m = measured[fam]
        regs = m.get("registers", {})
        where = [f"{r} (AUC {regs[r]['auc']})" for r in m.get("fails_in", []) if r in regs]
        why = (f"{fam} measured, AUC {m.get('auc')}, TPR at 5 % FPR {m.get('tpr_at_5fpr')}"
               + (f"; does not hold for its {', '.join(where)} passages" if where else ""))
    else:
        why = f"its family{f' ({fam})' if fam else ''} was never measured"
    return Validity(scorer, language, ok, bad, measured, writer, fam, Standing.UNVALIDATED,
                    f"unvalidated for {writer}: {why}")


def human_reference(scorer: str | None, language: str) -> dict[str, dict[str, float]]:
    """Quartiles of log_ppl, sentence_cv and overused over the calibration split's human passages, as recorded with
    ``scorer``'s validity; {} when it has no record."""
    entry = entries().get(digest_of(scorer) or "", {}).get("languages", {}).get(language, {})
    return dict(entry.get("human_reference", {}))
