"""The scenario registry. `get_scenario(id)` is the front door for the page, the CLI and the API."""
from scenarios.base import ConfigError, RunResult, Scenario, ScenarioConfig

_REGISTRY: dict[str, Scenario] = {}


def register(scenario: Scenario) -> Scenario:
    if scenario.id in _REGISTRY:
        raise ValueError(f"scenario {scenario.id!r} is registered twice")
    _REGISTRY[scenario.id] = scenario
    return scenario


def get_scenario(scenario_id: str) -> Scenario:
    try:
        return _REGISTRY[scenario_id]
    except KeyError:
        raise KeyError(f"unknown scenario {scenario_id!r}; known: {', '.join(_REGISTRY)}") from None


def all_scenarios() -> list[Scenario]:
    return list(_REGISTRY.values())


def _register_builtin() -> None:
    from scenarios.vanishing_gradients import VanishingGradients
    register(VanishingGradients())


_register_builtin()

__all__ = ["ConfigError", "RunResult", "Scenario", "ScenarioConfig", "all_scenarios", "get_scenario", "register"]
