"""The reading order of the explorer: scenarios grouped by topic, topics in the glossary's order.

A scenario names its topic (`Scenario.topic`); the navigation's sections and the home
gallery's groups both come from `by_topic`, so a page is found in the same place in both.
A topic not listed here still gets its group, after the known ones, so no page goes missing.
"""
from scenarios.base import Scenario

TOPICS = ("Core mechanics", "Optimization", "Architecture", "Language models", "Generalization",
          "Fine-tuning & compression", "Alignment", "Distributed")


def by_topic(scenarios: list[Scenario]) -> dict[str, list[Scenario]]:
    """Topic -> its scenarios in gallery order; known topics first, in `TOPICS` order."""
    groups: dict[str, list[Scenario]] = {topic: [] for topic in TOPICS}
    for scenario in scenarios:
        groups.setdefault(scenario.topic, []).append(scenario)
    return {topic: members for topic, members in groups.items() if members}


def first_scenario(scenarios: list[Scenario]) -> Scenario:
    """Where a newcomer begins: the first page of the first topic."""
    return next(iter(by_topic(scenarios).values()))[0]
