"""humanize: the model rewrites the draft; the *system* measures the score.

The score comes from ``pipeline.scoring`` (deterministic, documented there),
so it can be recomputed from the stored text at any time. Below
``[humanize] threshold`` the rewrite is tried again, up to ``max_rewrites``.
"""

from __future__ import annotations

import json
from typing import Annotated

from pipeline.content import content_hash, problems, split_markdown, token_budget, trim_to_sentence
from pipeline.errors import CapabilityError
from pipeline.models import Article
from pipeline.scoring import score
from pipeline.tools import RunContext, capability

from .draft import LANGUAGE_NAMES


@capability
def humanize(ctx: RunContext, article_id: Annotated[int, "The article_id of the draft returned by draft."]) -> dict:
    """Rewrite a draft so it reads as written by a person, and score it (0-100). Returns the new article_id and the score."""
    with ctx.ledger.read() as s:
        src = s.get(Article, article_id)
    if src is None or src.run_id != ctx.run_id:
        raise CapabilityError(f"no article {article_id} in this run; pass the article_id returned by draft")
    if src.kind != "draft":
        raise CapabilityError(f"article {article_id} is already humanized; pass the draft's article_id")
    h = ctx.cfg.humanize
    system = ctx.prompts.render("humanize.md", language_name=LANGUAGE_NAMES[src.language])
    best = None
    for _ in range(1 + h.max_rewrites):
        reply = ctx.llm.complete([{"role": "system", "content": system},
                                  {"role": "user", "content": f"# {src.title}\n\n{src.body}"}],
                                 max_tokens=token_budget(len(src.body), src.language))
        title, body = split_markdown(reply.text)
        title = title or src.title
        if reply.finish_reason == "length":
            body = trim_to_sentence(body)
        if problems(title, body, ctx.cfg.draft.min_chars, ctx.cfg.draft.max_chars * 2):
            continue
        measured = score(f"# {title}\n\n{body}", src.language)
        if best is None or measured.total > best[2].total:
            best = (title, body, measured)
        if measured.total >= h.threshold:
            break
    if best is None:
        raise CapabilityError(f"the rewrite of article {article_id} was empty or out of bounds; call humanize again")
    title, body, measured = best
    with ctx.ledger.write() as s:
        article = Article(run_id=ctx.run_id, topic_id=src.topic_id, parent_id=src.id, kind="humanized", title=title,
                          body=body, language=src.language, content_hash=content_hash(title, body),
                          score=measured.total, score_components_json=json.dumps(measured.components))
        s.add(article)
    return {"article_id": article.id, "score": measured.total, "components": measured.components,
            "threshold": h.threshold, "passed": measured.total >= h.threshold}
