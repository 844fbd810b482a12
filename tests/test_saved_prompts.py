"""The agent's first prompt kept across runs (pipeline.model.local.saved_prompts), against a fake of llama.cpp's
/slots endpoint; the real server's restore is in the local tier (tests/test_local_model.py)."""

from __future__ import annotations

import json
import os

import httpx

from pipeline.model.local.saved_prompts import KEEP, SavedPrompts, first_turn

SYSTEM = {"role": "system", "content": "You are the operator of an automated content pipeline."}
TOOLS = [{"type": "function", "function": {"name": "topic", "parameters": {"type": "object"}}}]


def fake_llama(directory, refuse_restore=False):
    """llama.cpp's /slots/{id}?action=save|restore: a save writes the file under ``directory``."""
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        action = request.url.params["action"]
        filename = json.loads(request.content)["filename"]
        seen.append((request.url.path, action, filename, request.headers.get("authorization")))
        if action == "save":
            (directory / filename).write_bytes(b"kv")
            return httpx.Response(200, json={"n_saved": 500})
        if refuse_restore:
            return httpx.Response(400, json={"error": {"message": "Unable to restore slot"}})
        return httpx.Response(200, json={"n_restored": 500})
    client = httpx.Client(base_url="http://llama", transport=httpx.MockTransport(handle), headers={"Authorization": "Bearer k"})
    return client, seen


def request(day):
    return {"messages": [SYSTEM, {"role": "user", "content": f"Run the pipeline. Today is {day}."}], "tools": TOOLS}


def test_a_saved_first_prompt_is_found_by_the_next_days_run_and_restored(tmp_path):
    client, seen = fake_llama(tmp_path)
    store = SavedPrompts(tmp_path, client, "model-sha n_ctx q8")
    monday, tuesday = store.name(request("2026-12-07")), store.name(request("2026-12-08"))
    assert monday == tuesday  # the task line names the day; the system turn and tools are the cached part
    assert not store.restore(0, monday)  # nothing saved yet: the prompt is read as before
    store.save(0, monday)
    assert (tmp_path / monday).read_bytes() == b"kv" and not list(tmp_path.glob("*.part"))
    assert store.restore(0, tuesday)
    assert [s[:2] for s in seen] == [("/slots/0", "save"), ("/slots/0", "restore")]
    assert seen[0][2].endswith(".part") and seen[1][2] == monday and seen[1][3] == "Bearer k"


def test_another_model_or_prompt_is_another_file(tmp_path):
    client, _ = fake_llama(tmp_path)
    name = SavedPrompts(tmp_path, client, "model-a").name(request("d"))
    assert SavedPrompts(tmp_path, client, "model-b").name(request("d")) != name
    changed = request("d")
    changed["messages"][0] = {"role": "system", "content": "A new system prompt."}
    assert SavedPrompts(tmp_path, client, "model-a").name(changed) != name
    assert SavedPrompts(tmp_path, client, "model-a").name({**request("d"), "tools": []}) != name


def test_a_file_llama_cpp_refuses_is_deleted_and_the_prompt_read_as_before(tmp_path):
    client, _ = fake_llama(tmp_path, refuse_restore=True)
    store = SavedPrompts(tmp_path, client, "fp")
    name = store.name(request("d"))
    (tmp_path / name).write_bytes(b"from another runtime")
    assert not store.restore(0, name) and not (tmp_path / name).exists()


def test_only_the_newest_files_are_kept(tmp_path):
    client, _ = fake_llama(tmp_path)
    store = SavedPrompts(tmp_path, client, "fp")
    for n in range(KEEP + 3):
        old = tmp_path / f"old{n}.kv"
        old.write_bytes(b"kv")
        os.utime(old, (1_000_000 + n, 1_000_000 + n))
    store.save(0, store.name(request("d")))
    left = sorted(p.name for p in tmp_path.glob("*.kv"))
    assert len(left) == KEEP and store.name(request("d")) in left and "old0.kv" not in left


def test_only_a_conversations_first_turn_is_saved_or_restored():
    assert first_turn([SYSTEM, {"role": "user", "content": "go"}])
    assert not first_turn([SYSTEM, {"role": "user", "content": "go"}, {"role": "assistant", "content": ""},
                           {"role": "tool", "content": "{}"}])
