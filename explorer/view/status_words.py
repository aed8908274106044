"""The status line's words: how far a run (or a group of seeds) has got, or how it ended."""
import datetime
import re

from explorer.runs.handle import RunHandle, Snapshot
from explorer.runs.watched import WatchedHandle
from explorer.view.seeds import SeedGroup


NAMED_ARMS = 3  # up to this many arms that trained another length than most are named


def steps_per_arm(frame, counted: tuple[str, ...] = ("loss",)) -> str | None:
    """"10 steps" when every training arm reached the same step; "400 steps for “teacher”, 300 for the
    other arms" when a few arms train another length than most (a teacher beside its students,
    skip-gram beside two language models), each arm named where no count is shared; "up to 400 steps"
    when many do (a Stop caught them at different points). Training arms are those with a metric whose
    name holds one of `counted` (the scenario's `counted`): an arm indexed by something else (bit
    width, sequence length N, d_k) is no count of steps. None when no arm trains (a page that
    measures): the line then gives no count."""
    if frame.empty:
        return "0 steps" if counted else None
    metrics = frame["metric"].astype(str)
    trained = frame[metrics.str.contains("|".join(map(re.escape, counted)))] if counted else frame.iloc[:0]
    if trained.empty:
        return None
    last = trained.groupby("arm", sort=False)["step"].max() + 1
    low, high = int(last.min()), int(last.max())
    if low == high:
        return f"{high} steps"
    arms: dict[int, list[str]] = {}
    for arm, count in last.items():
        arms.setdefault(int(count), []).append(f"“{arm}”")
    most = max(arms, key=lambda count: (len(arms[count]), count))  # the count most arms share
    others = [(count, names) for count, names in arms.items() if count != most]
    if sum(len(names) for _, names in others) > NAMED_ARMS:  # a Stop caught many arms at different points
        return f"up to {high} steps"
    named = list(arms.items()) if len(arms[most]) == 1 else others  # no count shared: every arm, in order
    parts = [f"{count}{(' step' if count == 1 else ' steps') if i == 0 else ''} for {' and '.join(names)}"
             for i, (count, names) in enumerate(named)]  # the first count carries the word
    if len(arms[most]) > 1:
        parts.append(f"{most} for the other arms")
    return ", ".join(parts)


WORDS = {"finished": "Finished", "diverged": "Finished — an arm diverged", "stopped": "Stopped — partial result",
         "failed": "Failed", "refused": "Not run",
         "incomplete": "Incomplete — its script ended without finishing it (killed?)"}


def status_line(snap: Snapshot, handle: RunHandle | SeedGroup | WatchedHandle | None = None) -> str:
    if isinstance(handle, SeedGroup):
        return group_status_line(snap, handle)
    if isinstance(handle, WatchedHandle):
        return watched_status_line(snap, handle)
    steps = snap.steps
    if snap.running and snap.waiting and not steps:
        return f"Waiting: {snap.waiting} ({snap.elapsed_s:.1f} s)"
    if snap.running and snap.waiting:
        return f"Running… {snap.progress:.0%} — {snap.waiting} ({snap.elapsed_s:.1f} s)"
    if snap.running:  # the step of the arm training now (a warm start's 30 steps are not the next arm's)
        of = f" of “{snap.arm_now}”" if snap.arm_now else ""  # a second arm's count starts again from 0
        return f"Running… {snap.progress:.0%} (step {snap.step_now or steps}{of}, {snap.elapsed_s:.1f} s)"
    if snap.from_store:
        when = datetime.datetime.fromtimestamp(snap.created_at).strftime("%Y-%m-%d %H:%M")
        return (f"Served from the run store: run {snap.run_id} ({snap.status}), trained {when} in "
                f"{snap.elapsed_s:.1f} s — no retraining")
    if snap.status == "refused":
        return "Not run: this machine cannot run these settings"
    steps = steps_per_arm(snap.frame, handle.scenario.counted if isinstance(handle, RunHandle) else ("loss",))
    after = (f" after {steps}," if "," in (steps or "") else f" after {steps}") if steps else ""  # a list of counts
    line = f"{WORDS.get(snap.status, snap.status)}{after} in {snap.elapsed_s:.1f} s"
    if snap.status == "stopped" and not snap.run_id:
        return line + " · not stored"
    return line + (f" · stored as run {snap.run_id}" if snap.run_id else "")


def group_status_line(snap: Snapshot, group: SeedGroup) -> str:
    snaps = group.snapshots()
    seeds = f"seeds {group.seeds[0]}–{group.seeds[-1]}"
    if snap.running:
        current = f"seed {group.seeds[max(0, len(snaps) - 1)]} ({max(1, len(snaps))} of {len(group.seeds)}, {seeds})"
        return f"Running… {snap.progress:.0%} — {snap.waiting or current}, {snap.elapsed_s:.1f} s"
    served = sum(s.from_store for s in snaps)
    ids = ", ".join(s.run_id for s in snaps if s.run_id)
    return (f"{WORDS.get(snap.status, snap.status)}: {len(snaps)} of {len(group.seeds)} {seeds} in "
            f"{snap.elapsed_s:.1f} s ({len(snaps) - served} trained, {served} from the run store) · runs {ids}")


def watched_status_line(snap: Snapshot, handle: WatchedHandle) -> str:
    """A run of a person's own script: how far it got (it has no known end), or how it ended."""
    name = f"“{handle.name}” · " if handle.name else ""
    every = handle.config.watch_every
    measured = f"measured every {every} optimizer steps" if every > 1 else "measured every optimizer step"
    if snap.running:
        return f"Running in your script: {name}step {snap.steps}, {snap.elapsed_s:.0f} s · {measured} · run {snap.run_id}"
    return f"{WORDS.get(snap.status, snap.status)}: {name}{snap.steps} steps in {snap.elapsed_s:.1f} s · {measured} · run {snap.run_id}"
