"""What every page shares: the run store and the run backend of this server process (the local warm
pool, or Ray where `EXPLORER_RAY_ADDRESS` names a cluster), and starting or loading a run.

A run store that cannot be used (not a store, damaged, of another schema) is said once at the top
of every page, with what to do (`store_banner`); the pages then work without storing: nothing is
found in it (`UnusableStore`) and runs train without being stored. A read-only store is read as it
is: its runs are shown, new ones are not stored."""
import threading
from pathlib import Path

import pandas as pd
import streamlit as st

from explorer.runs.backend import RunBackend, make_backend, ray_address
from explorer.runs.handle import RunHandle
from explorer.runs.serving import stored_result
from explorer.runs.store import RunStore, StoreError
from explorer.runs.store_home import store_path
from explorer.view.chart import payload
from explorer.plaintext import plain
from explorer.view.look import polish
from scenarios import get_scenario
from scenarios.base import COLUMNS, Scenario, ScenarioConfig


class UnusableStore:
    """Stands in for a run store that cannot be used (`problem` says why): it holds no runs, and saving
    to it raises the same StoreError (the pages never ask: `saving_store` is None)."""

    read_only = True

    def __init__(self, path: str, problem: str) -> None:
        self.path, self.problem = Path(path), problem

    def lookup(self, *args, **kwargs) -> None:
        return None

    def get(self, run_id: str) -> None:
        return None

    def list_runs(self, *args, **kwargs) -> list:
        return []

    def count(self, scenario: str | None = None) -> int:
        return 0

    def record_counts(self, run_ids: list[str]) -> dict[str, int]:
        return dict.fromkeys(run_ids, 0)

    def frame(self, run_id: str) -> pd.DataFrame:
        return pd.DataFrame(columns=COLUMNS)

    def events(self, run_id: str) -> list:
        return []

    def save(self, *args, **kwargs) -> str:
        raise StoreError(self.problem)

    rename = delete = save


def run_store() -> RunStore | UnusableStore:
    """The store at `EXPLORER_STORE` (or the default place); one object per path and process."""
    return _store_at(str(store_path()))


@st.cache_resource(show_spinner=False)
def _store_at(path: str) -> RunStore | UnusableStore:
    try:  # a path and the records it recently saved or read; connections are per call
        return RunStore(path, reading=True)
    except StoreError as error:  # kept until the server restarts: the banner says so
        return UnusableStore(path, str(error))


def store_banner() -> None:
    """At the top of every page, when runs cannot be stored: why, and what to do."""
    store = run_store()
    if isinstance(store, UnusableStore):
        st.error(plain(f"{store.problem[0].upper()}{store.problem[1:]}. Scenario pages still train, but no run "
                       "is stored or served from the store until EXPLORER_STORE names a usable file and the "
                       "server is restarted."))
    elif store.read_only:
        st.warning(plain(f"The run store {store.path} is read-only here: its runs are shown, new runs are not "
                         "stored. Set EXPLORER_STORE to a writable file and restart the server to store them."))


def worker_pool() -> RunBackend:
    """The server's run backend, started with the first page anyone opens; ended at exit: the local warm
    workers, or the Ray cluster `EXPLORER_RAY_ADDRESS` names (until someone chose the local pool instead)."""
    return _backend(None if _choice()["local"] else ray_address())


@st.cache_resource(show_spinner=False)
def _backend(address: str | None) -> RunBackend:
    return make_backend(address)


@st.cache_resource(show_spinner=False)
def _choice() -> dict[str, bool]:
    return {"local": False}


worker_pool.clear = _backend.clear  # tests start the backend afresh


def use_local_pool() -> None:
    """The Ray cluster could not be reached (or was lost): this server's runs go to its local warm pool."""
    failed = worker_pool()
    _choice()["local"] = True
    if failed.name != "local":
        failed.shutdown()


@st.cache_resource(show_spinner=False)
def warm_figures(scenario_id: str) -> threading.Thread:
    """Build the scenario's figures once from no records, in a thread, while its page is first read
    in this server process: plotly loads each class and validator on first use, and a first build
    of four charts after Run cost ~0.1 s more than the next (quantization 0.32 against 0.17 s of CPU).
    Once per scenario and process; the thread ends when the figures are built (~0.1–0.5 s)."""
    thread = threading.Thread(target=_build_empty, args=(scenario_id,), name=f"warm-figures-{scenario_id}", daemon=True)
    thread.start()
    return thread


def _build_empty(scenario_id: str) -> None:
    scenario = get_scenario(scenario_id)
    try:
        figures = scenario.figures(pd.DataFrame(columns=COLUMNS), scenario.validate({}))
        for name in figures:  # the page's own path: polished, serialised
            payload(name, polish(figures[name]))
    except Exception:  # a warm-up only: the page's own build reports what fails
        pass


def start_or_load(scenario: Scenario, config: ScenarioConfig, *, fresh: bool = False,
                  store: RunStore | None = None, pool: RunBackend | None = None, session: str | None = None) -> RunHandle:
    """Serve a complete stored run of exactly this config and code, or start training it.

    Pass `store`, `pool` and `session` when calling from outside the script thread (a seed group's thread)."""
    store = store or run_store()
    stored = stored_result(store, scenario, config, fresh=fresh)
    if stored is not None:
        return RunHandle.from_stored(scenario, stored, store, stored_frame(stored.run_id, store))
    return RunHandle.start(scenario, config, None if store.read_only else store, pool=pool or worker_pool(),
                           session=session if session is not None else session_id(), fresh=fresh)


def session_id() -> str:
    """This browser tab's id, for the backend's fair queue (one queue per tab, served in turn)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    context = get_script_run_ctx(suppress_warning=True)
    return context.session_id if context is not None else ""


def stored_handle(scenario: Scenario, config: ScenarioConfig) -> RunHandle | None:
    """A handle showing the stored complete run of this config, or None when there is none."""
    store = run_store()
    stored = stored_result(store, scenario, config)
    return None if stored is None else RunHandle.from_stored(scenario, stored, store, stored_frame(stored.run_id))


def stored_frame(run_id: str, store: RunStore | None = None):
    """A stored run's records (the store object keeps those it saved or read: a stored run never changes)."""
    return (store or run_store()).frame(run_id)


def backend_caption(pool) -> None:
    """Where runs train, when that is a Ray cluster: its address, workers free and nodes."""
    if pool.name == "local":
        return
    status = pool.status()
    where = "a private Ray on this machine" if status.address == "local" else f"the Ray cluster at {status.address}"
    st.caption(plain(f"Runs train on {where}: {status.free} of {status.workers} workers free, {status.nodes} "
                     f"node{'s' if status.nodes != 1 else ''}" + (f", {status.queued} runs queued" if status.queued else "")))
