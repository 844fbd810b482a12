"""Numbers in claims: 85, 78.4, 八十五, seventy-eight, and whether the context makes one a score."""

from __future__ import annotations

import re

# Scores. Numbers come as 85, 78.4, 八十五, seventy-eight; the context says whether one is a score.
_EN_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_EN_TEENS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
             "seventeen": 17, "eighteen": 18, "nineteen": 19}
_EN_ONES = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_NUMBER = re.compile(
    r"(?<![\w.])(\d{1,3}(?:\.\d+)?)(?![\d.]*\d)|([零一二两三四五六七八九十百]+(?:点[零一二三四五六七八九]+)?)|"
    rf"\b((?:{'|'.join(_EN_TENS)})(?:[- ](?:{'|'.join(_EN_ONES)}))?|{'|'.join(_EN_TEENS)}|(?:a |one )?hundred)\b",
    re.IGNORECASE,
)
_SCORE_BEFORE = re.compile(r"(评分|得分|打分|分数|打了|得了|拟人度|拟人化|拟人|人味|score\w*|rating|rated|rate|humani[sz]\w*|"
                           r"human[- ]?likeness|humanness|naturalness|human)[^\d\n]{0,25}$", re.IGNORECASE)
_SCORE_UNIT = re.compile(r"^\s*(分(?!钟|之|析|享|别|配)|points?\b|pts\b|/\s*100\b|out of 100\b|of 100\b)", re.IGNORECASE)
_SCORE_AFTER = re.compile(r"^[^\d\n]{0,25}(humanness|human[- ]?likeness|naturalness|humani[sz]\w*)", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*%")
_SCORE_WORD = re.compile(r"评分|得分|打分|分数|拟人|人味|检测结果|"
                         r"score|rating|rated|humani[sz]|human[- ]?likeness|humanness|naturalness", re.IGNORECASE)
_THRESHOLD = re.compile(r"(threshold|阈值|门槛|离|距离|at least|minimum|min\.|≥|>=|below|under|above|over|低于|高于|超过|不低于)"
                        r"[^\d\n]{0,12}$", re.IGNORECASE)
_THRESHOLD_AFTER = re.compile(r"^\s*(分)?\s*(的)?(门槛|阈值|threshold|or (more|higher|above))", re.IGNORECASE)
_NOT_SCORE_AFTER = re.compile(r"^\s*(分钟|秒|篇|次|个|条|号|天|小时|minutes?|seconds?|hours?|days?|times|am|pm|s\b)", re.IGNORECASE)

# --- numbers -------------------------------------------------------------------------


def parse_number(token: str) -> float | None:
    """85, 78.4, 八十五, 一百, seventy-eight, a hundred → the number; None if it is not one."""
    token = token.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", token):
        return float(token)
    if re.fullmatch(r"[零一二两三四五六七八九十百]+点[零一二三四五六七八九]+", token):  # 七十八点四
        whole, frac = token.split("点")
        integer = parse_number(whole)
        return None if integer is None else float(f"{integer:g}." + "".join(str(_ZH_DIGITS[ch]) for ch in frac))
    if re.fullmatch(r"[零一二两三四五六七八九十百]+", token):
        total, digit = 0, None
        for ch in token:
            if ch == "百":
                total += (digit if digit is not None else 1) * 100
                digit = None
            elif ch == "十":
                total += (digit if digit is not None else 1) * 10
                digit = None
            else:
                digit = _ZH_DIGITS[ch] if digit is None else digit * 10 + _ZH_DIGITS[ch]
        return float(total + (digit or 0))
    words = re.split(r"[- ]", token)
    if words[-1] == "hundred":
        return 100.0
    if words[0] in _EN_TENS:
        return float(_EN_TENS[words[0]] + (_EN_ONES.get(words[1], 0) if len(words) > 1 else 0))
    if token in _EN_TEENS:
        return float(_EN_TEENS[token])
    return None


def scores_in(clause: str) -> list[str]:
    """Humanize scores quoted in a clause: a number in a scoring context that is not a threshold."""
    clause = re.sub(r"百分之\s*([零一二两三四五六七八九十百]+(?:点[零一二三四五六七八九]+)?|\d+(?:\.\d+)?)", r"\1%", clause)
    out = []
    for m in _NUMBER.finditer(clause):
        before, after = clause[:m.start()], clause[m.end():]
        value = parse_number(m.group(0))
        if value is None or not 0 <= value <= 100 or _NOT_SCORE_AFTER.match(after):
            continue
        if _THRESHOLD.search(before) or _THRESHOLD_AFTER.match(after):
            continue
        scored = (_SCORE_BEFORE.search(before) or _SCORE_UNIT.match(after) or _SCORE_AFTER.match(after)
                  or (_PERCENT.match(after) and _SCORE_WORD.search(clause)))
        if scored:
            out.append(f"{value:g}")
    return out
