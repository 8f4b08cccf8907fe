"""Compose the Hydra configuration from conf/, with one clear sentence for an unknown name."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness.errors import ForgeBenchError

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
GROUPS = ("agent", "model", "platform", "suite", "budget")


def group_options(group: str) -> list[str]:
    """The entries of a config group: its YAML files (the group is the registry)."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def _choose(group: str, value: str | None) -> list[str]:
    if value is None:
        return []
    if value not in group_options(group):
        if group == "model" and "/" in value:
            # Any litellm model string works without a conf entry of its own.
            return ["model=litellm", f"model.name={value}"]
        raise ForgeBenchError(
            f"unknown {group} '{value}'; choose one of {', '.join(group_options(group))} (the files in conf/{group}/)."
        )
    return [f"{group}={value}"]


def compose(
    agent: str | None = None,
    model: str | None = None,
    platform: str | None = None,
    suite: str | None = None,
    overrides: list[str] | None = None,
) -> DictConfig:
    """The run's configuration: conf/config.yaml, the chosen entries, then raw overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    choices = [o for group, value in zip(GROUPS, (agent, model, platform, suite)) for o in _choose(group, value)]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = hydra_compose("config", overrides=choices + list(overrides or []))
        OmegaConf.resolve(cfg)
    except (HydraException, OmegaConfBaseException) as exc:
        first = str(exc).strip().splitlines()[0]
        raise ForgeBenchError(f"the configuration does not compose: {first}; check the override's spelling.") from exc
    finally:
        GlobalHydra.instance().clear()
    return cfg


def instantiate(node: DictConfig, what: str, **kwargs):
    """Build the object a config entry names, with a sentence instead of a deep traceback."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate as hydra_instantiate

    try:
        return hydra_instantiate(node, _convert_="all", **kwargs)
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, ForgeBenchError):
            raise cause from None
        raise ForgeBenchError(f"the {what} configuration cannot be built: {cause}; fix conf/{what}/.") from exc
