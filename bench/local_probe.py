"""How fast is the embedded model on this machine? Load, one tool decision, 200 tokens of prose.

Run: .venv/bin/python bench/local_probe.py [--data-dir var] [--tries 5]
Everything goes through ``litellm.completion("local/…")``, the path the pipeline
uses, so the numbers include the provider's own overhead. Each decision starts
from the pipeline's real system prompt, task and six tool schemas; a correct
decision is a call of ``topic``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODEL = "local/qwen2.5-coder-1.5b"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="var")
    ap.add_argument("--tries", type=int, default=5, help="tool decisions to time")
    args = ap.parse_args()

    from pipeline.model.local.provider import prepare, register_local_provider
    from pipeline.tools.catalog import capabilities
    from pipeline.tools.prompts import Prompts
    from pipeline.tools.toolbox import Toolbox

    t = time.perf_counter()
    import litellm

    litellm.suppress_debug_info = True
    print(f"import litellm        {time.perf_counter() - t:6.2f} s")
    register_local_provider(args.data_dir)
    t = time.perf_counter()
    prepare(args.data_dir)
    print(f"weights ready         {time.perf_counter() - t:6.2f} s")

    t = time.perf_counter()
    litellm.completion(model=MODEL, messages=[{"role": "user", "content": "Say OK."}], max_tokens=1, num_retries=0)
    print(f"load (+1 token)       {time.perf_counter() - t:6.2f} s")

    prompts = Prompts()
    messages = [{"role": "system", "content": prompts.render("system.md")},
                {"role": "user", "content": prompts.render("task.md", channel="default", today="2026-01-01")}]
    tools = Toolbox(capabilities()).schemas()
    right = 0
    for i in range(args.tries):
        t = time.perf_counter()
        r = litellm.completion(model=MODEL, messages=messages, tools=tools, tool_choice="auto", temperature=0.3,
                               num_retries=0)
        dt = time.perf_counter() - t
        calls = r.choices[0].message.tool_calls or []
        name = calls[0].function.name if calls else None
        right += name == "topic"
        what = f"{name}({calls[0].function.arguments})" if calls else f"prose: {(r.choices[0].message.content or '')[:60]!r}"
        cached = "cold prompt" if i == 0 else "cached prompt"
        print(f"tool decision {i + 1}       {dt:6.2f} s  {r.usage.prompt_tokens} prompt tok ({cached}), "
              f"{r.usage.completion_tokens} out  -> {what}")
    print(f"first call correct    {right}/{args.tries}")

    t = time.perf_counter()
    r = litellm.completion(model=MODEL, max_tokens=200, temperature=0.3, num_retries=0, messages=[
        {"role": "system", "content": "You write articles for working software engineers."},
        {"role": "user", "content": "Topic: Retries without tears\nAngle: backoff budgets"}])
    dt = time.perf_counter() - t
    n = r.usage.completion_tokens
    print(f"plain completion      {dt:6.2f} s  {n} tokens, {n / dt:.1f} tok/s overall")
    print(f"peak RSS              {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:6.0f} MiB")
    print(f"load average          {' '.join(f'{x:.2f}' for x in os.getloadavg())}  (on {os.cpu_count()} CPUs)")
    return 0 if right == args.tries else 1


if __name__ == "__main__":
    sys.exit(main())
