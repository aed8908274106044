"""The line beside Run (explorer/page/scenario_page.py): why Run is off, what a large run costs and
that Run asks first, that the settings moved on since the run started, or what the run would cost."""
from explorer.page.autorun import asking, estimate_note
from explorer.view.seeds import SeedGroup
from scenarios.base import Scenario


def run_note(scenario: Scenario, config, problem: str | None, machine, too_large: str | None, handle,
             repeat: int, auto: bool, no_workers: str | None = None, estimate=None, ray: bool = False) -> str | None:
    """One line beside Run: why it is off, what a large run costs (and that Run asks first), that the
    settings moved on, or what the run would cost. `no_workers`: why no worker could start (the backend's
    failure), when none could; `ray`: runs go to Ray."""
    if problem:
        return "Run is off: " + ("these settings are not valid" if config is None else
                                 "this machine cannot run these settings") + " (see under the settings)."
    if no_workers:
        return "Run is off: " + ("the Ray cluster cannot be used." if ray else "no worker process could start on this server.")
    if machine is None:
        return "Connecting to the Ray cluster and warming its workers…" if ray else "Starting the workers (importing torch)…"
    if too_large and asking(scenario, config, repeat):
        return too_large + " Press Run again to start it."
    if too_large:
        return too_large + (" Auto-run waits for you: press Run" if auto else " Press Run") + ", then Run again, to start it."
    moved = handle is not None and config is not None and (
        scenario.key_of(handle.config) != scenario.key_of(config) or seed_count(handle) != repeat)
    said = f" {estimate_note(estimate, repeat)}" if estimate is not None else ""
    if moved:
        return "Settings changed since this run started." + ("" if auto else " Press Run to run them." + said)
    return (said.strip() or None) if handle is None else None


def seed_count(handle) -> int:
    """Seeds a handle trains: a seed group's, or one."""
    return len(handle.seeds) if isinstance(handle, SeedGroup) else 1
