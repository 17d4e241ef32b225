"""Every flag is declared once: its help and default come from the setting it fills
(lwm.cli.common.option); the few flags that fill no library setting are listed here."""

from __future__ import annotations

import inspect

import typer
from typer.models import ArgumentInfo, OptionInfo

from lwm.cli import app
from lwm.cli.common import declared_default, field_docs

#: Flags that belong to the command line itself (display, serving), not to a library setting.
CLI_ONLY = {
    "progress", "force", "src", "format", "strict", "trajectories", "host", "port", "name", "n_ctx",
    "threads", "prompt_cache_mb", "adapter", "cache", "max_sessions", "max_turns", "suite", "domain", "backend", "out",
    "concurrency", "more", "runs", "title", "episodes", "run", "report",
}


def commands(typer_app: typer.Typer, prefix: str = ""):
    for command in typer_app.registered_commands:
        yield f"{prefix}{command.name or command.callback.__name__}", command.callback
    for group in typer_app.registered_groups:
        yield from commands(group.typer_instance, f"{prefix}{group.name} ")


def test_every_flag_comes_from_a_documented_setting():
    seen = 0
    for name, fn in commands(app):
        for param in inspect.signature(fn).parameters.values():
            info = param.default
            assert isinstance(info, (OptionInfo, ArgumentInfo)), f"{name} --{param.name}: not a typer parameter"
            assert info.help, f"{name} --{param.name} has no help"
            field = getattr(info, "lwm_field", None)
            if field is None:
                assert param.name in CLI_ONLY, f"{name} --{param.name} fills no setting and is not listed as CLI-only"
                continue
            owner, setting = field
            assert info.help.startswith(field_docs(owner)[setting]), f"{name} --{param.name}: help drifted"
            seen += 1
    assert seen >= 60


def test_defaults_match_the_settings_unless_the_help_says_why():
    for name, fn in commands(app):
        for param in inspect.signature(fn).parameters.values():
            field = getattr(param.default, "lwm_field", None)
            if field is None:
                continue
            owner, setting = field
            declared = declared_default(owner, setting)
            if param.default.default != declared and declared is not ...:
                # a CLI default of its own: None (resolved later) or stated in the help
                assert param.default.default is None or "Default" in param.default.help or \
                    isinstance(declared, (tuple, list)), f"{name} --{param.name}: {param.default.default!r} != " \
                                                         f"{declared!r} and the help does not say why"
