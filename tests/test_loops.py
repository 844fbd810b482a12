"""A reply stuck in a loop ends where the loop begins (pipeline.model.loops), as the local provider streams it."""

from __future__ import annotations

import pytest

from pipeline.model.local import provider
from pipeline.model.loops import LoopGuard

LOOPED = "We also used a build tool that was optimized for our specific use case. "


def streamed(text: str, size: int = 3) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def test_the_third_time_a_sentence_is_said_the_reply_ends_before_it():
    guard = LoopGuard()
    opening = "Our builds were slow for a year before anyone measured them. "
    pieces = streamed(opening + LOOPED * 26)
    fed = 0
    for piece in pieces:
        fed += 1
        if guard.feed(piece):
            break
    assert guard.looped and fed < len(pieces) // 4  # the cores are freed early, not at max_tokens
    assert guard.text == (opening + LOOPED * 2).rstrip()


def test_short_echoes_and_varied_prose_do_not_trip_it():
    guard = LoopGuard()
    text = "That stung. " * 5 + " ".join(f"Week {i} took {40 - i} minutes, down from the week before." for i in range(9))
    assert not any(guard.feed(p) for p in streamed(text)) and guard.text == text


def test_a_chinese_loop_is_ended_too():
    guard = LoopGuard()
    said = "我们把缓存键改成了锁文件的哈希，构建时间从四十分钟降到了十二分钟。"
    for piece in streamed("夜间构建慢了一整年。" + said * 5, 2):
        guard.feed(piece)
    assert guard.looped and guard.text == "夜间构建慢了一整年。" + said * 2


def test_a_loop_that_changes_a_word_each_time_ends_at_its_third_sentence():
    # make run, 2026-12-06: 37 such sentences over two calls, 42 s, every one deleted afterwards as a repeat.
    guard = LoopGuard()
    opening = "We measured every stage of the nightly build before touching it. "
    said = [f"We also ran our builds on different {x} to ensure that the improvements were not specific to a particular one. "
            for x in ("operating systems", "time zones", "browsers", "devices", "networks")]
    for piece in streamed(opening + "".join(said)):
        if guard.feed(piece):
            break
    assert guard.looped and guard.text == (opening + said[0] + said[1]).rstrip()
    zh = [f"我们还在不同的{x}上运行了构建，以确保这些改进并不只适用于某一种特定的环境。" for x in ("操作系统", "时区", "浏览器", "设备")]
    guard = LoopGuard()
    for piece in streamed("".join(zh), 2):
        guard.feed(piece)
    assert guard.looped and guard.text == zh[0] + zh[1]
    # Prose that shares shorter runs goes on.
    guard = LoopGuard()
    varied = ("The cache key included the date, so every build started cold. We changed the key to the lockfile's hash. "
              "The cache key now changes only when the lockfile does. Builds that start warm finish in nine minutes. ")
    assert not any(guard.feed(p) for p in streamed(varied))


class FakeServer:
    """llama.cpp's streamed chat completions, one chunk a piece."""

    def __init__(self, text: str) -> None:
        self.pieces, self.sent = streamed(text), 0

    def handle_chat_completions(self, req, on_chunk):
        for piece in self.pieces:
            self.sent += 1
            if on_chunk({"choices": [{"delta": {"content": piece}, "finish_reason": None}]}):
                return None
        on_chunk({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"completion_tokens": len(self.pieces)}})
        return None


def test_the_local_provider_ends_a_looping_reply_and_returns_what_came_before():
    server = FakeServer("It began with the cache. " + LOOPED * 20)
    reply = provider._generate(server, {"messages": []}, None)
    assert reply["choices"][0]["message"]["content"] == ("It began with the cache. " + LOOPED * 2).rstrip()
    assert reply["choices"][0]["finish_reason"] == "stop" and server.sent < len(server.pieces) // 5
    constrained = FakeServer('{"a": "' + LOOPED * 4 + '"}')
    reply = provider._generate(constrained, {"messages": [], "response_format": {"type": "json_object"}}, None)
    assert reply["choices"][0]["message"]["content"].count("optimized") == 4  # a JSON reply is left to its schema


@pytest.mark.litellm
def test_fresh_wording_reaches_llama_cpp_as_its_dry_sampler_and_only_for_the_embedded_model(monkeypatch):
    # A rewrite asks for wording of its own: llama.cpp's DRY sampler penalises runs of the prompt (provider.FRESH_WORDING)
    import litellm

    from pipeline.config import LLMConfig
    from pipeline.model.llm import ChatModel

    sent: list[dict] = []

    def generate(server, req, limit_ms):
        sent.append(req)
        return {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    monkeypatch.setattr(provider, "_generate", generate)
    monkeypatch.setattr(provider, "_load", lambda: object())
    model = ChatModel(LLMConfig(model="local/qwen2.5-coder-1.5b"))
    model.complete([{"role": "user", "content": "rewrite"}], fresh_wording=True)
    model.complete([{"role": "user", "content": "write"}])
    assert {k: sent[0][k] for k in provider.FRESH_WORDING} == provider.FRESH_WORDING
    assert not any(k in sent[1] for k in provider.FRESH_WORDING)
    asked: list[dict] = []

    def remote(**kwargs):
        asked.append(kwargs)
        raise SystemExit  # the request is what is checked; no reply is needed
    monkeypatch.setattr(litellm, "completion", remote)
    with pytest.raises(SystemExit):
        ChatModel(LLMConfig(model="openai/gpt-4o-mini", api_key_env="")).complete([{"role": "user", "content": "x"}],
                                                                               fresh_wording=True)
    assert not any(k in asked[0] for k in provider.FRESH_WORDING)  # a remote API has no such sampler
