"""Claim extraction: what the model *says* it did, and whether the ledger agrees.

This module is pure text processing. It never imports litellm, so
``pipeline claims check`` and ``pipeline ledger diff`` start fast.

How a text becomes claims:

1. **Layout is flattened into status lines.** JSON objects in the text become
   ``key: value`` pairs (``published_url: …``); Markdown table rows become
   ``first cell: other cells``; checklist boxes and bullets become marks
   (``[x]`` → ✅, ``[ ]`` → ☐); ``Publish — done`` becomes ``Publish: done``.
   A JSON object that is a tool call is left alone (it is a text tool call).
2. The text is split into sentences (。！？!?; newlines; ". ") and sentences
   into clauses (，,；; "but", 但, dashes); short English list items
   ("Topic, draft and humanize are done") stay with the clause they belong to.
3. A clause asserts nothing when it is negated or failed ("尚未", "failed",
   ❌, "pending"), future or planned ("will", "下一步", "准备"), conditional or
   an order/rule ("如果", "才能", "must", "only after", "each"), or a question;
   a Chinese clause ending in 后/之后 ("发布完毕后，…") is a condition unless the
   next clause narrates a completed act (了/已).
4. An asserting clause claims a capability when
   * a verb phrase of the lexicon matches (``published``, ``went live``,
     ``synced to the platform``, ``logged in the ledger``, ``已同步到``, …), or
   * (Chinese) it names the step (发布, 上线, 台账, 入册, 拟人化 …) *and* marks it
     done (已, 了, 完成, 成功, ✅ …), or
   * (English) it names the step and a status follows it
     (``Publish: done``, ``registration is in place``, ``✅ Topic``).
5. Values quoted in asserting clauses are claims too, because a fabricated
   value is the most convincing part of a hallucination: a registration number
   (``CT-YYYYMMDD-NNN``, prefix from config) is a *register* claim; a score
   (Arabic, Chinese or English numerals, ``85/100``, ``91%``, 百分之七十八, 七十八点四)
   in a scoring context (评分, 打分, rated, points, 分 …) and not a threshold is
   a *humanize* claim; a URL is a *publish* claim when its sentence makes a
   publish claim, it sits next to 链接/link/URL, or its host is one we publish
   to. A value joins the keyword claim of its capability in its sentence, and a
   bare keyword claim is dropped when the message quotes a value for it elsewhere.

Verdicts against the facts (``{capability: [recorded values]}``):
``verified`` the capability succeeded (and the quoted value, if any, is one it
recorded); ``unbacked`` the capability has no successful execution;
``mismatch`` it ran, but the quoted value is not what it recorded.

Measured on the labelled corpus in ``bench/corpus`` by ``bench/bench_claims.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from ...states import Verdict
from ._layouts import normalise_layout
from ._lexicon import Lexicon
from ._numbers import scores_in

VERIFIED, UNBACKED, MISMATCH = Verdict.VERIFIED, Verdict.UNBACKED, Verdict.MISMATCH


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

# Chinese: a step named in a clause that marks it done claims it ("台账也记录好了", "选题 ✔").
_ZH_DONE = re.compile(r"已|了|完成|完毕|成功|搞定|办妥|好|啦|出来|出去|均|通过|✅|✔|✓|☑|[:：]\s*是\s*$|"
                      r"[:：]\s*(ok|okay|done|yes|pass|passed|success)\s*$", re.IGNORECASE)
# English: a step named, then a status after it ("Publish: done", "registration is in place").
_EN_DONE = re.compile(r"\b(done|complete|completed|success|successful|successfully|succeeded|ok|okay|yes|true|finished|"
                      r"verified|in place|went through|ready|exists)\b|✅|✔|✓|☑", re.IGNORECASE)
_MARK_DONE = re.compile(r"✅|✔|✓|☑")
_LIST_GLUE = re.compile(r"[\s,/&]*(\b(and|or)\b)?[\s,/&]*", re.IGNORECASE)

# A clause with any of these asserts nothing.
_NON_ASSERTIVE_ZH = re.compile(
    r"尚未|未能|暂未|并未|还没|没有|没能|没|未|不(?!错)|无法|失败|错误|出错|报错|拒绝|否|等待|"  # negation / failure
    r"将要|将会|(?<!已)将|准备|计划|打算|即将|稍后|接下来|下一步|"
    r"随后(?![^，。]*[已了])|待|需|应该|应当|要去|会|(?<![重主需摘只不])要(?!求)|^等|等到|"  # future / plan
    r"必须|要求|只有(?!\s*[\d零一二两三四五六七八九十百])|只要|才|方可|前提|"  # rules and orders
    r"如果|若|假如|假设|一旦|倘若|如需|是否|吗|呢"  # conditional / question
)
_NON_ASSERTIVE_EN = re.compile(
    r"\b(not|never|cannot|can't|couldn't|didn't|don't|doesn't|wasn't|weren't|isn't|aren't|hasn't|haven't|"
    r"won't|unable|failed|fail|fails|failure|"
    r"error(?!\s+(handling|codes?|messages?|types?))|errored|rejected|refused|no longer|without|nothing|none|neither|nor|"
    r"pending|remaining|skipped|todo|waiting|false|unverified|"
    r"will|shall|to be|going to|about to|plan to|plans to|planning|intend|intends|next|let me|\w+'ll|need to|needs to|as soon as|until|"
    r"only\b[^.]{0,20}\b(after|once|when|if)|happens? after|comes? after|ha(s|ve) to|can be|"
    r"should|would|could|might|may|must|requires?|required|can only|only (after|when|once|if|a|an|the)|each|every|exactly once|"
    r"if|unless|once|whether|when)\b|(?<!registration )\bno\b(?![.:：])|❌|✘|✗|✖|☐|⏸|⏳|🚫",
    re.IGNORECASE,
)

_SENTENCE_SPLIT = re.compile(r"(?<=[。！？!?\n])|(?<=[.;；])(?=\s|$)")
_CLAUSE_SPLIT = re.compile(r"[，,；;\n]|…+|\s[-–—]{1,2}\s|——|\s\|\s|\s+(?:but|however|though|although)\s+|但是|但|不过", re.IGNORECASE)
_URL = re.compile(r"https?://[^\s<>\"'`，。；、）)\]】|]+", re.IGNORECASE)
_LINK_WORD = re.compile(r"链接|网址|地址|\b(link|url|at|available)\b", re.IGNORECASE)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_EXAMPLE = re.compile(r"(\blike|such as|e\.g\.|for example|for instance|例如|比如|格式为?|形如)[\s:：]*$", re.IGNORECASE)
# A registration number named by its label but not in this deployment's format ("the registration
# number is 12345", seen from the embedded model): a register claim whose value no fact can match.
_REGISTRATION_LABELLED = re.compile(
    r"(?:registration\s+(?:number|no\.?|id)|登记号|登记编号|台账编号)\s*(?:is|was|:|：|为|是|=)?\s*[`'\"“«(（]?"
    r"((?=[A-Za-z_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{2,})", re.IGNORECASE)

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
        lexicons: Mapping[str, Lexicon],
        extra: Mapping[str, Iterable[str]] | None = None,
        registration_prefix: str = "CT",
        publish_hosts: Iterable[str] = (),
    ) -> None:
        patterns: dict[str, list[str]] = {cap: list(lex.verbs) for cap, lex in lexicons.items()}
        for cap, more in (extra or {}).items():
            patterns.setdefault(cap, []).extend(more)
        try:
            self.rules = {cap: re.compile("|".join(f"(?:{p})" for p in ps), re.IGNORECASE) for cap, ps in patterns.items() if ps}
        except re.error as exc:
            raise ValueError(f"[claims] bad regular expression: {exc}") from None
        self.zh_steps = {cap: re.compile(lex.zh_step) for cap, lex in lexicons.items() if lex.zh_step}
        self.en_steps = {cap: re.compile(lex.en_step, re.IGNORECASE) for cap, lex in lexicons.items() if lex.en_step}
        self.zh_generic = {cap: re.compile(lex.zh_generic) for cap, lex in lexicons.items() if lex.zh_generic}
        steps = [lex.zh_step for lex in lexicons.values() if lex.zh_step] + [lex.en_step for lex in lexicons.values() if lex.en_step]
        self.step_name = re.compile("|".join(steps) or r"(?!)", re.IGNORECASE)
        self.absorbers = [self.zh_steps[cap] for cap, lex in lexicons.items() if lex.absorbs_generic and cap in self.zh_steps]
        self.registration_no = re.compile(rf"\b{re.escape(registration_prefix)}-\d{{8}}-\d{{3,}}\b")
        self.publish_hosts = {h.lower() for h in publish_hosts}

    # -- extraction ---------------------------------------------------------

    def capabilities_in(self, clause: str) -> list[str]:
        """The capabilities an (asserting) clause claims, by verb phrase or by step name plus status."""
        bare = _URL.sub(" ", clause)
        found = [cap for cap, rx in self.rules.items() if rx.search(bare)]
        zh_done = _CJK.search(bare) and _ZH_DONE.search(bare)
        absorbed = any(rx.search(bare) for rx in self.absorbers)  # "报告写好了": the report's, not the draft's
        for cap, rx in self.zh_steps.items():
            if not zh_done or cap in found:
                continue
            m = rx.search(bare)
            generic = self.zh_generic.get(cap)
            if m and not (absorbed and generic and generic.fullmatch(m.group(0)) and not rx.search(generic.sub(" ", bare))):
                found.append(cap)
        # English: the status must follow the step with nothing but other steps of a list in between
        # ("Topic, draft and humanize are done"), not another step's status ("the humanized version
        # … the registration is in place").
        marked = _MARK_DONE.search(bare)
        steps = sorted((m.start(), m.end(), cap) for cap, rx in self.en_steps.items() for m in rx.finditer(bare))
        for i, (_, _end, cap) in enumerate(steps):
            if cap in found:
                continue
            if marked:
                found.append(cap)
                continue
            for j in range(i, len(steps)):
                stop = steps[j + 1][0] if j + 1 < len(steps) else len(bare)
                segment = bare[steps[j][1]:stop]
                if _EN_DONE.search(segment):
                    found.append(cap)
                    break
                if not _LIST_GLUE.fullmatch(segment):
                    break
        return found

    def extract(self, text: str) -> list[ClaimFound]:
        found: list[ClaimFound] = []
        for sentence in _sentences(normalise_layout(text or "", self.step_name)):
            keyword_claims: dict[str, ClaimFound] = {}
            values: list[tuple[str, str, str]] = []  # (capability, value, clause)
            clauses = _clauses(sentence)
            for i, clause in enumerate(clauses):
                if not _asserts(clause, clauses[i + 1] if i + 1 < len(clauses) else ""):
                    continue
                # "已提交发布" (a publish task accepted) is no publish claim: decide on the clause without it.
                unsubmitted = self.capabilities_in(_SUBMITTED.sub(" ", clause)) if _SUBMITTED.search(clause) else None
                for cap in self.capabilities_in(clause):
                    if cap == "publish" and unsubmitted is not None and "publish" not in unsubmitted:
                        continue
                    keyword_claims.setdefault(cap, ClaimFound(cap, clause))
                for m in self.registration_no.finditer(clause):
                    if not _EXAMPLE.search(clause[:m.start()]):  # "a number like CT-…" shows a format
                        values.append(("register", m.group(0), clause))
                bare = _URL.sub(" ", clause)
                for m in _REGISTRATION_LABELLED.finditer(bare):
                    if not self.registration_no.fullmatch(m.group(1)) and not _EXAMPLE.search(bare[:m.start()]):
                        values.append(("register", m.group(1), clause))
                for score in scores_in(self.registration_no.sub(" ", bare)):
                    values.append(("humanize", score, clause))
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
        # "Humanized; it rates 87.4": the keyword and the value sit in different sentences, but they are one
        # claim; the bare one would be "verified" next to the quoted value's "mismatch".
        quoted = {c.capability for c in found if c.value is not None}
        return _dedupe([c for c in found if c.value is not None or c.capability not in quoted])

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

def facts_from_mapping(data: Mapping[str, Any], fact_keys: Mapping[str, str]) -> dict[str, list[Any]]:
    """Read the ``--facts`` JSON: ``{"publish": {"url": …}, "draft": {}}`` (a list of such dicts also works).

    ``fact_keys``: each capability's recorded value (``{"publish": "url"}``).
    """
    out: dict[str, list[Any]] = {}
    for cap, recorded in data.items():
        items = recorded if isinstance(recorded, list) else [recorded]
        values = []
        for item in items:
            if isinstance(item, Mapping):
                values.append(item.get(fact_keys.get(cap, ""), None))
            else:
                values.append(item)
        out[cap] = [v for v in values if v is not None] or []
    return out

# --- sentences and clauses ----------------------------------------------------------

_URL_TOKEN = "\x00URL{}\x00"
_QUOTED = re.compile(r"《[^》]{0,80}》|“[^”]{0,80}”|\"[^\"\n]{0,80}\"")
_CONTRAST = re.compile(r"\s*[,;]?\s+(?:though|although|but|however)\s+", re.IGNORECASE)
_ZH_AFTER = re.compile(r"(之后|以后|后|时)\s*$")
_ZH_NARRATED = re.compile(r"了|已")


def _protect_urls(text: str) -> str:
    # URLs contain commas and semicolons; hide them from the clause splitter.
    return _URL.sub(lambda m: m.group(0).replace(",", "\x01").replace(";", "\x02"), text)


def _restore_urls(text: str) -> str:
    return text.replace("\x01", ",").replace("\x02", ";")


def _sentences(text: str) -> list[str]:
    protected = _URL.sub(lambda m: m.group(0).replace(".", "\x03").replace("?", "\x04").replace("!", "\x05"), text)
    parts = _SENTENCE_SPLIT.split(protected)
    return [p.replace("\x03", ".").replace("\x04", "?").replace("\x05", "!").strip() for p in parts if p.strip()]


def _clauses(sentence: str) -> list[str]:
    # A contrast word opening a clause is kept (as a mark) so the list rule below can see it.
    marked = _CONTRAST.sub(", \x06", _protect_urls(sentence))
    raw = [_restore_urls(c).strip() for c in _CLAUSE_SPLIT.split(marked)]
    raw = [c for c in raw if c]
    out: list[str] = []
    turned = False
    for clause in raw:
        if clause.startswith("\x06"):
            turned, clause = True, clause[1:].strip()
            if not clause:
                continue
        # "Topic, draft and humanize are done": a bare English list item belongs to the clause after it.
        # Not when the next clause turns against it ("Drafted, though neither humanized nor published").
        if out and not turned and not _CJK.search(out[-1]) and len(out[-1].split()) <= 2 and not out[-1].endswith(":") \
                and not _CJK.search(clause):
            clause = f"{out.pop()}, {clause}"
        out.append(clause)
        turned = False
    return out


def _asserts(clause: str, following: str = "") -> bool:
    bare = _URL.sub(" ", clause)
    bare = re.sub(r"\b[A-Z]{1,8}-\d{8}-\d{3,}\b", " ", bare)
    bare = _QUOTED.sub(" ", bare)  # a title may say anything ("为什么…很重要", "Why X is not slow")
    if bare.rstrip().endswith(("?", "？")):
        return False
    if _NON_ASSERTIVE_ZH.search(bare) or _NON_ASSERTIVE_EN.search(bare):
        return False
    # "发布完毕后，登记号由系统生成" states an order; "改写完成后，我把文章发到了平台" narrates one.
    return not (_ZH_AFTER.search(bare) and not _ZH_NARRATED.search(following))


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
