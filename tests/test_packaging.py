"""A non-editable install works on its own: the wheel carries the prompts, templates and migrations.

The wheel is built from a copy of the sources (nothing is written into the checkout) and
installed without its dependencies into a fresh venv; the dependencies come from this
project's venv through a .pth file, so no network is needed. The project itself is not
importable from that path (its editable hook is a .pth there, which Python does not read
from a directory a .pth file adds), so the run below uses the installed copy, which the
test checks. Then ``pipeline run`` on a config in a directory outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from support import KEY_ENV, REPO, SOURCED_BACKLOG, write_config

pytestmark = pytest.mark.slow

SOURCES = ["pyproject.toml", "README.md", "pipeline"]


def _run(*cmd: str | Path, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kwargs)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the project's wheel installed (not editable); returns its bin directory."""
    root = tmp_path_factory.mktemp("packaging")
    src = root / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-w", root / "dist", src, cwd=root)
    [wheel] = (root / "dist").glob("pipeline-*.whl")

    venv = root / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    vpy = venv / "bin" / "python"
    site = Path(_run(vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    # The dependencies: this project's venv, after the fresh venv's own site-packages.
    (site / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    _run(sys.executable, "-m", "pip", "--python", vpy, "install", "--quiet", "--no-deps", "--no-index",
         "--disable-pip-version-check", wheel)
    return venv / "bin"


def test_the_installed_wheel_has_its_data_and_runs_outside_the_checkout(installed, tmp_path, fake_llm):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIPELINE_CONFIG")}
    env.update({KEY_ENV: "sk-test-not-a-real-key", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    where = _run(installed / "python", "-c",
                 "import pipeline, pipeline.prompts, pipeline.tools.prompts as p; from importlib.resources import files; "
                 "print(pipeline.__file__); print(p.default_dir()); "
                 "print(files('pipeline') / 'publishing' / 'templates' / 'site' / 'post.html'); "
                 "print(files('pipeline') / 'ledger' / 'migrations' / 'script.py.mako')",
                 cwd=tmp_path, env=env).stdout.split("\n")
    venv = installed.parent.resolve()
    for line in where[:4]:
        assert Path(line).resolve().is_relative_to(venv), where  # the installed copy, not the checkout
        assert Path(line).exists(), line
    assert (Path(where[1]) / "system.md").is_file() and (Path(where[1]) / "nudges.en.toml").is_file()

    backlog = tmp_path / "topics.txt"  # the scripted model's backlog and the notes its article is written from
    shutil.copy2(SOURCED_BACKLOG, backlog)
    shutil.copy2(SOURCED_BACKLOG.parent / "notes.md", tmp_path / "notes.md")
    config = write_config(tmp_path, fake_llm.api_base, "honest")
    config.write_text(config.read_text(encoding="utf-8").replace(str(SOURCED_BACKLOG), str(backlog)),
                      encoding="utf-8")
    assert str(REPO) not in config.read_text(encoding="utf-8")
    run = subprocess.run([str(installed / "pipeline"), "run", "--config", "config.toml"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(list((tmp_path / "site" / "posts").glob("*.html"))) == 1
