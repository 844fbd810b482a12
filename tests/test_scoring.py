"""The human-likeness score is the system's measurement: deterministic and explainable."""

from __future__ import annotations

from scenarios import DRAFT, HUMANIZED

from pipeline.scoring import WEIGHTS, score

STOCK = """# The future of builds

In today's fast-paced world, it is important to note that builds matter. Moreover, builds are important.
Furthermore, it is worth noting that builds matter. In conclusion, builds are important and builds matter.
Additionally, we must delve into the ever-evolving landscape of builds. Builds are important. Builds matter.
"""

ZH_STOCK = "# 构建\n\n随着技术的快速发展，构建非常重要。值得注意的是，构建非常重要。总而言之，构建非常重要。综上所述，构建至关重要。"
ZH_HUMAN = "# 构建\n\n去年我们的夜间构建要四十分钟。现在九分钟。大部分时间花在一个写错的缓存键上，每个任务都从零开始下载依赖，修好它只用了一个下午。测试里还有一堆没人记得为什么加的两秒等待？删掉以后，不稳定的失败也一起消失了。"  # noqa: E501  (one paragraph, as written)


def test_same_text_same_score():
    assert score(HUMANIZED) == score(HUMANIZED)


def test_stock_phrases_and_repetition_score_lower_than_human_text():
    assert score(STOCK).total < 50 < score(HUMANIZED).total
    assert score(STOCK).components["stock_phrases"] < score(HUMANIZED).components["stock_phrases"]
    assert score(STOCK).components["repetition"] < score(HUMANIZED).components["repetition"]


def test_chinese_is_scored_on_characters():
    assert score(ZH_STOCK).language == "zh"
    assert score(ZH_STOCK).total < score(ZH_HUMAN).total


def test_total_is_the_weighted_sum_of_components():
    s = score(DRAFT)
    assert abs(s.total - round(100 * sum(WEIGHTS[k] * v for k, v in s.components.items()), 1)) < 1e-9
    assert set(s.components) == set(WEIGHTS) and abs(sum(WEIGHTS.values()) - 1) < 1e-9
