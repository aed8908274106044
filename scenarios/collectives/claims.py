"""Collectives, said: bytes against the ring formula, results against the single-process answer,
the fitted latency and bandwidth, a DTensor's redistributions and a DDP/FSDP step's collectives.
Every number is a `Computed` that reads it again from the records, so each sentence holds for any
world size, sweep and partial frame."""
from collections.abc import Callable

from scenarios.claims import Computed, three_digits
from scenarios.collectives.figures import count, fit, max_error, mean_sent_over_ring, per_rank
from scenarios.collectives.launch import TRANSITIONS
from scenarios.explanation import Explanation, Sentence, join, say
from scenarios.records import Records
from scenarios.words import byte_size, counted

Compute = Callable[[Records], float | None]


def claim(records: Records, compute: Compute, text: str = "{}", shown: Callable[[float], str] | None = None):
    value = compute(records)
    return None if value is None else Computed(text, value, compute, shown=shown(value) if shown else "")


def times(value: float, of: str = "") -> str:
    """A ratio to the precision it has, before what it multiplies: 'exactly its ring formula' or 'exactly 2× S'
    where the bytes agree to the byte, else three digits ('1.00× its ring formula': TCP's few hundred bytes over
    4 MiB are 1.0001, which '1.000×' dressed up as precision)."""
    if value > 0 and value == round(value):
        return " ".join(part for part in ("exactly", "" if value == 1 and of else f"{value:g}×", of) if part)
    return f"{three_digits(value)}× {of}".strip()


def ratio_of(op: str) -> Compute:
    return lambda records: mean_sent_over_ring(records, op)


def largest(op: str) -> Compute:
    return lambda records: records.last(op, "size_bytes")


def error_of(index: int) -> Compute:
    return lambda records: (found[index] if (found := max_error(records)) else None)


def headline(records: Records) -> dict[str, float | None]:
    found = max_error(records)
    return {"all-reduce sent ÷ ring formula (largest S)": mean_sent_over_ring(records, "all-reduce"),
            "all-gather sent ÷ ring formula (largest S)": mean_sent_over_ring(records, "all-gather"),
            "largest |error| against one process": found[0] if found else None,
            "FSDP all-gathers per step": sum(count(records, "FSDP", f"{phase}/collectives/all-gather") or 0
                                             for phase in ("forward", "backward")) if records.has("units", "FSDP") else None}


def takeaway(records: Records) -> Sentence | None:
    parts = [say(f"{op} {{}}", c) for op in ("all-reduce", "all-gather")
             if (c := claim(records, ratio_of(op), shown=lambda v: times(v, "its ring formula"))) is not None]
    size = claim(records, largest("all-reduce"), shown=byte_size)
    if not parts or size is None:
        return None
    joined = join(*parts, sep=", ")
    text = f"At S = {size}, bytes each rank sent: {joined.text}"
    claims = [size, *joined.claims]
    error = claim(records, error_of(0))
    if error is not None:
        text += ("; every result equals the single-process computation (largest |error| {})" if error.value == 0 else
                 "; largest |error| against the single-process computation {}").format(error)
        claims.append(error)
    return Sentence(text, tuple(claims))


def correctness(records: Records) -> Sentence | None:
    error, results = claim(records, error_of(0)), claim(records, error_of(1), shown=lambda v: f"{v:.0f}")
    if error is None or results is None:
        return None
    return say("Against the single-process computation (each rank rebuilds every rank's input): largest |error| {} "
               "over {} results (op × size × rank).", error, results)


def scatter_and_ring(records: Records) -> Sentence | None:
    parts = [say(f"{op} {{}}", c) for op in ("reduce-scatter", "ring all-reduce (by hand)", "ring reduce-scatter (by hand)")
             if (c := claim(records, ratio_of(op), shown=times)) is not None]
    if not parts:
        return None
    joined = join(*parts, sep=", ")
    text, claims = f"Sent ÷ the ring formula at the largest size: {joined.text}", joined.claims
    alike = claim(records, scatter_over_reduce, shown=lambda v: times(v, "what"))
    if alike is not None and abs(alike.value - 1) <= ALIKE:  # held by the claim: the two sent the same bytes
        text += (f"; gloo's reduce-scatter sent {alike} its all-reduce of the same tensor sent — as many bytes "
                 "as a whole all-reduce, so its bars stand at the all-reduce's rather than at its own formula")
        claims = (*claims, alike)
    return Sentence(text + ".", claims)


ALIKE = 0.01  # reduce-scatter's bytes within 1% of the all-reduce's: "the same"


def scatter_over_reduce(records: Records) -> float | None:
    """At the largest size, when both ran it: the reduce-scatter's mean bytes sent per rank ÷ the all-reduce's."""
    steps = [records.last_step(op, "size_bytes") for op in ("reduce-scatter", "all-reduce")]
    if None in steps or records.at("reduce-scatter", "size_bytes", steps[0]) != records.at("all-reduce", "size_bytes", steps[1]):
        return None
    scatter, reduce = (per_rank(records, op, "sent_bytes", step) for op, step in zip(("reduce-scatter", "all-reduce"), steps))
    return sum(scatter) / len(scatter) / (sum(reduce) / len(reduce)) if scatter and reduce and sum(reduce) else None


def broadcast(records: Records) -> Sentence | None:
    step = records.last_step("broadcast", "size_bytes")
    if step is None:
        return None
    def root(r: Records) -> float | None:
        size, sent = r.at("broadcast", "size_bytes", step), r.at("broadcast", "rank_0/sent_bytes", step)
        return sent / size if size and sent is not None else None
    def others(r: Records) -> float | None:
        size, got = r.at("broadcast", "size_bytes", step), per_rank(r, "broadcast", "received_bytes", step)[1:]
        return min(got) / size if size and got else None
    claims = [claim(records, root, shown=lambda v: times(v, "S")), claim(records, others, shown=lambda v: times(v, "S"))]
    if None in claims:
        return None
    return say("Broadcast from rank 0: it sent {}, every other rank received at least {}.", *claims)


def fitted(records: Records) -> Sentence | None:
    parts, held = [], []
    for op in ("all-reduce", "all-gather", "broadcast"):
        found = fit(records, op)
        if found is not None and found[0] == 0:  # the free fit's intercept was negative: noise, no latency
            held.append(op)
        if found is None or found[0] <= 0:
            continue
        alpha = claim(records, lambda r, op=op: (f := fit(r, op)) and f[0], shown=lambda v: f"{v * 1e3:.2f} ms")
        bandwidth = claim(records, lambda r, op=op: (f := fit(r, op)) and f[1], shown=lambda v: f"{v / 1e9:.2f} GB/s")
        if alpha is not None and bandwidth is not None:
            parts.append(say(f"{op} α {{}}, B {{}}", alpha, bandwidth))
    if held:  # said, not left out: the chart's legend gives these fits too
        parts.append(say(f"{' and '.join(held)}: α held at 0 (the free fit's latency came out negative: "
                         "the small sizes' timings are noise on this machine)"))
    if not parts:
        return None
    joined = join(*parts)
    return Sentence(f"Time per call fitted as α + S/B (loopback TCP, a shared machine): {joined.text}.", joined.claims)


def dtensor(records: Records) -> Sentence | None:
    if records.at("DTensor", "shard_dim", len(TRANSITIONS) - 1) is None:
        return None
    rows = claim(records, lambda r: r.at("DTensor", "rank_0/local_rows", 0), shown=lambda v: f"{v:.0f}")
    total = claim(records, lambda r: r.at("DTensor", "rows", 0), shown=lambda v: f"{v:.0f}")
    issued = [claim(records, lambda r, i=i: sum(count(r, "DTensor", f"collectives/{k}", i) or 0 for k in
                                                ("all-gather", "all-to-all", "scatter", "all-reduce", "broadcast")),
                    shown=lambda v: f"{v:.0f}") for i in range(1, len(TRANSITIONS))]
    sent = claim(records, lambda r: r.at("DTensor", "rank_0/sent_bytes", 2), shown=byte_size)
    if rows is None or total is None or None in issued:
        return None
    text = ("DTensor: with Shard(0), rank 0 holds {} of the {} rows; collectives issued: → Replicate() {}, "
            "back to Shard(0) {}" + (" ({} sent)" if sent is not None else "") + ", → Shard(1) {}.")
    return say(text, rows, total, issued[0], issued[1], *([sent] if sent is not None else []), issued[2])


def training(records: Records) -> Sentence | None:
    ddp = claim(records, lambda r: count(r, "DDP", "backward/collectives/all-reduce"), shown=lambda v: f"{v:.0f}")
    fsdp = [claim(records, lambda r, n=n: count(r, "FSDP", n), shown=lambda v: f"{v:.0f}")
            for n in ("forward/collectives/all-gather", "backward/collectives/all-gather", "backward/collectives/reduce-scatter")]
    units = claim(records, lambda r: r.last("FSDP", "units"), shown=lambda v: f"{v:.0f}")
    step = records.last_step("FSDP", "units")
    if ddp is None or None in fsdp or units is None:
        return None
    scatters = fsdp[2].value
    text = (f"In training step {step}: DDP issued {counted(ddp.value, 'all-reduce')} in backward; FSDP "
            f"{counted(fsdp[0].value, 'all-gather')} in forward, {{}} in backward and "
            f"{counted(scatters, 'reduce-scatter')}, for {counted(units.value, 'unit')}")
    rebuilt = claim(records, lambda r: count(r, "DDP", "forward/collectives/broadcast", 1), shown=lambda v: f"{v:.0f}")
    if rebuilt is not None and rebuilt.value:
        return say(text + f"; at step 1 DDP's forward also issued {counted(rebuilt.value, 'broadcast')}.",
                   ddp, *fsdp, units, rebuilt)
    return say(text + ".", ddp, *fsdp, units)


def explanation(records: Records) -> Explanation:
    first = takeaway(records)
    if first is None:
        return Explanation(waiting="Starting the rank processes: the first collectives are measured after they start.")
    details = [s for s in (scatter_and_ring(records), broadcast(records), fitted(records), dtensor(records),
                           training(records), correctness(records)) if s is not None]
    return Explanation(first, tuple(details[:5]))
