"""Text from outside (a link, a file, an error) is shown as itself: one line, no markdown."""
import markdown_it
import pytest
from hypothesis import given, settings, strategies as st
from markdown_it.common.utils import escapeHtml

from explorer.plaintext import WORD_JOINER, one_line, plain

MARKDOWN = markdown_it.MarkdownIt("commonmark")
# NUL is replaced by U+FFFD by the CommonMark spec itself; every other character is fair game.
TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=80)
ACTIVE = st.lists(st.sampled_from(list("[]()!*_`~#>-+=|\\<>&$:@./ \n\t") + ["www", "https", "1.", "a"]),
                  max_size=40).map("".join)


def rendered_as_text(text: str) -> None:
    html = MARKDOWN.render(plain(text))
    expected = escapeHtml(one_line(text).replace(WORD_JOINER, ""))
    seen = html.replace(WORD_JOINER, "")
    assert seen == (f"<p>{expected}</p>\n" if expected else ""), f"{text!r} rendered as {html!r}"


@settings(max_examples=300, deadline=None)
@given(st.one_of(TEXT, ACTIVE))
def test_any_text_renders_as_one_paragraph_of_itself(text: str) -> None:
    rendered_as_text(text)


@pytest.mark.parametrize("text", [
    "[click](https://evil.example)", "![img](https://evil.example/x.png)", "**bold** _it_ `code`",
    "# heading", "> quote", "- item", "1. item", "<img src=x onerror=alert(1)>", "&lt;b&gt;", "a\\\nb",
    "line one\nline two", "| a | b |", "    indented code", "~~~fence", "https://evil.example/a_b_",
])
def test_known_markup_is_shown_literally(text: str) -> None:
    rendered_as_text(text)
    assert "\n" not in plain(text)


def test_bare_links_get_a_word_joiner_where_they_would_start() -> None:
    """GFM links bare URLs and e-mail addresses after escapes are read: an invisible joiner stops it."""
    assert plain("see https://evil.example or www.evil.example or me@evil.example") == (
        f"see https{WORD_JOINER}\\:\\/\\/evil\\.example or www{WORD_JOINER}\\.evil\\.example or "
        f"me{WORD_JOINER}\\@evil\\.example")


def test_a_lone_star_in_a_sentence_stays_a_star_in_the_bold_takeaway() -> None:
    """rlhf-ppo's takeaway names the optimum π*: inside the takeaway's `**…**` a bare `*` closed the
    bold and opened italics. Rendered, the whole takeaway is one <strong> holding "π*"; in a terminal, "π*"."""
    from explorer.plaintext import terminal_text
    from scenarios.explanation import Explanation, Sentence
    explanation = Explanation(takeaway=Sentence("PPO ends at KL 2.1 — π* ∝ π_ref·exp(r/β): KL 5.54", []),
                              details=[Sentence("π* is the optimum; a **bold** word stays bold", [])])
    html = MARKDOWN.render(explanation.markdown())
    assert "<strong>PPO ends at KL 2.1 — π* ∝ π_ref·exp(r/β): KL 5.54</strong>" in html, html
    assert "<em>" not in html and "<strong>bold</strong>" in html, html
    assert terminal_text(explanation.markdown()).splitlines()[0] == "PPO ends at KL 2.1 — π* ∝ π_ref·exp(r/β): KL 5.54"


def test_what_to_look_for_folds_after_its_third_detail_and_keeps_every_sentence() -> None:
    """generalization's ten details filled 1.5 screens at 1000 px before its first chart: the takeaway and three
    details stay above the charts, the rest go in an expander; a single fourth is not folded away alone."""
    from scenarios.explanation import folded
    text = "**What to look for**\n\n**takeaway**\n\n" + "\n".join(f"- detail {i}" for i in range(1, 11))
    shown, more = folded(text, 3)
    assert shown.endswith("- detail 3") and more == [f"- detail {i}" for i in range(4, 11)], (shown, more)
    assert shown.split("\n") + more == text.split("\n"), "nothing is lost"
    four = "**t**\n\n" + "\n".join(f"- d{i}" for i in range(1, 5))
    assert folded(four, 3) == (four, []), "one more is shown rather than folded alone"
