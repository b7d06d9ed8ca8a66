"""Typed records for the domain databases, validated the way tau2's pydantic models validate them.

tau2-bench keeps every database as pydantic models. What the agent sees of them (a tool's JSON result, an
error message) and what the evaluator compares (a hash of ``model_dump()``) follow from pydantic's rules, so
this module reproduces the rules the domains rely on, with the standard library only:

* a record is a plain ``dict`` whose keys are the model's fields **in declaration order**, every field
  present (defaults filled in), so ``json.dumps(record)`` is ``json.dumps(model.model_dump())``;
* validation is pydantic's *lax* mode: ``int`` accepts an integral float, a bool or a numeric string;
  ``float`` accepts ints (made floats), bools and numeric strings; ``str`` accepts only strings; ``bool``
  accepts ``0``/``1`` and the usual words; a ``Literal`` must match; unknown keys are ignored (or refused when
  the model forbids extras);
* a failure raises :class:`ValidationError` whose text is pydantic's (``1 validation error for Task`` ...,
  with the ``[type=..., input_value=..., input_type=...]`` line and the documentation link);
* assigning to a field afterwards is not validated, as in pydantic (tools write raw values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: The pydantic minor version whose documentation links appear in validation errors (tau2-bench's lock file).
PYDANTIC_DOCS_VERSION = "2.12"

_MISSING: Any = object()


class ValidationError(ValueError):
    """pydantic's ``ValidationError``: every problem of one validation, with pydantic's message."""

    def __init__(self, title: str, errors: Sequence[tuple[tuple[Any, ...], str, str, Any]]) -> None:
        self.title = title
        self.errors = list(errors)
        super().__init__(self._render())

    def _render(self) -> str:
        n = len(self.errors)
        lines = [f"{n} validation error{'s' if n != 1 else ''} for {self.title}"]
        for loc, kind, message, value in self.errors:
            lines.append(".".join(str(part) for part in loc) if loc else self.title)
            lines.append(f"  {message} [type={kind}, input_value={_truncated_repr(value)}, "
                         f"input_type={type(value).__name__}]")
            lines.append(f"    For further information visit https://errors.pydantic.dev/{PYDANTIC_DOCS_VERSION}/v/{kind}")
        return "\n".join(lines)


def _truncated_repr(value: Any) -> str:
    """pydantic-core's ``input_value``: the repr, cut to its first 25 and last 24 bytes when longer than 50."""
    text = repr(value)
    data = text.encode("utf-8")
    if len(data) <= 50:
        return text
    head = data[:25].decode("utf-8", "ignore")
    tail_bytes = data[-24:]
    while tail_bytes and (tail_bytes[0] & 0xC0) == 0x80:  # do not start inside a character
        tail_bytes = tail_bytes[1:]
    return f"{head}...{tail_bytes.decode('utf-8', 'ignore')}"


class _Errors:
    def __init__(self) -> None:
        self.items: list[tuple[tuple[Any, ...], str, str, Any]] = []

    def add(self, loc: tuple[Any, ...], kind: str, message: str, value: Any) -> None:
        self.items.append((loc, kind, message, value))


# -- types ----------------------------------------------------------------------------------------


class Type:
    """A field type. ``check`` returns the validated value or records errors and returns ``_MISSING``."""

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        raise NotImplementedError


class _Str(Type):
    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if isinstance(value, str):
            return value
        errors.add(loc, "string_type", "Input should be a valid string", value)
        return _MISSING


class _Int(Type):
    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                errors.add(loc, "finite_number", "Input should be a finite number", value)
                return _MISSING
            if value.is_integer():
                return int(value)
            errors.add(loc, "int_from_float", "Input should be a valid integer, got a number with a fractional part",
                       value)
            return _MISSING
        if isinstance(value, str):
            text = value.strip()
            try:
                return int(text)
            except ValueError:
                pass
            try:
                number = float(text)
            except ValueError:
                number = None
            if number is not None and number.is_integer():
                return int(number)
            if number is not None:
                errors.add(loc, "int_from_float",
                           "Input should be a valid integer, got a number with a fractional part", value)
                return _MISSING
            errors.add(loc, "int_parsing", "Input should be a valid integer, unable to parse string as an integer",
                       value)
            return _MISSING
        errors.add(loc, "int_type", "Input should be a valid integer", value)
        return _MISSING


class _Float(Type):
    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                errors.add(loc, "float_parsing", "Input should be a valid number, unable to parse string as a number",
                           value)
                return _MISSING
        errors.add(loc, "float_type", "Input should be a valid number", value)
        return _MISSING


_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


class _Bool(Type):
    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, int | float | str):
            errors.add(loc, "bool_parsing", "Input should be a valid boolean, unable to interpret input", value)
        else:
            errors.add(loc, "bool_type", "Input should be a valid boolean", value)
        return _MISSING


class _Any(Type):
    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        return value


STR: Type = _Str()
INT: Type = _Int()
FLOAT: Type = _Float()
BOOL: Type = _Bool()
ANY: Type = _Any()


class Literal(Type):
    def __init__(self, *values: Any) -> None:
        self.values = values

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        for allowed in self.values:
            if value == allowed and type(value) is type(allowed):
                return allowed
        shown = [repr(v) for v in self.values]
        expected = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
        errors.add(loc, "literal_error", f"Input should be {expected}", value)
        return _MISSING


class Enum(Type):
    """A ``str`` enum of pydantic: one of its values (stored as the plain string, which is what
    ``json.dumps`` writes for a ``str`` enum member); ``name`` is the enum class's, for error texts."""


    def __init__(self, name: str, members: Mapping[str, str]) -> None:
        self.name = name
        self.members = dict(members)  # NAME -> value, in the enum's order
        self.values = tuple(self.members.values())
        self._names = {v: k for k, v in self.members.items()}

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if isinstance(value, str) and value in self.values:
            return str(value)
        shown = [repr(v) for v in self.values]
        expected = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
        errors.add(loc, "enum", f"Input should be {expected}", value)
        return _MISSING

    def member_repr(self, value: str) -> str:
        """``repr()`` of the enum member with this value (``<Level.GOOD: 'good'>``), as Python prints it
        inside a container; a value that is not a member is shown as itself."""
        if isinstance(value, str) and value in self._names:
            return f"<{self.name}.{self._names[value]}: {value!r}>"
        return repr(value)


class _DateTime(Type):
    """``datetime.datetime`` (``date_only``: ``datetime.date``), stored as ``str()`` of the value: what
    ``json.dumps(..., default=str)`` writes for it, so hashes and tool results match upstream's."""

    def __init__(self, date_only: bool) -> None:
        self.date_only = date_only

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        import datetime as dt

        kind = "date" if self.date_only else "datetime"
        if isinstance(value, dt.datetime):
            parsed: Any = value
        elif isinstance(value, dt.date):
            parsed = value if self.date_only else dt.datetime(value.year, value.month, value.day)
        elif isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value.strip())
            except ValueError:
                errors.add(loc, f"{kind}_from_date_parsing" if self.date_only else "datetime_from_date_parsing",
                           f"Input should be a valid {kind}, invalid {kind} format", value)
                return _MISSING
        else:
            errors.add(loc, f"{kind}_type", f"Input should be a valid {kind}", value)
            return _MISSING
        if self.date_only and isinstance(parsed, dt.datetime):
            if parsed.time() != dt.time(0) or parsed.tzinfo is not None:
                errors.add(loc, "date_from_datetime_inexact",
                           "Datetimes provided to dates should have zero time - e.g. be exact dates", value)
                return _MISSING
            parsed = parsed.date()
        return str(parsed)


DATE: Type = _DateTime(date_only=True)
DATETIME: Type = _DateTime(date_only=False)


class Optional(Type):
    def __init__(self, inner: Type) -> None:
        self.inner = inner

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if value is None:
            return None
        return self.inner.check(value, loc, errors)


class ListOf(Type):
    def __init__(self, inner: Type) -> None:
        self.inner = inner

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if not isinstance(value, list | tuple):
            errors.add(loc, "list_type", "Input should be a valid list", value)
            return _MISSING
        out = []
        ok = True
        for i, item in enumerate(value):
            checked = self.inner.check(item, (*loc, i), errors)
            ok = ok and checked is not _MISSING
            out.append(checked)
        return out if ok else _MISSING


class DictOf(Type):
    def __init__(self, inner: Type, keys: Type = STR) -> None:
        self.inner = inner
        self.keys = keys

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if not isinstance(value, Mapping):
            errors.add(loc, "dict_type", "Input should be a valid dictionary", value)
            return _MISSING
        out = {}
        ok = True
        for key, item in value.items():
            checked_key = self.keys.check(key, (*loc, key, "[key]"), errors)
            checked = self.inner.check(item, (*loc, key), errors)
            ok = ok and checked is not _MISSING and checked_key is not _MISSING
            out[checked_key] = checked
        return out if ok else _MISSING


class Field:
    """One field: its type and default (``default_factory`` for mutable defaults)."""

    def __init__(self, type_: Type, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None,
                 description: str | None = None) -> None:
        self.type = type_
        self.default = default
        self.default_factory = default_factory
        self.description = description

    @property
    def required(self) -> bool:
        return self.default is _MISSING and self.default_factory is None


class Model(Type):
    """A pydantic model: named, ordered fields; ``extra="forbid"`` refuses unknown keys.

    Calling it validates keyword arguments into a record (``Task(task_id=..., title=...)``).
    """

    def __init__(self, name: str, fields: Mapping[str, Field | Type], *, forbid_extra: bool = False) -> None:
        self.name = name
        self.fields: dict[str, Field] = {
            k: (f if isinstance(f, Field) else Field(f)) for k, f in fields.items()
        }
        self.forbid_extra = forbid_extra

    def __repr__(self) -> str:
        return f"Model({self.name})"

    def extend(self, name: str, fields: Mapping[str, Field | Type], *, forbid_extra: bool | None = None) -> Model:
        """A subclass: the parent's fields first (a redefined one keeps its place), then the new ones."""
        merged: dict[str, Field | Type] = dict(self.fields)
        merged.update(fields)
        return Model(name, merged, forbid_extra=self.forbid_extra if forbid_extra is None else forbid_extra)

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        if not isinstance(value, Mapping):
            errors.add(loc, "model_type", f"Input should be a valid dictionary or instance of {self.name}", value)
            return _MISSING
        out: dict[str, Any] = {}
        ok = True
        for key, field in self.fields.items():
            if key in value:
                checked = field.type.check(value[key], (*loc, key), errors)
                ok = ok and checked is not _MISSING
                out[key] = checked
            elif field.default_factory is not None:
                out[key] = field.default_factory()
            elif field.default is not _MISSING:
                out[key] = field.default
            else:
                errors.add((*loc, key), "missing", "Field required", value)
                ok = False
        if self.forbid_extra:
            for key in value:
                if key not in self.fields:
                    errors.add((*loc, key), "extra_forbidden", "Extra inputs are not permitted", value[key])
                    ok = False
        return out if ok else _MISSING

    def validate(self, value: Any) -> dict[str, Any]:
        """``Model.model_validate(value)``: the record, or :class:`ValidationError`."""
        errors = _Errors()
        out = self.check(value, (), errors)
        if errors.items or out is _MISSING:
            raise ValidationError(self.name, errors.items)
        return out

    def __call__(self, **values: Any) -> dict[str, Any]:
        return self.validate(values)


class Union(Type):
    """``Union[A, B, ...]`` of models in pydantic's smart mode (the first member that validates)."""

    def __init__(self, *members: Model) -> None:
        self.members = members

    def check(self, value: Any, loc: tuple[Any, ...], errors: _Errors) -> Any:
        attempts: list[_Errors] = []
        for member in self.members:
            mine = _Errors()
            out = member.check(value, loc, mine)
            if not mine.items and out is not _MISSING:
                return out
            attempts.append(mine)
        for member, mine in zip(self.members, attempts, strict=True):
            for item_loc, kind, message, item_value in mine.items:
                tagged = (*loc, member.name, *item_loc[len(loc):])
                errors.add(tagged, kind, message, item_value)
        return _MISSING


def copy_data(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars), much faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: copy_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(copy_data(v) for v in value)
    return value


def deep_update(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """addict's ``Dict.update``, which tau2 uses to apply initialization data: nested mappings merge, every
    other value (lists included) replaces."""
    for key, value in update.items():
        if key in base and isinstance(base[key], dict) and isinstance(value, Mapping):
            deep_update(base[key], value)
        else:
            base[key] = copy_data(value) if isinstance(value, dict | list) else value
    return base
