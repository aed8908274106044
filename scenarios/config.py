"""A scenario's settings: the pydantic base every Config extends, view fields, and the one-line errors.

A Config's fields, with bounds (`ge`, `le`), `Literal` choices and `description`, are the
single source of the page's widgets, the CLI's `--set`, URL parameters and validation.
A field that only chooses what is drawn is a *view field* (`view_field(...)`): it is not
part of a run's key, so changing it redraws from the same records instead of training.
A field that acts only at some values of another names them in `json_schema_extra={"used_when":
{"schedule": [...]}}`: the page greys its widget out at the others. A check across fields is a pydantic `model_validator(mode="after")` raising ValueError with a
message that starts with the field it refuses ("line_length=48 is longer than …"): it is
refused at every edge, like a bound.
"""
import functools
import math
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError


class ScenarioConfig(BaseModel):
    """Base of every scenario's Config: unknown keys are refused, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(0, ge=0, le=2**31 - 1, description="Seeds the weights and the data order of every arm.")


class ConfigError(ValueError):
    """Bad input from any edge (page, CLI, URL, API): one line naming the field and what is allowed."""


def view_field(default: Any, *, description: str, **kwargs: Any) -> Any:
    """A Config field that only chooses what is drawn: not in the run's key, never retrains."""
    extra = dict(kwargs.pop("json_schema_extra", None) or {}, view=True)
    return Field(default, description=description, json_schema_extra=extra, **kwargs)


def is_view_field(info) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("view"))


def canonical_value(value: Any) -> Any:
    """The form a value is keyed and stored in: −0.0 is 0.0 (they train alike), containers recursively."""
    if isinstance(value, float) and value == 0.0 and math.copysign(1.0, value) < 0:
        return 0.0
    if isinstance(value, Mapping):
        return {key: canonical_value(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical_value(v) for v in value]
    return value


def one_line(text: str) -> str:
    """User input inside a message stays on one line (a newline in a value would make two)."""
    return " ".join(str(text).split())


ECHO_CHARS = 80


def cut(value: object, limit: int = ECHO_CHARS) -> str:
    """A value from outside as a message quotes it: one line, cut with an ellipsis past `limit` characters.
    (explorer/plaintext.py's `cut`, the same: scenarios import nothing above them, and the command line
    refuses a bad argument before it loads the scenario registry.)"""
    text = one_line(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def field_spec(info) -> dict[str, Any]:
    """The facts about one pydantic field that the edges need."""
    spec: dict[str, Any] = {"default": info.default, "description": info.description or "",
                            "view": is_view_field(info), "title": info.title}  # title: the page's label, where the name is terse
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    spec["used_when"] = extra.get("used_when")  # {field: [values]}: the field does nothing otherwise
    annotation = info.annotation
    if typing.get_origin(annotation) is typing.Literal:
        spec.update(kind="choice", choices=list(typing.get_args(annotation)))
    elif annotation is bool:
        spec["kind"] = "bool"
    elif annotation in (int, float):
        spec["kind"] = annotation.__name__
        for meta in info.metadata:
            for bound in ("ge", "gt", "le", "lt"):
                if hasattr(meta, bound):
                    spec[bound] = getattr(meta, bound)
        spec["scale"] = extra.get("scale", "linear")
    else:
        spec["kind"] = "other"
    return spec


def unused_because(spec: dict[str, Any], values: Mapping[str, Any]) -> str | None:
    """Why a field does nothing at these values ("schedule is constant"), from its `used_when`; None if it acts."""
    for name, allowed in (spec.get("used_when") or {}).items():
        if name in values and values[name] not in allowed:
            return f"{name} is {values[name]}"
    return None


def describe_error(scenario_id: str, specs: dict[str, dict[str, Any]], error: ValidationError,
                   field_name: str | None = None) -> str:
    """The first problem in one line, naming the key and what is allowed (`field_name`: the field a
    value was checked alone against)."""
    problem = error.errors()[0]
    if field_name is None and not problem["loc"] and problem["type"] == "value_error":
        return one_line(f"{str(problem['msg']).removeprefix('Value error, ')} ({scenario_id})")  # a check across fields
    # An empty loc is the whole config; a loc of ('',) is a key named '' (said as such below).
    key = field_name or (".".join(str(part) for part in problem["loc"]) if problem["loc"] else "config")
    if problem["type"] == "extra_forbidden":
        named = f"{cut(key)!r}" if key else "'' (an empty name)"
        return one_line(f"unknown key {named} for {scenario_id}; allowed keys: {', '.join(specs)}")
    spec = specs.get(key, {})
    given = cut(problem.get("input"))
    if problem["type"] == "value_error":  # a validator's own sentence: the combination, not the bounds
        return one_line(f"{key}={given} is not allowed for {scenario_id}: {problem.get('ctx', {}).get('error', problem['msg'])}")
    if spec.get("kind") == "choice":
        allowed = "one of " + ", ".join(str(c) for c in spec["choices"])
    elif spec.get("kind") in ("int", "float"):
        low = spec.get("ge", spec.get("gt"))
        high = spec.get("le", spec.get("lt"))
        allowed = f"{'an integer' if spec['kind'] == 'int' else 'a number'} from {low} to {high}"
    elif spec.get("kind") == "bool":
        allowed = "true or false"
    elif problem["msg"].startswith(("Input should be ", "String should be ")):  # pydantic's own words, as ours
        allowed = problem["msg"].split(" should be ", 1)[1]
    elif problem["msg"].startswith("String should have "):
        return one_line(f"{key}={given} is not allowed for {scenario_id}: {key} must have "
                        f"{problem['msg'].removeprefix('String should have ')}")
    else:
        return one_line(f"{key}={given} is not allowed for {scenario_id}: {problem['msg'].removeprefix('Value error, ')}")
    return one_line(f"{key}={given} is not allowed for {scenario_id}: {key} must be {allowed}")


@functools.cache
def field_adapter(config_class: type[ScenarioConfig], name: str) -> TypeAdapter:
    """A validator of one field alone: its type, bounds and choices, no check across fields."""
    info = config_class.model_fields[name]
    return TypeAdapter(Annotated[info.annotation, info])
