"""Config: file, environment overrides, the incident's switches, one-line errors."""

from __future__ import annotations

import pytest

from pipeline import config
from pipeline.errors import ConfigError


def write(tmp_path, text):
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_defaults_without_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config.load(environ={})
    assert cfg.agent.hallucination_guard is True and cfg.agent.hallucination_max_nudges == 2
    assert cfg.agent.done_when == ["publish", "register"]


def test_shipped_config_is_valid():
    from support import REPO

    cfg = config.load(REPO / "config.toml", environ={})
    assert cfg.publish.target == "local" and cfg.registration.prefix == "CT"


def test_env_overrides_nested_keys_and_types(tmp_path):
    p = write(tmp_path, "[llm]\nmodel = 'openai/a'\n")
    cfg = config.load(p, environ={"PIPELINE_LLM__MODEL": "deepseek/deepseek-chat", "PIPELINE_AGENT__MAX_TURNS": "7",
                                  "PIPELINE_PUBLISH_LOCAL__DIR": "/srv/site", "PIPELINE_AGENT__DONE_WHEN": '["publish"]'})
    assert cfg.llm.model == "deepseek/deepseek-chat" and cfg.agent.max_turns == 7
    assert cfg.publish.local.dir == "/srv/site" and cfg.agent.done_when == ["publish"]


def test_incident_switches_win(tmp_path):
    p = write(tmp_path, "[agent]\nhallucination_guard = true\nhallucination_max_nudges = 5\n")
    cfg = config.load(p, environ={"AGENT_HALLUCINATION_GUARD": "false", "AGENT_HALLUCINATION_MAX_NUDGES": "1",
                                  "PIPELINE_AGENT__HALLUCINATION_MAX_NUDGES": "3"})
    assert cfg.agent.hallucination_guard is False and cfg.agent.hallucination_max_nudges == 1


def test_relative_paths_resolve_against_the_config_file(tmp_path):
    p = write(tmp_path, "[ledger]\nurl = 'sqlite:///var/l.db'\n[publish.local]\ndir = 'site'\n")
    cfg = config.load(p, environ={})
    assert cfg.ledger_url == f"sqlite:///{tmp_path}/var/l.db"
    assert cfg.path(cfg.publish.local.dir) == tmp_path / "site"


@pytest.mark.parametrize("text,needle", [
    ("[agent]\nmax_turns = 'x'\n", "[agent] max_turns"),
    ("[agent]\ndone_when = ['publish', 'tweet']\n", "[agent] done_when"),
    ("[llm]\nmodle = 'x'\n", "[llm] modle: unknown key"),
    ("[register]\nprefix = 'ct'\n", "[register] prefix"),
    ("[claims]\ndeploy = ['x']\n", "claims"),
    ("[agent\n", "not valid TOML"),
])
def test_bad_config_names_the_key(tmp_path, text, needle):
    with pytest.raises(ConfigError) as info:
        config.load(write(tmp_path, text), environ={})
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_explicit_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        config.load(tmp_path / "nope.toml", environ={})
