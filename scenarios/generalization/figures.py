"""Generalization, drawn and said: train and validation loss per arm with the early-stopping
point, the gap, final against restored weights on the test set, the gap against the training-set
size; and the claims about the U-shape, the gaps, early stopping and dropout's scaling."""
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scenarios.claims import Claim, Computed, Final, Low
from scenarios.explanation import Sentence, join, say
from scenarios.plotting import category_color, full_width, layout
from scenarios.records import Records
from scenarios.words import count

NONE, DROPOUT, DECAY, BOTH = "no regularization", "dropout", "weight decay", "dropout + weight decay"
MAIN_ARMS = [NONE, DROPOUT, DECAY, BOTH]


def sweep_label(n: int) -> str:
    return f"{NONE} · n={n}"


def n_of(arm: str) -> int:
    return int(arm.split("n=")[1])


# --- figures ------------------------------------------------------------------------------------
def loss_figure(records: Records, colors: dict[str, str], arms: list[str]) -> go.Figure:
    """Train (dashed) and validation (solid) loss per arm; a diamond at each arm's best validation step."""
    fig = go.Figure()
    for arm in arms:
        for metric, dash, name in (("val_loss", "solid", "validation"), ("train_loss", "dash", "train")):
            series = records.series(arm, metric)
            if series.empty:
                continue
            fig.add_scatter(x=series.index, y=series.to_numpy(), name=f"{arm} · {name}", mode="lines",
                            line=dict(color=colors.get(arm), dash=dash), legendgroup=arm,
                            hovertemplate=f"{arm}<br>{name}<br>step %{{x}}<br>loss %{{y:.4g}}<extra></extra>")
        best = records.last(arm, "early_stop/best_step")
        if best is not None and records.at(arm, "val_loss", int(best)) is not None:
            fig.add_scatter(x=[best], y=[records.at(arm, "val_loss", int(best))], mode="markers", legendgroup=arm,
                            marker=dict(symbol="diamond", size=11, color=colors.get(arm), line=dict(color="black", width=1)),
                            name=f"{arm} · best validation (restored)", showlegend=False)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return full_width(layout(fig, "Train (dashed) and validation (solid) loss; ◆ the early-stopping point",
                             "step", "cross-entropy (nats, eval mode)"))


def wrapped(name: str, width: int = 12) -> str:
    """A category label broken at spaces into lines of about `width` characters (plotly's <br>)."""
    lines: list[str] = []
    for word in name.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def early_stopping_figure(records: Records, arms: list[str]) -> go.Figure:
    """Test loss and accuracy of the final weights against the weights early stopping restored."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["test loss", "test accuracy"], horizontal_spacing=0.12)
    shown = [arm for arm in arms if records.has("final/test_loss", arm)]
    for i, (kind, words) in enumerate((("final", "final weights"), ("restored", "restored (best validation)"))):
        for col, metric in ((1, "test_loss"), (2, "test_accuracy")):
            fig.add_bar(x=shown, y=[records.last(arm, f"{kind}/{metric}") for arm in shown], name=words,
                        marker_color=category_color(i), showlegend=col == 1, legendgroup=kind, row=1, col=col)
    for col, y_title in ((1, "cross-entropy (nats)"), (2, "accuracy")):
        # the arms' names on two level lines: slanted, the last ran under the next panel and into the axis title
        fig.update_xaxes(title_text="arm", tickvals=shown, ticktext=[wrapped(arm) for arm in shown], tickangle=0,
                         row=1, col=col)
        fig.update_yaxes(title_text=y_title, row=1, col=col)
    fig.update_layout(barmode="group", title="Early stopping: final against restored weights (test set)",
                      margin=dict(l=60, r=20, t=70, b=50),  # the legend right of the bars: above them it ran into the title
                      legend=dict(orientation="v", yanchor="top", y=1, x=1.02, xanchor="left"))
    return full_width(fig)


def gap_vs_n_figure(records: Records, colors: dict[str, str], points: dict[int, str]) -> go.Figure:
    """The final gap against the training-set size (no regularization), n → arm that trained at n."""
    xs = [n for n, arm in sorted(points.items()) if records.has("gap", arm)]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=[records.last(points[n], "gap") for n in xs], mode="lines+markers", name=NONE,
                    line=dict(color=colors.get(NONE)), marker=dict(size=9),
                    hovertemplate="n %{x}<br>final gap %{y:.3g}<extra></extra>")
    fig = layout(fig, "Final gap against training-set size", "training examples n (log scale; no regularization)",
                 "validation − train loss (nats)")
    return fig.update_xaxes(type="log", tickvals=xs, ticktext=[str(n) for n in xs])


# --- claims -------------------------------------------------------------------------------------
def u_shape(records: Records, arm: str) -> list[Claim]:
    """The validation loss's low and where it ended, and where the training loss ended."""
    val, train = records.series(arm, "val_loss"), records.series(arm, "train_loss")
    if val.empty or train.empty:
        return []
    return [Low(arm, "val_loss", int(val.idxmin()), float(val.min()), "validation loss"),
            Final(arm, "val_loss", int(val.index[-1]), float(val.iloc[-1])),
            Final(arm, "train_loss", int(train.index[-1]), float(train.iloc[-1]))]


def u_sentence(records: Records, arm: str) -> Sentence | None:
    claims = u_shape(records, arm)
    if not claims:
        return None
    low, end, train = claims
    if low.step == end.step:  # still falling at the end: no minimum before it
        return say("{}: validation loss {}, while the training loss {}", arm, end, train)
    return say("{}: {}, then {}, while the training loss {}", arm, low, end, train)


def gap_sentence(records: Records, arms: list[str]) -> Sentence | None:
    parts = [say("{} {}", arm, Final(arm, "gap", records.last_step(arm, "gap"), records.last(arm, "gap")))
             for arm in arms if records.has("gap", arm)]
    return say("The gap, validation − train loss: " + join(*parts).text, *join(*parts).claims) if parts else None


def stopping_claims(records: Records, arm: str, end: int) -> list[Claim]:
    """Where early stopping stopped, the step it restored, and the test loss of both weights."""
    if records.at(arm, "restored/test_loss", end) is None:
        return []
    claims: list[Claim] = []
    stopped = records.at(arm, "early_stop/stopped_at", end)
    if stopped is not None:
        claims.append(Computed("stopped at {}", stopped, lambda r: r.at(arm, "early_stop/stopped_at", end),
                               shown=str(int(stopped))))
    best = records.at(arm, "early_stop/best_step", end)
    # Validation is measured before a step's update: the best step's weights are those before it.
    words = ("restored the weights before step {}'s update (the last: the final weights are one update later)"
             if best == end - 1 else "restored the weights before step {}'s update")
    claims.append(Computed(words, best, lambda r: r.at(arm, "early_stop/best_step", end), shown=str(int(best))))
    for kind, words in (("restored", "test loss {}"), ("final", "{} final")):
        value = records.at(arm, f"{kind}/test_loss", end)
        claims.append(Computed(words, value, lambda r, k=kind: r.at(arm, f"{k}/test_loss", end)))
    return claims


def stopping_sentence(records: Records, arms: list[str], end: int, patience: int) -> Sentence | None:
    parts = [say("{} " + " and ".join(["{}"] * (len(claims) - 2)) + ": {} against {}", arm, *claims)
             for arm in arms if (claims := stopping_claims(records, arm, end))]
    if not parts:
        return None
    joined = join(*parts)
    return say(f"Early stopping (patience {count(patience, 'step')}): " + joined.text, *joined.claims)


def sweep_sentence(records: Records, points: dict[int, str]) -> Sentence | None:
    ns = [n for n, arm in sorted(points.items()) if records.has("gap", points[n])]
    claims = [Final(points[n], "gap", records.last_step(points[n], "gap"), records.last(points[n], "gap")) for n in ns]
    return say("The gap without regularization by training-set size: " +
               "; ".join(f"n={n} {{}}" for n in ns), *claims) if len(claims) > 1 else None


def dropout_sentence(records: Records, arm: str) -> Sentence | None:
    train_mean, eval_mean = records.first(arm, "dropout/train_mean"), records.first(arm, "dropout/eval_mean")
    if train_mean is None or eval_mean is None:
        return None
    return say("Inverted dropout scales kept units by 1/(1 − p): at step 0 the first dropout layer's mean output is {} "
               "in train mode (16 masks) and {} in eval mode",
               Computed("{}", train_mean, lambda r: r.first(arm, "dropout/train_mean"), shown=f"{train_mean:.4f}"),
               Computed("{}", eval_mean, lambda r: r.first(arm, "dropout/eval_mean"), shown=f"{eval_mean:.4f}"))

