"""Up-front checks of local state: everything a run will need from this host, before anything is written.

``config.load`` already checks values (types, ranges, time zones). This adds
what only the host can answer: can the ledger be opened (the file is SQLite,
its directory writable), can the lock, site and report directories be
written, is the backlog there and readable text, does each channel's schedule parse,
does litellm know the model (``pipeline.model.modelcheck``, from its data files).
Each failure is a ``ConfigError`` (exit 2) naming the file or key; nothing
here imports litellm or migrates the ledger, so it takes milliseconds.

The ledger file is only ever opened through SQLite: closing any other
descriptor on it would drop every POSIX lock this process's SQLite
connections hold (fcntl locks are per process, not per descriptor), and a
long-lived daemon worker would then see another process delete its live WAL.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..config import Config
from ..errors import ConfigError


def _writable_dir(path: Path, what: str) -> None:
    """``path`` is a writable directory, or can be created as one."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{what}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{what}: no permission to write in {probe}")


def _ledger(cfg: Config) -> None:
    url = cfg.ledger_url
    if not url.startswith("sqlite:///") or ":memory:" in url:
        return
    path = Path(url[len("sqlite:///"):])
    _writable_dir(path.parent, f"[ledger] url {cfg.ledger.url}")
    if not path.exists():
        return
    if path.is_dir():
        raise ConfigError(f"[ledger] url: {path} is a directory, not an SQLite file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"[ledger] url: no permission to read {path}")
    try:
        # Read-only, through SQLite (see the module docstring); reading the header is all it does.
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise ConfigError(f"[ledger] url: {path} is not an SQLite database") from None
        # busy, locked: the file is SQLite; the run's own open will wait for it or say why not
    if not os.access(path, os.W_OK):
        raise ConfigError(f"[ledger] url: no permission to write {path}")


def _backlog(cfg: Config) -> None:
    if not cfg.topic.backlog:
        return
    path = cfg.path(cfg.topic.backlog)
    if not path.exists():
        # A named backlog that is not there is a mistake, not an empty list: the run would make a topic up.
        raise ConfigError(f'[topic] backlog: no such file {path} (backlog = "" to use only feeds and brainstorming)')
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"[topic] backlog: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"[topic] backlog: {path} is not UTF-8 text (byte {exc.start})") from None
    rows = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if len(rows) <= (1 if path.suffix.lower() == ".csv" else 0):  # a CSV's first row is its header
        # Not an exhausted backlog (used topics are skipped at run time): one that never held a topic.
        raise ConfigError(f'[topic] backlog: {path} holds no topics (empty, or only comments): add "title | angle" '
                          'lines, or set backlog = "" to brainstorm from [topic] niche and feeds')


def _schedules(cfg: Config) -> None:
    from ..runtime.scheduling import make_trigger

    for name in cfg.channel_names():
        chan = cfg.for_channel(name).channel
        where = f"[[channels]] {name} cron" if cfg.channels else "[daemon] cron"
        try:
            make_trigger(chan.cron, chan.timezone)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def upfront(cfg: Config) -> None:
    """Raise ConfigError (exit 2) for the first thing this host cannot give a run of ``cfg``."""
    _ledger(cfg)
    _writable_dir(cfg.state_dir, "[daemon] state_dir")
    if cfg.publish.target == "local":
        _writable_dir(cfg.path(cfg.publish.local.dir), "[publish.local] dir")
    if cfg.report.markdown_dir:
        _writable_dir(cfg.path(cfg.report.markdown_dir), "[report] markdown_dir")
    _backlog(cfg)
    _schedules(cfg)
    from ..model import modelcheck

    modelcheck.check(cfg.llm.model, cfg.llm.api_base, cfg.llm.model_check)
    _scoring_model(cfg)


def _scoring_model(cfg: Config) -> None:
    """The humanize score runs on this host whatever model writes: its weights must be here (not loaded)."""
    if cfg.humanize.scoring_model:
        path = cfg.path(cfg.humanize.scoring_model)
        if not path.is_file():
            raise ConfigError(f"[humanize] scoring_model: {path} does not exist")
        return
    from ..model.local import assets

    target = assets.models_dir(cfg.state_dir) / assets.SCORER.filename
    if not target.is_file():
        assets.part_files(assets.SCORER)  # ConfigError naming the missing package and the install command
