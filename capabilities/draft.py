"""draft: the model writes the article; the system validates and stores it.

The tool takes a topic id and returns an article id: the model never retypes
an article, and what is published is exactly what was validated here.
"""

from __future__ import annotations

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
from pipeline.tools import RunContext, capability

LANGUAGE_NAMES = {"en": "English", "zh": "Simplified Chinese"}
ATTEMPTS = 2


LEXICON = Lexicon(
    verbs=(
        "(文章|正文|草稿|初稿|稿子)已(经)?(生成|完成|写好|撰写|写完)",
        "已(生成|撰写|写好|写完)(了)?(文章|正文|草稿|初稿)",
        r"\b(drafted|composed|authored)\b",
        r"\bwrote the (first|initial) (version|cut)\b",
        r"\bwrote (it|this|that|one) up\b",
        r"\b(I|we) (have|'ve got|got) (a|the) draft\b",
        r"\b(wrote|written|generated|produced|created|finished writing|finished|completed)\b(\s+\w+){0,3}?\s+(draft|article|post|piece)s?\b",
        r"\b(draft|article|post|piece)s?(\s+#?\d+)?\s+(is |was |has been |have been )?"
        r"(written|drafted|generated|ready|done|finished|complete|completed|saved|stored|in the ledger)\b",
        r"\b(wrote|written|finished|completed|produced)\b(\s+\w+){0,3}?\s+(first|initial|rough) (pass|version|cut)\b",
    ),
    zh_step="初稿|草稿|正文|写作|撰写|(?<!改)写(好|完|出)|(文章|稿子)(已经?)?生成",
    en_step=r"\bdrafts?\b|\bwriting\b",
    zh_generic="写好|写完|写出|撰写",  # also says "written"/"sent" of a report
)


@capability(order=20, fact="article_id", lexicon=LEXICON)
def draft(ctx: RunContext, topic_id: Annotated[int, "The topic_id returned by topic."]) -> dict:
    """Write the article for a topic. Returns the draft's article_id, title and length."""
    from sqlmodel import select

    from pipeline.models import Article, Topic

    with ctx.ledger.read() as s:
        t = s.get(Topic, topic_id)
        existing = s.exec(select(Article).where(Article.topic_id == topic_id, Article.kind == "draft",
                                                Article.run_id == ctx.run_id)).first()
    if t is None or t.run_id != ctx.run_id:
        raise CapabilityError(f"no topic {topic_id} in this run; call topic first and pass its topic_id")
    if existing:
        return {"article_id": existing.id, "title": existing.title, "chars": len(existing.body), "reused": True}

    d = ctx.cfg.draft
    system = ctx.prompts.render("draft.md", audience=d.audience, niche=ctx.cfg.topic.niche, style=d.style,
                                language_name=LANGUAGE_NAMES[d.language], target_chars=d.target_chars, max_chars=d.max_chars)
    user = ctx.prompts.render("draft_user.md", title=t.title, angle=t.angle or "your choice")
    why: list[str] = []
    # Small models ignore the length asked for and write until stopped (the embedded one: 1,200-2,200
    # characters for 550), so the budget sets the length: time on a 2-core machine is per token.
    # A draft that reaches it is cut back to its last full sentence.
    budget = token_budget(min(d.max_chars, d.target_chars), d.language)
    for _ in range(ATTEMPTS):
        reply = ctx.llm.complete([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                 max_tokens=budget)
        title, body = split_markdown(reply.text)
        if reply.finish_reason == "length":
            body = trim_to_sentence(body)
        why = problems(title, body, d.min_chars, d.max_chars)
        if not why:
            break
    else:
        raise CapabilityError(f"the draft for topic {topic_id} failed validation: {'; '.join(why)}")
    with ctx.ledger.write() as s:
        article = Article(run_id=ctx.run_id, topic_id=topic_id, kind="draft", title=title, body=body,
                          language=d.language, content_hash=content_hash(title, body))
        s.add(article)
    return {"article_id": article.id, "title": title, "chars": len(body)}
