"""Masked against causal, and word2vec, drawn: the middle-token fill against the source's exact fill,
the two losses, analogy accuracy over training, w·c against the shifted PMI, the countries and capitals
on their principal plane, and the nearest neighbours."""
import plotly.graph_objects as go

from engines.sequence.relational import COUNTRIES, vocabulary
from scenarios.masked_causal import labels
from scenarios.plotting import add_curve, layout, legend_line
from scenarios.recorded import snapshot
from scenarios.records import Records

CAUSAL, MASKED, EXACT = "causal LM (next token)", "masked LM (bidirectional)", "topic lines: exact"
SGNS, WORLD = "skip-gram (SGNS)", "relational world"
LM_ARMS = (CAUSAL, MASKED)
ANALOGY = "\u00a0".join("a : b :: c : ?".split(" "))  # one word to a line breaker: "a : b :: c : ?"
RELATION_NAMES = {"country_capital": "country → capital", "country_people": "country → people",
                  "capital_people": "capital → people"}


def reference_lines(fig: go.Figure, lines: list[tuple[float | None, str, str]]) -> None:
    """Gray lines named in the legend (a label on the line sat on the curves that end on it)."""
    for value, label, dash in lines:
        if value is not None:
            legend_line(fig, value, f"{label} {value:.3g}", dash, hover=f"{label}<br>{value:.4g}")


def below(fig: go.Figure) -> go.Figure:
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))


def fill_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for arm in LM_ARMS:
        add_curve(fig, records, arm, "fill/accuracy", arm, colors[arm])
    reference_lines(fig, [(records.first(EXACT, "bayes/both_accuracy"), "the source, both sides (Bayes)", "solid"),
                          (records.first(EXACT, "bayes/left_accuracy"), "the source, left side only (Bayes)", "dash")])
    layout(fig, "Filling a hidden middle word of held-out lines", "step", "share of hidden words filled right")
    return below(fig)


def loss_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    """Each model's own held-out loss (next-token, masked-token), and both on the middle-token fill."""
    fig = go.Figure()
    add_curve(fig, records, CAUSAL, "heldout_nats", f"{CAUSAL}: next-token loss", colors[CAUSAL])
    add_curve(fig, records, MASKED, "heldout_masked_nats", f"{MASKED}: masked-token loss", colors[MASKED])
    for arm in LM_ARMS:
        add_curve(fig, records, arm, "fill/nats", f"{arm}: loss on the hidden middle word", colors[arm], dash="dot")
    reference_lines(fig, [(records.first(EXACT, "entropy_rate"), "entropy rate (next-token floor)", "solid"),
                          (records.first(EXACT, "bayes/both_nats"), "middle word given both sides (exact)", "dash")])
    layout(fig, "Held-out loss: next token against masked token", "step", "nats per predicted token")
    return below(fig)


def analogy_figure(records: Records, colors: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    add_curve(fig, records, SGNS, "analogy/accuracy", f"{SGNS}: all questions (w + c)", colors[SGNS])
    for index, (key, name) in enumerate(RELATION_NAMES.items()):
        add_curve(fig, records, SGNS, f"analogy/{key}", f"{SGNS}: {name}", colors[SGNS],
                  dash=("dash", "dashdot", "longdash")[index], opacity=0.6)
    add_curve(fig, records, SGNS, "analogy/accuracy_words", f"{SGNS}: word vectors w alone", colors[SGNS], dash="dot")
    questions = records.first(WORLD, "questions")
    # the notation's parts joined by no-break spaces: the page wraps a long title at spaces, and broke it inside
    title = f"Analogy accuracy, {ANALOGY} (3CosAdd)" + (f", {questions:.0f} questions" if questions else "")
    layout(fig, title, "step", "share answered right")
    return below(fig)


def pair_names(countries: int, key: str) -> str:
    words = vocabulary(countries)
    w, c = (int(part) for part in key.split("_"))
    return f"{words[w]} · {words[c]}"


def identity_figure(records: Records, colors: dict[str, str], countries: int) -> go.Figure:
    """w·c at the end against ln(#(w,c) / (#(w)·k·P_n(c))) on every frequent pair, with the line y = x."""
    fig = go.Figure()
    _, dots = snapshot(records, SGNS, "pair/")
    _, targets = snapshot(records, WORLD, "target/")
    keys = [k[len("pair/"):] for k in dots if f"target/{k[len('pair/'):]}" in targets]
    if keys:
        x = [targets[f"target/{k}"] for k in keys]
        y = [dots[f"pair/{k}"] for k in keys]
        low, high = min(x + y), max(x + y)
        fig.add_scatter(x=[low, high], y=[low, high], mode="lines", name="w·c = target", line=dict(color="gray", dash="dash"),
                        hovertemplate="y = x<br>%{x:.3g}<extra></extra>")
        fig.add_scatter(x=x, y=y, mode="markers", name=f"{SGNS}: frequent pairs", marker=dict(color=colors[SGNS], size=5),
                        text=[pair_names(countries, k) for k in keys],
                        hovertemplate="%{text}<br>target %{x:.3f}<br>w·c %{y:.3f}<extra></extra>")
    r = records.last(SGNS, "identity/correlation")
    title = "w·c against the shifted PMI it converges to" + (f" (r = {r:.3f})" if r is not None else "")
    layout(fig, title, "ln(#(w,c) / (#(w)·k·P_n(c)))  (PMI − ln k at α = 1)", "w·c after training")
    return below(fig)


def plane_figure(records: Records, colors: dict[str, str], countries: int) -> go.Figure:
    """Country and capital vectors (w + c) on their first two principal components, an arrow per country."""
    fig = go.Figure()
    _, found = snapshot(records, SGNS, "plane/")
    words = vocabulary(countries)
    index = {w: i for i, w in enumerate(words)}
    pairs = []
    for name, capital, _, _ in COUNTRIES[:countries]:
        keys = [f"plane/{axis}/{index[word]:03d}" for word in (name, capital) for axis in ("x", "y")]
        if all(k in found for k in keys):
            pairs.append((name, capital, *(found[k] for k in keys)))
    points = [(x, y, word) for name, capital, x0, y0, x1, y1 in pairs for word, x, y in ((name, x0, y0), (capital, x1, y1))]
    placement = labels.place(points, [(2 * k, 2 * k + 1) for k in range(len(pairs))])  # each country to its capital
    positions = iter(placement.spots)
    for name, capital, x0, y0, x1, y1 in pairs:
        fig.add_scatter(x=[x0, x1], y=[y0, y1], mode="lines+markers+text", text=[name, capital],
                        textposition=[next(positions), next(positions)], showlegend=False,
                        line=dict(color=colors[SGNS], width=1),
                        marker=dict(symbol=["circle", "diamond"], size=labels.MARKER_PX),
                        hovertemplate="%{text}<br>PC1 %{x:.3f}<br>PC2 %{y:.3f}<extra></extra>")
    layout(fig, "Countries (●) and their capitals (◆): one offset for every pair", "first principal component",
           "second principal component")
    if points:  # ranges that hold every name: plotly's own pads for the markers only, and cut a name at the edge
        fig.update_xaxes(range=list(placement.x_range)).update_yaxes(range=list(placement.y_range))
    return fig


def spelled(words: tuple[str, ...], word_id: float | None) -> str:
    """A recorded word id as its word ('?' for a value that names none: a band's mean of two seeds' ids)."""
    if word_id is None or word_id != int(word_id) or not 0 <= word_id < len(words):
        return "?"
    return words[int(word_id)]


def neighbours_figure(records: Records, countries: int) -> go.Figure:
    """The nearest words (cosine of w + c) to the first countries and capitals, as a table of cosines."""
    _, found = snapshot(records, SGNS, "neighbour")
    words = vocabulary(countries)
    probes = sorted({int(k.split("/")[1]) for k in found if k.startswith("neighbour/")})
    ranks = sorted({int(k.split("/")[2]) for k in found if k.startswith("neighbour/")})
    fig = go.Figure()
    if probes:
        probes = probes[::-1]  # plotly draws the first row at the bottom: the first probe on top
        cosines = [[found.get(f"neighbour_cos/{p:03d}/{r}") for r in ranks] for p in probes]
        names = [[spelled(words, found.get(f"neighbour/{p:03d}/{r}")) for r in ranks] for p in probes]
        fig.add_heatmap(z=cosines, x=[f"#{r}" for r in ranks], y=[words[p] for p in probes], text=names,
                        texttemplate="%{text}<br>%{z:.2f}", colorscale="Blues", zmin=0, zmax=1,
                        colorbar=dict(title="cosine"), hovertemplate="%{y} → %{text}<br>cosine %{z:.3f}<extra></extra>")
    layout(fig, "Nearest neighbours (cosine of w + c)", "rank", "word")
    # category axes with explicit ranges: drawn so on the page (the first version, numeric autorange reversed, was not)
    fig.update_xaxes(type="category", range=[-0.5, max(len(ranks), 1) - 0.5])
    return fig.update_yaxes(type="category", range=[-0.5, max(len(probes), 1) - 0.5])
