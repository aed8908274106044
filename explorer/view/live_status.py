"""The running status line: a component that paints the progress line and the run's warnings,
then follows the run's live feed (explorer/view/feed.py) and paints each answer, handing newer figures
to their chart components (explorer/view/chart.py). Each poll names the page's charts in view (or near
it): the feed builds only those. It asks Streamlit for a rerun (its one trigger) when the run has
ended, when figures appear that the page has not drawn yet, when a chart built since takes another
width than the page gave it, and when the server no longer knows the feed. The feed's last message carries the line that says how the run ended: it
is painted at once (the page's rerun, which draws "what to look for" and the final charts, comes
~0.3 s later on the 2-core machine), and the page's run then draws it again as its own.
"""
import streamlit as st

_STATUS_JS = """
function paint(box, state) {
  box.querySelector(".explorer-status-text").textContent = state.text;
  box.querySelector(".explorer-status-bar > div").style.width = (100 * state.progress).toFixed(1) + "%";
  const notes = box.querySelector(".explorer-status-notes");
  notes.replaceChildren(...state.warnings.map((text) => {
    const line = document.createElement("div");
    line.className = "explorer-status-warning";
    line.textContent = text;
    return line;
  }));
}

async function follow(box, feed, tick, rerun) {
  const drawn = (key) => {  // the page's chart of that name, if it is on the page
    const updater = (window.__explorerCharts || {})[key];
    return updater && updater.element.isConnected ? updater : null;
  };
  const inView = (names) => {  // the page's charts in view, which the feed builds; none on the page yet: no word
    const shown = names.filter((key) => drawn(key));
    return shown.length ? "&near=" + encodeURIComponent(shown.filter((key) => drawn(key).near()).join(",")) : "";
  };
  let asked = "";
  let names = [];
  while (box.isConnected && box.dataset.feed === feed) {
    let state = null;
    try {
      const drawnMs = Math.round(window.__explorerDrawMs || 0);  // the charts' drawing since the last poll
      window.__explorerDrawMs = 0;
      const query = "?wait=" + tick / 1000 + "&drawn_ms=" + drawnMs + inView(names);
      const response = await fetch(feed + query, {cache: "no-store"});
      if (response.status === 404) { rerun("gone"); return; }  // the server lost it (restarted): redraw
      state = await response.json();
    } catch (error) {  // a dropped request: try again a tick later
      await new Promise((resolve) => setTimeout(resolve, tick));
    }
    if (state && box.dataset.feed === feed) {
      if (!state.running) {  // the final line at once; the page's rerun then draws it again with the final view
        paint(box, state);
        rerun("ended");
        return;
      }
      paint(box, state);
      names = state.names;
      for (const chart of Object.values(state.charts)) { (drawn(chart.key) || (() => {}))(chart); }
      const missing = state.names.filter((key) => !drawn(key));
      const layout = state.names.join() + (state.relayout ? " relayout" : "");
      if (!missing.length && !state.relayout) asked = "";  // the page drew what the feed holds
      else if (layout !== asked) { asked = layout; rerun("charts"); }
    }
  }
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let box = parentElement.querySelector("div.explorer-status");
  if (!box) {
    box = document.createElement("div");
    box.className = "explorer-status";
    box.innerHTML = '<div class="explorer-status-text" data-testid="explorer-progress"></div>' +
      '<div class="explorer-status-bar"><div></div></div><div class="explorer-status-notes"></div>';
    parentElement.appendChild(box);
  }
  const feed = data.feed || "";  // none: the run has ended, and the line is what the page drew
  if (!feed) {
    box.dataset.feed = "";  // a loop following the run's feed stops at its next answer
    paint(box, data.state);
  } else if (box.dataset.feed !== feed) {
    box.dataset.feed = feed;
    paint(box, data.state);
    follow(box, feed, data.tick_ms, (why) => setTriggerValue("rerun", why + " " + Date.now()));
  }
}
"""

_STATUS_CSS = """
.explorer-status-text { font-size: 0.875rem; line-height: 1.2rem; margin-bottom: 0.5rem; }
.explorer-status-bar { height: 8px; border-radius: 4px; overflow: hidden; background: rgb(248, 248, 247); }
.explorer-status-bar > div { height: 100%; background: rgb(28, 131, 225); }  /* st.progress's colours */
.explorer-status-warning { margin-top: 0.5rem; padding: 0.5rem 0.75rem; border-radius: 0.5rem; font-size: 0.875rem;
  background: rgba(255, 189, 69, 0.2); }
"""

_status = st.components.v2.component("explorer_status", js=_STATUS_JS, css=_STATUS_CSS, isolate_styles=False)


def live_status(key: str, feed_url: str | None, tick_ms: int, state: dict) -> None:
    """Paint `state` (explorer/view/live.py `live_state`) now; then the browser follows `feed_url`. With no
    `feed_url` the run has ended: the line stays as painted (the same element as the live line, so the
    page's rerun at the end swaps nothing: no blank moment)."""
    _status(key=key, data={"feed": feed_url, "tick_ms": tick_ms, "state": state}, on_rerun_change=lambda: None)
