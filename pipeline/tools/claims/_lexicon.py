"""How text claims one capability: the verbs and step names a capability declares (``@capability(lexicon=…)``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lexicon:
    """How text claims one capability; each capability declares its own (``@capability(lexicon=…)``).

    ``verbs``: phrases that assert the act (``published``, ``已发布``); ``[claims]`` in config.toml adds more.
    ``zh_step`` / ``en_step``: how the step is named, for a name plus a done mark ("台账也记录好了",
    "Publish: done"). ``zh_generic``: those of its Chinese step words that say "written" or "sent" of
    anything, so they belong to a step that ``absorbs_generic`` (the report) when it is named too.
    """

    verbs: tuple[str, ...] = ()
    zh_step: str | None = None
    en_step: str | None = None
    zh_generic: str | None = None
    absorbs_generic: bool = False
