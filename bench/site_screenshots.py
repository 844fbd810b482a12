"""Screenshots of the local site: the index and a post, at 1280 px (desktop) and 390 px (phone).

Builds a demo site with the local publisher (a Chinese post, an English post
and a title full of markup), serves it with ``pipeline serve``'s handler on
127.0.0.1 and photographs it with headless Chromium from Debian's ``chromium``
package (``apt-get install chromium fonts-noto-cjk``; ``make test`` installs
them when run as root). Writes docs/screenshots/site-{index,post}-{1280,390}.png.

    .venv/bin/python bench/site_screenshots.py [--out docs/screenshots]
    .venv/bin/python bench/site_screenshots.py --site var/site --name article-en   # the newest post of a real run, whole
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sitebrowser import build_demo_site, chromium, screenshot, serving  # noqa: E402

SIZES = {"1280": (1280, 900), "390": (390, 844)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--site", type=Path, help="a site a run published (e.g. var/site): its newest post, whole")
    parser.add_argument("--name", default="article", help="with --site: the screenshot's name (<name>-1280.png)")
    parser.add_argument("--height", type=int, default=4200, help="with --site: the page's height in pixels")
    args = parser.parse_args()
    if chromium() is None:
        print("chromium not found: apt-get install chromium fonts-noto-cjk", file=sys.stderr)
        return 7
    if args.site:
        newest = max((args.site / "posts").glob("*.html"), key=lambda p: p.stat().st_mtime)
        with serving(args.site) as base:
            print(screenshot(f"{base}/posts/{newest.name}", args.out / f"{args.name}-1280.png", 1280, args.height))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        build_demo_site(Path(tmp) / "site")
        with serving(Path(tmp) / "site") as base:
            pages = {"index": f"{base}/index.html", "post": f"{base}/posts/ci-cache-keys.html"}
            for name, url in pages.items():
                for label, (width, height) in SIZES.items():
                    path = screenshot(url, args.out / f"site-{name}-{label}.png", width, height)
                    print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
