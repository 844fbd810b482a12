"""The command line: ``pipeline run``, ``pipeline ledger …``, ``pipeline claims check``, ``pipeline stats``.

Start-up stays fast: nothing here imports litellm; ``pipeline.model.llm`` does, on
the first model call. The read commands (``ledger``, ``claims check``,
``stats``) read through ``pipeline.ledger.reader`` (sqlite3, no SQLAlchemy) and
import Rich only when they print a table. Every command turns a
PipelineError into one line on stderr and its documented exit code.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperArgument, TyperGroup

if TYPE_CHECKING:
    from rich.console import Console

    from .config import Config
    from .ledger.reader import LedgerReader
    from .ledger.writer import Ledger
    from .run.runner import RunOutcome

from .errors import ConfigError, PipelineError, clip, exit_codes
from .run.events import Nudge, RunObserver
from .states import GuardKind, ReviewStatus
from .text.redact import scrub, shown
from .text.untrusted import for_rich
from .text.untrusted import visible as for_display


def safe(text: object) -> str:
    """Untrusted text for a Rich markup string: secrets removed, markup escaped, controls visible."""
    return for_rich(scrub(text))


class _LazyModule:
    """``pipeline.config`` imported on first use: pydantic costs ~0.2 s that ``--help`` need not pay."""

    def __getattr__(self, name: str) -> Any:
        import importlib

        return getattr(importlib.import_module("pipeline.config"), name)


config_mod: Any = _LazyModule()

class _Group(TyperGroup):
    """Command lists print each command's first sentence whole: click's default cuts it at ~45 columns ("...").

    A group called without a command (``pipeline``, ``pipeline ledger``) prints its help and exits 0, as asked
    for: click's no_args_is_help exits 2, a usage error, for what is not one.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            sys.stdout.write(ctx.get_help() + "\n")
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _usage_name(self: Any) -> str:
    """Usage lines as man pages and gh write them: ``RUN_ID`` required, ``[RUN_ID]`` optional (Typer: ``{RUN_ID}``)."""
    name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
    return name + ("..." if self.nargs != 1 and not name.endswith("...") else "")


TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]
# An argument's name says what it is (RUN_ID, PATH): no "<str>" after it in the Arguments list.
TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]


# Plain help (no Rich markup): TOML names such as [[channels]] and [publish.local] print as written.
_SETTINGS = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(cls=_Group, no_args_is_help=True, add_completion=False, rich_markup_mode=None, context_settings=_SETTINGS,
                  help="A content pipeline whose agent cannot report work that did not happen.")
ledger_app = typer.Typer(cls=_Group, no_args_is_help=True, rich_markup_mode=None, context_settings=_SETTINGS,
                         help="Read the ledger: what the system really did.")
claims_app = typer.Typer(cls=_Group, no_args_is_help=True, rich_markup_mode=None, context_settings=_SETTINGS,
                         help="Test claim rules against text.")
app.add_typer(ledger_app, name="ledger")
app.add_typer(claims_app, name="claims")
review_app = typer.Typer(cls=_Group, no_args_is_help=True, rich_markup_mode=None, context_settings=_SETTINGS,
                         help="An editor's decisions: list, show, approve or reject held articles.")
app.add_typer(review_app, name="review")


class _LazyConsole:
    """A Rich console made on first use: ``--help`` and ``--json`` never import Rich."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._kwargs)
        return getattr(self._console, name)


# soft_wrap: long lines (URLs, error messages) stay on one line for grep and cron mail.
out: Any = _LazyConsole(soft_wrap=True)
err: Any = _LazyConsole(stderr=True, soft_wrap=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", metavar="PATH",
                                                help="Config file (default: $PIPELINE_CONFIG, else ./config.toml).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log more: every INFO line, libraries' too "
                                                                  "(default: warnings; the daemon: its own INFO).")]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        sys.stdout.write(f"pipeline {version('pipeline')}\n")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False,
          config: Annotated[Path | None, typer.Option("--config", "-c", metavar="PATH",
                                                      help="Config file for the command that follows, as its own "
                                                           "--config (default: $PIPELINE_CONFIG, else ./config.toml).")] = None) -> None:
    """A content pipeline whose agent cannot report work that did not happen.

    Run `pipeline help COMMAND` (or `pipeline COMMAND --help`) for a command's options.
    """
    if config is not None:
        # `pipeline --config X status` = `pipeline status --config X`: the same lookup as $PIPELINE_CONFIG,
        # which a command's own --config still overrides. Child processes (the daemon's workers) inherit it.
        os.environ["PIPELINE_CONFIG"] = str(config)


@app.command("help")
def help_(ctx: typer.Context,
          command: Annotated[list[str] | None, typer.Argument(metavar="COMMAND",
                                                              help="A command, or a group and its command (ledger show).")] = None) -> None:
    """Help for the program, or for one command."""
    group: Any = ctx.parent.command if ctx.parent is not None else ctx.command
    parent: Any = ctx.parent or ctx
    names: list[str] = []
    for word in command or []:
        sub = group.get_command(parent, word) if hasattr(group, "get_command") else None
        if sub is None:
            err.print(f"error: no command {' '.join([*names, word])!r}; `pipeline help` lists them", markup=False)
            raise typer.Exit(2)
        names.append(word)
        parent = sub.context_class(sub, info_name=word, parent=parent)
        group = sub
    sys.stdout.write(group.get_help(parent) + "\n")


@app.command()
def init(path: Annotated[Path | None, typer.Argument(metavar="PATH", show_default=False,
                                                    help="Where to write the config (default: the --config before "
                                                         "the command, else $PIPELINE_CONFIG, else ./config.toml).")] = None) -> None:
    """Write the starter config (the shipped config.toml, every key documented), its topic backlog and the notes
    the backlog's articles are written from.

    Never overwrites: an existing config is an error (exit 2). The backlog (topics.txt beside the
    config) and notes/ are written only when absent.
    """
    from importlib.resources import files

    path = path or config_mod.resolve_path(None)  # `pipeline --config x.toml init` writes x.toml
    starter = files("pipeline") / "starter"
    if path.exists():
        err.print(f"error: {path} exists: not overwritten", markup=False)
        raise typer.Exit(2)
    if not path.parent.is_dir():
        err.print(f"error: {path.parent} is not a directory", markup=False)
        raise typer.Exit(2)
    path.write_text((starter / "config.toml").read_text(encoding="utf-8"), encoding="utf-8")
    backlog = path.parent / "topics.txt"
    wrote = [str(path)]
    if not backlog.exists():
        backlog.write_text((starter / "topics.txt").read_text(encoding="utf-8"), encoding="utf-8")
        wrote.append(str(backlog))
    notes = path.parent / "notes"
    if not notes.exists():  # the sources topics.txt names: an article is written from them, never from nothing
        for folder in [starter / "notes", *(d for d in (starter / "notes").iterdir() if d.is_dir())]:
            target = notes / folder.name if folder.name != "notes" else notes
            target.mkdir(parents=True, exist_ok=True)
            for f in folder.iterdir():
                if f.is_file() and f.name.endswith(".md"):
                    (target / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
        wrote.append(f"{notes}/")
    out.print(f"wrote {', '.join(wrote)}; next: pipeline run --config {path}", markup=False, highlight=False)


@contextmanager
def _clean_errors(code_on_error: int | None = None) -> Iterator[None]:
    """One line on stderr and the documented exit code, instead of a traceback."""
    try:
        yield
    except PipelineError as exc:
        err.print(f"error: {shown(exc)}", markup=False, highlight=False)
        raise typer.Exit(code_on_error if code_on_error is not None else int(exc.exit_code)) from None


def _setup_logging(verbose: bool, *, daemon: bool = False) -> None:
    """Log lines on stderr. On a terminal, Rich; otherwise (cron mail, a log file, journald) one plain line each
    with its time and level, so a log read later says when. The daemon reports its start and each run's
    outcome at INFO without -v; -v adds every library's INFO."""
    from .text.redact import install_log_filter

    handler: logging.Handler
    if err.is_terminal:
        from rich.logging import RichHandler

        handler = RichHandler(console=err, show_path=False, show_time=daemon, markup=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%S%z"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    if daemon:
        logging.getLogger("pipeline").setLevel(logging.INFO)
    install_log_filter([handler])  # log lines carry error bodies and feed titles: no secrets, no control sequences
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose else logging.ERROR)


def _read_only_startup() -> None:
    # pydantic scans every installed distribution's entry points for plugins (~60 ms); the read
    # commands validate one config and use none. `pipeline run` keeps the default.
    import os

    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _project_config(cfg_path: Path | None) -> config_mod.Config:
    """The config a read command looks at; outside a project that is an error, not a set of defaults."""
    _read_only_startup()
    return config_mod.require(cfg_path)


def _ledger(cfg_path: Path | None) -> tuple[Config, Ledger]:
    from .ledger.writer import Ledger

    cfg = _project_config(cfg_path)
    return cfg, Ledger(cfg.ledger_url, cfg.ledger.busy_timeout_ms)


def _reader(cfg_path: Path | None) -> tuple[Config, LedgerReader]:
    """Read-only: never creates or migrates a ledger (a missing one is a LedgerError, exit 2)."""
    from .ledger.reader import LedgerReader

    cfg = _project_config(cfg_path)
    return cfg, LedgerReader(cfg.ledger_url)


def _reader_if_any(cfg_path: Path | None) -> Any:
    """Like ``_reader``, but a SQLite ledger not created yet is None (nothing has run, so nothing to list)."""
    from .ledger.reader import LedgerReader, sqlite_path

    cfg = _project_config(cfg_path)
    path = sqlite_path(cfg.ledger_url)
    return None if path is not None and not path.exists() else LedgerReader(cfg.ledger_url)


def _print_table(columns: list[str], rows: list[list[str]]) -> None:
    """A table whose cells are never cut or wrapped: ids and times must survive copy-paste and ``awk``."""
    from rich.table import Table

    table = Table(show_edge=False, box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col, no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*row)
    # Rich shrinks columns to the console width (80 when piped): render on a console as wide as the table.
    needed = out.measure(table, options=out.options.update(max_width=100_000)).maximum
    if needed <= out.width:
        out.print(table)
        return
    from rich.console import Console

    wide = Console(file=out.file, width=needed, soft_wrap=True, force_terminal=out.is_terminal,
                   color_system=out.color_system, no_color=out.no_color)
    wide.print(table)


# --- run ----------------------------------------------------------------------------

def _stamp() -> str:
    """The time, as a prefix, when stdout is not a terminal (cron mail, a log file): a log read later says when."""
    if sys.stdout.isatty():
        return ""
    from datetime import datetime, timezone

    return f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%S%z} "


@contextmanager
def _one_block() -> Iterator[None]:
    """Off a terminal, a run's output is written in one append at its end: an overlapping cron run's
    "skipped" line, appended to the same log, lands before or after it, never inside it."""
    if sys.stdout.isatty():
        yield
        return
    import io

    buffer = io.StringIO()
    out._kwargs["file"] = buffer
    out._console = None
    try:
        yield
    finally:
        _write_all(sys.stdout.fileno(), buffer.getvalue().encode())  # one write() for a usual block; O_APPEND keeps it whole



class _Progress(RunObserver):
    """Prints each step as it happens. Tool names, titles and model text are untrusted: shown inertly."""

    def __init__(self) -> None:
        self.status: Any = None  # a rich Status while a tool runs
        self.started_at = 0.0

    def started(self, run_id: str, model: str, channel: str) -> None:
        out.print(f"{_stamp()}[bold]run[/] {run_id}  model [cyan]{safe(model)}[/]", highlight=False)

    def tool_started(self, name: str) -> None:
        self.started_at = time.perf_counter()
        self.status = err.status(f"{safe(name)} …")
        self.status.start()

    def tool_finished(self, name: str, ok: bool, payload: dict[str, Any]) -> None:
        if self.status:
            self.status.stop()
        took = f"{time.perf_counter() - self.started_at:6.1f}s"
        if ok:
            keys = ("title", "article_id", "score", "url", "registration_no", "publication_id", "replayed")
            shown = {k: v for k, v in payload.items() if k in keys}
            out.print(f"  [green]✓[/] {safe(name):<9} {took}  {safe(json.dumps(shown, ensure_ascii=False))}", highlight=False)
        else:
            out.print(f"  [red]✗[/] {safe(name):<9} {took}  {safe(payload.get('error'))}", highlight=False)

    def turn(self, text: str, calls: list[str], latency_ms: float) -> None:
        if not calls:
            out.print(f"  [dim]model: {safe(clip(text or '(empty)', 160))}[/]", highlight=False)

    def escalated(self) -> None:
        out.print("  [yellow]![/] guard: next turns constrained by a JSON schema to a tool call or a final answer", highlight=False)

    def nudged(self, nudge: Nudge) -> None:
        what = ", ".join(f"{h.capability} {h.status}" + (f" ({h.value})" if h.value else "")
                         for h in nudge.hallucinations) or f"missing {', '.join(nudge.missing)}"
        # A repeated failure's numbers are failures of one call, not nudges: "nudge 2/3" beside the ledger's "nudges 1"
        # read as a miscount (issue 50).
        count = (f"the same failure {nudge.n} times, the run ends stuck at {nudge.limit}"
                 if nudge.kind == GuardKind.REPEATED_FAILURE else f"nudge {nudge.n}/{nudge.limit}")
        out.print(f"  [yellow]![/] guard: {nudge.kind} — {safe(what)}; {count}", highlight=False)


def _print_summary(ledger: LedgerReader, outcome: RunOutcome, as_json: bool = False) -> None:
    from .views.reports import run_summary

    s = run_summary(ledger, outcome.run_id)
    if as_json:  # one object on stdout, for a cron wrapper: the ledger's summary with the outcome
        sys.stdout.write(json.dumps({**s.as_dict(), "status": str(outcome.status), "exit_code": outcome.exit_code,
                                     "error": shown(outcome.error) if outcome.error else None},
                                    ensure_ascii=False, default=str) + "\n")
        return
    colour = "green" if outcome.exit_code == 0 else "red"
    out.print(f"[bold]status[/]                 [{colour}]{outcome.status}[/] (exit {outcome.exit_code})", highlight=False)
    for key in ("topic", "title", "score", "url", "registration_no", "nudges", "hallucinations_caught"):
        value = "—" if getattr(s, key) in (None, "") else str(getattr(s, key))
        if key == "score" and s.score is not None and s.score_note:
            value += f" ({s.score_note})"  # a writer the scorer was not validated on is said so beside the number
        out.print(f"[bold]{key.replace('_', ' '):<22}[/] {safe(value)}", highlight=False)  # one line each: URLs stay whole
    # Why it ended, and where to look, is the runner's one log line on stderr: not said twice.


@app.command()
def run(config: ConfigOpt = None,
        channel: Annotated[str | None, typer.Option(metavar="NAME", help="Channel to run (needed when [[channels]] declares several).")] = None,
        verbose: VerboseOpt = False,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Everything but the platform call: the would-be post goes "
                                              "to the preview directory (publish.preview_dir).")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print only the run's summary, as one JSON object "
                                              "(status, exit_code, error, topic, title, score, url, "
                                              "registration_no, …); no progress lines.")] = False) -> None:
    """Run the pipeline once now (for cron).

    Exit: {exit_codes}
    """
    from .errors import ChannelLocked
    from .ledger.locks import channel_lock
    from .run import validate
    from .runtime import shutdown
    from .text import redact

    def force() -> None:  # second signal: the run's row says interrupted, not running
        runner = sys.modules.get("pipeline.run.runner")
        if runner is not None:
            runner.force_finish()

    _setup_logging(verbose)
    shutdown.install(on_force=force)
    with _clean_errors():
        cfg = config_mod.require(config).for_channel(channel)
        redact.remember(cfg.secrets())
        validate.upfront(cfg)  # milliseconds, before the lock, the ledger or litellm: exit 2 and one line
        try:
            # The lock is taken before the heavy imports: an overlapping cron run gives up in well under a second.
            with channel_lock(cfg.ledger_url, cfg.state_dir, cfg.channel.name), _one_block():
                from .ledger.reader import LedgerReader
                from .run.runner import run_once

                # pre-flight next (the up-front checks ran above: once per run): no ledger on a config error
                outcome = run_once(cfg, observer=RunObserver() if as_json else _Progress(), lock_held=True,
                                   dry_run=dry_run, validated=True)
                summary_reader = LedgerReader(cfg.ledger_url)  # what the run recorded, read-only
                try:
                    _print_summary(summary_reader, outcome, as_json)
                finally:
                    summary_reader.close()
                global _fast_exit
                _fast_exit = True
        except ChannelLocked as exc:
            sys.stderr.write(f"{_stamp()}{exc}\n")
            raise typer.Exit(int(exc.exit_code)) from None
    raise typer.Exit(outcome.exit_code)


run.__doc__ = (run.__doc__ or "").format(exit_codes=exit_codes())  # the exit codes, as errors.ExitCode declares them


@app.command()
def daemon(config: ConfigOpt = None, verbose: VerboseOpt = False) -> None:
    """Run every channel on its cron schedule until SIGTERM/SIGINT (then exit 0)."""
    from .errors import ChannelLocked
    from .ops import daemon as daemon_mod

    _setup_logging(verbose, daemon=True)
    path = str(config_mod.resolve_path(config))
    with _clean_errors():
        cfg = config_mod.require(config)
        from .run import validate

        for name in cfg.channel_names():  # every channel's backlog, model, directories: now, not at its first tick
            validate.upfront(cfg.for_channel(name))
        try:
            code = daemon_mod.serve(path)
        except ChannelLocked as exc:
            sys.stderr.write(f"{exc}\n")
            raise typer.Exit(int(exc.exit_code)) from None
    # Stopped: exit without the interpreter's teardown, during which signal handlers are already
    # reset, so that a second SIGTERM still ends in exit 130 (and teardown costs seconds).
    global _fast_exit
    _fast_exit = True
    raise typer.Exit(code)


@app.command()
def worker(config: ConfigOpt = None,
           concurrency: Annotated[int | None, typer.Option("--concurrency", metavar="N", show_default=False,
                                                           help="Worker processes; 0 = one per core "
                                                                "(default: [engine] concurrency).")] = None,
           verbose: VerboseOpt = False) -> None:
    """A Celery worker that runs the ticks `pipeline daemon` queues ([engine] kind = "celery")."""
    from .ops.celery_engine import worker_main

    _setup_logging(verbose, daemon=True)
    with _clean_errors():
        cfg = config_mod.require(config)
        if cfg.engine.kind != "celery":
            raise config_mod.ConfigError('[engine] kind is "local": runs happen in `pipeline run`/`pipeline daemon`; '
                                         'set kind = "celery" to use workers')
        path = str(config_mod.resolve_path(config).resolve())
        if concurrency is not None and concurrency < 0:
            raise ConfigError(f"--concurrency {concurrency}: 0 (one per core) or more")
        worker_main(path, cfg.engine.concurrency if concurrency is None else concurrency, "INFO" if verbose else "WARNING")


@app.command()
def status(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Per channel: next run, last outcome and age, publications today, health and why; the scheduler's state.

    Exit 0 healthy, 8 an article awaits an editor's review (and nothing worse), 1 a channel failed or is
    overdue, 2 config or ledger unreadable or unreachable, 3 the declared scheduler is down. See README, Health.
    """
    from .views.status import SchedulerState, channel_status, daemon_state, health_exit

    with _clean_errors():
        cfg = _project_config(config)
        sched: list[SchedulerState] = []
        rows = channel_status(cfg, scheduler=sched)
        engine = None
        if cfg.engine.kind != "local" or cfg.ledger_url.startswith("postgres"):
            from .ops.topology import engine_status

            engine = engine_status(cfg.engine, cfg.ledger_url)
        # With a PostgreSQL ledger the daemon that matters may run on any host: the scheduler's lead says.
        alive = engine.daemon() if engine is not None and engine.postgres else daemon_state(cfg)
    if as_json:
        channels = [{**r.as_dict(), "daemon": alive.as_dict(), "scheduler": sched[0].as_dict()} for r in rows]
        data = {"channels": channels, "engine": engine.as_dict()} if engine is not None else channels
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    else:
        from .text.untrusted import for_rich

        if engine is not None:
            parts = [f"engine {engine.engine}"]
            if engine.postgres:
                parts.append("scheduler lead: " + ("held" if engine.scheduler_leader else "none (no daemon running)"))
            if engine.workers is not None and engine.queue_depth is not None:
                parts.append(f"workers seen: {len(engine.workers)}, queued ticks: {engine.queue_depth}")
            if engine.broker_error is not None:
                parts.append(f"broker unreachable: {engine.broker_error}")
            out.print(" · ".join(parts), highlight=False, markup=False)
        if engine is not None and engine.postgres:
            state = (f"[green]running[/]: {for_rich(engine.scheduler_leader or '')}" if alive.running
                     else "not running on any host (nobody holds the scheduler's lead)")
        else:
            state = (f"[green]running[/] (pid {alive.pid})" if alive.running
                     else f"not running on this host (no lock held on {for_rich(alive.lock)})")
        out.print(f"[bold]daemon[/] {state}", highlight=False)
        colour = "red" if sched[0].down else "green" if sched[0].alive else "default"
        out.print(f"[bold]scheduler[/] [{colour}]{sched[0].kind}[/]: {for_rich(sched[0].reason)}", highlight=False)
        table = []
        for r in rows:
            age = "—" if r.last_age_s is None else f"{r.last_age_s // 60} min"
            table.append([r.channel, f"{r.cron} {r.timezone}", r.next_run or "—", r.last_run or "—",
                          r.last_status or "—", age, str(r.publications_today), r.health])
        _print_table(["channel", "schedule", "next run", "last run", "status", "age", "published today", "health"], table)
        for r in rows:
            if r.health not in ("ok", "scheduler_down", "awaiting_review"):  # said once, above or below
                out.print(f"{r.channel}: {r.health}: {r.reason}", markup=False, highlight=False)
        # One line each, URLs whole: what reconciliation completed today, and what still waits for it.
        for r in rows:
            for rec in r.reconciled_today:
                out.print(f"{r.channel}: recovered publication {rec.publication_id} of {rec.run_status} run "
                          f"{rec.run_id} registered as {rec.registration_no} by run {rec.reconciled_by}: "
                          f"{rec.url}", markup=False, highlight=False)
            for rev in r.awaiting_review:
                state = "approved, not finished" if rev.status == ReviewStatus.APPROVED else "awaiting review"
                out.print(f"{r.channel}: run {rev.run_id} {state} since {rev.requested_at[:16]}: "
                          f"{for_display(rev.title)} (pipeline review show {rev.run_id})",
                          markup=False, highlight=False)
            for pub in r.awaiting_registration:
                out.print(f"{r.channel}: publication {pub.publication_id} of {pub.run_status} run {pub.run_id} "
                          f"is verified but not registered yet (the next run registers it): {pub.url}",
                          markup=False, highlight=False)
    raise typer.Exit(health_exit([r.health for r in rows]))


@app.command()
def report(config: ConfigOpt = None,
           day: Annotated[str | None, typer.Option("--date", metavar="YYYY-MM-DD",
                                                      help="YYYY-MM-DD in [register] timezone (default: today).")] = None,
           send: Annotated[bool, typer.Option("--send", help="Also deliver it: write the Markdown file under [report] markdown_dir "
                                                            "and post to the report webhook, as configured.")] = False,
           as_json: JsonOpt = False) -> None:
    """Daily summary from the ledger: runs, publications, registrations, hallucinations caught, failures.

    Read-only unless --send is given (the daemon's or cron's daily job passes it).
    """
    from datetime import date, datetime
    from zoneinfo import ZoneInfo

    try:
        when = date.fromisoformat(day) if day else None
    except ValueError:
        err.print(f"error: --date {day!r}: expected YYYY-MM-DD", markup=False)
        raise typer.Exit(2) from None
    with _clean_errors():
        cfg = _project_config(config)
        from .ledger.reader import sqlite_path

        path = sqlite_path(cfg.ledger_url)
        if path is not None and not path.exists():
            raise ConfigError(f"no ledger at {path}: nothing has run with this config yet")
        from .ledger.reader import LedgerReader
        from .views.reports import daily_summary, deliver, render_daily

        reader = LedgerReader(cfg.ledger_url)
        tz = cfg.registration.timezone
        when = when or datetime.now(ZoneInfo(tz)).date()
        try:
            summary = daily_summary(reader, when, tz)
        finally:
            reader.close()
        markdown = render_daily(summary)
        delivered_to = deliver(cfg.report, cfg.base_dir, f"daily-{when.isoformat()}", markdown) if send else []
    if as_json:
        sys.stdout.write(json.dumps({**summary.as_dict(), "delivered_to": delivered_to}, indent=2, ensure_ascii=False)
                         + "\n")
    else:
        sys.stdout.write(markdown)  # plain Markdown: URLs whole, pipe-friendly
        for where in delivered_to:
            err.print(f"sent to {where}", markup=False, highlight=False)


@app.command()
def stats(config: ConfigOpt = None,
          since: Annotated[str | None, typer.Option("--since", metavar="WHEN", help="Runs started since: 7d, 24h, 30m, 2w or an ISO date/time "
                                                                "(default: all).")] = None,
          as_json: JsonOpt = False) -> None:
    """Per-model reliability: runs and outcomes, prose-only turns, nudges, hallucinations, text tool calls,
    stuck runs, turns after the work was done (worst run), p50/p95 turn latency, capabilities' own model calls, tokens and
    model time (every call). Which model to stop using."""
    from .views.stats import model_stats, parse_since, score_stats

    try:
        start = parse_since(since) if since else None
    except ValueError:
        err.print(f"error: --since {since!r}: expected 7d, 24h, 30m, 2w or an ISO date", markup=False)
        raise typer.Exit(2) from None
    with _clean_errors(code_on_error=2):
        _, reader = _reader(config)
        rows = model_stats(reader, start)
        scores = score_stats(reader, start)
    if as_json:
        sys.stdout.write(json.dumps({"since": start.isoformat() if start else None, "models": [r.as_dict() for r in rows],
                                     "scores": [r.as_dict() for r in scores]}, indent=2) + "\n")
        return
    if not rows:
        out.print("no runs" + (f" since {start:%Y-%m-%d %H:%M} UTC" if start else ""), highlight=False)
        return

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    table = []
    for r in rows:
        halluc = ", ".join(f"{cap} {status} {n}" for cap, by in sorted(r.hallucinations.items())
                           for status, n in sorted(by.items())) or "0"
        served = ",".join(sorted(r.served)) or "—"
        ms = "—" if r.latency_ms_p50 is None else f"{r.latency_ms_p50:.0f}/{r.latency_ms_p95:.0f}"
        side = "—" if r.side_call_latency_ms_p50 is None else (
            f"{r.side_calls} {r.side_call_latency_ms_p50:.0f}/{r.side_call_latency_ms_p95:.0f}")
        table.append([r.model, served, str(r.runs), pct(r.outcomes.get("done", 0) / r.runs) if r.runs else "—",
                      pct(r.prose_only_share), f"{r.nudges_per_run:.2f}", halluc, str(r.text_tool_calls),
                      str(r.stuck_runs), "—" if r.turns_after_done_max is None else str(r.turns_after_done_max),
                      ms, side, f"{r.prompt_tokens}+{r.completion_tokens}", f"{r.model_time_s:.0f}"])
    _print_table(["model", "served", "runs", "done", "prose turns", "nudges/run", "hallucinations", "text calls", "stuck",
                  "after done", "turn p50/p95 ms", "side calls p50/p95 ms", "tokens", "model s"], table)
    if scores:  # one row per scorer version: numbers from two scorers are not comparable
        _print_table(["humanize scorer", "articles", "median score", "published"],
                     [[s.scorer, str(s.articles), "—" if s.median is None else f"{s.median:g}", str(s.published)]
                      for s in scores])


@app.command("score")
def score_cmd(files: Annotated[list[str] | None, typer.Argument(metavar="FILE",
                                                             help="Text or Markdown files; '-' reads standard input.")] = None,
              article: Annotated[int | None, typer.Option("--article", metavar="ID",
                                                          help="Re-score a stored article (its id in the ledger).")] = None,
              language: Annotated[str | None, typer.Option("--language", metavar="LANG", help="en or zh (default: detected per input).")] = None,
              writer: Annotated[str | None, typer.Option("--writer", metavar="MODEL",
                                                         help="The model that wrote the text (default: the configured "
                                                              "[llm] model; a stored article's: its run's).")] = None,
              config: ConfigOpt = None,
              as_json: JsonOpt = False) -> None:
    """The humanize score of each input: total, language, components, every paragraph's score, the scorer, and
    which writers the scorer was validated on ("unvalidated for MODEL" when the writer is not one of them).

    The scoring model loads once for all inputs. Exit 0 when every input reaches its pass mark, 1 when
    one is below it or too short to score, 2 on bad input or a missing scoring model.
    """
    from .score import scoring
    from .score.validity import Standing, validity

    if language not in (None, "en", "zh"):
        err.print(f"error: --language {language!r}: expected en or zh", markup=False)
        raise typer.Exit(2)
    if not files and article is None:
        err.print("error: nothing to score: pass FILE..., '-' for standard input, or --article ID", markup=False)
        raise typer.Exit(2)
    inputs: list[tuple[str, str, dict[str, Any], str | None]] = []
    with _clean_errors(code_on_error=2):
        cfg = _project_config(config)
        for name in files or []:
            try:
                text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                err.print(f"error: {name}: {getattr(exc, 'strerror', None) or exc}", markup=False)
                raise typer.Exit(2) from None
            inputs.append((name, text, {}, writer or cfg.llm.model))
        if article is not None:
            _, reader = _reader(config)
            stored = reader.article(article)
            if stored is None:
                err.print(f"error: no article {article} in the ledger", markup=False)
                raise typer.Exit(2)
            run = reader.get_run(stored.run_id) if getattr(stored, "run_id", None) else None
            stored_scorer = getattr(stored, "scorer", None)
            inputs.append((f"article {article}", stored.body,
                           {"stored": {"total": stored.score, "scorer": stored_scorer, "language": stored.language,
                                       "validity": validity(stored_scorer, stored.language,
                                                            writer or getattr(run, "model", None)).as_json()}},
                           writer or getattr(run, "model", None)))
            language = language or stored.language
        scoring.configure(cfg.state_dir, cfg.path(cfg.humanize.scoring_model) if cfg.humanize.scoring_model else None)
        results = []
        for name, text, extra, by in inputs:
            measured = scoring.score(text, language)
            threshold = cfg.humanize.pass_mark(measured.language)
            valid = validity(measured.scorer, measured.language, by)
            results.append({"input": name, **measured.as_json(), "threshold": threshold,
                            "passed": measured.total is not None and measured.total >= threshold,
                            "writer": by, "validity": valid.as_json(), **extra})
    if as_json:
        sys.stdout.write(json.dumps(results if len(results) > 1 else results[0], ensure_ascii=False, indent=2) + "\n")
    else:
        for r in results:
            total = "too short to score" if r["total"] is None else f"{r['total']:g}"
            verdict = "passes" if r["passed"] else "below"
            v = r["validity"]
            note = "" if v["status"] == Standing.VALIDATED else f"; {v['note']}"
            out.print(f"{for_display(r['input'])}: {total} ({r['language']}; {verdict} the pass mark {r['threshold']:g}"
                      f"{for_display(note)})", markup=False, highlight=False)
            out.print(f"  validated on: {', '.join(v['validated_on']) or 'no writer'}"
                      + (f"; does not hold for: {', '.join(v['failed_on'])}" if v["failed_on"] else ""),
                      markup=False, highlight=False)
            paras = ", ".join("—" if p["score"] is None else f"{p['score']:g}" for p in r["paragraphs"])
            out.print(f"  paragraphs: {paras}", markup=False, highlight=False)
            out.print(f"  scorer: {r['scorer']}", markup=False, highlight=False)
            if "stored" in r:
                st = r["stored"]
                same = "same scorer" if st["scorer"] == r["scorer"] else f"stored by {st['scorer'] or 'the heuristic before it'}"
                out.print(f"  stored: {st['total']} ({same})", markup=False, highlight=False)
    raise typer.Exit(0 if all(r["passed"] for r in results) else 1)


@app.command()
def doctor(config: ConfigOpt = None,
           channel: Annotated[str | None, typer.Option(metavar="NAME", help="Channel whose [llm] to check.")] = None,
           as_json: JsonOpt = False) -> None:
    """What the configured model supports (JSON schemas, native tools, usage), where each answer comes from
    (config, litellm's model map, a probe: two tiny requests, stored in the ledger), and how the guard will
    treat the model. Exit 0; 2 when the model cannot be reached or refuses the key (one line)."""
    from .model.llm import ChatModel, is_local

    with _clean_errors():
        cfg = config_mod.load(config).for_channel(channel)
        llm = ChatModel(cfg.llm, data_dir=cfg.state_dir)
        llm._api_key()  # the variable api_key_env names is set: exit 2 and one line otherwise
        if is_local(cfg.llm.model):
            from .model.local.provider import prepare
            from .model.probe import known

            prepare(cfg.state_dir)  # runtime installed, weights assembled: nothing to reach over a network
            answer = known(llm)
        else:
            from .ledger.writer import Ledger
            from .model.probe import support

            answer = support(llm, Ledger(cfg.ledger_url, cfg.ledger.busy_timeout_ms), refresh=True)
            if answer.probe_error:
                err.print(f"error: [llm] model {cfg.llm.model} cannot be reached: {answer.probe_error}", markup=False,
                          highlight=False)
                raise typer.Exit(2)
    treatment = _guard_treatment(cfg, answer)
    if as_json:
        sys.stdout.write(json.dumps({"model": cfg.llm.model, "api_base": cfg.llm.api_base, **answer.as_dict(),
                                     "guard": treatment}, indent=2) + "\n")
        return
    out.print(f"model {cfg.llm.model}" + (f" at {cfg.llm.api_base}" if cfg.llm.api_base else ""), markup=False,
              highlight=False)
    shown_value = {True: "yes", False: "no", None: "unknown"}
    _print_table(["capability", "supported", "from"],
                 [[c, shown_value[answer.get(c)], answer.sources.get(c, "—")] for c in ("json_schema", "tools", "usage")])
    for line in treatment:
        out.print(f"- {line}", markup=False, highlight=False)


def _guard_treatment(cfg: config_mod.Config, answer: Any) -> list[str]:
    """How the agent loop and the guard will treat a model with these capabilities, in a few lines."""
    from .model.llm import is_local

    agent, lines = cfg.agent, []
    if is_local(cfg.llm.model):
        lines.append("embedded model: every tool turn is JSON-schema constrained by the provider itself")
    elif not answer.tools:
        lines.append("no native tool calls: calls it writes as text are never run; the guard nudges "
                     f"(at most {agent.hallucination_max_nudges})")
    else:
        lines.append("native tool calls")
    if not is_local(cfg.llm.model):
        if agent.constrained_tools == "off":
            lines.append("escalation to JSON-schema constrained turns: off ([agent] constrained_tools)")
        elif not answer.json_schema:
            lines.append("no escalation (json_schema not supported): a model that keeps writing prose fails the run "
                         "(exit 3 or 4); set [llm] json_schema = true if the server honours response_format")
        elif agent.constrained_tools == "always":
            lines.append("every tool turn JSON-schema constrained ([agent] constrained_tools = always)")
        else:
            lines.append("after the first nudge, tool turns are JSON-schema constrained (escalation)")
    if not answer.usage:
        lines.append("no usage reported: token counts in the ledger and stats stay empty")
    lines.append("after done_when holds and the report is recorded: one closing message (tool_choice none), then the run ends")
    return lines


@app.command()
def serve(config: ConfigOpt = None,
          port: Annotated[int | None, typer.Option(metavar="PORT", help="Port (default: the one in [publish.local] base_url).")] = None) -> None:
    """Preview the local site on 127.0.0.1 (Ctrl-C to stop)."""
    from http.server import ThreadingHTTPServer
    from urllib.parse import urlsplit

    from .publishing.publishers.local import site_handler

    with _clean_errors():
        cfg = config_mod.require(config)
    directory = cfg.path(cfg.publish.local.dir)
    directory.mkdir(parents=True, exist_ok=True)
    configured = urlsplit(cfg.publish.local.base_url).port or 8765
    port = port or configured
    if port != configured:  # pages link relatively and work on any port; the feed's links are absolute
        err.print(f"note: the feed's links point at [publish.local] base_url {cfg.publish.local.base_url}, "
                  f"not port {port}", markup=False, highlight=False)
    handler = site_handler(directory)
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        err.print(f"error: cannot listen on 127.0.0.1:{port}: {exc.strerror}", markup=False)
        raise typer.Exit(2) from None
    out.print(f"serving {directory} at http://127.0.0.1:{port}/ (Ctrl-C to stop)", highlight=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# --- ledger -------------------------------------------------------------------------

_MARKS = {"verified": "[green]✓ verified[/]", "unbacked": "[red]✗ unbacked[/]", "mismatch": "[red]✗ mismatch[/]",
          None: "[yellow]? unjudged[/]"}


def _print_claims(claims: list[dict[str, Any]]) -> None:
    """One line per claim, the same in ``ledger diff`` and ``claims check``; model text shown exactly, never as markup."""
    from .text.untrusted import for_rich

    for c in claims:
        value = f" {for_rich(c['value'])}" if c.get("value") else ""
        recorded = ""
        if c.get("status") == "mismatch":
            shown = ", ".join(for_rich(v) for v in c.get("recorded") or []) or "no value"
            recorded = f" [dim](ledger: {shown})[/]"
        turns = f" ({len(c['turn_ids'])} turns)" if len(c.get("turn_ids") or []) > 1 else ""
        out.print(f"  {_MARKS[c.get('status')]:<10} {c['capability']:<9}{value}{recorded}  «{for_rich(c['text'])}»{turns}",
                  highlight=False)


@ledger_app.command("diff")
def ledger_diff(config: ConfigOpt = None,
                run_id: Annotated[str | None, typer.Option("--run", metavar="RUN_ID", help="Run id (default: the latest run).")] = None,
                as_json: JsonOpt = False) -> None:
    """Claims the model made beside the facts the ledger holds, and the article's statements no source backs.
    Exit 0 clean, 1 hallucinations (either kind), 2 trouble."""
    from .views.diff import run_diff

    with _clean_errors(code_on_error=2):
        _, reader = _reader(config)
        data = run_diff(reader, run_id)
    if data is None:
        err.print(f"error: no run {run_id!r} in the ledger" if run_id else "error: the ledger holds no runs", markup=False)
        raise typer.Exit(2)
    if as_json:
        sys.stdout.write(json.dumps(data.as_dict(), ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        from .text.untrusted import for_rich

        out.print(f"[bold]run[/] {data.run_id}  status [bold]{data.status}[/] (exit {data.exit_code}), nudges {data.nudges}"
                  + (f", reason {data.reason}" if data.reason else ""), highlight=False)
        # One line per item and no wrapping: URLs stay whole for grep and for cron mail.
        out.print("[bold]facts[/] — what the system did", highlight=False)
        for f in data.facts:
            value = "" if f.value is None else for_rich(f.value)
            out.print(f"  [green]✓[/] {f.capability:<9} {value}", highlight=False)
        if not data.facts:
            out.print(f"  [green]✓[/] {'(none)':<9} ", highlight=False)
        out.print("[bold]claims[/] — what the model said", highlight=False)
        _print_claims([c.as_dict() for c in data.claims])
        n = len(data.hallucinations)
        out.print(f"[{'red' if n else 'green'}]{n} hallucination(s)[/]", highlight=False)
        out.print("[bold]statements[/] — what the article says that no source backs", highlight=False)
        for u in data.statements:
            what = ", ".join(u.unsupported) or u.status
            mark = "[yellow]removed[/]" if u.removed else "[red]✗[/]"
            out.print(f"  {mark} {u.kind} line {u.line}: {for_rich(u.text)}  ({for_rich(what)})", highlight=False)
        if not data.statements:
            out.print("  [green]✓[/] every number, name, command and quotation is in a source", highlight=False)
        k = len(data.unsourced)
        out.print(f"[{'red' if k else 'green'}]{k} unsourced statement(s)[/]", highlight=False)
    raise typer.Exit(1 if data.hallucinations or data.unsourced else 0)


@ledger_app.command("runs")
def ledger_runs(config: ConfigOpt = None,
                limit: Annotated[int, typer.Option(metavar="N", help="How many runs, newest first.")] = 20,
                as_json: JsonOpt = False) -> None:
    """Recent runs with their status, facts and nudges. Ids are printed whole: `awk '{print $1}'` gives ids."""
    if limit < 1:
        err.print(f"error: --limit {limit}: 1 or more", markup=False)
        raise typer.Exit(2)
    with _clean_errors(code_on_error=2):
        _, reader = _reader(config)
        runs = reader.runs(limit)
        facts = reader.facts_by_run([r.id for r in runs])
    rows = [{"run_id": r.id, "channel": r.channel, "started_at": r.started_at.isoformat(), "status": r.status,
             "exit_code": r.exit_code, "model": r.model, "facts": facts[r.id], "nudges": r.nudges} for r in runs]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    _print_table(["run", "started (UTC)", "channel", "status", "exit", "nudges", "facts"],
                 [[r["run_id"], r["started_at"][:19], r["channel"], r["status"], str(r["exit_code"]), str(r["nudges"]),
                   ",".join(r["facts"]) or "—"] for r in rows])


def _cut(text: str, full: bool, limit: int = 400) -> str:
    if full or len(text) <= limit:
        return text
    return f"{text[:limit]} … ({len(text) - limit} more chars; --full shows all)"


def _show_data(reader: LedgerReader, run: Any) -> dict[str, Any]:
    turns, executions, guard = reader.turns(run.id), reader.executions(run.id), reader.guard_events(run.id)
    side = reader.model_calls(run.id)
    answered = [t for t in turns if t.role == "assistant"]
    # Every model call: the agent's turns and the capabilities' own calls (draft, humanize, brainstorm).
    every = [*answered, *side]
    totals = {
        "model_turns": len(answered),
        "side_calls": len(side),
        "model_calls": len(every),
        "prompt_tokens": sum(c.prompt_tokens or 0 for c in every),
        "completion_tokens": sum(c.completion_tokens or 0 for c in every),
        "model_latency_ms": round(sum(c.latency_ms or 0 for c in every), 1),
        "side_call_latency_ms": round(sum(c.latency_ms or 0 for c in side), 1),
        "executions": len(executions),
        "failed_executions": sum(1 for e in executions if e.ok is False),
        "nudges": run.nudges,
    }
    if run.finished_at is not None and totals["model_latency_ms"]:
        # Run overhead: wall time over the time spent in the model (1.0: nothing but model calls).
        wall_ms = (run.finished_at - run.started_at).total_seconds() * 1000
        totals["wall_ms"] = round(wall_ms, 1)
        totals["overhead"] = round(wall_ms / totals["model_latency_ms"], 3)

    def plain(row: Any) -> dict[str, Any]:
        return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in vars(row).items()}

    from .score.scoring import weakest_stored

    # getattr: a ledger from before revision 0018 (read as it is) has no scorer columns
    from .score.validity import validity

    articles = [{"id": a.id, "kind": a.kind, "title": a.title, "score": a.score, "scorer": getattr(a, "scorer", None),
                 "weakest": weakest_stored(a.body, getattr(a, "score_paragraphs_json", None)),
                 "validity": validity(getattr(a, "scorer", None), getattr(a, "language", None),
                                      getattr(run, "model", None)).as_json() if a.score is not None else None}
                for a in reader.articles(run.id)]
    return {"run": plain(run), "turns": [plain(t) for t in turns], "executions": [plain(e) for e in executions],
            "articles": articles,
            "model_calls": [plain(c) for c in side], "guard_events": [plain(g) for g in guard], "totals": totals}


@ledger_app.command("show")
def ledger_show(run_arg: Annotated[str | None, typer.Argument(metavar="RUN_ID", help="Run id (default: the latest run).")] = None,
                run_id: Annotated[str | None, typer.Option("--run", metavar="RUN_ID", help="Run id, as `ledger diff` takes it.")] = None,
                config: ConfigOpt = None,
                full: Annotated[bool, typer.Option("--full", help="Print every message in full (prompts included).")] = False,
                as_json: JsonOpt = False) -> None:
    """The turn-by-turn record of one run: messages, tool executions with their results, guard decisions, totals."""
    from .text.untrusted import for_rich

    with _clean_errors(code_on_error=2):
        _, reader = _reader(config)
        run = reader.get_run(run_id or run_arg)
        if run is None:
            err.print(f"error: no run {run_id or run_arg!r} in the ledger" if (run_id or run_arg) else "error: the ledger holds no runs",
                      markup=False)
            raise typer.Exit(2)
        data = _show_data(reader, run)
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
        return
    by_turn: dict[Any, list[dict[str, Any]]] = {}
    for ex in data["executions"]:
        by_turn.setdefault(ex["turn_id"], []).append(ex)
    by_execution: dict[Any, list[dict[str, Any]]] = {}
    for c in data["model_calls"]:
        by_execution.setdefault(c["execution_id"], []).append(c)
    guard: dict[Any, list[dict[str, Any]]] = {}
    for g in data["guard_events"]:
        guard.setdefault(g["turn_id"], []).append(g)
    # A tool turn repeats its execution's result (that is what the model was sent): print it once, with the execution.
    shown_calls = {ex["call_id"] for ex in data["executions"] if ex["call_id"]}
    r = data["run"]
    out.print(f"[bold]run[/] {r['id']}  {r['status']} (exit {r['exit_code']})  channel {for_rich(r['channel'])}  "
              f"model {for_rich(r['model'])}  nudges {r['nudges']}", highlight=False)
    if r["error"]:
        out.print(f"  error: {for_rich(r['error'])}", highlight=False)
    for t in data["turns"]:
        if t["role"] == "tool" and t["tool_call_id"] in shown_calls:
            continue
        meta = ""
        if t["role"] == "assistant" and t["latency_ms"] is not None:
            meta = (f" [dim]{for_rich(t['served_model'] or '?')} {t['prompt_tokens'] or 0}+{t['completion_tokens'] or 0} tok "
                    f"{t['latency_ms']:.0f} ms[/]")
        out.print(f"[bold]#{t['seq']} {t['role']}[/]{meta}", highlight=False)
        if t["content"]:
            out.print("   " + for_rich(_cut(t["content"], full)).replace("\n", "\n   "), highlight=False)
        for ex in by_turn.get(t["id"], []):
            mark = "[green]✓[/]" if ex["ok"] else "[red]✗[/]" if ex["ok"] is False else "[yellow]…[/]"
            detail = ex["result_json"] if ex["ok"] else ex["error"]
            out.print(f"   {mark} {for_rich(ex['capability'])}({for_rich(_cut(ex['arguments_json'], full, 200))}) → "
                      f"{for_rich(_cut(detail or '', full, 300))}", highlight=False)
            for c in by_execution.get(ex["id"], []):
                _print_side_call(c, full)
        for g in guard.get(t["id"], []):
            out.print(f"   [yellow]guard[/] {g['kind']} → {g['action']} {g['nudge_no'] or ''}", highlight=False)
    for g in guard.get(None, []):
        out.print(f"[yellow]guard[/] {g['kind']} → {g['action']}: {for_rich(g['message'])}", highlight=False)
    for a in data["articles"]:
        if a["kind"] == "humanized" and a["score"] is not None:
            from .score.validity import Standing

            note = a["validity"]["note"] if a["validity"] and a["validity"]["status"] != Standing.VALIDATED else ""
            out.print(f"[bold]article {a['id']}[/] score {a['score']:g} ({for_rich(a['scorer'] or 'heuristic')})"
                      + (f" [yellow]{for_rich(note)}[/]" if note else ""), highlight=False)
            for w in a["weakest"]:
                out.print(f"   weakest: {for_rich(w)}", highlight=False)
    for c in by_execution.get(None, []):  # a step that never committed its execution row
        _print_side_call(c, full)
    tot = data["totals"]
    overhead = f", wall {tot['wall_ms'] / 1000:.1f} s (overhead {tot['overhead']:.2f})" if "overhead" in tot else ""
    out.print(f"[bold]totals[/] {tot['model_calls']} model calls ({tot['model_turns']} turns, {tot['side_calls']} by "
              f"capabilities), {tot['prompt_tokens']}+{tot['completion_tokens']} tokens, "
              f"{tot['model_latency_ms'] / 1000:.1f} s in the model{overhead}, {tot['executions']} executions "
              f"({tot['failed_executions']} failed), {tot['nudges']} nudges"
              + (f", {r['turns_after_done']} after the work was done" if r.get("turns_after_done") is not None else ""),
              highlight=False)


def _print_side_call(c: dict[str, Any], full: bool = False) -> None:
    """One capability's model call; with ``--full``, also its request (the last message) and its reply."""
    from .text.untrusted import for_rich

    what = f"[red]failed: {for_rich(c['error'])}[/]" if c["error"] else for_rich(c["finish_reason"] or "")
    out.print(f"     [dim]↳ model call {for_rich(c['served_model'] or c['requested_model'])} "
              f"{c['prompt_tokens'] or 0}+{c['completion_tokens'] or 0} tok {c['latency_ms'] or 0:.0f} ms[/] {what}",
              highlight=False)
    if not full:
        return
    sent = json.loads(c.get("messages_json") or "[]")
    if sent and isinstance(sent[-1], dict):
        out.print("       [dim]asked:[/] " + for_rich(str(sent[-1].get("content") or "")).replace("\n", "\n       "),
                  highlight=False)
    if c.get("reply"):
        out.print("       [dim]answered:[/] " + for_rich(c["reply"]).replace("\n", "\n       "), highlight=False)


# --- ledger schema ------------------------------------------------------------------

@ledger_app.command("migrate")
def ledger_migrate(config: ConfigOpt = None,
                   to: Annotated[str, typer.Option("--to", metavar="REVISION",
                                                 help="Target revision (default: head); an older one downgrades.")] = "head",
                   sql: Annotated[bool, typer.Option("--sql", help="Print the SQL instead of running it.")] = False,
                   downgrade: Annotated[bool, typer.Option("--downgrade",
                                                       help="Allow --to an older revision (drops what later ones added).")] = False) -> None:
    """Migrate the ledger's schema explicitly (every open also migrates to head)."""
    from .ledger import migrations
    from .ledger.writer import Ledger

    with _clean_errors():
        cfg = config_mod.require(config)
        from sqlalchemy.exc import OperationalError

        from .ledger.unreachable import unavailable

        ledger = Ledger(cfg.ledger_url, cfg.ledger.busy_timeout_ms, migrate=False)
        try:
            if sql:
                sys.stdout.write(migrations.upgrade_sql(cfg.ledger_url, ledger.engine, to))
                return
            done = migrations.migrate(ledger.engine, to, allow_downgrade=downgrade)
        except OperationalError as exc:  # the server down, the file unreadable: one line, exit 2
            raise unavailable(cfg.ledger_url, exc) from None
    if done.stamped_legacy:
        out.print(f"ledger made by 0.1.0: stamped at baseline {migrations.BASELINE}", highlight=False)
    if done.before == done.after:
        out.print(f"ledger already at {done.after}", highlight=False)
    else:
        out.print(f"ledger migrated {done.before or 'base'} → {done.after}", highlight=False)


@ledger_app.command("check")
def ledger_check(config: ConfigOpt = None,
                 ledger_file: Annotated[Path | None, typer.Option("--ledger", metavar="PATH",
                                                                  help="Check this SQLite file (a backup) instead "
                                                                       "of the config's ledger; it is not changed.")] = None,
                 as_json: JsonOpt = False) -> None:
    """Schema revision and integrity of the ledger, read-only. Exit 0 sound, 1 problems or not current, 2 cannot open."""
    from .ledger.check import check

    with _clean_errors():
        if ledger_file is not None:
            from .ledger.backup import readonly_engine

            engine = readonly_engine(ledger_file)
        else:
            from .ledger.writer import Ledger

            project = _project_config(config)
            engine = Ledger(project.ledger_url, project.ledger.busy_timeout_ms, migrate=False).engine
        try:
            health = check(engine)
        except Exception as exc:  # sqlalchemy's DatabaseError: not a database, unreadable, the server down
            from sqlalchemy.exc import SQLAlchemyError

            from .ledger.unreachable import unavailable

            if not isinstance(exc, SQLAlchemyError):
                raise
            raise unavailable(str(engine.url) if ledger_file is None else f"sqlite:///{ledger_file}", exc,
                              "cannot read") from None
    if as_json:
        sys.stdout.write(json.dumps(health.as_dict(), indent=2) + "\n")
    else:
        out.print(f"ledger   {health.backend}" + (f" {ledger_file}" if ledger_file else ""), highlight=False, markup=False)
        out.print(f"schema   {health.revision or '(none)'} ({health.schema}; this program: {health.head})", highlight=False)
        for note in health.notes:
            out.print(f"         {note}", highlight=False, markup=False)
        for problem in health.problems:
            err.print(f"problem: {problem}", highlight=False, markup=False)
        out.print("ok" if health.ok else "NOT OK", highlight=False)
    raise typer.Exit(0 if health.ok else 1)


@ledger_app.command("backup")
def ledger_backup(dest: Annotated[Path, typer.Argument(metavar="DEST", help="The copy to write (must not exist).")],
                  config: ConfigOpt = None) -> None:
    """A consistent copy of a SQLite ledger, safe while runs are writing (SQLite's online backup).

    The copy is one self-contained file, integrity-checked; verify it with `pipeline ledger check --ledger DEST`.
    A PostgreSQL ledger: use pg_dump (refused here). Exit 0 written, 2 refused or failed.
    """
    from .ledger.backup import backup

    with _clean_errors(code_on_error=2):
        cfg = _project_config(config)
        done = backup(cfg.ledger_url, dest)
    out.print(f"backed up {done.runs} runs to {done.path} ({done.bytes} bytes)", markup=False, highlight=False)


# --- claims -------------------------------------------------------------------------

@claims_app.command("check")
def claims_check(text: Annotated[str, typer.Argument(metavar="TEXT", help="Text to check; '-' reads standard input.")],
                 facts: Annotated[Path | None, typer.Option("--facts", metavar="FILE",
                                                                      help='JSON: {"publish": {"url": …}, "register": {"registration_no": …}, '
                                                                      '"humanize": {"score": 77}, "draft": {}}')] = None,
                 run_id: Annotated[str | None, typer.Option("--run", metavar="RUN_ID",
                                                                     help="Judge against the facts this run recorded in the ledger.")] = None,
                 config: ConfigOpt = None,
                 as_json: JsonOpt = False) -> None:
    """What the guard would extract from TEXT and, given --facts or --run, each claim's verdict.

    Exit 0 when every claim is verified (or there are none), 1 when a claim is unbacked, mismatched or
    not judged (no --facts or --run: nothing is a fact), 2 on bad input.
    """
    from .tools.catalog import claim_rules, fact_keys
    from .tools.claims import facts_from_mapping

    if text == "-":
        text = sys.stdin.read()
    if facts is not None and run_id is not None:
        err.print("error: pass --facts or --run, not both", markup=False)
        raise typer.Exit(2)
    _read_only_startup()
    with _clean_errors(code_on_error=2):
        path = config_mod.resolve_path(config)
        cfg = config_mod.load(config) if (config or path.exists() or run_id) else config_mod.Config()
        rules = claim_rules(cfg.publish, cfg.claims, cfg.registration)
        fact_map = None
        if facts is not None:
            try:
                fact_map = facts_from_mapping(json.loads(facts.read_text(encoding="utf-8")), fact_keys())
            except (OSError, ValueError, AttributeError) as exc:
                err.print(f"error: --facts {facts}: {exc}", markup=False)
                raise typer.Exit(2) from None
        elif run_id is not None:
            _, reader = _reader(config)
            if reader.get_run(run_id) is None:
                err.print(f"error: no run {run_id!r} in the ledger", markup=False)
                raise typer.Exit(2)
            fact_map = {}
            for f in reader.facts(run_id):
                fact_map.setdefault(f.capability, [])
                if f.value is not None:
                    fact_map[f.capability].append(f.value)
    found = rules.extract(text)
    if fact_map is not None:
        found = rules.judge(found, fact_map)
    rows = [c.as_dict() for c in found]
    for r in rows:
        r["recorded"] = [str(v) for v in (fact_map or {}).get(r["capability"], [])]
    unsettled = [r for r in rows if r["status"] != "verified"]
    if as_json:
        sys.stdout.write(json.dumps({"judged": fact_map is not None, "claims": rows,
                                     "hallucinations": [r for r in rows if r["status"] in ("unbacked", "mismatch")]},
                                    ensure_ascii=False, indent=2) + "\n")
    else:
        if rows:
            _print_claims(rows)
        else:
            out.print("no claims", highlight=False)
    if fact_map is None and rows:
        err.print("not judged: pass --facts FILE or --run RUN_ID to judge these claims against facts", markup=False)
    raise typer.Exit(1 if unsettled else 0)


# --- review -------------------------------------------------------------------------

ChannelOpt = Annotated[str | None, typer.Option(metavar="NAME", help="Channel (needed when [[channels]] declares several).")]


@review_app.command("list")
def review_list(config: ConfigOpt = None, channel: ChannelOpt = None,
                show_all: Annotated[bool, typer.Option("--all", help="Decided reviews too.")] = False,
                as_json: JsonOpt = False) -> None:
    """Articles waiting for a decision (and approved ones not finished yet), oldest first."""
    from .views.status import reviews

    with _clean_errors():
        reader = _reader_if_any(config)
        rows = reviews(reader, channel, all_states=show_all) if reader is not None else []
    if as_json:
        sys.stdout.write(json.dumps([r.as_dict() for r in rows], indent=2, ensure_ascii=False) + "\n")
        raise typer.Exit(0)
    if not rows:
        out.print("nothing awaits review", highlight=False)
    for r in rows:
        out.print(f"{r.run_id}  {r.channel}  {r.status}  {r.requested_at[:16]}  score {r.score}"
                  f"{f' ({for_display(r.score_note)})' if r.score_note else ''}  "
                  f"{for_display(r.title)}\n    preview: {r.preview}", markup=False, highlight=False)


@review_app.command("show")
def review_show(run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="Run id.")], config: ConfigOpt = None,
                as_json: JsonOpt = False) -> None:
    """One held article: title, score, preview, decision, and its text."""
    from .views.status import review_of

    with _clean_errors():
        reader = _reader_if_any(config)
        r = review_of(reader, run_id) if reader is not None else None
        if r is None:
            raise ConfigError(f"no review for run {run_id!r} (pipeline review list shows them)")
    if as_json:
        sys.stdout.write(json.dumps(r.as_dict(), indent=2, ensure_ascii=False) + "\n")
        raise typer.Exit(0)
    lines = [f"run {r.run_id} ({r.channel}): {r.status}" + (" and published" if r.completed else ""),
             f"title: {for_display(r.title)}", f"score: {r.score}" + (f" ({for_display(r.score_note)})" if r.score_note else ""),
             f"preview: {r.preview}",
             f"requested: {r.requested_at}"]
    lines += [f"weakest: {for_display(w)}" for w in r.weakest]
    if r.decided_by:
        lines.append(f"decided by {r.decided_by} at {r.decided_at}" + (f": {r.reason}" if r.reason else ""))
    if r.url:
        lines.append(f"published at {r.url}")
    lines += ["", for_display(r.body or "")]
    out.print("\n".join(lines), markup=False, highlight=False)


def _review_cfg(config: Path | None, ledger_cfg: tuple[Config, Ledger], run_id: str) -> tuple[Config, Ledger]:
    """The config of the run's channel: publish must go where that channel publishes."""
    from .ledger.models import Run

    cfg, ledger = ledger_cfg
    with ledger.read() as s:
        run = s.get(Run, run_id)
    if run is None:
        raise ConfigError(f"no run {run_id!r}")
    return cfg.for_channel(run.channel if cfg.channels else None), ledger


@review_app.command("approve")
def review_approve(run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="Run id.")], config: ConfigOpt = None,
                   by: Annotated[str | None, typer.Option("--by", metavar="NAME",
                                                              help="Approver (default $PIPELINE_REVIEWER, $USER).")] = None) -> None:
    """Approve a held article: publish, register and report it now, exactly once. Exit 75 while its channel runs."""
    from .errors import ChannelLocked
    from .publishing.review import approve, reviewer

    with _clean_errors():
        name = reviewer(by)
        cfg, ledger = _review_cfg(config, _ledger(config), run_id)
        try:
            r, now = approve(cfg.run_settings(), ledger, run_id, name)
        except ChannelLocked as exc:
            sys.stderr.write(f"{exc}\n")
            raise typer.Exit(int(exc.exit_code)) from None
    verb = "approved by" if now else "already approved by"
    out.print(f"run {r.run_id}: {verb} {r.decided_by} at {r.decided_at}; published at {r.url}",
              markup=False, highlight=False)


@review_app.command("reject")
def review_reject(run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="Run id.")],
                  reason: Annotated[str, typer.Option("--reason", metavar="TEXT", help="Why (kept in the ledger).")],
                  config: ConfigOpt = None,
                  by: Annotated[str | None, typer.Option("--by", metavar="NAME",
                                                             help="Reviewer (default $PIPELINE_REVIEWER, $USER).")] = None) -> None:
    """Reject a held article: nothing is published; the run is recorded rejected."""
    from .publishing.review import reject, reviewer

    with _clean_errors():
        name = reviewer(by)
        cfg, ledger = _review_cfg(config, _ledger(config), run_id)
        r = reject(cfg.run_settings(), ledger, run_id, name, reason)
    out.print(f"run {r.run_id}: rejected by {r.decided_by} at {r.decided_at}: {r.reason}", markup=False,
              highlight=False)


# Set once a run has ended and its outcome is on the ledger and on screen: the process may then skip
# interpreter teardown, which with litellm's thousands of modules is seconds of garbage collection on a
# busy host, and would make "SIGTERM ends a run within 2 s" false for no reason.
_fast_exit = False


class _QuietPipe:
    """stdout that a reader closing early (``pipeline ledger diff | head -1``) silences instead of failing: the rest
    of the output goes nowhere and the command still ends with its own exit code (not 1 and a BrokenPipeError)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _closed_by_reader(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())  # later writes, and the flush at exit, succeed into nothing
        finally:
            os.close(devnull)

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._closed_by_reader()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed_by_reader()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until done; a reader that closed the pipe ends the output quietly (see _QuietPipe)."""
    try:
        while data:
            data = data[os.write(fd, data):]
    except BrokenPipeError:
        pass


def main() -> None:
    stdout: Any = sys.stdout
    if stdout is not None and not isinstance(stdout, _QuietPipe):
        sys.stdout = _QuietPipe(stdout)
    try:
        app()
    except SystemExit as exc:
        if not _fast_exit:
            raise
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        logging.shutdown()  # flush and close every handler
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


if __name__ == "__main__":
    main()
