"""What Hydra chose for this run: the option picked in each config group and the command line's overrides."""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig


def config_choices() -> dict[str, str]:
    """The option picked in each config group (task, data, encoder, attention, decoder, ...), when run by Hydra."""
    if not HydraConfig.initialized():
        return {}
    choices = HydraConfig.get().runtime.choices
    # the groups a user picks; not Hydra's own, not the data options every data config shares, not the unset ones
    return {
        group: str(option) for group, option in choices.items()
        if option is not None and not group.startswith(("hydra", "data_common"))
    }


def command_line_overrides() -> dict[str, str]:
    """This run's ``key=value`` overrides (a sweep's job: its own values), when run by Hydra."""
    if not HydraConfig.initialized():
        return {}
    pairs = (override.split("=", 1) for override in HydraConfig.get().overrides.task if "=" in override)
    return {key.lstrip("+~"): value for key, value in pairs}
