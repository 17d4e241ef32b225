"""What every ``lwm`` command shares: options declared from the settings dataclasses, one
error handler and one Ctrl-C rule.

A flag's help is the documentation of the setting it fills: :func:`option` reads it from
the dataclass docstring (its ``Attributes:`` section) and takes the dataclass default, so
the two cannot drift (``tests/cli/test_options.py`` checks every command).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from lwm.errors import LwmError

#: Errors that end a command with exit code 2 and one line on stderr (anything else is a bug: traceback).
USER_ERRORS = (LwmError, KeyError, ValueError, OSError)

console = Console(stderr=True, soft_wrap=True)  # one error, one line

T = TypeVar("T")


@cache
def field_docs(owner: Any) -> dict[str, str]:
    """``{name: description}`` from the ``Attributes:`` (or ``Args:``) section of a
    Google-style docstring (a settings dataclass, or a function); descriptions are joined
    into one line and markup (````x````, ``:func:`x```) is reduced to plain text."""
    doc = inspect.getdoc(owner) or ""
    m = re.search(r"^(Attributes|Args):\s*$(.*?)(?=^\S|\Z)", doc, re.M | re.S)
    docs: dict[str, str] = {}
    if not m:
        return docs
    name = None
    for line in m.group(2).splitlines():
        if (entry := re.match(r"^ {4}(\w+): ?(.*)$", line)) is not None:
            name = entry.group(1)
            docs[name] = entry.group(2).strip()
        elif name and line.strip():
            docs[name] += " " + line.strip()
    return {k: _plain(v) for k, v in docs.items()}


def _plain(text: str) -> str:
    text = re.sub(r":(?:data|func|class|mod|meth|attr):`~?([^`]*)`", r"\1", text)
    return re.sub(r"``([^`]*)``", r"\1", text)


def declared_default(owner: Any, name: str) -> Any:
    """The default of field ``name`` of a dataclass, or of parameter ``name`` of a function
    (``...`` when it has none: the option is required)."""
    if dataclasses.is_dataclass(owner):
        f = next(f for f in dataclasses.fields(owner) if f.name == name)
        if f.default is not dataclasses.MISSING:
            return f.default
        return ... if f.default_factory is dataclasses.MISSING else f.default_factory()
    p = inspect.signature(owner).parameters[name]
    return ... if p.default is inspect.Parameter.empty else p.default


def option(owner: Any, name: str, *flags: str, default: Any = dataclasses.MISSING, help_suffix: str = "",
           **kwargs: Any) -> Any:
    """A typer option for the setting ``name`` of ``owner`` (a settings dataclass, or the
    library function the command calls): its help is the setting's documentation, its
    default the declared default unless ``default`` is given (the CLI's own default, which
    ``help_suffix`` then states).

    Raises:
        KeyError: ``owner`` documents no such setting (a programming error; the tests catch it).
    """
    docs = field_docs(owner)
    if name not in docs:
        raise KeyError(f"{getattr(owner, '__qualname__', owner)} documents no setting {name!r}")
    if default is dataclasses.MISSING:
        default = declared_default(owner, name)
    if isinstance(default, (list, tuple)):  # a repeated flag takes one value each time
        kwargs.setdefault("metavar", "<str>")
    info = typer.Option(default, *flags, help=f"{docs[name]} {help_suffix}".strip(), **kwargs)
    info.lwm_field = (owner, name)  # read by the drift test
    return info


def fail(e: BaseException) -> NoReturn:
    """Print ``e`` as one red line on stderr and exit 2."""
    message = e.args[0] if isinstance(e, KeyError) and e.args else e  # KeyError's str() adds quotes
    console.print(f"[red]error:[/red] {escape(str(message))}", markup=True, highlight=False)  # paths may hold [..]
    raise typer.Exit(2)


def call(fn: Callable[..., T], *args: Any, resume: Path | str | None = None, hint: str | None = None,
         **kwargs: Any) -> T:
    """Run the library function of a command: a user error prints one line and exits 2;
    Ctrl-C exits 130, saying how to go on: ``hint``, or resuming into ``resume`` (the run
    directory)."""
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt:
        if hint is None and resume is not None:
            hint = f"resume with the same command and --out {resume}"
        console.print(f"\n[yellow]interrupted[/yellow]{escape('; ' + hint if hint else '')}", markup=True,
                      highlight=False)
        raise typer.Exit(130) from None
    except USER_ERRORS as e:
        fail(e)


def note(text: str, style: str = "") -> None:
    """A line for the user on stderr (results go to stdout)."""
    console.print(f"[{style}]{escape(text)}[/{style}]" if style else escape(text), markup=True, highlight=False)


