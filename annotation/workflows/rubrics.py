"""Rubrics for ``rubric_rating``: the configuration a project stores, its checks, and the presets.

A rubric is plain JSON in ``Project.workflow_config``. ``rubric_parse`` checks it and returns a
``Rubric``; ``Rubric.as_config`` gives the canonical JSON the project keeps, so a stored
rubric always parses again. ``{"preset": "<name>"}`` on its own expands to a shipped preset.

Shape (every key but ``name`` and ``criteria`` is optional)::

    {"name": "...", "version": 1, "unit": "item" | "candidate" | "pair",
     "repeat": "cited_images",          # candidate unit: the criteria once per cited image
     "pair_systems": ["sys-a", "sys-b"],  # pair unit: whose answers to compare first
     "instructions": "...",
     "stages": [{"title": "..."}, ...],  # titles of stages 1, 2, ...
     "context": {"question": 1, "figure": 1, "caption": 2},  # what is shown, from which stage
     "criteria": [{"key": "relevance", "label": "Relevance", "description": "...",
                   "stage": 1, "required": true, "level": "ordinal",
                   "scale": {"type": "points", "points": [{"value": 1, "label": "...", "description": "..."}]}
                          | {"type": "range", "min": 1, "max": 10, "step": 1, "anchors": {"1": "poor"}}
                          | {"type": "choices", "choices": [{"value": "a", "label": "...", "description": "..."}]}
                          | {"type": "text", "max_length": 2000}}]}

The level of measurement follows the scale (points ordinal, range interval, choices nominal,
text text); ``level`` may say nominal for points (a 0/1 scale is binary) or ordinal for a range.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from annotation.workflows.rubric_presets import PRESETS

Value = int | float | str

UNITS = ("item", "candidate", "pair")
REPEATS = ("cited_images",)
SCALE_TYPES = ("points", "range", "choices", "text")
DEFAULT_LEVEL = {"points": "ordinal", "range": "interval", "choices": "nominal", "text": "text"}
ALLOWED_LEVELS = {
    "points": ("ordinal", "nominal"),
    "range": ("interval", "ordinal"),
    "choices": ("nominal",),
    "text": ("text",),
}
# What the display can show. "answers" is the answer rated (candidate) or the two compared (pair).
CONTEXT_PARTS = ("paper", "question", "gold_answer", "explanation", "answers", "figure", "caption")
DEFAULT_CONTEXT = {
    "item": ("paper", "question", "gold_answer", "figure", "caption"),
    "candidate": ("paper", "question", "gold_answer", "answers", "figure", "caption"),
    "pair": ("paper", "question", "answers"),
}
# Each option of a criterion has a number key (1 to 9, then 0), so at most ten of them; a
# number range with more steps is typed into a number box.
MAX_OPTIONS = 10
MAX_RANGE_STEPS = 1000
MAX_CRITERIA = 20
MAX_STAGES = 4
MAX_CITED_IMAGES = 12
MAX_TEXT_LENGTH = 10_000
DEFAULT_TEXT_LENGTH = 2000
MAX_LABEL = 200
MAX_DESCRIPTION = 2000
MAX_INSTRUCTIONS = 5000
KEY_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
CHOICE_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")
# Keys the payload uses for its own records; a criterion cannot be called any of these.
RESERVED_KEYS = frozenset({"reveals", "changed_after_reveal", "pair", "cited_images", "no_cited_images", "rubric"})
TOP_KEYS = (
    "name",
    "version",
    "preset",
    "unit",
    "repeat",
    "pair_systems",
    "instructions",
    "stages",
    "context",
    "criteria",
)
CRITERION_KEYS = ("key", "label", "description", "stage", "required", "level", "scale")
SCALE_KEYS = {
    "points": ("type", "points"),
    "range": ("type", "min", "max", "step", "anchors"),
    "choices": ("type", "choices"),
    "text": ("type", "max_length"),
}
OPTION_KEYS = ("value", "label", "description")


class RubricInvalid(Exception):
    """A rubric that cannot be used; ``messages`` says every problem found, one per line."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))


@dataclass(frozen=True, slots=True)
class Option:
    value: Value
    label: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class Scale:
    type: str
    options: tuple[Option, ...] = ()  # points and choices; ranges with few steps list them too
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    step: Decimal | None = None
    anchors: tuple[tuple[Value, str], ...] = ()
    max_length: int = DEFAULT_TEXT_LENGTH

    @property
    def numeric(self) -> bool:
        return self.type in ("points", "range")

    @property
    def as_buttons(self) -> bool:
        """Shown as one button per option, each with its number key."""
        return self.type in ("points", "choices") or (self.type == "range" and bool(self.options))

    def as_config(self) -> dict[str, Any]:
        if self.type == "points":
            return {"type": "points", "points": [_option_config(o) for o in self.options]}
        if self.type == "choices":
            return {"type": "choices", "choices": [_option_config(o) for o in self.options]}
        if self.type == "range":
            assert self.minimum is not None
            assert self.maximum is not None
            assert self.step is not None
            config: dict[str, Any] = {
                "type": "range",
                "min": number(self.minimum),
                "max": number(self.maximum),
                "step": number(self.step),
            }
            if self.anchors:
                config["anchors"] = {value_text(value): label for value, label in self.anchors}
            return config
        return {"type": "text", "max_length": self.max_length}

    def range_values(self) -> tuple[Value, ...]:
        assert self.minimum is not None
        assert self.maximum is not None
        assert self.step is not None
        count = int((self.maximum - self.minimum) / self.step) + 1
        return tuple(number(self.minimum + self.step * n) for n in range(count))


@dataclass(frozen=True, slots=True)
class Criterion:
    key: str
    label: str
    description: str
    stage: int
    required: bool
    level: str
    scale: Scale

    def values(self) -> tuple[Value, ...]:
        """The scale's values in order (empty for text)."""
        if self.scale.type == "range":
            return self.scale.range_values()
        return tuple(option.value for option in self.scale.options)

    def as_config(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "description": self.description,
            "stage": self.stage,
            "required": self.required,
            "level": self.level,
            "scale": self.scale.as_config(),
        }


@dataclass(frozen=True, slots=True)
class Stage:
    number: int
    title: str


@dataclass(frozen=True, slots=True)
class Rubric:
    name: str
    version: int
    preset: str
    unit: str
    repeat: str
    pair_systems: tuple[str, ...]
    instructions: str
    stages: tuple[Stage, ...]
    context: tuple[tuple[str, int], ...]  # (part, the stage it appears at), in CONTEXT_PARTS order
    criteria: tuple[Criterion, ...]

    @property
    def stage_count(self) -> int:
        return len(self.stages)

    def context_at(self, stage: int) -> frozenset[str]:
        """The parts shown once ``stage`` is revealed."""
        return frozenset(part for part, first in self.context if first <= stage)

    def parts_revealed_at(self, stage: int) -> tuple[str, ...]:
        return tuple(part for part, first in self.context if first == stage)

    def as_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.preset:
            config["preset"] = self.preset
        config["unit"] = self.unit
        if self.repeat:
            config["repeat"] = self.repeat
        if self.pair_systems:
            config["pair_systems"] = list(self.pair_systems)
        if self.instructions:
            config["instructions"] = self.instructions
        config["stages"] = [{"title": stage.title} for stage in self.stages]
        config["context"] = dict(self.context)
        config["criteria"] = [criterion.as_config() for criterion in self.criteria]
        return config


def number(value: Decimal) -> int | float:
    """A JSON number: an int when whole."""
    return int(value) if value == value.to_integral_value() else float(value)


def value_text(value: Value) -> str:
    """A value as a form sends it: "7", "0.5", "yes"."""
    if isinstance(value, str):
        return value
    return str(number(Decimal(str(value))))


def _option_config(option: Option) -> dict[str, Any]:
    return {"value": option.value, "label": option.label, "description": option.description}


# Checking -----------------------------------------------------------------------------------


class _Problems:
    """Collects every problem of a rubric, each prefixed with where it is."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.messages.append(f"{where}: {message}" if where else message)


def preset_names() -> list[str]:
    return list(PRESETS)


def rubric_expand(config: Mapping[str, Any]) -> dict[str, Any]:
    """The full rubric for ``{"preset": name}``, else the config as given."""
    if set(config) == {"preset"}:
        name = config["preset"]
        if not isinstance(name, str) or name not in PRESETS:
            known = ", ".join(PRESETS)
            raise RubricInvalid([f"preset: unknown preset {name!r}; choose one of: {known}."])
        return {**copy.deepcopy(PRESETS[name].config), "preset": name}
    return dict(config)


def rubric_parse(config: Any) -> Rubric:
    """The rubric a configuration describes; raises RubricInvalid listing every problem."""
    if not isinstance(config, Mapping):
        raise RubricInvalid(["The rubric must be a JSON object."])
    if not config:
        raise RubricInvalid([f"Choose a preset ({', '.join(PRESETS)}) or give a rubric with its name and criteria."])
    config = rubric_expand(config)
    problems = _Problems()
    _unknown_keys(problems, "", config, TOP_KEYS)
    name = _text(problems, "name", config.get("name"), required=True, limit=MAX_LABEL)
    version = config.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.add("version", "must be a whole number from 1 (raise it when the rubric changes).")
        version = 1
    preset = config.get("preset", "")
    if not isinstance(preset, str):
        problems.add("preset", "must be the name of a preset.")
        preset = ""
    unit = config.get("unit", "item")
    if unit not in UNITS:
        problems.add("unit", f"must be one of {', '.join(UNITS)} (got {unit!r}).")
        unit = "item"
    repeat = _repeat(problems, config.get("repeat", ""), unit)
    pair_systems = _pair_systems(problems, config.get("pair_systems"), unit)
    instructions = _text(problems, "instructions", config.get("instructions", ""), limit=MAX_INSTRUCTIONS)
    criteria = _criteria(problems, config.get("criteria"))
    stage_count = max((criterion.stage for criterion in criteria), default=1)
    stages = _stages(problems, config.get("stages"), stage_count)
    _check_stages(problems, criteria, stage_count, repeat)
    context = _context(problems, config.get("context"), unit, stage_count)
    if problems.messages:
        raise RubricInvalid(problems.messages)
    return Rubric(
        name=name,
        version=version,
        preset=preset,
        unit=unit,
        repeat=repeat,
        pair_systems=pair_systems,
        instructions=instructions,
        stages=stages,
        context=context,
        criteria=tuple(criteria),
    )


def _unknown_keys(problems: _Problems, where: str, mapping: Mapping[str, Any], known: Sequence[str]) -> None:
    unknown = [key for key in mapping if key not in known]
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        problems.add(where, f"unknown key{'s' if len(unknown) > 1 else ''} {names}; known keys: {', '.join(known)}.")


def _text(problems: _Problems, where: str, value: Any, *, required: bool = False, limit: int) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        problems.add(where, "must be a text." if not required else "is required (a non-empty text).")
        return ""
    if len(value) > limit:
        problems.add(where, f"is longer than {limit} characters.")
    return value.strip()


def _repeat(problems: _Problems, repeat: Any, unit: str) -> str:
    if repeat in ("", None):
        return ""
    if repeat not in REPEATS:
        problems.add("repeat", f"must be {' or '.join(REPEATS)} (got {repeat!r}).")
        return ""
    if unit != "candidate":
        problems.add("repeat", "rating each cited image needs the candidate unit (one model answer at a time).")
    return str(repeat)


def _pair_systems(problems: _Problems, systems: Any, unit: str) -> tuple[str, ...]:
    if systems in (None, []):
        return ()
    if unit != "pair":
        problems.add("pair_systems", "only the pair unit compares systems.")
        return ()
    if not isinstance(systems, list) or not all(isinstance(s, str) and s.strip() for s in systems):
        problems.add("pair_systems", "must be a list of system names.")
        return ()
    names = tuple(dict.fromkeys(s.strip() for s in systems))
    if len(names) < 2:
        problems.add("pair_systems", "name at least two different systems to compare.")
    return names


def _criteria(problems: _Problems, raw: Any) -> list[Criterion]:
    if not isinstance(raw, list) or not raw:
        problems.add("criteria", "give a list of at least one criterion.")
        return []
    if len(raw) > MAX_CRITERIA:
        problems.add("criteria", f"at most {MAX_CRITERIA} criteria (got {len(raw)}).")
    criteria: list[Criterion] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw[:MAX_CRITERIA]):
        criterion = _criterion(problems, index, entry)
        if criterion is None:
            continue
        if criterion.key in seen:
            problems.add(_where(index, criterion.key), "another criterion has the same key.")
            continue
        seen.add(criterion.key)
        criteria.append(criterion)
    return criteria


def _where(index: int, key: Any = None) -> str:
    return f"criteria[{index}]" + (f" ({key!r})" if isinstance(key, str) and key else "")


def _criterion(problems: _Problems, index: int, entry: Any) -> Criterion | None:
    if not isinstance(entry, Mapping):
        problems.add(_where(index), "must be an object with key, label and scale.")
        return None
    key = entry.get("key")
    where = _where(index, key)
    before = len(problems.messages)
    _unknown_keys(problems, where, entry, CRITERION_KEYS)
    if not isinstance(key, str) or not KEY_PATTERN.match(key) or "__" in key:
        problems.add(
            where, "key must be 1 to 40 lower-case letters, digits or single underscores, starting with a letter."
        )
    elif key in RESERVED_KEYS:
        problems.add(where, f"key {key!r} is reserved for the record; choose another.")
    label = _text(problems, f"{where} label", entry.get("label"), required=True, limit=MAX_LABEL)
    description = _text(problems, f"{where} description", entry.get("description", ""), limit=MAX_DESCRIPTION)
    stage = entry.get("stage", 1)
    if isinstance(stage, bool) or not isinstance(stage, int) or not 1 <= stage <= MAX_STAGES:
        problems.add(where, f"stage must be a whole number from 1 to {MAX_STAGES}.")
        stage = 1
    required = entry.get("required", True)
    if not isinstance(required, bool):
        problems.add(where, "required must be true or false.")
        required = True
    scale = _scale(problems, where, entry.get("scale"))
    level = _level(problems, where, entry.get("level"), entry.get("scale"))
    if scale is None or len(problems.messages) > before:
        return None
    return Criterion(
        key=str(key), label=label, description=description, stage=stage, required=required, level=level, scale=scale
    )


def _level(problems: _Problems, where: str, level: Any, scale: Any) -> str:
    kind = scale.get("type") if isinstance(scale, Mapping) else None
    if kind not in SCALE_TYPES:
        return ""
    if level is None:
        return DEFAULT_LEVEL[kind]
    allowed = ALLOWED_LEVELS[kind]
    if level not in allowed:
        problems.add(where, f"a {kind} scale is measured as {' or '.join(allowed)}, not {level!r}.")
        return DEFAULT_LEVEL[kind]
    return str(level)


def _scale(problems: _Problems, where: str, raw: Any) -> Scale | None:
    if not isinstance(raw, Mapping) or raw.get("type") not in SCALE_TYPES:
        problems.add(where, f"scale must be an object whose type is one of {', '.join(SCALE_TYPES)}.")
        return None
    kind = str(raw["type"])
    before = len(problems.messages)
    _unknown_keys(problems, f"{where} scale", raw, SCALE_KEYS[kind])
    if kind == "points":
        scale = Scale("points", options=_options(problems, where, raw.get("points"), numeric=True))
    elif kind == "choices":
        scale = Scale("choices", options=_options(problems, where, raw.get("choices"), numeric=False))
    elif kind == "range":
        scale = _range(problems, where, raw)
    else:
        scale = _text_scale(problems, where, raw)
    return scale if len(problems.messages) == before else None


def _options(problems: _Problems, where: str, raw: Any, *, numeric: bool) -> tuple[Option, ...]:
    kind = "points" if numeric else "choices"
    if not isinstance(raw, list) or not 2 <= len(raw) <= MAX_OPTIONS:
        problems.add(where, f"a {kind} scale needs a list of 2 to {MAX_OPTIONS} {kind} (one number key each).")
        return ()
    options: list[Option] = []
    for position, entry in enumerate(raw, 1):
        at = f"{where} {kind}[{position - 1}]"
        if not isinstance(entry, Mapping):
            problems.add(at, "must be an object with value and label.")
            continue
        _unknown_keys(problems, at, entry, OPTION_KEYS)
        value = _option_value(problems, at, entry.get("value"), numeric=numeric)
        label = _text(problems, f"{at} label", entry.get("label"), required=True, limit=MAX_LABEL)
        description = _text(problems, f"{at} description", entry.get("description", ""), limit=MAX_DESCRIPTION)
        if value is not None:
            options.append(Option(value=value, label=label, description=description))
    texts = [value_text(option.value) for option in options]
    if len(set(texts)) != len(texts):
        problems.add(where, f"two {kind} share a value; every value must be different.")
    if numeric and len(options) == len(raw):
        values = [Decimal(text) for text in texts]
        if values != sorted(values):
            problems.add(where, "list the points from the lowest value to the highest (their order is the scale's).")
    return tuple(options)


def _option_value(problems: _Problems, where: str, value: Any, *, numeric: bool) -> Value | None:
    if numeric:
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.add(where, "a point's value must be a number.")
            return None
        return number(Decimal(str(value)))
    if not isinstance(value, str) or not CHOICE_PATTERN.match(value):
        problems.add(where, "a choice's value must be a short word: a letter, then letters, digits or underscores.")
        return None
    return value


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        result = Decimal(str(value))
    except InvalidOperation:
        return None
    return result if result.is_finite() else None


def _range(problems: _Problems, where: str, raw: Mapping[str, Any]) -> Scale:
    minimum, maximum = _decimal(raw.get("min")), _decimal(raw.get("max"))
    step = _decimal(raw.get("step", 1))
    if minimum is None or maximum is None:
        problems.add(where, "a range needs numbers min and max.")
        return Scale("range")
    if step is None or step <= 0:
        problems.add(where, "a range's step must be a number above 0.")
        return Scale("range")
    if maximum <= minimum:
        problems.add(where, f"a range's max ({number(maximum)}) must be greater than its min ({number(minimum)}).")
        return Scale("range")
    steps = (maximum - minimum) / step
    if steps != steps.to_integral_value():
        span, size = number(maximum - minimum), number(step)
        problems.add(where, f"max - min ({span}) must be a whole number of steps of {size}.")
        return Scale("range")
    if steps + 1 > MAX_RANGE_STEPS:
        problems.add(where, f"a range has at most {MAX_RANGE_STEPS} values; make the step larger.")
        return Scale("range")
    scale = Scale("range", minimum=minimum, maximum=maximum, step=step)
    values = scale.range_values()
    anchors = _anchors(problems, where, raw.get("anchors"), values)
    options: tuple[Option, ...] = ()
    if len(values) <= MAX_OPTIONS:
        labels = dict(anchors)
        options = tuple(Option(value=value, label=labels.get(value, "")) for value in values)
    return Scale("range", options=options, minimum=minimum, maximum=maximum, step=step, anchors=anchors)


def _anchors(problems: _Problems, where: str, raw: Any, values: tuple[Value, ...]) -> tuple[tuple[Value, str], ...]:
    if raw in (None, {}):
        return ()
    if not isinstance(raw, Mapping):
        problems.add(where, 'anchors must be an object such as {"1": "poor", "10": "excellent"}.')
        return ()
    by_text = {value_text(value): value for value in values}
    anchors: list[tuple[Value, str]] = []
    for text, label in raw.items():
        try:
            value = by_text.get(value_text(number(Decimal(str(text).strip()))))
        except InvalidOperation:
            value = None
        if value is None:
            problems.add(where, f"anchor {text!r} is not a value of the range.")
        elif not isinstance(label, str) or not label.strip():
            problems.add(where, f"anchor {text!r} needs a label.")
        else:
            anchors.append((value, label.strip()))
    return tuple(sorted(anchors, key=lambda pair: Decimal(value_text(pair[0]))))


def _text_scale(problems: _Problems, where: str, raw: Mapping[str, Any]) -> Scale:
    limit = raw.get("max_length", DEFAULT_TEXT_LENGTH)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TEXT_LENGTH:
        problems.add(where, f"a text's max_length must be a whole number from 1 to {MAX_TEXT_LENGTH}.")
        return Scale("text")
    return Scale("text", max_length=limit)


def _stages(problems: _Problems, raw: Any, stage_count: int) -> tuple[Stage, ...]:
    if raw in (None, []):
        return tuple(Stage(n, f"Stage {n}") for n in range(1, stage_count + 1))
    if not isinstance(raw, list) or not all(isinstance(s, Mapping) for s in raw):
        problems.add("stages", 'must be a list of objects such as {"title": "Image only"}.')
        return tuple(Stage(n, f"Stage {n}") for n in range(1, stage_count + 1))
    if len(raw) != stage_count:
        problems.add("stages", f"the criteria use {stage_count} stage(s) but {len(raw)} are described.")
    stages = []
    for n, entry in enumerate(raw[:stage_count], 1):
        _unknown_keys(problems, f"stages[{n - 1}]", entry, ("title",))
        title = _text(problems, f"stages[{n - 1}] title", entry.get("title"), required=True, limit=MAX_LABEL)
        stages.append(Stage(n, title or f"Stage {n}"))
    return tuple(stages)


def _check_stages(problems: _Problems, criteria: list[Criterion], stage_count: int, repeat: str) -> None:
    if not criteria:
        return  # every criterion had problems of its own
    used = {criterion.stage for criterion in criteria}
    for n in range(1, stage_count + 1):
        if n not in used:
            problems.add("criteria", f"no criterion is in stage {n}; stages are numbered 1, 2, … without gaps.")
        elif n < stage_count and not any(c.required for c in criteria if c.stage == n):
            problems.add(
                "criteria", f"stage {n} needs a required criterion: answering it is what reveals stage {n + 1}."
            )
    if repeat and stage_count > 1:
        problems.add("repeat", "a rubric repeated for each cited image has one stage.")


def _context(problems: _Problems, raw: Any, unit: str, stage_count: int) -> tuple[tuple[str, int], ...]:
    if raw is None:
        shown = dict.fromkeys(DEFAULT_CONTEXT[unit], 1)
    elif not isinstance(raw, Mapping):
        problems.add("context", 'must be an object such as {"question": 1, "caption": 2}.')
        return ()
    else:
        shown = {}
        for part, stage in raw.items():
            if part not in CONTEXT_PARTS:
                problems.add("context", f"unknown part {part!r}; parts: {', '.join(CONTEXT_PARTS)}.")
            elif isinstance(stage, bool) or not isinstance(stage, int) or not 1 <= stage <= stage_count:
                problems.add("context", f"{part!r} must name the stage it appears at, 1 to {stage_count}.")
            else:
                shown[part] = stage
    if "answers" in shown and unit == "item":
        problems.add("context", "'answers' needs the candidate or pair unit; the item unit rates no answer.")
    if unit in ("candidate", "pair") and "answers" not in shown:
        problems.add("context", f"the {unit} unit rates answers, so the context must show 'answers'.")
    return tuple((part, shown[part]) for part in CONTEXT_PARTS if part in shown)
