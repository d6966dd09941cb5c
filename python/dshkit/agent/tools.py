"""Tools the model can call: `Tool`, the `ToolContext` a body receives, and `ToolOutput`.

A `Tool` can be made from a plain typed function (`Tool.from_function`, the `@tool` decorator): the
name is the function's, the description its docstring, and the JSON schema of the arguments
comes from its type hints through pydantic (an optional dependency: ``pip install
'dshkit[typed]'``), so `Annotated[int, Field(ge=1, description=...)]`, `Literal`, enums, nested
pydantic models and defaults all carry over. The body gets its arguments converted to the hinted
types (a nested model arrives as that model). A parameter annotated `ToolContext` receives the
call's context instead of an argument. The function may be sync or async.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints, overload

from dshkit.agent.approvals import Policy, check_policy
from dshkit.agent.cancel import CancelToken
from dshkit.agent._input.checks import check_message_batch
from dshkit.llm import Message, freeze, to_json

if TYPE_CHECKING:
    from dshkit.session import Session

# A tool body is a plain function or a coroutine function: a returned awaitable is awaited.
ToolBody = Callable[[Any, "ToolContext"], "object | Awaitable[object]"]


@dataclass(frozen=True)
class ToolContext:
    """What a tool body receives beside its arguments."""

    call_id: str
    name: str
    turn: int
    step: int
    cancel: CancelToken
    session: Session

    def __init__(self, call_id: str, name: str, turn: int, step: int, cancel: CancelToken, session: Session) -> None:
        # The dataclass's own __init__, signature and fields kept; one write of the instance dict
        # instead of the frozen init's object.__setattr__ per field (~1.3k instructions each on 3.11).
        self.__dict__.update(call_id=call_id, name=name, turn=turn, step=step, cancel=cancel, session=session)


class ToolOutput:
    """A tool's full answer: content plus optional error flag, added context, end of turn.

    A tool body may return plain content instead (a `str`, a list of content blocks, or any
    other JSON value, which is sent as JSON text). `context` messages are new user messages
    queued for the next step (after every result of this step); `end_turn` asks the agent to
    stop the turn after this step instead of calling the model again. `meta` is presentation
    data logged beside the result, never shown to the model.
    """

    __slots__ = ("content", "context", "end_turn", "is_error", "meta")

    def __init__(
        self,
        content: Any,
        *,
        is_error: bool = False,
        context: Iterable[Message] = (),
        end_turn: bool = False,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        added = check_message_batch(context, "ToolOutput context")
        for index, message in enumerate(added):
            if message.role != "user":
                raise TypeError(f"ToolOutput context[{index}]: expected a user-role message, got role {message.role!r}")
            if any(earlier.id == message.id for earlier in added[:index]):
                raise ValueError(f"ToolOutput context[{index}]: message id {message.id} appears twice")
        if meta is not None and not isinstance(meta, Mapping):
            raise TypeError(f"ToolOutput meta: expected a mapping, got {type(meta).__name__}")
        self.content = content
        self.is_error = bool(is_error)
        self.context = added
        self.end_turn = bool(end_turn)
        self.meta = meta

    def __repr__(self) -> str:
        return f"ToolOutput({self.content!r}, is_error={self.is_error}, end_turn={self.end_turn})"


class Tool:
    """A tool: `name`, `description`, JSON-schema `parameters` and `run(arguments, ctx)` (sync or async).

    `arguments` is the parsed JSON object the model wrote (a plain `dict`). `parallel=False`
    makes the tool exclusive: it starts only after every earlier call of the step finished,
    and later calls wait for it (use it for tools that write). `timeout` (seconds) cancels a body
    that runs longer (None: the agent's `tool_timeout`); `approval` is the tool's approval policy
    (``"always"``, ``"ask"``, ``"never"`` or a callable; None: the agent's); `retries` is how many
    calls with invalid arguments the model may make in a turn before the turn ends with an error.
    `Tool.from_function(fn)` builds a tool from a typed function.
    """

    __slots__ = ("approval", "description", "name", "parallel", "parameters", "retries", "run", "timeout")

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        run: ToolBody,
        *,
        parallel: bool = True,
        timeout: float | None = None,
        approval: Policy | None = None,
        retries: int = 2,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Tool name: expected a non-empty str, got {name!r}")
        if not isinstance(description, str):
            raise TypeError(f"Tool {name!r} description: expected a str, got {type(description).__name__}")
        if not isinstance(parameters, Mapping):
            raise TypeError(f"Tool {name!r} parameters: expected a JSON schema mapping, got {type(parameters).__name__}")
        if not callable(run):
            raise TypeError(f"Tool {name!r} run: expected a callable (a function or an async function), got {type(run).__name__}")
        self.name = name
        self.description = description
        self.parameters = freeze(parameters)
        self.run = run
        self.parallel = bool(parallel)
        self.timeout = check_timeout(timeout, f"Tool {name!r} timeout")
        self.approval = check_policy(approval, f"Tool {name!r} approval")
        if type(retries) is not int or retries < 0:
            raise ValueError(f"Tool {name!r} retries: expected an int >= 0, got {retries!r}")
        self.retries = retries

    @classmethod
    def from_function(cls, fn: Callable[..., Any], **options: Any) -> Tool:
        """A tool from a typed function: name, docstring and a JSON schema from its type hints.

        See `tool_from_function` (the options: `name`, `description`,
        `parallel`, `timeout`, `approval`, `retries`).
        """
        return tool_from_function(fn, **options)

    @property
    def spec(self) -> dict[str, Any]:
        """The tool as the model sees it: ``{name, description, parameters}``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


F = TypeVar("F", bound=Callable[..., Any])


def _pydantic() -> Any:
    try:
        import pydantic
    except ImportError as exc:
        raise ImportError(
            "Tool.from_function builds the argument schema from type hints with pydantic, which is not "
            "installed: pip install 'dshkit[typed]'"
        ) from exc
    return pydantic


def tool_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    parallel: bool = True,
    timeout: float | None = None,
    approval: Any = None,
    retries: int = 2,
) -> Tool:
    """A `Tool` calling `fn(**arguments)`, its schema from `fn`'s type hints (see the module doc)."""
    if not callable(fn):
        raise TypeError(f"Tool.from_function: expected a function, got {type(fn).__name__}")
    pydantic = _pydantic()
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(tool_name, str) or not tool_name or tool_name == "<lambda>":
        raise ValueError("Tool.from_function: the function has no usable name; pass name=...")
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve, ...
        raise TypeError(f"Tool.from_function({tool_name}): cannot resolve the type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    context_parameter: str | None = None
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise TypeError(
                f"Tool.from_function({tool_name}): parameter {parameter.name!r} must be passable by keyword "
                "(no *args, **kwargs or positional-only parameters)"
            )
        hint = hints.get(parameter.name, Any)
        if hint is ToolContext:
            context_parameter = parameter.name
            continue
        if parameter.name not in hints:
            raise TypeError(f"Tool.from_function({tool_name}): parameter {parameter.name!r} has no type hint")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hint, default)
    model = pydantic.create_model(f"{tool_name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    schema = _without_titles(model.model_json_schema())
    text = description if description is not None else inspect.getdoc(fn) or ""
    run = _typed_body(fn, model, tuple(fields), context_parameter)
    return Tool(tool_name, text, schema, run, parallel=parallel, timeout=timeout, approval=approval, retries=retries)


def _typed_body(fn: Callable[..., Any], model: Any, names: tuple[str, ...], context_parameter: str | None) -> ToolBody:
    """A tool body calling `fn` with the arguments converted by the pydantic `model` (sync or async as `fn`)."""

    def keyword_arguments(arguments: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
        checked = model.model_validate(arguments)
        values = {field: getattr(checked, field) for field in names}
        if context_parameter is not None:
            values[context_parameter] = ctx
        return values

    if inspect.iscoroutinefunction(fn):

        async def run_async(arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
            return await fn(**keyword_arguments(arguments, ctx))

        return run_async

    def run_sync(arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        return fn(**keyword_arguments(arguments, ctx))

    return run_sync


@overload
def tool(fn: F, /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None, parallel: bool = True,
         timeout: float | None = None, approval: Any = None, retries: int = 2) -> Callable[[F], Tool]: ...
def tool(fn: Any = None, /, **options: Any) -> Any:
    """Decorator: ``@tool`` or ``@tool(timeout=5, approval="ask")`` turns a typed function into a `Tool`."""
    if fn is None:
        return lambda function: tool_from_function(function, **options)
    return tool_from_function(fn, **options)


def _without_titles(schema: Any) -> Any:
    """The schema without pydantic's generated ``title`` keys (noise for the model)."""
    if isinstance(schema, dict):
        return {
            key: (_without_titles(value) if key != "properties" else {k: _without_titles(v) for k, v in value.items()})
            for key, value in schema.items()
            if key != "title"
        }
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    return schema


def check_timeout(timeout: object, where: str) -> float | None:
    """`timeout` as seconds (a positive finite number) or None, else an error naming `where`."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{where}: expected seconds (a number) or None, got {type(timeout).__name__}")
    if not 0 < timeout < float("inf"):
        raise ValueError(f"{where}: expected a positive finite number of seconds, got {timeout!r}")
    return float(timeout)


def check_tools(tools: Iterable[Tool]) -> dict[str, Tool]:
    """Validate the agent's tools: `Tool` instances with unique names."""
    if isinstance(tools, (str, bytes, Mapping, Tool)):
        raise TypeError(f"Agent tools: expected an iterable of Tool, got {type(tools).__name__}")
    by_name: dict[str, Tool] = {}
    for index, tool in enumerate(tools):
        if not isinstance(tool, Tool):
            raise TypeError(f"Agent tools[{index}]: expected a Tool, got {type(tool).__name__}")
        if tool.name in by_name:
            raise ValueError(f"Agent tools[{index}]: duplicate tool name {tool.name!r}")
        by_name[tool.name] = tool
    return by_name


def tool_content(value: Any) -> str | Sequence[Mapping[str, Any]]:
    """A tool's returned value as message content: text, content blocks, or JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)) and value and all(
        isinstance(block, Mapping) and isinstance(block.get("type"), str) for block in value
    ):
        return value
    if value is None:
        return ""
    # Any other JSON value (a dict of results, a number, ...) goes to the model as JSON text;
    # `to_json` raises TypeError naming the offending part when it is not JSON.
    return to_json(freeze(value))


__all__ = [
    "Tool",
    "ToolBody",
    "ToolContext",
    "ToolOutput",
    "check_timeout",
    "check_tools",
    "tool",
    "tool_content",
    "tool_from_function",
]
