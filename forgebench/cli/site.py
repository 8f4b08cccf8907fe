"""`forgebench site OUT`: a static site (leaderboards, charts, tree inspectors) from MLflow alone."""

from __future__ import annotations

import argparse
from pathlib import Path

from forgebench.cli import store


def add(sub) -> None:
    site = sub.add_parser("site", help="a static site (leaderboards, charts, tree inspectors) from MLflow alone")
    site.add_argument("out", metavar="OUT", help="the folder to write (made if missing); open OUT/index.html")
    store.add_options(site)
    site.set_defaults(handler=build)


def build(args: argparse.Namespace) -> int:
    from leaderboard.site import build_site, load_site

    tracking_uri, experiment = store.checked(args)
    out = Path(args.out)
    written = build_site(load_site(tracking_uri, experiment), out)
    print(f"wrote {len(written)} pages under {out}; open {out / 'index.html'}")
    return 0
