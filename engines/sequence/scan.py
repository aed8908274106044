"""A SCAN-like command language (Lake & Baroni 2018), generated in code, and its splits.

A command is one phrase or two joined by "and" / "after"; a phrase is an action with optional
direction and repetition:

    command   := phrase | phrase "and" phrase | phrase "after" phrase
    phrase    := verb | verb "twice" | verb "thrice"
    verb      := primitive | primitive direction | primitive "opposite" direction
                 [| primitive "around" direction]                       (only with `around`)
                 | "turn" direction | "turn" "opposite" direction [| "turn" "around" direction]
    primitive := "jump" | "walk" | "run" | "look"        direction := "left" | "right"

Its meaning is a sequence of actions (JUMP WALK RUN LOOK LTURN RTURN), one per command, by the
interpretation function `meaning`: "x left" = LTURN X, "x opposite left" = LTURN LTURN X, "x around
left" = (LTURN X)×4, "turn left" = LTURN, "turn opposite left" = LTURN LTURN, "turn around left" =
LTURN×4; "p twice" = p p, "p thrice" = p p p; "a and b" = a b; "a after b" = b a. SCAN proper has
"around" (its longest meaning is 48 actions); here it is a choice, off by default, so the default
language's meanings are at most 18 actions and a small model learns them in seconds on a CPU.

Splits (which commands train, which are tested):
- random: a seeded share of all commands is held out.
- add jump: "jump" alone trains; every other command with "jump" is tested. The model has seen the
  word jump mean JUMP, and seen every construction with the other verbs, never with jump.
- add jump + k: the same, with k seeded commands that use jump in a composition moved to training.
- length: commands whose meaning is at most `max_train_actions` long train; the longer ones are tested.
"""
import itertools
from dataclasses import dataclass

import torch

PRIMITIVES = ("jump", "walk", "run", "look")
DIRECTIONS = ("left", "right")
REPEATS = {"": 1, "twice": 2, "thrice": 3}
CONJUNCTIONS = ("and", "after")
ACTIONS = {"jump": "JUMP", "walk": "WALK", "run": "RUN", "look": "LOOK", "left": "LTURN", "right": "RTURN"}
WORDS = (*PRIMITIVES, "turn", *DIRECTIONS, "opposite", "around", "twice", "thrice", *CONJUNCTIONS)
PAD, SEP, EOS = "<pad>", "<sep>", "<eos>"
VOCAB = (PAD, SEP, EOS, *WORDS, *dict.fromkeys(ACTIONS.values()))  # one id per word and action
IDS = {token: i for i, token in enumerate(VOCAB)}
# the constructions a command is scored under (a command counts under each one it uses)
CONSTRUCTIONS = ("bare", "direction", "opposite", "around", "twice", "thrice", "and", "after")


def verbs(opposite: bool, around: bool) -> list[str]:
    forms = ["", *DIRECTIONS, *((f"opposite {d}" for d in DIRECTIONS) if opposite else ()),
             *((f"around {d}" for d in DIRECTIONS) if around else ())]
    plain = [f"{p} {f}".strip() for p in PRIMITIVES for f in forms]
    return plain + [f"turn {f}" for f in forms if f]  # "turn" needs a direction


def phrases(opposite: bool, around: bool, thrice: bool = True) -> list[str]:
    return [f"{v} {r}".strip() for v in verbs(opposite, around) for r in REPEATS if thrice or r != "thrice"]


def commands(opposite: bool = True, around: bool = False, conjunctions: tuple[str, ...] = CONJUNCTIONS,
             thrice: bool = True) -> list[str]:
    """Every command of the language, in a fixed order."""
    single = phrases(opposite, around, thrice)
    return single + [f"{a} {c} {b}" for c in conjunctions for a, b in itertools.product(single, single)]


def verb_meaning(words: list[str]) -> list[str]:
    head, rest = words[0], words[1:]
    act = [] if head == "turn" else [ACTIONS[head]]
    if not rest:
        return act
    turn = ACTIONS[rest[-1]]
    if rest[0] == "opposite":
        return [turn, turn, *act]
    if rest[0] == "around":
        return [turn, *act] * 4
    return [turn, *act]


def phrase_meaning(words: list[str]) -> list[str]:
    times = REPEATS.get(words[-1], 1)
    return verb_meaning(words[:-1] if times > 1 else words) * times


def meaning(command: str) -> list[str]:
    """The one action sequence of `command`."""
    words = command.split()
    for conjunction in CONJUNCTIONS:
        if conjunction in words:
            i = words.index(conjunction)
            first, second = phrase_meaning(words[:i]), phrase_meaning(words[i + 1:])
            return first + second if conjunction == "and" else second + first
    return phrase_meaning(words)


def constructions(command: str) -> list[str]:
    """The constructions of CONSTRUCTIONS `command` uses ("bare": a phrase that is a primitive alone)."""
    words = command.split()
    used = [c for c in CONSTRUCTIONS[2:] if c in words]
    parts = [p.split() for p in _phrases_of(words)]
    if any(len(p) == 1 for p in parts):
        used.append("bare")
    if any(len(p) >= 2 and p[1] in DIRECTIONS for p in parts):
        used.append("direction")
    return [c for c in CONSTRUCTIONS if c in used]


def _phrases_of(words: list[str]) -> list[str]:
    for conjunction in CONJUNCTIONS:
        if conjunction in words:
            i = words.index(conjunction)
            return [" ".join(words[:i]), " ".join(words[i + 1:])]
    return [" ".join(words)]


# --- splits ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    name: str
    train: tuple[str, ...]
    test: tuple[str, ...]


def random_split(all_commands: list[str], test_share: float, seed: int) -> Split:
    order = torch.randperm(len(all_commands), generator=torch.Generator().manual_seed(seed)).tolist()
    n_test = round(test_share * len(all_commands))
    return Split("random", tuple(all_commands[i] for i in order[n_test:]), tuple(all_commands[i] for i in order[:n_test]))


def add_jump_split(all_commands: list[str], extra: int = 0, seed: int = 0) -> Split:
    """"jump" alone trains, every other command with jump is tested; `extra` of them (seeded) train too."""
    with_jump = [c for c in all_commands if "jump" in c.split() and c != "jump"]
    moved: set[str] = set()
    if extra:
        order = torch.randperm(len(with_jump), generator=torch.Generator().manual_seed(seed)).tolist()
        moved = {with_jump[i] for i in order[:extra]}
    tested = set(with_jump)
    train = [c for c in all_commands if c not in tested or c in moved]
    return Split(f"add jump + {extra}" if extra else "add jump", tuple(train), tuple(c for c in with_jump if c not in moved))


def length_split(all_commands: list[str], max_train_actions: int) -> Split:
    return Split("length", tuple(c for c in all_commands if len(meaning(c)) <= max_train_actions),
                 tuple(c for c in all_commands if len(meaning(c)) > max_train_actions))


# --- tensors -----------------------------------------------------------------------------------
def longest(all_commands: list[str]) -> int:
    """Tokens of the longest "command SEP actions EOS" sequence."""
    return max(len(c.split()) + len(meaning(c)) + 2 for c in all_commands)


def aligned(all_commands: list[str]) -> tuple[int, int]:
    """Where SEP sits when every command ends just before it (its longest command's words), and the
    tokens of "command SEP actions EOS" then: (sep, length)."""
    sep = max(len(c.split()) for c in all_commands)
    return sep, sep + max(len(meaning(c)) for c in all_commands) + 2


def encode(command_list: list[str] | tuple[str, ...], length: int, sep: int | None = None
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each command as "words SEP actions EOS" in `length` tokens, PAD elsewhere: ids (n, length) and
    the position of SEP in each (n,). With `sep`, the words end just before position `sep` (PAD
    before them), so the k-th action is at position sep + k in every row; without, they start at 0."""
    ids = torch.full((len(command_list), length), IDS[PAD], dtype=torch.long)
    seps = torch.empty(len(command_list), dtype=torch.long)
    for row, command in enumerate(command_list):
        words = command.split()
        start = 0 if sep is None else sep - len(words)
        tokens = [*words, SEP, *meaning(command), EOS]
        ids[row, start:start + len(tokens)] = torch.tensor([IDS[t] for t in tokens])
        seps[row] = start + len(words)
    return ids, seps
