"""The short form of bench/torture.py: at least 10 SIGKILLs and 3 SIGTERMs per target, each inside a run's
work window (never during interpreter start-up), then the ledger is audited against the platform."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import torture

pytestmark = pytest.mark.slow
KILLS, TERMS = 10, 3


@pytest.fixture(scope="module")
def server():
    s = torture.ForkServer()
    yield s
    s.close()


@pytest.mark.timeout(900)  # tens of seconds per target on an idle machine; minutes on a shared, loaded one
@pytest.mark.parametrize("target", ["local", "webhook"])
def test_kills_and_sigterms_inside_the_work_window_lose_and_duplicate_nothing(server, tmp_path, target):
    r = torture.torture(target, KILLS, TERMS, tmp_path, seed=7, server=server, log=lambda *_: None)
    assert r["kills_in_window"] >= KILLS and r["terms_in_window"] >= TERMS, r
    assert r["term_exit_codes"] == [130], r  # every SIGTERM: exit 130, recorded interrupted
    assert r["integrity"] == "ok"
    assert (r["duplicates"], r["lost"], r["phantoms"], r["running"]) == (0, 0, 0, 0), r
    assert r["runs"].get("crashed", 0) == r["kills_in_window"]  # each killed run marked crashed by the next
    assert r["runs"].get("interrupted", 0) == r["terms_in_window"]
    assert r["final_run_exit"] == 0 and r["posts"] >= 1
    if r["unregistered"]:
        # The one invariant this branch does not provide: reconciling the posts of killed/interrupted runs
        # (item 5) is built with issue 9. Once merged this line is not reached and the test passes.
        pytest.xfail(f"{r['unregistered']} verified publication(s) without a registration: item 5, issue 9")
