"""The MLflow store a command reads or writes: its two options, and the store they name, checked."""

from __future__ import annotations

import argparse


def add_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--tracking-uri", default=None, help="MLflow store (default: MLFLOW_TRACKING_URI or sqlite:///mlflow.db)"
    )
    command.add_argument("--experiment", default=None, help="MLflow experiment (default: forgebench)")


def named(args: argparse.Namespace) -> tuple[str, str]:
    """The tracking URI and experiment the options name, else their defaults."""
    from harness.record import store

    return store(args.tracking_uri, args.experiment)


def checked(args: argparse.Namespace) -> tuple[str, str]:
    """The store and experiment the options name, which must exist (a reader never creates a store)."""
    from harness.record import check_experiment, check_store_exists

    tracking_uri, experiment = named(args)
    check_store_exists(tracking_uri)
    check_experiment(tracking_uri, experiment)
    return tracking_uri, experiment
