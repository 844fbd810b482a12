"""humanize: the model rewrites the draft; the *system* measures the score.

The score comes from ``pipeline.scoring`` (deterministic, documented there),
so it can be recomputed from the stored text at any time. Below
``[humanize] threshold`` the rewrite is tried again, up to ``max_rewrites``.

A retry must not repeat itself: on the embedded model the same prompt with the
same sampling gave the same text and the same score every time. So each retry
(within a call, and across calls on the same draft) is told what the scorer
measured in the previous attempt — weak components, stock phrases and repeated
phrases quoted — and samples hotter with a new seed. Every attempt and its
score is in the result (``attempts``), which the ledger stores with the
execution; the best attempt is the article row.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict
import json
from typing import Annotated

from pipeline.claims import Lexicon
from pipeline.content import (
    content_hash,
    problems,
    split_markdown,
    token_budget,
    trim_to_sentence,
)
from pipeline.errors import CapabilityError
from pipeline.scoring import feedback, score, weakest_quoted
from pipeline.tools import RunContext, capability

from .draft import LANGUAGE_NAMES

TEMPERATURE_STEP = 0.3  # per retry, on top of [humanize] temperature
TEMPERATURE_MAX = 1.1


LEXICON = Lexicon(
    verbs=(
        "已(完成)?(拟人化|润色|改写)",
        r"\bhumani[sz]ed\b(?!\s+(version|text|article|draft|copy))",
        r"\b(rewrote|rewritten|reworded|reworked|polished)\b",
        r"\bsounds? (more )?(human|natural)",
        r"\breads? (more )?natural(ly)?\b",
        r"\b(reads?|sounds?) (more )?like (a (real )?(person|human)|someone)\b",
        "更(加)?像真?人(写|说)",
        "(机器|AI|ai)(味|腔)(淡|少|减|去)",
    ),
    zh_step="拟人化|拟人|润色|改写",
    en_step=r"\bhumani[sz]\w*|\brewrite\b",
)


# A rewrite this similar to its draft (difflib ratio of the bodies) is a copy, not a rewrite. (The
# embedded model's real rewrites measured 0.73-0.91: it keeps most of its source's wording.)
UNCHANGED = 0.95
UNCHANGED_NOTE = ("Your previous rewrite returned the article nearly word for word. Rewrite it for real: "
                  "change the wording and the rhythm of every sentence, keeping the facts.")


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _earlier_calls(ctx: RunContext) -> int:
    return sum(1 for e in ctx.ledger.executions(ctx.run_id) if e.capability == "humanize" and e.ok is not None)


def _passed(result: dict) -> bool:
    """A rewrite below the threshold does not finish the step."""
    return result.get("passed", True) is not False


def _best_score(results: list[dict]) -> dict:
    scores = [float(r["score"]) for r in results if isinstance(r.get("score"), (int, float))]
    return {"best": f"{max(scores):g}" if scores else "none yet"}


@capability(order=30, fact="score", lexicon=LEXICON, finished=_passed, hint=_best_score,
            shown=("article_id", "score", "threshold", "passed", "next"))
def humanize(ctx: RunContext, article_id: Annotated[int, "The article_id of the draft returned by draft."]) -> dict:
    """Rewrite a draft so it reads as written by a person, and score it (0-100). Returns the new article_id and the score."""
    from sqlmodel import select

    from pipeline.models import Article

    with ctx.ledger.read() as s:
        src = s.get(Article, article_id)
        earlier = [] if src is None else list(s.exec(select(Article).where(
            Article.run_id == ctx.run_id, Article.parent_id == article_id, Article.kind == "humanized")))
    if src is None or src.run_id != ctx.run_id:
        raise CapabilityError(f"no article {article_id} in this run; pass the article_id returned by draft")
    if src.kind != "draft":
        raise CapabilityError(f"article {article_id} is already humanized; pass the draft's article_id {src.parent_id}")
    h = ctx.cfg.humanize
    threshold = h.pass_mark(src.language)
    system = ctx.prompts.render("humanize.md", language_name=LANGUAGE_NAMES[src.language])
    original = f"# {src.title}\n\n{src.body}"
    # What the previous attempt got wrong, for the next one: an earlier call on this draft that stayed
    # below the threshold starts from what the scorer measured in it.
    note: str | None = None
    if earlier:
        prev = max(earlier, key=lambda a: a.score or 0)
        prev_text = f"# {prev.title}\n\n{prev.body}"
        note = feedback(prev_text, score(prev_text, src.language), threshold)
    # Attempts are numbered across calls (rejected ones leave no article), so none repeats a sampling.
    offset = _earlier_calls(ctx) * (1 + h.max_rewrites)
    best = None
    attempts: list[dict] = []
    rejected = ""
    for i in range(1 + h.max_rewrites):
        n = offset + i
        user = original if note is None else f"{note}\n\n{original}"
        temperature = min(TEMPERATURE_MAX, h.temperature + TEMPERATURE_STEP * n)
        if note is UNCHANGED_NOTE:  # after a copy, the hottest: the embedded model copies up to 1.0 (measured)
            temperature = TEMPERATURE_MAX
        # A rewrite is about as long as its source; the model writes up to its budget, so it stays close.
        reply = ctx.llm.complete([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                 max_tokens=token_budget(int(len(src.body) * 1.1), src.language),
                                 temperature=temperature, seed=n if n else None)
        title, body = split_markdown(reply.text)
        title = title or src.title
        if reply.finish_reason == "length":
            body = trim_to_sentence(body)
        why = problems(title, body, ctx.cfg.draft.min_chars, ctx.cfg.draft.max_chars * 2)
        same = similarity(src.body, body)
        if not why and same >= UNCHANGED:
            # A copy would score whatever the draft scores: the step would be recorded as done without
            # having been done. (The embedded model does, now and then, at every temperature.)
            why = [f"the rewrite is {same:.0%} the draft's text"]
            note = UNCHANGED_NOTE
        if why:
            rejected = "; ".join(why)
            attempts.append({"attempt": n + 1, "score": None, "rejected": rejected})
            continue
        text = f"# {title}\n\n{body}"
        measured = score(text, src.language)
        attempts.append({"attempt": n + 1, "score": measured.total, "components": measured.components,
                         "similarity": round(same, 3),
                         "temperature": temperature})
        note = feedback(text, measured, threshold)
        if best is None or (measured.total or 0) > (best[2].total or 0):
            best = (title, body, measured)
        if measured.passed:
            break
    if best is None:
        raise CapabilityError(f"no usable rewrite of article {article_id} ({rejected}); call humanize again")
    title, body, measured = best
    with ctx.ledger.write() as s:
        article = Article(run_id=ctx.run_id, topic_id=src.topic_id, parent_id=src.id, kind="humanized", title=title,
                          body=body, language=src.language, content_hash=content_hash(title, body),
                          score=measured.total, score_components_json=json.dumps(measured.components),
                          scorer=measured.scorer,
                          score_paragraphs_json=json.dumps([asdict(p) for p in measured.paragraphs]))
        s.add(article)
    passed = measured.passed
    result = {"article_id": article.id, "score": measured.total, "components": measured.components,
              "weakest": weakest_quoted(f"# {title}\n\n{body}", measured),
              "threshold": threshold, "passed": passed, "attempts": attempts}
    if not passed:  # say what to do, or the model publishes a failing article and loops on the error
        result["next"] = f"call humanize again with the draft's article_id {src.id}; publish needs a score ≥ {threshold:g}"
    return result
