"""The house rules a refactor must not undo: no import circle, every capability declared once."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

from pipeline.run.guard import Guard, NextStep
from pipeline.tools import catalog as registry
from pipeline.tools.claims import Lexicon
from pipeline.tools.prompts import Prompts

from support import REPO


def _modules() -> dict[str, Path]:
    mods = {}
    for root in ("pipeline",):
        for path in (REPO / root).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import: at module level, inside a function, and under TYPE_CHECKING alike."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


@functools.cache
def _graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (built once per session; the tests only read it)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                # `from package import module` depends on the module (and not on the package's __init__)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                targets = [a.name for a in node.names]
            for t in targets:
                while t and t not in mods:  # `from pipeline.x.y import Name`: the module pipeline.x.y
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return found


def test_no_import_circle_even_through_lazy_imports():
    graph = _graph()
    assert "pipeline.model.messages" in graph["pipeline.model.llm"] and "pipeline.tools.catalog" in graph["pipeline.run.runner"]  # lazy too
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check can fail
    assert _cycles(graph) == []


# Which part may import which: a module imports only from its own layer or the layers before it.
# Bottom to top; each line of the README's "Where things live" is one of these.
LAYERS: list[tuple[str, ...]] = [
    ("pipeline", "pipeline.states", "pipeline.errors", "pipeline.config", "pipeline.prompts"),  # shared vocabulary
    ("pipeline.text",),
    ("pipeline.runtime",),
    ("pipeline.ledger",),
    ("pipeline.model",),
    ("pipeline.score",),
    ("pipeline.sources",),
    ("pipeline.views",),
    ("pipeline.tools",),
    ("pipeline.publishing",),
    ("pipeline.capabilities",),
    ("pipeline.run",),
    ("pipeline.ops",),
    ("pipeline.cli", "pipeline.__main__", "pipeline.testing"),  # entry points: may use any layer
]
# The one import that runs up, with its reason: [humanize] threshold, when unset, is the calibrated pass mark
# of the scorer in use (HumanizeConfig.pass_mark, a lazy import; no module circle, the graph test says).
UPWARD = {("pipeline.config", "pipeline.score.scoring")}


def _layer(module: str) -> int:
    best = max((p for layer in LAYERS for p in layer if module == p or module.startswith(p + ".")), key=len)
    return next(i for i, layer in enumerate(LAYERS) if best in layer)


def test_every_import_runs_down_the_layers():
    graph = _graph()
    assert set(graph) and all(_layer(m) >= 0 for m in graph)  # every module has a layer
    upward = sorted((m, t) for m, targets in graph.items() for t in targets
                    if _layer(t) > _layer(m) and (m, t) not in UPWARD)
    assert upward == []
    assert _layer("pipeline.run.runner") > _layer("pipeline.publishing.settle")  # the check can fail


# What hands out the whole run config: the class, and the functions that read one from a file.
WHOLE_CONFIG = ("Config", "load", "require")
# The modules that hold the whole run config: the orchestrators, which take its sections apart for everything
# else (a capability gets RunSettings, a publisher its [publish] section and base directory, redact its secrets).
CONFIG_HOLDERS = {
    "pipeline.cli",
    "pipeline.run.runner", "pipeline.run.validate",
    "pipeline.ops.daemon", "pipeline.ops.celery_engine",
    "pipeline.views.status",  # shows every channel
}


def _absolute(package: str, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` names, its relative dots resolved against ``package``."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    return ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a chain of names, else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _config_holders(sources: dict[str, tuple[str, bool]]) -> set[str]:
    """The modules (name -> (source, is a package)) that hold the whole run config.

    One that imports ``Config`` (or ``load``/``require``) from pipeline.config in any form, lazily or under
    TYPE_CHECKING too, uses it through the module (``config_mod.Config``), or reads a run context's ``ctx.cfg``.
    """
    found = set()
    for name, (source, is_package) in sources.items():
        package = name if is_package else name.rsplit(".", 1)[0]
        tree = ast.parse(source)
        aliases = set()  # the names this module binds to pipeline.config
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(package, node)
                if base == "pipeline.config" and any(a.name in WHOLE_CONFIG for a in node.names):
                    found.add(name)
                aliases |= {a.asname or a.name for a in node.names if f"{base}.{a.name}" == "pipeline.config"}
            elif isinstance(node, ast.Import):
                aliases |= {a.asname or a.name for a in node.names if a.name == "pipeline.config"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (
                    (node.attr in WHOLE_CONFIG and _dotted(node.value) in aliases)
                    or (node.attr == "cfg" and _dotted(node.value).rpartition(".")[2] == "ctx")):
                found.add(name)
    return found


def test_the_run_config_reaches_few_modules():
    """A function gets the config section or the values it reads; only the orchestrators hold the whole Config."""
    synthetic = {
        "pipeline.a.x": ("from ..config import LLMConfig\ndef f(ctx): return ctx.settings.topic", False),
        "pipeline.a.y": ("def f():\n    from ..config import Config", False),
        "pipeline.a.z": ("from pipeline import config as c\nc.load()", False),
        "pipeline.a.w": ("def f(self): return self.ctx.cfg.publish", False),
    }
    assert _config_holders(synthetic) == {"pipeline.a.y", "pipeline.a.z", "pipeline.a.w"}  # the check can fail
    holders = _config_holders({name: (path.read_text(encoding="utf-8"), path.name == "__init__.py")
                               for name, path in _modules().items()})
    assert holders == CONFIG_HOLDERS
    assert len(holders | {"pipeline.config"}) <= 10


def test_the_top_level_holds_few_modules():
    """The package's top level is its shared vocabulary and its entry points; everything else lives in a room."""
    top = sorted(p.name for p in (REPO / "pipeline").glob("*.py"))
    assert len(top) <= 12, top


def _bare_status_strings(tree: ast.AST) -> list[int]:
    """Lines that compare, assign, filter or write a ``status`` as a bare string instead of a member of pipeline.states."""
    found = []
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.Compare) and any(isinstance(p, ast.Attribute) and p.attr == "status"
                                                 for p in [node.left, *node.comparators]):
            values = [node.left, *node.comparators]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "status" for t in node.targets):
            values = [node.value]
        elif isinstance(node, ast.keyword) and node.arg == "status":
            values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "in_"
              and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "status" and node.args
              and isinstance(node.args[0], (ast.Tuple, ast.List))):
            values = list(node.args[0].elts)
        found += [v.lineno for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return found


def test_states_are_named_not_spelled():
    """states.py names every state once; code compares and writes the members, never the bare strings."""
    assert _bare_status_strings(ast.parse('if row.status == "done": row.status = "x"')) == [1, 1]  # the check can fail
    offenders = {}
    for name, path in _modules().items():
        if ".migrations" in name:  # a revision is frozen history: it spells the values it wrote
            continue
        lines = _bare_status_strings(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            offenders[name] = lines
    assert offenders == {}


def test_pipeline_never_imports_a_capability_module():
    """Data flows one way: capabilities use pipeline/, and only the registry finds them."""
    graph = _graph()
    offenders = {m: sorted(t for t in targets if t.startswith("pipeline.capabilities"))
                 for m, targets in graph.items()
                 if not m.startswith("pipeline.capabilities") and m != "pipeline.tools.catalog"}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_everything_about_a_capability_is_derived_from_its_declaration():
    caps = registry.capabilities()
    assert [c.name for c in caps] == ["topic", "draft", "humanize", "publish", "register", "report"]
    assert [c.order for c in caps] == sorted(c.order for c in caps)
    assert registry.fact_keys() == {c.name: c.fact for c in caps}
    assert registry.toolbox().names == registry.names()
    assert all(isinstance(c.lexicon, Lexicon) and c.lexicon.verbs for c in caps)
    # A capability's own idea of "finished" (a humanize below the threshold is not)
    humanize = registry.get("humanize")
    assert humanize.finished({"score": 80, "passed": True}) and not humanize.finished({"score": 40, "passed": False})


def test_a_step_without_a_needs_line_of_its_own_gets_the_generic_one():
    """A new capability needs no nudge text: its arguments and the values earlier steps returned say it."""
    guard = Guard(ledger=None, rules=None, done_when=[], prompts=Prompts(), language="en", tool_names=[])  # type: ignore[arg-type]
    line = guard.next_step_line(NextStep("announce", ["publication_id"], {"publication_id": 7}))
    assert line == "Next step: call `announce` now through tool_calls — pass publication_id 7."


@pytest.mark.slow
def test_listing_the_capabilities_imports_no_database_or_http_library():
    import subprocess

    code = ("import sys; from pipeline.tools import catalog as registry; registry.capabilities(); registry.lexicons(); "
            "print(sorted(m for m in ('sqlalchemy', 'sqlmodel', 'httpx', 'litellm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
