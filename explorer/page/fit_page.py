"""The "Will it fit?" page: per-rank memory of one training step of a built-in GPT-style or
Llama-style model, or of a person's own model by import path, at any world size.

Measure runs `python -m engines.distributed.fit_report` in a child process (explorer/fit.py):
the page's process never imports torch, and a person's model code runs only in that child,
only from an import path they typed. The server binds to localhost (app.py), and the page
says that an import path runs its module's code.
"""
import pandas as pd
import streamlit as st

from explorer.fit import ROWS, FitFailed, amount, count, fit_in_subprocess, job_of, unit_for
from explorer.plaintext import plain

MODELS = {"GPT-style": "gpt", "Llama-style (SwiGLU, GQA)": "llama", "Import path": None}
STRATEGIES = {"One device (world 1)": "single", "DDP": "ddp", "FSDP2, ZeRO-2-like": "fsdp-zero2",
              "FSDP2, ZeRO-3-like": "fsdp-zero3"}
STRATEGY_HELP = ("ZeRO-2-like: `fully_shard(reshard_after_forward=False)`, every block stays gathered from its "
                 "forward to its backward; ZeRO-3-like: `reshard_after_forward=True`, gathered again in backward.")
PRECISIONS = {"bf16": "bf16", "bf16 compute, fp32 kept": "bf16-mixed", "fp32": "fp32"}
PRECISION_HELP = ("bf16: parameters, gradients and optimizer state in bf16. bf16 compute, fp32 kept: fp32 "
                  "parameters and optimizer state, bf16 in forward and backward (FSDP's MixedPrecisionPolicy; "
                  "autocast under DDP).")


def settings() -> dict:
    """The sidebar's choices as a fit job."""
    side = st.sidebar
    kind = MODELS[side.radio("Model", list(MODELS), key="fit:model")]
    architecture, model, inputs = None, None, None
    if kind is None:
        model = side.text_input("Factory, MODULE:FUNCTION", key="fit:path", placeholder="my_pkg.models:build")
        inputs = side.text_input("Example inputs, MODULE:FUNCTION (optional)", key="fit:inputs",
                                 placeholder="my_pkg.models:example_batch") or None
        side.caption("An import path **runs that module's code** in a worker process on this machine (this "
                     "server listens on localhost only). "
                     "The inputs function takes (batch per rank, seq); without one, a model that starts with an "
                     "Embedding gets token ids and one that starts with a Linear gets (batch, in_features).")
    else:
        number = side.number_input
        architecture = {"architecture": kind,
                        "layers": number("Layers", 1, 256, 32, key="fit:layers"),
                        "hidden": number("Hidden size", 8, 65536, 4096, step=128, key="fit:hidden"),
                        "heads": number("Attention heads", 1, 256, 32, key="fit:heads"),
                        "vocab": number("Vocabulary", 2, 1_000_000, 50304 if kind == "gpt" else 128256,
                                        key="fit:vocab")}
        if kind == "llama":
            architecture["kv_heads"] = number("Key/value heads (GQA)", 1, 256, 8, key="fit:kv_heads")
    strategy = STRATEGIES[side.selectbox("Strategy", list(STRATEGIES), index=3, key="fit:strategy",
                                         help=STRATEGY_HELP)]
    world = side.number_input("World size (ranks)", 1, 1024, 64, key="fit:world")
    batch = side.number_input("Global batch (split over the ranks)", 1, 1_000_000, 64, key="fit:batch")
    seq = side.number_input("Sequence length", 1, 1_000_000, 2048, key="fit:seq")
    dtype = PRECISIONS[side.selectbox("Precision", list(PRECISIONS), key="fit:dtype", help=PRECISION_HELP)]
    optimizer = side.selectbox("Optimizer", ("adamw", "adam", "sgd"), key="fit:optimizer")
    checkpointing = side.checkbox("Activation checkpointing (per block)", key="fit:checkpointing")
    if architecture is not None and kind == "gpt":
        architecture["max_seq"] = int(seq)  # learned positions, as many as the sequence measured
    return job_of(model, architecture=architecture, inputs=inputs, strategy=strategy, world=int(world),
                  batch=int(batch), seq=int(seq), dtype=dtype, optimizer=optimizer, checkpointing=checkpointing)


def render_fit() -> None:
    st.title("Will my model fit?")
    st.markdown("One training step of your model, per rank, **measured without allocating it**: PyTorch's "
                "memory trackers run under `FakeTensorMode` (tensors with shapes and no storage) and a fake process "
                "group stands in for the other ranks, so FSDP shards as it would on a real mesh. Beside each "
                "measured number, the analytic model's (ZeRO's model states and Korthikanti et al.'s activations); "
                "where the two differ, the table's last column says why.")
    job = settings()
    # in the page, under the words that ask for it: at the sidebar's foot it was below the fold
    if st.button("Measure", type="primary", key="fit:measure", icon=":material/straighten:"):
        if job["model"] == "" and job["architecture"] is None:
            st.session_state["fit:result"] = {"error": "type an import path MODULE:FUNCTION for the model"}
        else:
            with st.spinner("Measuring (a child process imports torch, builds the model on the meta device and "
                            "runs one fake step)..."):
                try:
                    st.session_state["fit:result"] = fit_in_subprocess(job)
                except FitFailed as failure:
                    st.session_state["fit:result"] = {"error": str(failure)}
    result = st.session_state.get("fit:result")
    if result is None:
        st.info("Pick a model and a setup in the sidebar, then press **Measure** above.")
    elif "error" in result:
        st.error(plain(result["error"]))
    else:
        show(result)


def show(report: dict) -> None:
    config, per_rank, formula = report["config"], report["per_rank"], report["analytic"]
    st.subheader(plain(f"{config['model']}: {count(report['n_params'])} parameters"))
    st.caption(plain(f"{config['strategy']}, world {config['world']}, batch {config['batch']} "
                     f"({config['batch'] // config['world']} per rank), seq {config['seq']}, {config['dtype']}, "
                     f"{config['optimizer']}{', checkpointing' if config['checkpointing'] else ''}; "
                     f"rank {report['rank']}; measured in {report['seconds']:.1f} s"))
    peak, model_peak = per_rank["peak"], formula["peak"]
    left, right = st.columns(2)
    left.metric("Peak per rank, measured", f"{peak / 1e9:.3g} GB")
    right.metric("Peak per rank, analytic model", f"{model_peak / 1e9:.3g} GB")
    st.markdown(plain(report["fits_line"]))
    divisor, unit = unit_for(peak)
    rows = [{"category": row.replace("_", " "), f"measured ({unit})": amount(per_rank[row], divisor),
             f"formula ({unit})": amount(formula.get(row), divisor), "difference": report["difference"][row]["text"]}
            for row in ROWS]
    st.table(pd.DataFrame(rows).set_index("category"))
    st.caption("Measured at the step's peak (the categories sum to it); difference: measured − formula, in the unit "
               "that shows it (in the table's unit a few kB would round away). Parameters, gradients and optimizer state "
               "are this rank's shards; unsharded: parameters FSDP has all-gathered; communication: DDP's gradient "
               "buckets, FSDP's all-gather and reduce-scatter buffers.")
    phases = pd.DataFrame({phase: {c.replace("_", " "): v / divisor for c, v in by.items()}
                           for phase, by in report["phases"].items()})
    st.markdown(f"**By phase ({unit})**")
    st.dataframe(phases, width="stretch", key="fit:phases",  # three decimals, like the table above
                 column_config={phase: st.column_config.NumberColumn(format="%.3f") for phase in phases.columns})
