"""Leave-one-family-out: does the humanize score hold for a writer it was not calibrated on?

    python bench/score_lofo.py [--json]     (after score_corpus.py and score_binoculars.py have cached features)

Per language and feature set, for every writer family F in the machine corpus (qwen: the embedded 1.5B and the
0.5B; smollm; gemma; anthropic: passages written by a model of another family, bench/corpus/score/written/):

* calibrate exactly as bench/calibrate_score.py does (class-balanced L2 logistic regression on standardised
  features, pass mark = 10th percentile of the calibration humans' scores) on the calibration split's human
  passages and the calibration split of every family **but F**;
* test on the test split's human passages (other sources than calibration's: split by source) against **every**
  passage of F (it was never seen) and against the test split of the other families.

Reported per family and per register: AUC, TPR at 5 % FPR, and the machine pass rate at the pass mark; the human
pass rate at the pass mark on the test split. "in-family" rows calibrate on every family's calibration split and
test on every family's test split. "shipped" scores every passage with the shipped calibration file, unchanged.
Features come from the caches only (bench/results/score_features.jsonl, binoculars_features.jsonl); a feature set
is evaluated on the passages that have all its features, and says how many.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from calibrate_score import HUMAN_PASS, fit  # noqa: E402
from gen_machine import family_of  # noqa: E402

from pipeline.score import lexical, scoring  # noqa: E402

from score_eval import auc, cached_features, corpus, digest, pass_rate, split_of, tpr_at_fpr  # noqa: E402

BINO_CACHE = HERE / "results" / "binoculars_features.jsonl"
BINO_TOKENS = 64  # the first 64 predicted tokens of each passage (score_binoculars.py --tokens 64): the budget two shared cores allowed
SETS = {
    "fdg7": list(scoring.FEATURES),
    "fdg7+lex": [*scoring.FEATURES, "overused"],
    "bino": ["bino_pq"],
    "bino2": ["bino_pq", "bino_qp"],
    "fdg7+bino": [*scoring.FEATURES, "bino_pq", "bino_qp"],
    "all": [*scoring.FEATURES, "overused", "bino_pq", "bino_qp"],
}


def binoculars() -> dict[tuple[str, str], dict]:
    if not BINO_CACHE.exists():
        return {}
    return {(r["id"], r["sha"]): r for r in map(json.loads, BINO_CACHE.read_text().splitlines())
            if r["tokens"] == BINO_TOKENS}


def features_of(lang: str) -> tuple[list[dict], dict[str, dict[str, float]]]:
    cache, bino = cached_features(), binoculars()
    rows, feats = [], {}
    for r in corpus(lang):
        key = (r["id"], digest(r["text"]))
        f: dict[str, float] = {}
        if key in cache:
            f.update({k: cache[key][k] for k in scoring.FEATURES})
        if key in bino:
            f.update({k: bino[key][k] for k in ("bino_pq", "bino_qp")})
        f["overused"] = lexical.overused(r["text"], lang)
        if r["label"] == "machine":
            r = {**r, "family": r.get("family") or family_of(r["generator"])}
        rows.append(r)
        feats[r["id"]] = f
    return rows, feats


class Model:
    def __init__(self, names: list[str], rows: list[dict], feats: dict[str, dict[str, float]]) -> None:
        x = np.array([[feats[r["id"]][n] for n in names] for r in rows])
        y = np.array([1.0 if r["label"] == "human" else 0.0 for r in rows])
        self.names = names
        self.mean, self.scale = x.mean(axis=0), x.std(axis=0)
        self.scale[self.scale == 0] = 1.0
        self.coef, self.intercept = fit((x - self.mean) / self.scale, y)
        human = sorted(self.score(feats[r["id"]]) for r in rows if r["label"] == "human")
        self.threshold = math.floor(human[math.floor((1 - HUMAN_PASS) * len(human))] * 10) / 10

    def score(self, f: dict[str, float]) -> float:
        z = self.intercept + float(((np.array([f[n] for n in self.names]) - self.mean) / self.scale) @ self.coef)
        return 100 / (1 + math.exp(-max(-60.0, min(60.0, z))))


def measure(name: str, human: list[float], machine: list[float], threshold: float) -> dict:
    return {"set": name, "human": len(human), "machine": len(machine), "auc": round(auc(human, machine), 3),
            "tpr_at_5fpr": round(tpr_at_fpr(human, machine), 3),
            "human_pass": round(pass_rate(human, threshold), 3), "machine_pass": round(pass_rate(machine, threshold), 3)}


def breakdown(label: str, humans: list[float], machine: list[dict], scores: dict[str, float], threshold: float) -> list[dict]:
    lines = [measure(label, humans, [scores[r["id"]] for r in machine], threshold)]
    for reg in sorted({r.get("register", "") for r in machine}):
        part = [r for r in machine if r.get("register", "") == reg]
        lines.append(measure(f"  register {reg}", humans, [scores[r["id"]] for r in part], threshold))
    gens = sorted({(r["generator"], r.get("temperature")) for r in machine})
    if len(gens) > 1:
        for gen, temp in gens:
            part = [r for r in machine if (r["generator"], r.get("temperature")) == (gen, temp)]
            lines.append(measure(f"  {gen} T={temp}", humans, [scores[r["id"]] for r in part], threshold))
    return lines


def family_validity(lines: list[dict], registers: list[str]) -> dict:
    """A family's figures and whether the score holds for it: AUC >= BAR and TPR at 5 % FPR >= TPR_BAR overall and in
    every register measured on at least 5 passages, on at least MIN_PASSAGES passages (pipeline.score.validity)."""
    from pipeline.score.validity import BAR, MIN_PASSAGES, TPR_BAR

    top = lines[0]
    regs = {r["set"].split("register ", 1)[1]: r for r in lines if r["set"].startswith("  register ")}
    failing = [name for name, r in regs.items() if r["machine"] >= 5 and not (r["auc"] >= BAR and r["tpr_at_5fpr"] >= TPR_BAR)]
    ok = top["machine"] >= MIN_PASSAGES and top["auc"] >= BAR and top["tpr_at_5fpr"] >= TPR_BAR and not failing
    return {"validated": ok, "auc": top["auc"], "tpr_at_5fpr": top["tpr_at_5fpr"], "machine_pass": top["machine_pass"],
            "passages": top["machine"], "fails_in": failing,
            "registers": {name: {k: r[k] for k in ("machine", "auc", "tpr_at_5fpr", "machine_pass")} for name, r in regs.items()}}


def evaluate(lang: str) -> dict:
    rows, feats = features_of(lang)
    split = split_of(rows)
    families = sorted({r["family"] for r in rows if r["label"] == "machine"})
    out: dict = {"families": families, "sets": {}}
    cal = scoring.calibrations().languages[lang]
    shipped_rows = [r for r in rows if all(n in feats[r["id"]] for n in scoring.FEATURES)]
    shipped = {r["id"]: 100 * cal.probability(feats[r["id"]]) for r in shipped_rows}
    humans = [shipped[r["id"]] for r in shipped_rows if r["label"] == "human" and split[r["id"]] == "test"]
    lines, validity = [], {}
    for fam in families:
        # The shipped calibration saw the qwen passages of topic group A only: those are not a test of it.
        machine = [r for r in shipped_rows if r["label"] == "machine" and r["family"] == fam
                   and not (fam == "qwen" and split[r["id"]] == "cal" and r.get("temperature", 0.8) == 0.8
                            and r.get("register") != "grounded")]
        part = breakdown(f"{fam} (held-out passages)", humans, machine, shipped, cal.threshold)
        lines += part
        validity[fam] = family_validity(part, [r.get("register", "") for r in machine])
    cal_h = [feats[r["id"]] for r in shipped_rows if r["label"] == "human" and split[r["id"]] == "cal"]
    reference = {}
    for name in ("log_ppl", "sentence_cv", "overused"):
        values = sorted(f[name] for f in cal_h)
        reference[name] = {"p25": round(values[len(values) // 4], 4), "median": round(values[len(values) // 2], 4),
                           "p75": round(values[3 * len(values) // 4], 4)}
    out["shipped"] = {"threshold": cal.threshold, "rows": lines, "validity": validity,
                      "human_pass": round(pass_rate(humans, cal.threshold), 3), "humans": len(humans),
                      "human_reference": reference}
    # Binoculars zero-shot: the raw ratio (higher: more human), no calibration at all, so no family is "seen".
    zero: list[dict] = []
    for feat in ("bino_pq", "bino_qp"):
        have = [r for r in rows if feat in feats[r["id"]]]
        hs = [feats[r["id"]][feat] for r in have if r["label"] == "human" and split[r["id"]] == "test"]
        if not hs:
            continue
        for fam in families:
            machine = [r for r in have if r["label"] == "machine" and r["family"] == fam]
            if machine:
                zero += breakdown(f"{feat} zero-shot: {fam}", hs, machine, {r["id"]: feats[r["id"]][feat] for r in machine},
                                  float("nan"))
    out["zero_shot"] = zero
    for set_name, names in SETS.items():
        have = [r for r in rows if all(n in feats[r["id"]] for n in names)]
        test_h = [r for r in have if r["label"] == "human" and split[r["id"]] == "test"]
        cal_h = [r for r in have if r["label"] == "human" and split[r["id"]] == "cal"]
        result: dict = {"features": names, "passages": len(have), "lofo": [], "in_family": []}
        if not test_h or not cal_h:
            out["sets"][set_name] = result
            continue
        for fam in families:
            train = cal_h + [r for r in have if r["label"] == "machine" and r["family"] != fam and split[r["id"]] == "cal"]
            if not any(r["label"] == "machine" for r in train):
                continue
            model = Model(names, train, feats)
            scores = {r["id"]: model.score(feats[r["id"]]) for r in have}
            hs = [scores[r["id"]] for r in test_h]
            held = [r for r in have if r["label"] == "machine" and r["family"] == fam]
            if not held:
                continue
            entry = {"left_out": fam, "threshold": model.threshold,
                     "rows": breakdown(f"{fam} left out", hs, held, scores, model.threshold)}
            for other in families:
                if other == fam:
                    continue
                seen = [r for r in have if r["label"] == "machine" and r["family"] == other and split[r["id"]] == "test"]
                if seen:
                    entry["rows"].append(measure(f"  {other} (calibrated on, test split)", hs,
                                                 [scores[r["id"]] for r in seen], model.threshold))
            result["lofo"].append(entry)
        train = cal_h + [r for r in have if r["label"] == "machine" and split[r["id"]] == "cal"]
        model = Model(names, train, feats)
        scores = {r["id"]: model.score(feats[r["id"]]) for r in have}
        hs = [scores[r["id"]] for r in test_h]
        result["threshold"] = model.threshold
        result["coef"] = dict(zip(names, (round(float(c), 3) for c in model.coef), strict=True))
        for fam in families:
            test_m = [r for r in have if r["label"] == "machine" and r["family"] == fam and split[r["id"]] == "test"]
            if test_m:
                result["in_family"] += breakdown(f"{fam} (test split)", hs, test_m, scores, model.threshold)
        out["sets"][set_name] = result
    return out


def write_validity(report: dict) -> None:
    """pipeline/score/calibration/validity.json: the shipped calibration's measured validity, keyed by its digest."""
    target = HERE.parent / "pipeline" / "score" / "calibration" / "validity.json"
    data = json.loads(target.read_text()) if target.exists() else {"calibrations": {}}
    data["rule"] = ("a writer family is validated in a language when, on 10 or more of its passages the calibration never "
                    "saw and the test split's human passages (split by source), AUC >= 0.90 and TPR at 5 % FPR >= 0.50, "
                    "overall and in every register measured on 5 or more passages (bench/score_lofo.py)")
    digest = scoring.calibrations().digest
    data["calibrations"][digest] = {
        "scorer": report["scorer"],
        "languages": {lang: {"threshold": d["shipped"]["threshold"], "human_pass": d["shipped"]["human_pass"],
                             "humans": d["shipped"]["humans"], "families": d["shipped"]["validity"],
                             "human_reference": d["shipped"]["human_reference"]}
                      for lang, d in report["languages"].items()}}
    target.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print("wrote", target)


def summary(report: dict) -> list[str]:
    """One line per language, family and register: AUC / TPR at 5 % FPR of the shipped calibration, of fdg7 and
    fdg7+lex calibrated without that family, and of Binoculars zero-shot; the human pass rates at each pass mark."""
    out = ["Summary: AUC / TPR@5%FPR against test-split humans (n: that family's passages)",
           f"  {'lang family / register':34} {'n':>4} {'shipped':>12} {'LOFO fdg7':>12} {'LOFO +lex':>12} "
           f"{'bino zero-shot':>16}"]
    for lang, data in report["languages"].items():
        def pick(rows: list[dict], name: str) -> str:
            r = next((r for r in rows if r["set"].strip() == name.strip()), None)
            return f"{r['auc']:.2f} / {r['tpr_at_5fpr']:.2f}".rjust(12) if r and r["machine"] else "—".rjust(12)

        lofo = {s: {e["left_out"]: e["rows"] for e in data["sets"][s]["lofo"]} for s in ("fdg7", "fdg7+lex")}
        for fam in data["families"]:
            shipped = block(data["shipped"]["rows"], f"{fam} (held-out passages)")
            zero = block(data["zero_shot"], f"bino_pq zero-shot: {fam}")
            regs = ["", *[r["set"].strip().split(" ", 1)[1] for r in shipped[1:] if r["set"].startswith("  register ")]]
            for reg in regs:
                label = f"{lang} {fam}" + (f" / {reg}" if reg else "")
                name = f"register {reg}" if reg else None
                row = shipped[0] if not reg else next(r for r in shipped if r["set"].strip() == name)
                out.append(f"  {label:34} {row['machine']:>4} {pick(shipped, name or shipped[0]['set'])} "
                           f"{pick(block(lofo['fdg7'].get(fam, []), f'{fam} left out'), name or f'{fam} left out')} "
                           f"{pick(block(lofo['fdg7+lex'].get(fam, []), f'{fam} left out'), name or f'{fam} left out')} "
                           f"{pick(zero, name or f'bino_pq zero-shot: {fam}'):>16}")
        sh = data["shipped"]
        passes = {s: data["sets"][s]["lofo"][0]["rows"][0]["human_pass"] if data["sets"][s]["lofo"] else None
                  for s in ("fdg7", "fdg7+lex")}
        out.append(f"  {lang} humans at the pass mark (test split, {sh['humans']}): shipped {sh['human_pass']:.1%} at "
                   f"{sh['threshold']}; LOFO fdg7 {passes['fdg7']}, +lex {passes['fdg7+lex']} (first left-out family)")
    return out


def block(rows: list[dict], head: str) -> list[dict]:
    """The row named ``head`` and the indented rows under it."""
    start = next((i for i, r in enumerate(rows) if r["set"] == head), None)
    if start is None:
        return []
    out = [rows[start]]
    for r in rows[start + 1:]:
        if not r["set"].startswith("  "):
            break
        out.append(r)
    return out


def table(lines: list[dict]) -> list[str]:
    out = [f"    {'set':46} {'hum':>4} {'mach':>4} {'AUC':>6} {'TPR@5%':>7} {'h pass':>7} {'m pass':>7}"]
    for r in lines:
        out.append(f"    {r['set'][:46]:46} {r['human']:>4} {r['machine']:>4} {r['auc']:>6} {r['tpr_at_5fpr']:>7} "
                   f"{r['human_pass']:>7} {r['machine_pass']:>7}")
    return out


def main() -> None:
    report = {"scorer": scoring.ModelScorer().version, "languages": {lang: evaluate(lang) for lang in ("en", "zh")}}
    (HERE / "results" / "score_lofo.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    if "--write-validity" in sys.argv:
        write_validity(report)
    if "--json" in sys.argv:
        print(json.dumps(report, indent=1, ensure_ascii=False))
        return
    lines = [f"shipped scorer: {report['scorer']}", "", *summary(report), "", "Details:"]
    for lang, data in report["languages"].items():
        lines.append(f"\n=== {lang}: families {', '.join(data['families'])}")
        lines.append(f"\n{lang} shipped calibration, unchanged (pass mark {data['shipped']['threshold']}), "
                     f"test-split humans against every passage of each family:")
        lines += table(data["shipped"]["rows"])
        if data["zero_shot"]:
            lines.append(f"\n{lang} Binoculars zero-shot (first {BINO_TOKENS} tokens; no calibration, no pass mark):")
            lines += table(data["zero_shot"])
        for set_name, res in data["sets"].items():
            lines.append(f"\n{lang} [{set_name}] features {', '.join(res['features'])} ({res['passages']} passages)")
            for entry in res["lofo"]:
                lines.append(f"  leave out {entry['left_out']}: pass mark {entry['threshold']}")
                lines += table(entry["rows"])
            if res["in_family"]:
                lines.append(f"  in-family (every family calibrated on): pass mark {res['threshold']}, coef {res['coef']}")
                lines += table(res["in_family"])
    text = "\n".join(lines) + "\n"
    (HERE / "results" / "score_lofo.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
