"""The CLI's surface, for a before/after diff of a refactor: every command's --help and every --json shape.

    .venv/bin/python bench/cli_surface.py > after.txt
    git worktree add /tmp/before REV && cp -a .venv /tmp/venv-before \\
        && /tmp/venv-before/bin/pip install -q --no-deps --no-build-isolation -e /tmp/before
    (cd /tmp/before && /tmp/venv-before/bin/python bench/cli_surface.py) > before.txt; diff before.txt after.txt

The help is each command's at 120 columns without colour. The shapes are the keys and value types
(not the values) of each read command's --json output after one scripted run (the ``honest`` scenario
of tests/scenarios.py, in-process: no model, no socket) in a temporary directory, so two trees that print
the same fields diff clean. (Entry points are read from the installed metadata: a tree whose publisher
modules moved needs its own editable install, as above.)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ.update({"COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb", "PIPELINE_SCORER": "stylometric"})

import typer.main  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from pipeline import cli  # noqa: E402


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def helps(runner: CliRunner) -> None:
    def walk(command: Any, path: list[str]) -> None:
        res = runner.invoke(cli.app, [*path, "--help"], terminal_width=120)
        print(f"===== pipeline {' '.join(path)} --help (exit {res.exit_code})\n{res.output}")
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(cli.app), [])


class _Env:
    def setenv(self, key: str, value: str) -> None:
        os.environ[key] = value


def json_shapes(runner: CliRunner) -> None:
    import support  # tests/support.py: the harness every test runs scenarios with

    tmp = Path(tempfile.mkdtemp(prefix="cli-surface-"))
    os.chdir(tmp)
    harness = support.Harness(tmp, _Env())
    outcome, _ = harness.run("honest")
    run = outcome.run_id
    article = tmp / "article.md"
    article.write_text("# Builds\n\n" + "We cut the nightly build from forty minutes to twelve by caching the toolchain. " * 8)
    commands = [["ledger", "runs"], ["ledger", "show", run], ["ledger", "diff", "--run", run], ["ledger", "check"],
                ["stats"], ["status"], ["review", "list"], ["report"],
                ["claims", "check", "--run", run, "published at http://127.0.0.1/x"], ["score", str(article)]]
    for args in commands:
        res = runner.invoke(cli.app, [*args, "--config", str(tmp / "config.toml"), "--json"], env=harness.env)
        name = " ".join(a for a in args[:2] if a != run and not a.startswith("/"))
        try:
            print(f"===== pipeline {name} --json (exit {res.exit_code})\n{json.dumps(shape(json.loads(res.output)), indent=1)}")
        except ValueError:
            print(f"===== pipeline {name} --json (exit {res.exit_code}): not JSON: {res.output.strip()[:300]!r}")


def main() -> None:
    runner = CliRunner()
    helps(runner)
    json_shapes(runner)


if __name__ == "__main__":
    main()
