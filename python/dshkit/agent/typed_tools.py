"""Typed tools: a `Tool` from a plain typed function (`Tool.from_function`, the `@tool` decorator).

The name is the function's, the description its docstring, and the JSON schema of the arguments
comes from its type hints through pydantic (an optional dependency: ``pip install
'dshkit[typed]'``), so `Annotated[int, Field(ge=1, description=...)]`, `Literal`, enums, nested
pydantic models and defaults all carry over. The body gets its arguments converted to the hinted
types (a nested model arrives as that model). A parameter annotated `ToolContext` receives the
call's context instead of an argument. The function may be sync or async.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_type_hints, overload

from dshkit.agent.tools import Tool, ToolContext

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
    names = tuple(fields)

    def keyword_arguments(arguments: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
        checked = model.model_validate(arguments)
        values = {field: getattr(checked, field) for field in names}
        if context_parameter is not None:
            values[context_parameter] = ctx
        return values

    if inspect.iscoroutinefunction(fn):

        async def run_async(arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
            return await fn(**keyword_arguments(arguments, ctx))

        run: Callable[..., Any] = run_async
    else:

        def run_sync(arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
            return fn(**keyword_arguments(arguments, ctx))

        run = run_sync
    return Tool(tool_name, text, schema, run, parallel=parallel, timeout=timeout, approval=approval, retries=retries)


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


__all__ = ["tool", "tool_from_function"]
