"""Binoculars features of the score corpus: the 0.5B scoring model and the embedded 1.5B as observer and performer.

    python bench/score_binoculars.py [--tokens 128] [--max-seconds S] [--limit N]

Binoculars (Hans et al., ICML 2024) divides a text's log-perplexity under one model by the cross-perplexity of two
models at the same positions: how surprising the text is, against how surprising one model finds the other's
predictions. A prompt can make a model's text surprising (a persona, a register), but it stays close to what a
second model would have predicted there; a person's text does not. The two Qwen2.5-Coder models share their
tokenizer (151,936 tokens, the same ids: checked on the first passage), so every position is compared token for
token. Per position t, with p and q the 0.5B's and the 1.5B's next-token distributions:

    ll_p, ll_q      log p(x_t), log q(x_t)
    h_p, h_q        entropies
    x_pq = -sum_v p(v) log q(v),   x_qp = -sum_v q(v) log p(v)

summed per passage over its first ``--tokens`` predicted tokens (each paragraph its own sequence, as the scorer
reads them; a paragraph past one window is cut there). The features: ``bino_pq`` = mean(-ll_q) / mean(x_pq)
(observer 0.5B, performer 1.5B, the reference code's orientation) and ``bino_qp`` = mean(-ll_p) / mean(x_qp).

Cost bound: both output matrices held dense (0.55 + 0.93 GB), the two llama.cpp servers in processes of their own,
~3 s a passage at 128 tokens on two shared cores. Passages are done new machine passages first, then human ones
round-robin over sources, then the rest; the cache (bench/results/binoculars_features.jsonl) is appended and
resumed, keyed by passage id and text digest, so a run cut short by ``--max-seconds`` loses nothing.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipeline.model.local import assets, logprobs  # noqa: E402
from pipeline.model.local.scorer_process import ScorerProcess  # noqa: E402
from pipeline.score import scoring  # noqa: E402

from score_eval import corpus, digest  # noqa: E402

OUT = HERE / "results" / "binoculars_features.jsonl"
SUMS = ("ll_p", "ll_q", "h_p", "h_q", "x_pq", "x_qp")


class Model:
    def __init__(self, path: Path) -> None:
        import httpx

        key = secrets.token_hex(16)
        self.process = ScorerProcess(path, logprobs.WINDOW, key)
        self.http = httpx.Client(base_url=self.process.address, timeout=600, headers={"Authorization": f"Bearer {key}"})
        layer = logprobs.OutputLayer(path)
        self.out = np.vstack([layer.block(lo, lo + 8192) for lo in range(0, layer.vocab, 8192)])  # dense float32

    def tokenize(self, text: str) -> list[int]:
        reply = self.http.post("/tokenize", json={"content": text})
        reply.raise_for_status()
        return [int(t) for t in reply.json()["tokens"]]

    def log_probs(self, ids: list[int]) -> np.ndarray:
        reply = self.http.post("/embedding", json={"content": ids})
        reply.raise_for_status()
        hidden = np.asarray(reply.json()[0]["embedding"], dtype=np.float32)[:-1]
        z = hidden @ self.out.T
        z -= z.max(axis=1, keepdims=True)
        z -= np.log(np.exp(z).sum(axis=1, keepdims=True))
        return z  # log-probabilities of the next token at every position but the last


def sums(small: Model, large: Model, texts: list[str], budget: int) -> dict[str, float]:
    out = dict.fromkeys(SUMS, 0.0)
    n = 0
    for text in texts:
        if n >= budget:
            break
        ids = small.tokenize(text)[: min(logprobs.WINDOW, budget - n + 1)]
        if len(ids) < 2:
            continue
        lp, lq = small.log_probs(ids), large.log_probs(ids)
        target = np.asarray(ids[1:])
        rows = np.arange(len(target))
        p, q = np.exp(lp), np.exp(lq)
        out["ll_p"] += float(lp[rows, target].sum())
        out["ll_q"] += float(lq[rows, target].sum())
        out["h_p"] += float(-(p * lp).sum())
        out["h_q"] += float(-(q * lq).sum())
        out["x_pq"] += float(-(p * lq).sum())
        out["x_qp"] += float(-(q * lp).sum())
        n += len(target)
    return {"n": n, **out}


def features(s: dict[str, float]) -> dict[str, float]:
    n = max(s["n"], 1)
    return {"bino_pq": (-s["ll_q"] / n) / max(s["x_pq"] / n, 1e-9),
            "bino_qp": (-s["ll_p"] / n) / max(s["x_qp"] / n, 1e-9)}


def order(rows: list[dict]) -> list[dict]:
    """The passages in the order a run cut short still measures something: per language, round-robin over the test
    split's human sources, each machine family and the calibration split's human sources, so that every prefix has
    people and every family in proportion."""
    from score_eval import split_of

    out: list[dict] = []
    for lang in ("en", "zh"):
        mine = [r for r in rows if r["lang"] == lang]
        split = split_of(mine)
        queues: dict[str, list[dict]] = {}
        for r in mine:
            if r["label"] == "human":
                key = f"human-{split[r['id']]}"
            else:
                key = r.get("family") or r["generator"]
            queues.setdefault(key, []).append(r)
        for key in [k for k in queues if k.startswith("human")]:  # sources interleaved within each human queue
            by_source: dict[str, list[dict]] = {}
            for r in queues[key]:
                by_source.setdefault(r["source"], []).append(r)
            queues[key] = [v[k] for k in range(max(map(len, by_source.values())))
                           for _, v in sorted(by_source.items()) if k < len(v)]
        # Zero-shot first: the test split's people against each family; the calibration split's people after them.
        lanes = [queues[k] for k in sorted(queues) if k != "human-cal"]
        rest = queues.get("human-cal", [])
        out += [lane[k] for k in range(max(map(len, lanes))) for lane in lanes if k < len(lane)] + rest
    # the two languages alternate too
    en = [r for r in out if r["lang"] == "en"]
    zh = [r for r in out if r["lang"] == "zh"]
    return [r for pair in zip(en, zh, strict=False) for r in pair] + en[len(zh):] + zh[len(en):]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--max-seconds", type=float, default=0)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--data-dir", default=str(HERE.parent / "var"))
    args = ap.parse_args()
    done = set()
    if OUT.exists():
        done = {(r["id"], r["sha"], r["tokens"]) for r in map(json.loads, OUT.read_text().splitlines())}
    rows = []
    for lang in ("en", "zh"):
        rows += corpus(lang)
    todo = [r for r in order(rows) if (r["id"], digest(r["text"]), args.tokens) not in done]
    if args.limit:
        todo = todo[:args.limit]
    data = Path(args.data_dir)
    small = Model(assets.model_path(data, assets.SCORER))
    large = Model(assets.model_path(data, assets.EMBEDDED))
    probe = todo[0]["text"] if todo else "a"
    if small.tokenize(probe) != large.tokenize(probe):
        raise SystemExit("the two models tokenize differently: Binoculars needs one tokenizer")
    started = time.monotonic()
    with OUT.open("a") as fh:
        for i, row in enumerate(todo, 1):
            s = sums(small, large, scoring.paragraphs_of(row["text"]), args.tokens)
            fh.write(json.dumps({"id": row["id"], "sha": digest(row["text"]), "tokens": args.tokens, **s,
                                 **features(s)}) + "\n")
            fh.flush()
            elapsed = time.monotonic() - started
            if i % 20 == 0:
                print(f"{i}/{len(todo)} {elapsed:.0f}s", file=sys.stderr)
            if args.max_seconds and elapsed > args.max_seconds:
                print(f"stopped after {i} passages ({elapsed:.0f} s)", file=sys.stderr)
                break
    for m in (small, large):
        m.process.close()


if __name__ == "__main__":
    main()
