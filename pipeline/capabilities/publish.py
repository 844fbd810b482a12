"""publish: put a humanized article on the configured platform, once, and verify it (``pipeline.publishing.publish``)."""

from __future__ import annotations

from typing import Annotated, Any

from pipeline.tools.claims import Lexicon
from pipeline.tools.toolbox import RunContext, capability

LEXICON = Lexicon(
    verbs=(
        "已发布",
        "发布成功",
        "成功发布",
        "已上线",
        "已发表",
        "已(将|把).{0,16}(发布|推送|上线|发表)",
        r"\b(published|posted|uploaded|deployed|shipped)\b",
        r"\b(pushed|sent|synced|synchronized|delivered|submitted|put)\b[^.]{0,30}\b(to|on|onto)\s+(the\s+|our\s+)?(local\s+)?(site|blog|platform|cms|production|website|web|server|medium|wordpress|ghost|channel)\b",
        r"\bpushed (it )?(out|live)\b",
        r"\b(went|gone|go) (out|live|up)\b",
        r"\blive (at|on)\b",
        r"\bhit publish\b",
        r"\b(is|are|'s) (now )?out\b(?! of)",
        r"\bin the wild\b",
        r"\breleased\b",
        r"\b(and|now) live\b",
        r"\b(is|are|'s) (now )?on (the |our )?(site|blog|platform|website)\b",
        r"\bup and running\b",
        r"\bmade (it|the \w+) (public|available)\b",
        r"\b(is|are|'s|was|were) (now )?(live|online|up on|out there)\b",
        r"\b(visible|available|readable|accessible) on (the |our )?(platform|site|blog|web|website)\b",
        r"\bmade it (onto|to|on) (the |our )?(site|blog|platform|website)\b",
    ),
    zh_step="发布|发表|上线|推送|上传|同步到|投递|挂到|放到|推到|发到|发出|公开|直接发|发了|放出|上架|(平台|站点|网站|博客)上?(看到|可见|访问)",
    en_step=r"\bpublish\w*|\bpublication\b|\bupload\w*|\bposting\b",
    zh_generic="发出|发到|发了|发给|推送",  # also says "written"/"sent" of a report
)


def _verified(result: dict[str, Any]) -> bool:
    """A publication whose URL did not check out does not finish the step."""
    return result.get("verified") is not False


@capability(order=40, fact="url", lexicon=LEXICON, finished=_verified)
def publish(ctx: RunContext, article_id: Annotated[int, "The article_id returned by humanize."]) -> dict[str, Any]:
    """Publish a humanized article to the configured platform and verify its URL. Returns publication_id and url."""
    from pipeline.publishing.publish import publish_article

    return publish_article(ctx, article_id)
