"""Article text helpers: Markdown title/body, content hashes, slugs, HTML."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_BOILERPLATE = re.compile(
    r"as an ai( language model)?|i am an ai|i'm an ai|as a large language model|作为一个?(人工智能|AI|ai|语言模型)|我是一个?(AI|人工智能)",
    re.IGNORECASE,
)


def split_markdown(text: str) -> tuple[str, str]:
    """Return (title, body) from Markdown whose first non-empty line is ``# Title``."""
    text = text.strip()
    # Models like to wrap the whole answer in a code fence.
    fence = re.match(r"^```(?:markdown|md)?\s*\n(.*)\n```$", text, re.DOTALL)
    if fence:
        text = fence.group(1).strip()
    lines = text.splitlines()
    if lines and lines[0].lstrip().startswith("#"):
        return lines[0].lstrip("#").strip(), "\n".join(lines[1:]).strip()
    return "", text


def content_hash(title: str, body: str) -> str:
    return hashlib.sha256(f"{title}\n\n{body}".encode()).hexdigest()


def problems(title: str, body: str, min_chars: int, max_chars: int) -> list[str]:
    """Why a draft is not publishable; empty when it is."""
    out = []
    if not title:
        out.append("no '# Title' line")
    if len(body) < min_chars:
        out.append(f"body has {len(body)} characters, fewer than {min_chars}")
    if len(body) > max_chars:
        out.append(f"body has {len(body)} characters, more than {max_chars}")
    if _BOILERPLATE.search(title + "\n" + body):
        out.append("contains AI-assistant boilerplate ('As an AI…')")
    return out


def slugify(title: str, fallback: str) -> str:
    """A readable ASCII slug (Chinese as pinyin syllables, via text-unidecode), made unique by ``fallback``."""
    from slugify import slugify as transliterate

    slug = transliterate(title, max_length=60, word_boundary=True, lowercase=True)
    slug = re.sub(r"[^a-z0-9-]+", "", slug).strip("-")  # only what every platform takes in a URL path
    return f"{slug}-{fallback}" if slug else fallback


def normalize_title(title: str) -> str:
    return re.sub(r"\W+", " ", unicodedata.normalize("NFKC", title).lower()).strip()


def to_html(markdown: str) -> str:
    from markdown_it import MarkdownIt

    html: str = MarkdownIt("commonmark", {"html": False}).render(markdown)
    return html


# Characters of generated prose per token. English measured on the embedded model: 5.0-5.3
# (Qwen2.5's tokenizer; other models' are close). Chinese kept low: a budget should not cut it short.
CHARS_PER_TOKEN = {"en": 5.0, "zh": 1.3}


def token_budget(chars: int, language: str) -> int:
    """max_tokens for a text of about ``chars`` characters, with room for a title and some slack."""
    return int(chars / CHARS_PER_TOKEN.get(language, 3.5)) + 48


def trim_to_sentence(text: str) -> str:
    """Cut a text that hit its token limit back to its last complete sentence.

    The article then ends on a finished sentence instead of mid-word; whether what is
    left is long enough is still checked by ``problems``.
    """
    cut = max(text.rfind(mark) for mark in ("。", "！", "？", ". ", "! ", "? ", ".\n", "!\n", "?\n"))
    if text.rstrip().endswith((".", "!", "?", "。", "！", "？")):
        return text.rstrip()
    return text[: cut + 1].rstrip() if cut > 0 else text
