"""Tools: what a model is offered (name, description, JSON-schema parameters) and how a call runs.

tau2 derives each tool's schema from the Python function (``pydantic.create_model`` over the signature, the
docstring's descriptions). Here every tool declares the same facts explicitly, with :class:`Param`, and
:meth:`ToolSpec.openai_schema` renders them exactly as pydantic's ``model_json_schema()`` does for those
types (keys sorted, a property's ``title`` from its name, ``$defs`` for nested models). A call goes to the
toolkit's method with the arguments as keywords, so a missing or unexpected argument fails with Python's
own ``TypeError`` text, naming the method as upstream's (``RetailTools.get_user_details() missing ...``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from taubench_runner import records

_REQUIRED: Any = object()


@dataclass(frozen=True)
class Param:
    """One parameter. ``kind``: ``string``, ``integer``, ``number``, ``boolean``, ``enum`` (strings),
    ``string_list``, ``model_list`` (a list of ``model`` objects or free-form objects), or ``raw`` (a schema
    given as is, for the unions of models and enums that pydantic renders with ``anyOf``)."""

    name: str
    kind: str
    description: str | None
    default: Any = _REQUIRED
    enum: tuple[str, ...] = ()
    model: records.Model | None = None
    #: For ``kind="raw"``: the property's schema as pydantic writes it (keys in its order, title included),
    #: and the ``$defs`` it refers to.
    raw: tuple[tuple[str, Any], ...] = ()
    raw_defs: tuple[tuple[str, Any], ...] = ()

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        typed: dict[str, Any]
        if self.kind == "raw":
            defs.update(dict(self.raw_defs))
            return dict(self.raw)
        if self.kind in ("string", "integer", "number", "boolean"):
            typed = {"type": self.kind}
        elif self.kind == "enum":
            typed = {"enum": list(self.enum), "type": "string"}
        elif self.kind == "string_list":
            typed = {"items": {"type": "string"}, "type": "array"}
        elif self.kind == "model_list":
            assert self.model is not None
            defs[self.model.name] = model_schema(self.model)
            typed = {
                "items": {"anyOf": [{"$ref": f"#/$defs/{self.model.name}"},
                                    {"additionalProperties": True, "type": "object"}]},
                "type": "array",
            }
        else:
            raise ValueError(f"unknown parameter kind {self.kind!r}")
        out: dict[str, Any] = {}
        if not self.required:
            out["default"] = self.default
        if self.description is not None:
            out["description"] = self.description
        out.update(typed)
        out["title"] = title(self.name)
        return dict(sorted(out.items()))


def title(name: str) -> str:
    """pydantic's default title of a field: words capitalised, underscores as spaces."""
    return name.replace("_", " ").title()


_JSON_TYPES = {records.STR: "string", records.INT: "integer", records.FLOAT: "number", records.BOOL: "boolean"}


def model_schema(model: records.Model) -> dict[str, Any]:
    """The ``$defs`` entry of a flat model (scalar fields), as pydantic writes it."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, f in model.fields.items():
        prop: dict[str, Any] = {"type": _JSON_TYPES[f.type]}
        if f.description is not None:
            prop["description"] = f.description
        prop["title"] = title(name)
        properties[name] = dict(sorted(prop.items()))
        if f.required:
            required.append(name)
    out: dict[str, Any] = {"properties": properties}
    if required:
        out["required"] = required
    out.update(title=model.name, type="object")
    return out


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its name, description, parameters, kind (``read``, ``write``, ``generic``, ``think``) and
    whether replaying it changes state (tau2's ``mutates_state``: writes do)."""

    name: str
    description: str
    params: tuple[Param, ...]
    kind: str = "read"
    mutates: bool = False

    def parameters_schema(self) -> dict[str, Any]:
        defs: dict[str, Any] = {}
        properties = {p.name: p.schema(defs) for p in self.params}
        out: dict[str, Any] = {}
        if defs:
            out["$defs"] = dict(sorted(defs.items()))
        out["properties"] = properties
        required = [p.name for p in self.params if p.required]
        if required:
            out["required"] = required
        out.update(title="parameters", type="object")
        return out

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters_schema()},
        }


def tool(kind: str, description: str, *params: Param, mutates: bool | None = None) -> Callable[[Any], Any]:
    """Mark a toolkit method as a tool. ``mutates`` defaults to ``kind == "write"``, as in tau2."""

    def mark(func: Any) -> Any:
        func.__tool_spec__ = ToolSpec(
            name=func.__name__, description=description, params=tuple(params), kind=kind,
            mutates=(kind == "write") if mutates is None else mutates,
        )
        return func

    return mark


def env_function(func: Any) -> Any:
    """Mark a toolkit method that tasks may call by name (initialization actions, env assertions)."""
    func.__env_function__ = True
    return func


@dataclass
class ModelOut:
    """A tool result that tau2 returns as a pydantic model (``model_dump()``-ed, not stringified)."""

    value: Any = field(default=None)


class ToolKit:
    """The tools of one side (agent or user) over one database. Subclasses declare tools with :func:`tool`;
    the order of declaration is the order the model is offered them."""

    tool_specs: ClassVar[dict[str, ToolSpec]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs: dict[str, ToolSpec] = {}
        for base in reversed(cls.__mro__[1:]):
            specs.update(getattr(base, "tool_specs", {}) or {})
        own = {name: value.__tool_spec__ for name, value in vars(cls).items() if hasattr(value, "__tool_spec__")}
        cls.tool_specs = {**own, **{k: v for k, v in specs.items() if k not in own}}

    def __init__(self, db: dict[str, Any] | None) -> None:
        self.db: Any = db
        #: The model of the database object this toolkit holds (another side's after tau2's re-pointing).
        self.db_model_name = self.db_model().name

    def field(self, name: str) -> Any:
        """``self.db.<name>``, failing as attribute access fails on the database model."""
        try:
            return self.db[name]
        except KeyError:
            raise AttributeError(f"'{self.db_model_name}' object has no attribute '{name}'") from None

    def specs(self, include: Sequence[str] | None = None) -> list[ToolSpec]:
        specs = list(self.tool_specs.values())
        if include is not None:
            unknown = set(include) - set(self.tool_specs)
            if unknown:
                raise ValueError(f"Tool(s) not found: {sorted(unknown)}. Available: {sorted(self.tool_specs)}")
            specs = [s for s in specs if s.name in set(include)]
        return specs

    def has_tool(self, name: str) -> bool:
        return name in self.tool_specs

    def use_tool(self, tool_name: str, **kwargs: Any) -> Any:
        if tool_name not in self.tool_specs:
            raise ValueError(f"Tool '{tool_name}' not found.")
        return getattr(self, tool_name)(**kwargs)

    def env_call(self, func_name: str) -> Callable[..., Any]:
        """The method an initialization action or assertion names (a tool or an env function)."""
        func = getattr(self, func_name, None)
        if func is None or not (hasattr(func, "__tool_spec__") or hasattr(func, "__env_function__")):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{func_name}'")
        return func

    def update_db(self, update: dict[str, Any]) -> None:
        """Apply initialization data: merged into the database and validated again."""
        if self.db is None:
            raise ValueError("Database has not been initialized.")
        merged = records.deep_update(records.copy_data(self.db), update)
        self.db = self.db_model().validate(merged)

    @classmethod
    def db_model(cls) -> records.Model:
        raise NotImplementedError


# -- pieces shared by the domains -----------------------------------------------------------------

CALCULATE_DESCRIPTION = "Calculate the result of a mathematical expression."
CALCULATE_PARAM = Param(
    "expression", "string",
    "The mathematical expression to calculate, such as '2 + 2'. The expression can contain numbers, operators "
    "(+, -, *, /), parentheses, and spaces.",
)
TRANSFER_DESCRIPTION = (
    "Transfer the user to a human agent, with a summary of the user's issue.\n\nOnly transfer if\n"
    " -  the user explicitly asks for a human agent\n"
    " -  given the policy and the available tools, you cannot solve the user's issue."
)
TRANSFER_PARAM = Param("summary", "string", "A summary of the user's issue.")


def calculate(expression: Any) -> str:
    """tau2's ``calculate``: arithmetic on digits, operators, parentheses and spaces, rounded to 2 places."""
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ValueError("Invalid characters in expression")
    return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))

