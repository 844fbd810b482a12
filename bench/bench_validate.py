"""Up-front validation, timed (issue 14, item 7): bad local state must end in exit 2 within 0.5 s.

    .venv/bin/python bench/bench_validate.py [--repeat 5]

For each bad state (unknown time zone, bad cron, empty model, config not UTF-8, ledger not SQLite):
the wall time of a whole ``pipeline run`` process (interpreter start, CLI imports, the check, exit)
and the time of the check alone in-process (``config.load`` + ``validate.upfront``). Writes
bench/results/validate.json with the load average, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline import config as config_mod  # noqa: E402
from pipeline.errors import ConfigError  # noqa: E402
from pipeline.run import validate  # noqa: E402

BASE = '[llm]\nmodel = "openai/x"\napi_key_env = ""\n[ledger]\nurl = "sqlite:///ledger.db"\n'
CASES = {
    "register_timezone": BASE + '[register]\ntimezone = "Mars/Olympus_Mons"\n',
    "bad_cron": BASE + '[daemon]\ncron = "61 25 * * *"\n',
    "empty_model": '[llm]\nmodel = ""\n',
    "not_utf8": b'[llm]\nmodel = "caf\xe9"\n',
    "ledger_not_sqlite": BASE,
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in CASES.items():
            d = Path(tmp) / name
            d.mkdir()
            cfg = d / "config.toml"
            cfg.write_bytes(text if isinstance(text, bytes) else text.encode())
            if name == "ledger_not_sqlite":
                (d / "ledger.db").write_text("not a database\n")
            walls, checks, codes = [], [], set()
            for _ in range(args.repeat):
                start = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(cfg)], cwd=d,
                                   capture_output=True, text=True, timeout=120)
                walls.append(time.perf_counter() - start)
                codes.add(r.returncode)
                start = time.perf_counter()
                try:
                    validate.upfront(config_mod.load(cfg))
                except ConfigError:
                    pass
                checks.append((time.perf_counter() - start) * 1000)
            results[name] = {"exit_codes": sorted(codes), "process_wall_median_s": round(statistics.median(walls), 3),
                             "check_median_ms": round(statistics.median(checks), 2), "message": r.stderr.strip()}
            print(name, results[name], flush=True)
    results["load_average_1m"] = round(os.getloadavg()[0], 2)
    (REPO / "bench" / "results" / "validate.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0 if all(v["exit_codes"] == [2] for k, v in results.items() if isinstance(v, dict)) else 1


if __name__ == "__main__":
    sys.exit(main())
