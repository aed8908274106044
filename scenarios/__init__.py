"""The scenario registry. `get_scenario(id)` is the front door for the page, the CLI and the API.

Every module in this package except the shared ones (`base`, `plotting`) is a scenario
module: importing the package imports each of them and registers every `Scenario`
subclass it defines. Adding a scenario is adding one file; nothing here changes.
Gallery order: the class attribute `order`, then the title.
"""
import importlib
import inspect
import pkgutil

from scenarios.base import ConfigError, RunResult, Scenario, ScenarioConfig

SHARED_MODULES = {"base", "claims", "config", "driver", "explanation", "plotting", "records"}

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
    return sorted(_REGISTRY.values(), key=lambda s: (s.order, s.title))


def _register_builtin() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in SHARED_MODULES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Scenario) and cls is not Scenario and cls.__module__ == module.__name__:
                register(cls())


_register_builtin()

__all__ = ["ConfigError", "RunResult", "Scenario", "ScenarioConfig", "all_scenarios", "get_scenario", "register"]
