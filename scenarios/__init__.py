"""The scenario registry. `get_scenario(id)` is the front door for the page, the CLI and the API.

The modules at the top of this package are the shared contract (base, config, driver, records,
claims, explanation, plotting, and the helpers every scenario may use). Every sub-package is one
scenario: `scenarios/<name>/__init__.py` defines its `Scenario` subclass, and its other modules
(figures, claims, launch helpers) belong to it alone. Importing this package imports each
sub-package and registers the `Scenario` subclasses it defines. Adding a scenario is adding one
folder; nothing here changes. Gallery order: the class attribute `order`, then the title.
"""
import importlib
import inspect
import pkgutil

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
    """The scenarios a person picks from (gallery, navigation, `list`), in gallery order."""
    return sorted((s for s in _REGISTRY.values() if s.listed), key=lambda s: (s.order, s.title))


def registered() -> list[Scenario]:
    """Every registered scenario, the unlisted ones too (scenarios/watched/: runs from a person's own script)."""
    return sorted(_REGISTRY.values(), key=lambda s: (s.order, s.title))


def _register_builtin() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Scenario) and cls is not Scenario and cls.__module__ == module.__name__:
                register(cls())


_register_builtin()

__all__ = ["ConfigError", "RunResult", "Scenario", "ScenarioConfig", "all_scenarios", "get_scenario", "register",
           "registered"]
