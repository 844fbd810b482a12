"""Torture: kill -9 and SIGTERM whole runs *inside the window where they work*, then audit ledger against platform.

    .venv/bin/python bench/torture.py [--targets local,webhook,wordpress] [--kills 100] [--terms 20] [--seed 14]

Every run is a complete ``run_once`` (model turns through real litellm against the scripted
model on 127.0.0.1, the six capabilities, the platform) in a process forked from a server that
has already imported everything, so a signal can never land in interpreter start-up: the timer
starts when the run has written its ledger row (the runner's "start" event) and the signal is
sent at a uniform random point of a clean run's duration, only if the run is still going.
Signals that land after the run's row was finished (the process on its way out) are not counted.

After the kills and SIGTERMs one more run (not killed) takes the channel: it marks the dead
runs crashed, settles what they left pending, and runs. Then the invariants:

* ``integrity``      PRAGMA integrity_check is "ok"
* ``duplicates``     posts on the platform sharing an idempotency key: 0
* ``lost``           posts on the platform that no verified publication in the ledger accounts for: 0
* ``phantoms``       verified publications whose post the platform does not hold: 0
* ``running``        runs still ``running`` after the next run: 0
* ``unregistered``   verified publications without a registration after reconciliation: 0
                     (the reconciliation of interrupted/killed runs' posts is issue 9's; until it is
                     merged a kill between publish and register leaves one: reported, not hidden)

Targets: ``local`` (the static site), ``webhook`` (the contract receiver of tests/platforms.py),
``wordpress`` (the fake WordPress of tests/platforms.py), ``wordpress-real`` (a real WordPress from
tests/realwp.py, issue 9's tier: Debian's package, php -S, MariaDB). Another target plugs in with
``register_target(name, factory)``; see ``Target``.

Writes bench/results/torture.json. ``tests/test_torture.py`` runs the short form.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
sys.path[:0] = [str(REPO), str(TESTS)]


# --- targets --------------------------------------------------------------------------------------------

class Target:
    """A publishing target under torture.

    ``publish_target``: the ``[publish] target`` name; ``platform``: the started server (None for
    the local site); ``env()``: variables a run needs (secrets); ``posts(directory)``: (idempotency
    key, url) of every post the platform holds; ``stop()``. A real WordPress fixture subclasses this
    and overrides ``config_extra`` to point ``[publish.wordpress]`` at it.
    """

    publish_target = "local"

    def __init__(self) -> None:
        self.platform = None

    def start(self) -> Target:
        return self

    def env(self) -> dict[str, str]:
        import platforms

        return platforms.secret_env(self.publish_target, self.platform)

    def write_config(self, directory: Path, llm_section: str) -> Path:
        import platforms

        return platforms.write_config(directory, self.publish_target, self.platform, extra=llm_section + self.config_extra())

    def config_extra(self) -> str:
        return ""

    def posts(self, directory: Path) -> list[tuple[str | None, str]]:
        # Each page's key is in the site's own record of it (.pipeline/posts/<slug>.json), which is what
        # LocalSitePublisher.find reads after a crash; a page without a readable record has no key.
        out = []
        for page in sorted((directory / "site" / "posts").glob("*.html")):
            record = directory / "site" / ".pipeline" / "posts" / f"{page.stem}.json"
            try:
                key = json.loads(record.read_text(encoding="utf-8")).get("key")
            except (OSError, ValueError):
                key = None
            out.append((key, f"http://127.0.0.1:8765/posts/{page.name}"))
        return out

    def stop(self) -> None:
        if self.platform is not None:
            self.platform.stop()


class _Served(Target):
    def start(self) -> Target:
        import platforms

        self.platform = platforms.make_platform(self.publish_target)
        return self

    def posts(self, directory: Path) -> list[tuple[str | None, str]]:
        return [(p.key, p.url) for p in self.platform.posts]


class WebhookTarget(_Served):
    publish_target = "webhook"


class WordPressTarget(_Served):
    publish_target = "wordpress"


class RealWordPressTarget(Target):
    """A real WordPress (tests/realwp.py: Debian's package, ``php -S``, MariaDB on 127.0.0.1), user ``admin``."""

    publish_target = "wordpress"

    def start(self) -> Target:
        import tempfile

        import realwp

        missing = realwp.missing()
        if missing:
            raise SystemExit(f"wordpress-real: {missing}")
        self._tmp = tempfile.TemporaryDirectory()
        self.site = realwp.WordPressSite(Path(self._tmp.name)).start()
        self.site.permalinks("postname")
        self.site.reset()  # no "Hello world!": every post on the site is then the pipeline's
        return self

    def env(self) -> dict[str, str]:
        import platforms

        return {platforms.SECRET_ENV["wordpress"]: self.site.passwords["admin"]}

    def write_config(self, directory: Path, llm_section: str) -> Path:
        import platforms

        path = platforms.write_config(directory, "wordpress", None, timeout_s=10, extra=llm_section)
        text = path.read_text(encoding="utf-8").replace('[publish.wordpress]\nurl = ""\nusername = "editor"',
                                                       f'[publish.wordpress]\nurl = "{self.site.url}"\nusername = "admin"')
        path.write_text(text, encoding="utf-8")
        return path

    def posts(self, directory: Path) -> list[tuple[str | None, str]]:
        from pipeline.publishing.publishers.wordpress import read_markers

        return [(read_markers(p["content"]).get("idempotency-key"), p["link"])
                for p in self.site.posts() if p["status"] != "trash"]

    def stop(self) -> None:
        self.site.stop()
        self._tmp.cleanup()


TARGETS: dict[str, Callable[[], Target]] = {"local": Target, "webhook": WebhookTarget, "wordpress": WordPressTarget,
                                            "wordpress-real": RealWordPressTarget}


def register_target(name: str, factory: Callable[[], Target]) -> None:
    """Add (or replace) a target, e.g. ``register_target("wordpress", RealWordPress)`` from a fixture."""
    TARGETS[name] = factory


# --- the fork server (a separate, single-threaded process) ----------------------------------------------


def serve() -> None:
    """Import everything once, then fork one child per requested run."""
    import threading

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from pipeline import config as config_mod
    from pipeline.model.llm import _load_litellm
    from pipeline.run.events import RunObserver
    from pipeline.run.runner import run_once
    from pipeline.runtime import shutdown
    from pipeline.runtime.http import tls as _tls
    from pipeline.tools.catalog import toolbox

    _load_litellm()
    toolbox()
    _tls()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        assert threading.active_count() == 1, "fork only from a single-threaded process"
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the run
            os.close(read_fd)
            code = 1
            try:
                os.environ.update(req.get("env") or {})
                random.seed()
                shutdown.reset()
                shutdown.install()

                class Started(RunObserver):
                    def started(self, run_id: str, model: str, channel: str) -> None:
                        os.write(write_fd, b"s" + run_id.encode() + b"\n")

                outcome = run_once(config_mod.load(req["config"]), observer=Started())
                code = outcome.exit_code
            except BaseException as exc:  # the parent reads the exit code; the ledger holds the rest
                code = getattr(exc, "exit_code", 1)
                sys.stderr.write(f"child: {type(exc).__name__}: {exc}\n")
            os._exit(int(code))
        os.close(write_fd)
        # Blocks until the run's row exists (or the child is gone).
        line = b""
        while not line.endswith(b"\n"):
            chunk = os.read(read_fd, 64)
            if not chunk:
                break
            line += chunk
        started, run_id = line.startswith(b"s"), line[1:].strip().decode() or None
        t0 = time.monotonic()
        signalled, sent_at, status = False, None, None
        kill_after = req.get("kill_after")
        if started and kill_after is not None:
            deadline = t0 + kill_after
            while time.monotonic() < deadline:
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:  # the run ended before the timer: not a kill in the window
                    status = st
                    break
                time.sleep(0.005)
            else:
                os.kill(pid, getattr(signal, req.get("signal", "SIGKILL")))
                signalled, sent_at = True, time.monotonic()
        if status is None:
            _, status = os.waitpid(pid, 0)
        ended = time.monotonic()
        os.close(read_fd)
        print(json.dumps({"exit": os.waitstatus_to_exitcode(status), "started": started, "run_id": run_id,
                          "signalled": signalled,
                          "run_s": round(ended - t0, 3),
                          "after_signal_s": round(ended - sent_at, 3) if sent_at else None}), flush=True)


class ForkServer:
    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PIPELINE_FAULT"}
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"], cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}

    def run(self, config: Path, env: dict[str, str], kill_after: float | None = None, sig: str = "SIGKILL") -> dict:
        self.proc.stdin.write(json.dumps({"config": str(config), "env": env, "kill_after": kill_after, "signal": sig}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


# --- the torture ------------------------------------------------------------------------------------------


def run_status(directory: Path, run_id: str | None) -> str | None:
    con = sqlite3.connect(directory / "ledger.db")
    try:
        row = con.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else None
    finally:
        con.close()


def audit(directory: Path, target: Target) -> dict:
    con = sqlite3.connect(directory / "ledger.db")
    try:
        integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
        statuses = dict(con.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
        pubs = con.execute("SELECT id, idempotency_key, url, status FROM publications").fetchall()
        registered = {r[0] for r in con.execute("SELECT publication_id FROM registrations")}
    finally:
        con.close()
    posts = target.posts(directory)
    verified = {(k, u) for _, k, u, s in pubs if s == "verified"}
    keys = [k for k, _ in posts]
    return {
        "integrity": integrity,
        "posts": len(posts),
        "duplicates": len(keys) - len(set(keys)),
        "lost": sum(1 for p in posts if p not in verified),
        "phantoms": sum(1 for v in verified if v not in set(posts)),
        "running": statuses.get("running", 0),
        "unregistered": sum(1 for i, _, _, s in pubs if s == "verified" and i not in registered),
        "publications": {s: sum(1 for p in pubs if p[3] == s) for s in sorted({p[3] for p in pubs})},
        "runs": statuses,
    }


def torture(target_name: str, kills: int, terms: int, workdir: Path, seed: int = 14,
            server: ForkServer | None = None, log=print) -> dict:
    """``kills`` SIGKILLs and ``terms`` SIGTERMs inside runs' work windows on one target; the audit after."""
    from fakellm import FakeLLM
    from support import DRAFT_FOR_SCRIPTED_MODEL

    rng = random.Random(seed)
    fake = FakeLLM().start()
    target = TARGETS[target_name]().start()
    own_server = server is None
    server = server or ForkServer()
    try:
        # Titles far apart (the scripted model's brainstormed ones are near-repeats of each other).
        backlog = workdir / "backlog.txt"
        notes = REPO / "tests" / "fixtures" / "sources" / "notes.md"  # what the fake model's article is written from
        backlog.write_text("".join(f"Notes on {rng.getrandbits(64):016x} and {rng.getrandbits(64):016x} | | {notes}\n"
                                   for _ in range(kills + terms + 50)), encoding="utf-8")
        llm = (f'\n[llm]\nmodel = "openai/honest"\napi_base = "{fake.api_base}"\napi_key_env = ""\n'
               f'max_retries = 2\nbackoff_s = 0.01\ntimeout_s = 10\n\n[topic]\nbacklog = "{backlog}"\n'
               + DRAFT_FOR_SCRIPTED_MODEL)
        config = target.write_config(workdir, llm)
        env = target.env()
        clean = [server.run(config, env) for _ in range(2)]  # how long a run's work takes here
        assert all(c["exit"] == 0 for c in clean), clean
        window = statistics.median(c["run_s"] for c in clean)
        counts = {"SIGKILL": 0, "SIGTERM": 0, "missed": 0, "late": 0, "exits_after_term": [], "term_s": []}
        # A signal counts as inside the work window only if the run's row still said "running" when
        # it landed: a kill after the row says "done" (the process on its way out) tests nothing.
        in_window = {"SIGKILL": "running", "SIGTERM": "interrupted"}
        for sig, wanted in (("SIGKILL", kills), ("SIGTERM", terms)):
            tries = 0
            while counts[sig] < wanted and tries < wanted * 3:
                tries += 1
                r = server.run(config, env, kill_after=rng.uniform(0.02, 0.98) * window, sig=sig)
                if not r["signalled"]:
                    counts["missed"] += 1
                    continue
                if run_status(workdir, r["run_id"]) != in_window[sig]:
                    counts["late"] += 1
                    continue
                counts[sig] += 1
                if sig == "SIGTERM":
                    counts["exits_after_term"].append(r["exit"])
                    counts["term_s"].append(r["after_signal_s"])
        final = server.run(config, env)  # the next run: marks the dead crashed, settles, publishes
        figures = audit(workdir, target)
        result = {"target": target_name, "window_s": round(window, 3), "kills_in_window": counts["SIGKILL"],
                  "terms_in_window": counts["SIGTERM"], "signals_after_the_run_ended": counts["missed"] + counts["late"],
                  "term_exit_codes": sorted(set(counts["exits_after_term"])),
                  "term_max_s": max(counts["term_s"], default=None), "final_run_exit": final["exit"], **figures}
        log(json.dumps(result))
        return result
    finally:
        if own_server:
            server.close()
        target.stop()
        fake.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--targets", default="local,webhook,wordpress")
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--terms", type=int, default=20)
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    if args.serve:
        serve()
        return 0
    results = []
    server = ForkServer()
    try:
        for name in args.targets.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                results.append(torture(name, args.kills, args.terms, Path(tmp), args.seed, server))
    finally:
        server.close()
    out = REPO / "bench" / "results" / "torture.json"
    out.write_text(json.dumps({"kills": args.kills, "terms": args.terms, "results": results,
                               "load_average_1m": round(os.getloadavg()[0], 2)}, indent=2) + "\n", encoding="utf-8")
    invariants = ("duplicates", "lost", "phantoms", "running", "unregistered")
    bad = [(r["target"], k, r[k]) for r in results for k in invariants if r[k]]
    bad += [(r["target"], "integrity", r["integrity"]) for r in results if r["integrity"] != "ok"]
    print("PASS" if not bad else f"FAIL {bad}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
