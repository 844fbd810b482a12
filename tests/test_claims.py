"""Claim extraction and verdicts: pure text, no model, no ledger."""

from __future__ import annotations

import pytest

from pipeline.claims import ClaimRules, facts_from_mapping, text_tool_calls

INCIDENT = "文章已生成，拟人化评分 82 分，已发布至平台，链接 https://domain/item/fake-id，已登记到台账，登记号 CT-20260922-001。"
RULES = ClaimRules(publish_hosts=["127.0.0.1", "domain"])


def caps(text: str, rules: ClaimRules = RULES) -> set[str]:
    return {c.capability for c in rules.extract(text)}


def test_incident_text_yields_every_claim_with_its_value():
    found = {(c.capability, c.value) for c in RULES.extract(INCIDENT)}
    assert found == {("draft", None), ("humanize", "82"), ("publish", "https://domain/item/fake-id"),
                     ("register", "CT-20260922-001")}


@pytest.mark.parametrize("text,cap", [
    ("已发布", "publish"), ("发布成功", "publish"), ("已推送到平台", "publish"), ("文章已上线", "publish"),
    ("已将文章发布到平台", "publish"),
    ("已登记", "register"), ("已写入台账", "register"), ("已入账", "register"), ("登记号 CT-20261130-002", "register"),
    ("评分 77", "humanize"), ("拟人化得分为 80 分", "humanize"),
    ("The article is published.", "publish"), ("It is now live.", "publish"),
    ("Registered as CT-20261130-004.", "register"), ("Humanize score: 71.", "humanize"),
    ("I drafted the article.", "draft"), ("Report sent.", "report"),
])
def test_positive_claims(text, cap):
    assert cap in caps(text)


@pytest.mark.parametrize("text", [
    "尚未发布", "发布失败", "如果发布成功，就登记", "还没有登记", "无法发布到平台", "未能写入台账", "已发布吗？",
    "准备发布", "接下来将发布", "下一步登记",
    "I will publish it next.", "I could not publish the article.", "Publishing failed.", "Has it been published?",
    "If the article is published, register it.", "I have not registered it yet.", "Nothing was published.",
    "The article is ready to be published.", "Let me publish it now.", "Once published, I'll register it.",
])
def test_negated_future_conditional_and_questions_are_not_claims(text):
    assert caps(text) == set(), RULES.extract(text)


def test_clause_scope_keeps_a_claim_next_to_a_negation():
    # "not emailed" negates its own clause only.
    assert caps("已发布至平台，但尚未推送到邮件列表。") == {"publish"}
    assert caps("Published at https://domain/a.html; I did not email it.") == {"publish"}


def test_url_with_dots_and_commas_stays_whole():
    [c] = [c for c in RULES.extract("Published at https://domain/p/a.b,c.html. Done.") if c.capability == "publish"]
    assert c.value == "https://domain/p/a.b,c.html"


def test_url_alone_is_a_claim_only_next_to_a_link_word_or_on_our_host():
    assert caps("See https://docs.python.org/3/ for the background.") == set()
    assert caps("链接 https://example.org/item/1") == {"publish"}
    assert caps("https://domain/item/2") == {"publish"}


def test_verdicts_verified_unbacked_mismatch():
    facts = {"publish": ["https://domain/item/real"], "humanize": [81.6], "draft": [1]}
    verdicts = {(c.capability, c.status) for c in RULES.check(INCIDENT, facts)}
    assert verdicts == {("draft", "verified"), ("humanize", "verified"), ("publish", "mismatch"), ("register", "unbacked")}


def test_url_comparison_ignores_case_of_host_and_trailing_slash():
    facts = {"publish": ["http://127.0.0.1:8765/posts/a.html"]}
    [c] = RULES.check("Published at HTTP://127.0.0.1:8765/posts/a.html/", facts)
    assert c.status == "verified"


def test_registration_prefix_comes_from_config():
    rules = ClaimRules(registration_prefix="PUB")
    assert {c.value for c in rules.extract("登记号 PUB-20261130-010")} == {"PUB-20261130-010"}


def test_extra_rules_from_config():
    rules = ClaimRules(extra={"publish": [r"已同步到(公众号|知乎)"]})
    assert caps("已同步到知乎", rules) == {"publish"}
    assert caps("已同步到知乎") == set()


def test_bad_extra_rule_is_a_clear_error():
    with pytest.raises(ValueError, match="bad regular expression"):
        ClaimRules(extra={"publish": ["(unclosed"]})


def test_facts_json_shape():
    assert facts_from_mapping({"publish": {"url": "u"}, "register": {"registration_no": "CT-1"}, "humanize": {"score": 77},
                               "draft": {}}) == {"publish": ["u"], "register": ["CT-1"], "humanize": [77], "draft": []}


@pytest.mark.parametrize("text,expected", [
    ('```json\n{"name": "publish", "arguments": {"article_id": 3}}\n```', ["publish"]),
    ('<tool_call>{"name": "topic", "arguments": {}}</tool_call>', ["<tool_call>", "topic"]),
    ('{"function": {"name": "register", "arguments": "{}"}}', ["register"]),
    ("I'll call publish(article_id=3) now", ["publish"]),
    ("The publish step is next.", []),
    ('{"title": "not a call"}', []),
])
def test_text_tool_calls(text, expected):
    assert text_tool_calls(text, ["topic", "draft", "humanize", "publish", "register", "report"]) == expected
