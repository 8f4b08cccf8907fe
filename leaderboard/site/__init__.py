"""The static site (`forgebench site OUT`): leaderboards, comparisons, charts and tree inspectors from MLflow alone."""

from leaderboard.site.build import build_site
from leaderboard.site.data import load_site

__all__ = ["build_site", "load_site"]
