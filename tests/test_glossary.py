"""The glossary: every declared term is defined, every seed term is present, the page counts coverage."""
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.glossary import (METHOD_NAMES, METHODS, SECTIONS, TERMS, coverage, method_coverage, scenarios_by_method,
                               scenarios_by_term)
from scenarios import all_scenarios

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
SEED = next(iter(sorted(SEEDS.glob("000_*.txt"))), None)
METHODS_SEED = next(iter(sorted(SEEDS.glob("002_*.txt"))), None)
SEED_SECTIONS = ["Core Mechanics", "Optimization & Training", "Architecture", "Generalization",
                 "Fine-Tuning & Compression", "Alignment", "Distributed Training"]


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.id)
def test_every_declared_term_is_in_the_glossary(scenario) -> None:
    names = {t.name for t in TERMS}
    missing = [term for term in scenario.terms if term not in names]
    assert not missing, f"{scenario.id} declares terms the glossary lacks (use its exact names): {missing}"


def test_terms_are_unique_and_defined_in_one_line() -> None:
    names = [t.name for t in TERMS]
    assert len(names) == len(set(names)), "a term is listed twice"
    for term in TERMS:
        assert term.definition and "\n" not in term.definition and len(term.definition) < 160, term.name
        assert term.definition.endswith("."), term.name


@pytest.mark.skipif(SEED is None, reason="the course glossary (../shared/seeds/000_*.txt) is not next to the repo")
def test_every_term_of_the_course_glossary_is_here() -> None:
    text = SEED.read_text()
    names = {t.name for t in TERMS}
    for section in SEED_SECTIONS:
        assert section in SECTIONS, section
        body = text.split(f"\n{section}\n", 1)[1].split("\n\n", 1)[0]  # the section's table
        seed_terms = [line.split("\t")[0].strip("`") for line in body.splitlines() if "\t" in line][1:]
        assert seed_terms, section
        assert not [t for t in seed_terms if t not in names], f"{section}: {seed_terms}"


def test_the_gradient_terms_are_here() -> None:
    names = {t.name for t in TERMS}
    for name in ("Gradient", "Gradient descent", "Gradient clipping", "Gradient accumulation", "Activation checkpointing",
                 "Autograd", "Optimizer", "Learning rate schedule", "ReLU", "NaN (Not a Number)"):
        assert name in names, name


def test_coverage_counts_the_course_terms_with_evidence() -> None:
    """Coverage is over the course glossary's 66 terms, from the declared evidence only."""
    scenarios = all_scenarios()
    shown, total = coverage(scenarios)
    course = {t.name for t in TERMS if t.origin == "course"}
    declared = {term for s in scenarios for term in s.terms}
    assert total == len(course) == 66 and shown == len(declared & course)
    assert coverage(scenarios, None) == (len(declared & {t.name for t in TERMS}), len(TERMS))
    assert all(s in scenarios_by_term(scenarios)["Backpropagation"] for s in scenarios if "Backpropagation" in s.terms)


@pytest.mark.skipif(METHODS_SEED is None, reason="the training methods (../shared/seeds/002_*.txt) are not next to the repo")
def test_the_training_methods_are_the_seeds_23() -> None:
    seed_names = re.findall(r"^\s*•\s*(.+?) · ", METHODS_SEED.read_text(), flags=re.M)
    assert len(seed_names) == 23 and list(METHOD_NAMES) == seed_names, (METHOD_NAMES, seed_names)


def test_methods_are_defined_in_one_line_and_declared_only_by_name() -> None:
    for name, meaning in METHODS:
        assert meaning.endswith(".") and "\n" not in meaning and len(meaning) < 160, name
    for scenario in all_scenarios():
        unknown = [m for m in scenario.methods if m not in METHOD_NAMES]
        assert not unknown, f"{scenario.id} declares methods the index lacks (use its exact names): {unknown}"


def test_method_coverage_counts_full_and_partial_evidence() -> None:
    """A method with a page showing it in full counts as shown; one shown only in part counts apart."""
    scenarios = all_scenarios()
    full, part, total = method_coverage(scenarios)
    by_method = scenarios_by_method(scenarios)
    in_full = {m for m, found in by_method.items() if any(not s.methods[m].partial for s in found)}
    assert total == 23 and full == len(in_full) and full + part == sum(1 for found in by_method.values() if found)
    assert {"Adam (optimizer)", "Backpropagation", "Dropout", "Knowledge distillation", "Direct preference optimization",
            "Reinforcement learning from human feedback", "Distributed training"} <= in_full, sorted(in_full)


def glossary_app() -> None:
    import streamlit as st
    from explorer.page.pages import build_navigation
    st.navigation(build_navigation(default="glossary")).run()


def test_glossary_page_shows_coverage_links_and_uncovered_terms() -> None:
    at = AppTest.from_function(glossary_app, default_timeout=60).run()
    assert not at.exception
    shown, total = coverage(all_scenarios())
    assert any(re.search(rf"{shown} of {total} terms of the course glossary have a live experiment", m.value)
               for m in at.markdown)
    assert [h.value for h in at.subheader] == list(SECTIONS)
    uncovered = [t.name for t in TERMS if not scenarios_by_term(all_scenarios())[t.name]]
    assert any("No live experiment yet" in c.value for c in at.caption) == bool(uncovered), \
        f"uncovered terms are listed as such: {uncovered}"
    links = [el for el in at.get("page_link")]
    assert any(el.proto.label == "Vanishing gradients" for el in links)
    full, part, total = method_coverage(all_scenarios())
    assert any(f"{full} of {total} training methods have a live experiment** (and {part} more in part)" in m.value
               for m in at.markdown), "the methods' count"
    assert [h.value for h in at.header] == ["Training methods"]
    assert any(c.value == "Not yet" for c in at.caption) == (full + part < total), \
        f"'Not yet' is shown exactly when a method has no experiment: {full} + {part} in part of {total}"

    at.text_input(key="glossary:find").set_value("lora").run()
    assert [h.value for h in at.subheader] == ["Fine-Tuning & Compression"]


def test_a_term_link_opens_the_glossary_on_its_entry() -> None:
    """`?term=Dropout` (the cards' and the scenario pages' term links) frames that entry first."""
    at = AppTest.from_function(glossary_app, default_timeout=60)
    at.query_params["term"] = "Dropout"
    at.run()
    assert not at.exception
    entries = [m.value for m in at.markdown if re.match(r"\*\*[^*]+\*\* — ", m.value)]
    assert entries[0].startswith("**Dropout** — ") and entries[1].startswith("**Tensor** — "), entries[:2]
    at = AppTest.from_function(glossary_app, default_timeout=60)
    at.query_params["term"] = "[no such](https://example.com)"
    at.run()
    assert [w.value for w in at.warning] and "no such" in at.warning[0].value and "](" not in at.warning[0].value
