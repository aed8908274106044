"""Text that came from outside (a link, a config file, an error message) shown as text.

Streamlit renders the body of `st.warning` / `st.error` / `st.info` as markdown, with its own
extras: a crafted link such as `?[click](https://evil.example)=1` would put a clickable link,
an external image, coloured text, LaTeX or an icon inside the app's own warning. `plain`
makes one line of the text (a newline in a value would start a second message line) and
puts a backslash before every ASCII punctuation character — CommonMark lets any of them be
escaped, so each shows as itself and none starts markup (`:`, `[`, `$`, `<`, `*`, `_` ...).
GitHub-flavoured markdown also turns bare `https://...`, `www....` and `name@host` into links
after escapes are read, so an invisible word joiner (U+2060) goes where such a link would
start: the text reads the same and links nowhere.
"""
import re

ECHO_CHARS = 80  # a value quoted in a message is cut past this many characters
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
_LINK_STARTS = re.compile(r"(?i)(?<=www)(?=\.)|(?=://)|(?=@)")  # where GFM's bare autolinks begin
WORD_JOINER = "\u2060"


def one_line(text: object) -> str:
    """Runs of whitespace (newlines included) become one space."""
    return " ".join(str(text).split())


def cut(value: object, limit: int = ECHO_CHARS) -> str:
    """A value from outside as a message quotes it: one line, cut with an ellipsis past `limit`
    characters (a pasted 10,000-character value would otherwise be the whole message)."""
    text = one_line(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def escape_markdown(text: str) -> str:
    """Each markdown-active character behind a backslash: rendered, the text reads as given."""
    return _PUNCTUATION.sub(r"\\\1", _LINK_STARTS.sub(WORD_JOINER, text))


def plain(text: object) -> str:
    """One line of literal text for a markdown body (st.warning, st.error, st.caption)."""
    return escape_markdown(one_line(text))


# Terminal text: what a terminal shows of the app's markdown (the explanations, the settings' help).
_SUPERSCRIPT = dict(zip("0123456789+-−=().abcdefghijklmnoprstuvwxyzABDEGHIJKLMNOPRTUVW",
                        "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾·ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻᴬᴮᴰᴱᴳᴴᴵᴶᴷᴸᴹᴺᴼᴾᴿᵀᵁⱽᵂ"))
_INLINE_MATH = re.compile(r"\$([^$\\]+)\$")  # `$10^{-4.0}$`; math with a LaTeX command is left as written
_POWER = re.compile(r"\^(?:\{([^{}]*)\}|\(([^()]*)\)|([-+−]?\d+(?:\.\d+)?|[A-Za-z](?![A-Za-z])))")
_BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)


def superscript(text: str) -> str | None:
    """`-4.0` as `⁻⁴·⁰`; None when a character has no superscript form."""
    if not text or any(ch not in _SUPERSCRIPT for ch in text):
        return None
    return "".join(_SUPERSCRIPT[ch] for ch in text)


def _power(match: re.Match) -> str:
    braced, parenthesized, bare = match.groups()
    raised = superscript(braced if braced is not None else bare if bare is not None else f"({parenthesized})")
    return raised if raised is not None else match.group(0)


_MATH_OR_CODE = re.compile(r"(\$[^$]+\$|`[^`]+`)")  # left as written by `raised_powers`


def raised_powers(markdown: str) -> str:
    """The page's markdown with its plain-text powers raised as the terminal's are (`B^-0.974` ->
    `B⁻⁰·⁹⁷⁴`, `ℝ^64` -> `ℝ⁶⁴`): Streamlit's markdown has no superscript. Inline math and code are left
    to render as they are."""
    return "".join(part if _MATH_OR_CODE.fullmatch(part) else _POWER.sub(_power, part)
                   for part in _MATH_OR_CODE.split(markdown))


def terminal_text(markdown: str) -> str:
    """Markdown as a terminal prints it: bold dropped, inline math unwrapped, powers raised
    (`$10^{-4.0}$` -> `10⁻⁴·⁰`, `2^17` -> `2¹⁷`). A power with no superscript form stays as written."""
    text = _BOLD.sub(r"\1", markdown).replace("\\*", "*")
    text = _INLINE_MATH.sub(lambda m: m.group(1), text)
    return _POWER.sub(_power, text)
