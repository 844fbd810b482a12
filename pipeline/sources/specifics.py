"""The specifics of a sentence: what in it can be checked against a source, each with a normalised key.

A specific is a number (with its unit: "41 min", "41 minutes" and "41分钟" are one key, ``41 min``; "12 %" is
"12%"; 四十一 is 41), a link, inline code or a code line, an identifier (``--flag``, ``snake_case``, ``a.b``,
``camelCase``), a name (a capitalised word where no sentence starts, an acronym, a word with a digit; in Chinese
text every Latin word), or a quotation. What is not a specific is not checked here: a sentence of plain words
makes no claim this module can trace (``grounding`` says so for each such sentence: "no specifics").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.text.article import CITATION

_CN_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNIT = {"十": 10, "百": 100, "千": 1000}
_CN_BIG = {"万": 10_000, "亿": 100_000_000}
_CN_NUMERAL = re.compile(r"[零〇一二两三四五六七八九十百千万亿]+")
# A lone 一/两/几 is an article or "a couple" far more often than a figure: a numeral of one character counts only
# before a unit of measure (三分钟, 五倍), never before 个/些/种.
_CN_MEASURE = re.compile(r"^(?:分钟|秒|毫秒|小时|天|周|个月|月|年|倍|次|%|％)")


def chinese_number(text: str) -> int | None:
    """四十一 → 41, 一千二百 → 1200, 三万五千 → 35000, 二〇二六 → 2026 (digit by digit); None if not a numeral."""
    if not text or any(c not in _CN_DIGIT and c not in _CN_UNIT and c not in _CN_BIG for c in text):
        return None
    if all(c in _CN_DIGIT for c in text) and len(text) > 1:
        return int("".join(str(_CN_DIGIT[c]) for c in text))
    total, section, digit = 0, 0, None
    for c in text:
        if c in _CN_DIGIT:
            digit = _CN_DIGIT[c]
        elif c in _CN_UNIT:
            section += (1 if digit is None else digit) * _CN_UNIT[c]
            digit = None
        else:
            total += (section + (digit or 0)) * _CN_BIG[c]
            section, digit = 0, None
    return total + section + (digit or 0)


def arabic(text: str) -> str:
    """Chinese numerals written as Arabic ones where they are figures (see ``_CN_MEASURE``)."""
    def repl(m: re.Match[str]) -> str:
        word, after = m.group(0), text[m.end():m.end() + 3]
        if len(word) == 1 and not _CN_MEASURE.match(after):
            return word
        if word in ("一些", "一下", "一直", "一起", "一样", "一般", "一定", "一旦", "一边"):
            return word
        n = chinese_number(word)
        return word if n is None else str(n)
    return _CN_NUMERAL.sub(repl, text)


# Units, each spelling mapped to one name; longest spellings first in the pattern.
_UNITS = {
    "ms": ("ms", "msec", "millisecond", "milliseconds", "毫秒"),
    "s": ("s", "sec", "secs", "second", "seconds", "秒", "秒钟"),
    "min": ("min", "mins", "minute", "minutes", "分钟"),
    "h": ("h", "hr", "hrs", "hour", "hours", "小时"),
    "day": ("day", "days", "天"),
    "week": ("week", "weeks", "周", "星期"),
    "month": ("month", "months", "个月"),
    "%": ("%", "％", "percent", "per cent"),
    "x": ("x", "×", "times", "倍"),
    "kb": ("kb", "kib"), "mb": ("mb", "mib"), "gb": ("gb", "gib"), "tb": ("tb", "tib"),
}
_UNIT_OF = {spelling: name for name, spellings in _UNITS.items() for spelling in spellings}
_UNIT_RX = "|".join(sorted((re.escape(s) for s in _UNIT_OF), key=len, reverse=True))
_NUMBER = re.compile(rf"(?<![A-Za-z0-9_.])(\d+(?:[.,]\d+)*)(?:\s?({_UNIT_RX})(?![A-Za-z]))?", re.IGNORECASE)
_WORD_NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                            "thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_WORD_NUMBERS |= {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
# A number written as a word counts only before a unit ("three minutes"): "one of the" is not a figure.
_WORD_NUMBER = re.compile(rf"\b(?:({'|'.join(_WORD_NUMBERS)})[\s-])?({'|'.join(_WORD_NUMBERS)})[\s-]+({_UNIT_RX})\b",
                          re.IGNORECASE)

_URL = re.compile(r"https?://[^\s)\]>\"'，。、]+")
_CODE = re.compile(r"`([^`\n]+)`")
_IDENT = re.compile(r"(?<![\w-])(?:--?[a-z][\w-]+|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z]*_\w+|[a-z]+[A-Z]\w*)", re.ASCII)
# A word starts where no letter or digit stands before it: inside "57e269e0d37a" there is no word "e269e0d37a".
_LATIN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z][A-Za-z0-9+#]*(?:[.\-'][A-Za-z0-9+#]+)*")
_QUOTE = re.compile(r"[\"“]([^\"“”\n]{3,300})[\"”]|「([^」\n]{2,300})」")
# Capitals that name no tool, product, organisation or person: the pronoun, and the common nouns of the trade that
# are written in capitals. Kept short on purpose: a name the sources lack is a hallucination, whatever its case.
GENERIC = frozenset("i ok api apis ci cd ci/cd cpu cpus gpu ram http https url urls id ids json sql utc ui io os pr prs "
                    "qa ai llm faq tl;dr etc vs e.g i.e".split())
_SENTENCE_START = re.compile(r"(?:^|(?<=[.!?:;。！？：；]))\s*[\"'(“‘*]*")


@dataclass(frozen=True)
class Specific:
    kind: str  # number | url | code | identifier | name | quote
    text: str  # as the sentence has it
    key: str   # normalised: what is looked for in the sources


def number_key(value: str, unit: str | None) -> str:
    v = value.replace(",", "")
    if "." in v:
        v = v.rstrip("0").rstrip(".") or "0"
    return f"{v} {_UNIT_OF[unit.lower()]}" if unit else v


def normalise(text: str) -> str:
    """Text as specifics are looked for in it: Chinese figures in Arabic numerals, one space, lower case."""
    text = arabic(text).replace("’", "'").replace("“", '"').replace("”", '"')
    return " ".join(text.split()).lower()


def numbers(text: str) -> list[tuple[str, str]]:
    """(as written, key) of every figure in ``text`` (code and links taken out first)."""
    text = arabic(_CODE.sub(" ", _URL.sub(" ", text)))
    out = [(m.group(0).strip(), number_key(m.group(1), m.group(2))) for m in _NUMBER.finditer(text)]
    for m in _WORD_NUMBER.finditer(text):
        tens, ones = (_WORD_NUMBERS[g.lower()] if g else 0 for g in m.group(1, 2))
        value = tens + ones if tens >= 20 and ones < 10 else None
        if m.group(1) and value is None:  # "two three-minute runs": not one figure
            continue
        out.append((m.group(0), number_key(str(value if value is not None else ones), m.group(3))))
    return out


def _starts(text: str) -> set[int]:
    """Where a sentence or clause starts (a capital there is not a name)."""
    return {m.end() for m in _SENTENCE_START.finditer(text)}


def names(text: str, language: str) -> list[str]:
    """Names in ``text``: in English a capitalised word where no sentence or clause starts, an acronym or a word
    with a digit anywhere; in Chinese text every Latin word of two letters or more."""
    found = []
    starts = _starts(text)
    for m in _LATIN.finditer(text):
        w = m.group(0).rstrip(".'")
        low = w.lower()
        if len(w) < 2 or low in GENERIC or low.rstrip("s") in GENERIC or low in _UNIT_OF:  # "GB", "min": units
            continue
        if language == "zh":
            found.append(w)
            continue
        marked = any(c.isdigit() for c in w) or sum(c.isupper() for c in w) >= 2
        if marked or (w[0].isupper() and m.start() not in starts):
            found.append(w)
    return found


def specifics(sentence: str, language: str) -> list[Specific]:
    """Every specific of one sentence, in order of kind. Citation markers ([1]) are not part of it."""
    text = CITATION.sub("", sentence)
    out: list[Specific] = [Specific("url", u.rstrip(".,;:"), u.rstrip(".,;:").lower()) for u in _URL.findall(text)]
    rest = _URL.sub(" ", text)
    out += [Specific("code", c, normalise(c)) for c in _CODE.findall(rest)]
    rest = _CODE.sub(" ", rest)
    for m in _QUOTE.finditer(rest):
        q = (m.group(1) or m.group(2)).strip()
        if len(q.split()) >= 3 or (language == "zh" and len(q) >= 6):
            out.append(Specific("quote", q, normalise(q)))
    idents = [i.rstrip(".") for i in _IDENT.findall(rest)]
    out += [Specific("identifier", i, i.lower()) for i in idents]
    bare = _IDENT.sub(" ", rest)
    out += [Specific("number", shown, key) for shown, key in numbers(bare)]
    seen = {s.key for s in out}
    for w in names(re.sub(r"\d+(?:[.,]\d+)*", " ", bare) if language == "zh" else bare, language):
        key = w.lower().removesuffix("'s")
        if key not in seen:
            seen.add(key)
            out.append(Specific("name", w, key))
    return out


def code_lines(block: str) -> list[str]:
    """The lines of a fenced code block that state something (not the fences, not lone punctuation)."""
    lines = block.splitlines()[1:]
    if lines and lines[-1].strip().startswith(("```", "~~~")):
        lines = lines[:-1]
    return [ln.strip() for ln in lines if re.search(r"\w", ln)]
