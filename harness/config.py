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


def task_patterns(cfg) -> str | list[str]:
    """The tasks a suite configuration selects: its `tasks` where given, else its task set's (a
    composed DictConfig, or the plain dict a suite run records as config.json)."""
    return cfg["tasks"] if cfg.get("tasks") is not None else list(cfg["suite"]["tasks"])


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


def _default_choices() -> dict[str, str]:
    """The entry of each group conf/config.yaml picks."""
    import yaml

    entries = yaml.safe_load((CONF_DIR / "config.yaml").read_text())["defaults"]
    return {k: v for entry in entries if isinstance(entry, dict) for k, v in entry.items()}


def _origin(key: str, overrides: list[str]) -> str:
    """Where a setting's value came from: the override that set it, or the YAML file of its group."""
    key = key.split("[", 1)[0]  # evaluate.check_seeds[0] came from where evaluate.check_seeds did
    for override in reversed(overrides):
        name = override.split("=", 1)[0].lstrip("+~")
        if key == name or key.startswith(f"{name}."):
            return f"the override {override}"
    group = key.split(".", 1)[0]
    choices = _default_choices()
    for override in overrides:
        name, _, value = override.partition("=")
        if name == group:
            choices[group] = value
    if group in choices:
        return f"conf/{group}/{choices[group]}.yaml"
    return "conf/config.yaml"


def _expected(exc) -> str:
    """What a setting must be, from OmegaConf's message ('... could not be converted to Float')."""
    import re

    if "ListConfig" in exc.msg:
        return "a list, such as [a, b]"
    if "DictConfig" in exc.msg:
        return "a mapping, such as {key: value}"
    match = re.search(r"converted to (\w+)|is not a valid (\w+)", exc.msg)
    kind = (match.group(1) or match.group(2)).lower() if match else ""
    names = {"float": "a number", "integer": "a whole number", "bool": "true or false", "boolean": "true or false"}
    return names.get(kind, f"a {kind}" if kind else "a value of another type")


def _sentence(exc: BaseException, overrides: list[str]) -> str:
    """One sentence for a configuration error: the key, the value, what it must be, where it came from."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

    from harness.errors import SettingOutOfRange

    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, (OmegaConfBaseException, SettingOutOfRange)):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, SettingOutOfRange):
        return f"{cause} (from {_origin(cause.key, overrides)}); fix the value."
    key = getattr(cause, "full_key", None) if cause is not None else None
    if key and isinstance(cause, (ConfigKeyError, ConfigAttributeError)):
        return (
            f"'{key}' is not a setting (from {_origin(key, overrides)}); check its spelling against "
            "harness/schema.py and the entries of conf/."
        )
    if key and isinstance(cause, ValidationError):
        return (
            f"{key} is {cause.value!r} (from {_origin(key, overrides)}), but it must be {_expected(cause)}; "
            "fix the value."
        )
    first = str(exc).strip().splitlines()[0]
    return f"the configuration does not compose: {first}; check the override's spelling."


def compose(
    agent: str | None = None,
    model: str | None = None,
    platform: str | None = None,
    suite: str | None = None,
    overrides: list[str] | None = None,
) -> DictConfig:
    """The run's configuration: the schema, conf/config.yaml, the chosen entries, then raw overrides;
    every value checked against its type and range before anything runs."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from harness.errors import SettingOutOfRange
    from harness.schema import TARGET_GROUPS, register

    choices = [o for group, value in zip(GROUPS, (agent, model, platform, suite)) for o in _choose(group, value)]
    everything = choices + list(overrides or [])
    # First the entries alone, to learn which class each names; then everything, each group typed by its class.
    selections = [o for o in everything if o.split("=", 1)[0].lstrip("+") in GROUPS]
    try:
        register()
        chosen = _hydra_compose(choices + selections)
        records = register({g: chosen[g]["_target_"] for g in TARGET_GROUPS if "_target_" in chosen[g]})
        cfg = _hydra_compose(everything)
        OmegaConf.resolve(cfg)
        for group, record in records.items():
            # Merged again into the bare schema: a key added with +key=value is refused too.
            schema = OmegaConf.create({group: OmegaConf.structured(record)})
            checked = OmegaConf.merge(schema, {group: OmegaConf.to_container(cfg[group])})
            if group in ("evaluate", "budget"):
                OmegaConf.to_object(checked[group])  # runs the records' range checks
    except (HydraException, OmegaConfBaseException, SettingOutOfRange) as exc:
        raise ForgeBenchError(_sentence(exc, everything)) from exc
    return cfg


def _hydra_compose(overrides: list[str]) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose("config", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


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
