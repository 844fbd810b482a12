"""Lexical signals of model-written prose that need no model: words and phrases models over-use.

The list is taken from published measurements and public style guides of model prose, never from the score
corpus's own machine passages (so a family left out of calibration is not measured with a list fitted to it):
Kobak et al. 2024, "Delving into ChatGPT usage in academic writing through excess vocabulary" (the words whose
frequency in 2024 abstracts rose far above trend: delve, showcasing, underscores, intricate, pivotal, ...), and the
Chinese connectives and set phrases that Chinese readers name as machine tells (此外, 总之, 值得注意的是, 至关重要, ...).
The shipped ``stock_phrases`` feature (``scores.STOCK_PHRASES``) is the narrower list issue 21 started with; this one is
measured beside it (bench/score_lofo.py) and used only where the calibration file lists it.
"""

from __future__ import annotations

import re

OVERUSED_EN = [
    "delve", "delves", "delving", "showcase", "showcases", "showcasing", "underscore", "underscores", "underscoring",
    "intricate", "intricacies", "pivotal", "realm", "meticulous", "meticulously", "notably", "crucial", "vital",
    "comprehensive", "enhance", "enhancing", "enhances", "insights", "foster", "fostering", "garner", "boast",
    "landscape", "tapestry", "testament", "seamless", "seamlessly", "robust", "leverage", "leveraging", "streamline",
    "streamlined", "utilize", "utilizing", "ensure", "ensuring", "furthermore", "moreover", "additionally",
    "ultimately", "overall", "in conclusion", "in summary", "it is important to", "it's important to",
    "it is worth noting", "it's worth noting", "plays a crucial role", "plays a vital role", "a myriad of",
    "navigate", "navigating", "embark", "harness", "unlock", "elevate", "empower", "dive into", "let's dive",
    "game-changer", "ever-evolving", "fast-paced", "cutting-edge", "not only", "whether you're",
]
OVERUSED_ZH = [
    "此外", "总之", "总而言之", "综上所述", "总的来说", "值得注意的是", "需要注意的是", "至关重要", "不可或缺", "毋庸置疑",
    "不仅", "确保", "有效地", "显著", "提升", "优化", "助力", "赋能", "深入", "全面", "关键在于", "重要作用", "在当今",
    "随着", "首先", "其次", "最后", "通过", "从而", "进而", "高效", "无缝", "一系列", "各种", "方面", "让我们",
]
_EN = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in OVERUSED_EN) + r")\b", re.IGNORECASE)
_ZH = re.compile("|".join(re.escape(w) for w in OVERUSED_ZH))


def overused(text: str, language: str) -> float:
    """Occurrences of over-used words and phrases per 1,000 non-space characters."""
    found = (_ZH if language == "zh" else _EN).findall(text)
    return len(found) * 1000 / max(len(re.sub(r"\s", "", text)), 1)


def overused_found(text: str, language: str) -> list[str]:
    return list(dict.fromkeys(m.group(0).lower() for m in (_ZH if language == "zh" else _EN).finditer(text)))
