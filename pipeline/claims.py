"""Claim extraction: what the model *says* it did, and whether the ledger agrees.

This module is pure text processing. It never imports litellm, so
``pipeline claims check`` and ``pipeline ledger diff`` start fast.

How a text becomes claims:

1. The text is split into sentences (。！？!?; and ". " — not the dots inside a
   URL) and each sentence into clauses (，,；;、 and line breaks).
2. A clause that is negated, future, conditional or a question asserts
   nothing ("尚未发布", "发布失败", "如果发布成功", "will publish", "could not
   publish", "已发布吗？") and is skipped.
3. In each asserting clause, every capability rule that matches makes a claim
   (``publish: 已发布|发布成功|…|published``).
4. Values quoted in asserting clauses are claims too, because a fabricated
   value is the most convincing part of a hallucination: a registration number
   (``CT-YYYYMMDD-NNN``, prefix from config) is a *register* claim, a score next
   to 评分/score is a *humanize* claim, and a URL is a *publish* claim when its
   sentence makes a publish claim, it sits next to 链接/link/URL, or its host is
   one we publish to. A value joins the keyword claim of the same capability in
   its sentence, else it stands alone.

Verdicts against the facts (``{capability: [recorded values]}``):
``verified`` the capability succeeded (and the quoted value, if any, is one it
recorded); ``unbacked`` the capability has no successful execution;
``mismatch`` it ran, but the quoted value is not what it recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

VERIFIED, UNBACKED, MISMATCH = "verified", "unbacked", "mismatch"

# Built-in rules, Chinese and English. `[claims]` in config.toml adds to these.
DEFAULT_RULES: dict[str, list[str]] = {
    "topic": [
        r"已(选定|确定|选好)(了)?(选题|题目|主题)", r"选题(已|为)",
        r"\b(picked|chose|selected) (the |a )?topic\b", r"\btopic (is|was) (selected|chosen|picked)\b",
    ],
    "draft": [
        r"(文章|正文|草稿|初稿)已(经)?(生成|完成|写好|撰写)", r"已(生成|撰写|写好)(了)?(文章|正文|草稿|初稿)",
        r"\b(drafted|wrote|written|generated) (the |an |a )?(article|draft|post)\b",
        r"\b(article|draft|post) (has been|was|is) (drafted|written|generated|ready)\b",
    ],
    "humanize": [
        r"评分\s*[:：为是]?\s*\d", r"拟人化.{0,6}\d+\s*分", r"已(完成)?(拟人化|润色|改写)",
        r"\bhumani[sz]ed\b", r"\bhumani[sz](e|ation) score\b", r"\bscored? (of |at )?\d{1,3}\b",
    ],
    "publish": [
        r"已发布", r"发布成功", r"成功发布", r"已推送", r"已上线", r"已发表", r"已(将|把).{0,16}(发布|推送|上线|发表)",
        r"\bpublished\b", r"\bis (now )?live\b", r"\bwent live\b", r"\bposted (it|the article|the post)\b",
    ],
    "register": [
        r"已登记", r"已写入台账", r"已入账", r"登记号", r"登记编号", r"已(将|把).{0,16}(登记|写入台账|入账)",
        r"\bregistered\b", r"\bregistration (number|no\.?|id)\b", r"\b(recorded|entered) in the ledger\b",
    ],
    "report": [
        r"已(汇报|生成报告|发送报告|提交报告)", r"报告已(生成|发送|提交)",
        r"\breport (has been |was |is )?(sent|generated|written|delivered|filed)\b",
        r"\b(sent|generated|filed) (the |a )?report\b",
    ],
}

# An asynchronous platform's own words for "a publish task was accepted" (WeChat's 发布任务): the
# article is not published yet, so these phrases are not publish claims. They are removed from a
# clause before the publish rules look at it, so "已提交发布" is no claim and "已提交发布，已发布" still is.
_SUBMITTED = re.compile(
    r"(已经?|已(将|把).{0,16}?)?提交(了)?(发布|发表|审核)(任务|申请)?|发布任务(已经?)?(创建|提交|受理)|"
    r"已(创建|提交)(了)?发布任务|"
    r"\bsubmitted (it |the (article|post) )?for (publishing|publication|review)\b|"
    r"\bpublish(ing)? (task|job) (was |has been |is )?(created|submitted|accepted|queued)\b",
    re.IGNORECASE,
)

# A clause with any of these asserts nothing.
_NON_ASSERTIVE_ZH = re.compile(
    r"尚未|未能|暂未|并未|还没|没有|未|不|无法|失败|错误|"  # negation / failure
    r"将要|将会|(?<!已)将|准备|计划|即将|稍后|接下来|下一步|随后|待|需要|应该|要去|"  # future / plan
    r"如果|若|假如|假设|一旦|倘若|如需|是否|吗"  # conditional / question
)
_NON_ASSERTIVE_EN = re.compile(
    r"\b(not|never|cannot|can't|couldn't|didn't|don't|doesn't|wasn't|weren't|isn't|aren't|hasn't|haven't|"
    r"won't|unable|failed|fail|fails|failure|error|no longer|without|nothing|none|"
    r"will|shall|to be|going to|about to|plan to|plans to|planning|next|then I|let me|I'll|we'll|need to|needs to|"
    r"should|would|could|might|may|"
    r"if|unless|once|whether|when)\b|\bno\b(?!\.)",
    re.IGNORECASE,
)

_SENTENCE_SPLIT = re.compile(r"(?<=[。！？!?\n])|(?<=[.;；])(?=\s|$)")
_CLAUSE_SPLIT = re.compile(r"[，,；;、\n]|\s[-–—]\s")
_URL = re.compile(r"https?://[^\s<>\"'`，。；、）)\]】]+", re.IGNORECASE)
_SCORE = re.compile(r"(?:评分|得分|分数|score[ds]?)\D{0,12}?(\d{1,3}(?:\.\d+)?)", re.IGNORECASE)
_LINK_WORD = re.compile(r"链接|网址|地址|\b(link|url|at|available)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ClaimFound:
    capability: str
    text: str
    value: str | None = None
    status: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ClaimRules:
    """Compiled claim rules plus what values look like for this deployment."""

    def __init__(
        self,
        extra: Mapping[str, Iterable[str]] | None = None,
        registration_prefix: str = "CT",
        publish_hosts: Iterable[str] = (),
    ) -> None:
        patterns: dict[str, list[str]] = {k: list(v) for k, v in DEFAULT_RULES.items()}
        for cap, more in (extra or {}).items():
            patterns.setdefault(cap, []).extend(more)
        try:
            self.rules = {cap: re.compile("|".join(f"(?:{p})" for p in ps), re.IGNORECASE) for cap, ps in patterns.items()}
        except re.error as exc:
            raise ValueError(f"[claims] bad regular expression: {exc}") from None
        self.registration_no = re.compile(rf"\b{re.escape(registration_prefix)}-\d{{8}}-\d{{3,}}\b")
        self.publish_hosts = {h.lower() for h in publish_hosts}

    # -- extraction ---------------------------------------------------------

    def extract(self, text: str) -> list[ClaimFound]:
        found: list[ClaimFound] = []
        for sentence in _sentences(text or ""):
            keyword_claims: dict[str, ClaimFound] = {}
            values: list[tuple[str, str, str]] = []  # (capability, value, clause)
            clauses = [c.strip() for c in _CLAUSE_SPLIT.split(_protect_urls(sentence)) if c.strip()]
            clauses = [_restore_urls(c) for c in clauses]
            for clause in clauses:
                if not _asserts(clause):
                    continue
                for cap, rx in self.rules.items():
                    said = _SUBMITTED.sub(" ", clause) if cap == "publish" else clause
                    if rx.search(said) and cap not in keyword_claims:
                        keyword_claims[cap] = ClaimFound(cap, clause)
                for no in self.registration_no.findall(clause):
                    values.append(("register", no, clause))
                for m in _SCORE.finditer(clause):
                    values.append(("humanize", m.group(1), clause))
                for url in _URL.findall(clause):
                    url = url.rstrip(".,:;!?")
                    if "publish" in keyword_claims or _LINK_WORD.search(clause) or _host(url) in self.publish_hosts:
                        values.append(("publish", url, clause))
            used: set[str] = set()
            for cap, value, clause in values:
                base = keyword_claims.get(cap)
                if base and cap not in used:
                    used.add(cap)
                    found.append(ClaimFound(cap, base.text if base.text == clause else f"{base.text}，{clause}", value))
                else:
                    found.append(ClaimFound(cap, clause, value))
            found.extend(c for cap, c in keyword_claims.items() if cap not in used)
        return _dedupe(found)

    # -- verdicts -------------------------------------------------------------

    def judge(self, claims: list[ClaimFound], facts: Mapping[str, list[Any]]) -> list[ClaimFound]:
        """Attach a verdict to each claim. ``facts`` maps capability -> recorded values."""
        out = []
        for c in claims:
            if c.capability not in facts:
                status = UNBACKED
            elif c.value is None:
                status = VERIFIED
            else:
                status = VERIFIED if any(_same(c.capability, c.value, v) for v in facts[c.capability]) else MISMATCH
            out.append(ClaimFound(c.capability, c.text, c.value, status))
        return out

    def check(self, text: str, facts: Mapping[str, list[Any]]) -> list[ClaimFound]:
        return self.judge(self.extract(text), facts)


def claim_rules(cfg) -> ClaimRules:
    """The rules for a deployment: built-ins, ``[claims]`` extras, its registration prefix and hosts."""
    from .errors import ConfigError

    hosts = list(cfg.publish.allowed_domains)
    base_host = urlsplit(cfg.publish.local.base_url).hostname
    if base_host:
        hosts.append(base_host)
    try:
        return ClaimRules(cfg.claims, cfg.registration.prefix, hosts)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def facts_from_mapping(data: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Read the ``--facts`` JSON: ``{"publish": {"url": …}, "draft": {}}`` (a list of such dicts also works)."""
    from .ledger import FACT_VALUE_KEYS

    out: dict[str, list[Any]] = {}
    for cap, recorded in data.items():
        items = recorded if isinstance(recorded, list) else [recorded]
        values = []
        for item in items:
            if isinstance(item, Mapping):
                values.append(item.get(FACT_VALUE_KEYS.get(cap, ""), None))
            else:
                values.append(item)
        out[cap] = [v for v in values if v is not None] or []
    return out


# --- text tool calls ---------------------------------------------------------

_TOOLCALL_TAG = re.compile(r"<\s*/?\s*(tool_call|tool_calls|function_call|function|tools)\b[^>]*>", re.IGNORECASE)
_JSON_CANDIDATE = re.compile(r"\{[^{}]*(\{[^{}]*\}[^{}]*)*\}", re.DOTALL)


def text_tool_calls(text: str, tool_names: Iterable[str]) -> list[str]:
    """Names of tools the model *wrote* as a call instead of calling. Never executed."""
    names = set(tool_names)
    found: list[str] = []
    if _TOOLCALL_TAG.search(text or ""):
        found.append("<tool_call>")
    for m in _JSON_CANDIDATE.finditer(text or ""):
        try:
            obj = json.loads(m.group(0))
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        fn = obj.get("function") if isinstance(obj.get("function"), dict) else obj
        name = fn.get("name") or fn.get("tool") or obj.get("tool_name")
        if isinstance(name, str) and name in names and name not in found:
            found.append(name)
    for name in names:
        if re.search(rf"\b{re.escape(name)}\s*\(\s*[\w\"'{{]", text or "") and name not in found:
            found.append(name)
    return found


# --- helpers ---------------------------------------------------------------------

_URL_TOKEN = "\x00URL{}\x00"


def _protect_urls(text: str) -> str:
    # URLs contain commas and semicolons; hide them from the clause splitter.
    return _URL.sub(lambda m: m.group(0).replace(",", "\x01").replace(";", "\x02"), text)


def _restore_urls(text: str) -> str:
    return text.replace("\x01", ",").replace("\x02", ";")


def _sentences(text: str) -> list[str]:
    protected = _URL.sub(lambda m: m.group(0).replace(".", "\x03").replace("?", "\x04").replace("!", "\x05"), text)
    parts = _SENTENCE_SPLIT.split(protected)
    return [p.replace("\x03", ".").replace("\x04", "?").replace("\x05", "!").strip() for p in parts if p.strip()]


def _asserts(clause: str) -> bool:
    bare = _URL.sub(" ", clause)
    bare = re.sub(r"\b[A-Z]{1,8}-\d{8}-\d{3,}\b", " ", bare)
    if bare.rstrip().endswith(("?", "？")):
        return False
    return not (_NON_ASSERTIVE_ZH.search(bare) or _NON_ASSERTIVE_EN.search(bare))


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _norm_url(url: str) -> str:
    parts = urlsplit(url.strip().rstrip("/.,;"))
    return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}{parts.path.rstrip('/')}{'?' + parts.query if parts.query else ''}"


def _same(capability: str, quoted: str, recorded: Any) -> bool:
    if recorded is None:
        return False
    if capability == "publish":
        return _norm_url(str(quoted)) == _norm_url(str(recorded))
    if capability == "humanize":
        try:
            return round(float(quoted)) == round(float(recorded))
        except (TypeError, ValueError):
            return False
    return str(quoted).strip().upper() == str(recorded).strip().upper()


def _dedupe(claims: list[ClaimFound]) -> list[ClaimFound]:
    seen, out = set(), []
    for c in claims:
        key = (c.capability, c.value, c.text)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out
