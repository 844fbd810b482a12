"""The README's operator commands (health, backup, restore) run as written, in a fresh copy of the project.

Every ```sh block the README marks with ``<!-- docs-check -->`` is run, in order, with ``bash -e``
in a copy of the files a clone has (``git ls-files``), beside this checkout's ``.venv``, on a ledger
holding a few runs. A command that stopped working, or a block that no longer matches the program,
fails here.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess

import pytest

from support import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # real processes on a shared 2-core host


def checked_blocks() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"<!-- docs-check -->\n```sh\n(.*?)```", text, flags=re.S)


def fresh_copy(dest):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    for name in files:
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name, follow_symlinks=False)
    (dest / ".venv").symlink_to(REPO / ".venv")


def test_the_readme_operator_blocks_run_as_written(tmp_path):
    blocks = checked_blocks()
    assert len(blocks) >= 3, "the README's health, backup and restore blocks are marked <!-- docs-check -->"
    assert any("status" in b for b in blocks) and any("ledger backup" in b for b in blocks)
    clone = tmp_path / "pipeline"
    fresh_copy(clone)
    from pipeline.ledger.writer import Ledger

    ledger = Ledger(f"sqlite:///{clone / 'var' / 'ledger.db'}")
    ids = [ledger.start_run("local/qwen2.5-coder-1.5b").id for _ in range(3)]
    for run_id in ids:
        ledger.finish_run(run_id, "done", 0)
    ledger.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
    for block in blocks:
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, f"README block failed (exit {proc.returncode}):\n{block}\n{proc.stdout}{proc.stderr}"
    # The restore put the backup in place: the same runs, in a ledger that is sound.
    con = sqlite3.connect(clone / "var" / "ledger.db")
    assert {r[0] for r in con.execute("SELECT id FROM runs")} == set(ids)
    assert (clone / "var" / "replaced" / "ledger.db").exists()
