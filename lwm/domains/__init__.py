"""The domain registry: every domain ``lwm`` knows, one typed spec each (:class:`Domain`).

>>> from lwm import domains
>>> domains.get("db").action_lang
'sql'
>>> domains.get("terminal").tool.name
'run_keystrokes'
>>> domains.get("nope")
Traceback (most recent call last):
...
lwm.errors.UnknownDomainError: unknown domain 'nope' (known: terminal, fs, mcp, db, code, search, web, swe, ...)

Built-in domains live in ``lwm/domains/<name>/`` and are imported on first use (their
``__init__`` defines ``DOMAIN``). Others are added with :func:`register`, or by an
installed package through the ``lwm.domains`` entry-point group (``name = "pkg.module:DOMAIN"``),
which every process, the CLI included, finds on first use (docs/adding-a-domain.md).
"""

from __future__ import annotations

import importlib
import subprocess
import threading
from dataclasses import dataclass

from lwm.domains.base import AgentTool, Asset, Domain
from lwm.errors import AssetMissingError, UnknownDomainError

__all__ = ["AgentTool", "Asset", "Domain", "Lazy", "BUILTIN", "find", "get", "load", "names", "register", "setup",
           "unregister"]

#: The built-in domains: real environments here, then import-only ones.
BUILTIN = ("terminal", "fs", "mcp", "db", "code", "search", "web", "swe", "os", "android")

_registry: dict[str, Domain] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Lazy:
    """A part of a domain imported only when used (``lwm --help`` stays instant, and one
    domain's tools are not needed by another): ``Lazy("pkg.module")()`` is the module,
    ``Lazy("pkg.module:Name")(*args)`` calls ``Name``. Picklable."""

    target: str

    def __call__(self, *args, **kwargs):
        module, _, name = self.target.partition(":")
        found = importlib.import_module(module)
        return getattr(found, name)(*args, **kwargs) if name else found


def get(name: str) -> Domain:
    """The domain called ``name``.

    Raises:
        UnknownDomainError: no such domain (the message lists the known ones).
    """
    with _lock:
        if name in _registry:
            return _registry[name]
    if name in BUILTIN:
        domain = importlib.import_module(f"lwm.domains.{name}").DOMAIN
    elif (entry := _entry_points().get(name)) is not None:
        domain = entry.load()
        if not isinstance(domain, Domain) or domain.name != name:
            raise UnknownDomainError(str(name), names())
    else:
        raise UnknownDomainError(str(name), names())
    with _lock:
        return _registry.setdefault(name, domain)


def load(spec: str) -> Domain:
    """A domain by its name (:func:`get`), or by ``module:attribute``: a :class:`Domain`
    object in an importable module, not registered (a domain still being written; ``lwm
    check-env``).

    Raises:
        UnknownDomainError: no domain of that name.
        ValueError: the module cannot be imported (what it raised is said), or the attribute
            is missing or not a Domain.
    """
    if ":" not in spec:
        return get(spec)
    module, _, attribute = spec.partition(":")
    try:
        found = importlib.import_module(module)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a user's module may raise anything on import
        raise ValueError(f"{spec}: importing {module!r} failed: {type(e).__name__}: {e}") from e
    if not hasattr(found, attribute):
        raise ValueError(f"{spec}: module {module} has no attribute {attribute!r}")
    domain = getattr(found, attribute)
    if not isinstance(domain, Domain):
        raise ValueError(f"{spec}: {attribute!r} of {module} is {type(domain).__name__}, not a lwm.domains.Domain")
    return domain


def _entry_points() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="lwm.domains")}


def find(name: str) -> Domain | None:
    """The domain called ``name``, or ``None`` when there is none (rows of other benchmarks
    can name domains ``lwm`` does not know)."""
    try:
        return get(name)
    except UnknownDomainError:
        return None


def register(domain: Domain, *, replace: bool = False) -> Domain:
    """Add a domain to the registry (``replace``: over one of the same name).

    Raises:
        ValueError: the name is taken (a built-in one included) and ``replace`` is false.
    """
    with _lock:
        if not replace and (domain.name in _registry or domain.name in BUILTIN):
            raise ValueError(f"a domain named {domain.name!r} exists; register(..., replace=True) to replace it")
        _registry[domain.name] = domain
    return domain


def unregister(name: str) -> None:
    """Remove a domain added with :func:`register` (built-in ones come back on the next
    :func:`get`). Unknown names are ignored."""
    with _lock:
        _registry.pop(name, None)


def names(*, runnable: bool | None = None) -> tuple[str, ...]:
    """The known domain names, built-in first; ``runnable=True`` keeps those with a real
    environment here, ``False`` the import-only ones (both load every spec)."""
    with _lock:
        extra = [n for n in _registry if n not in BUILTIN]
    extra += [n for n in _entry_points() if n not in BUILTIN and n not in extra]
    every = BUILTIN + tuple(extra)
    return every if runnable is None else tuple(n for n in every if get(n).runnable == runnable)


def setup(force: bool = False, report=print, domains: tuple[str, ...] | None = None) -> list[str]:
    """Install what the real environments need (every domain's :attr:`Domain.assets`, each
    installer once): what is missing, or everything with ``force``. ``report`` receives
    one line per asset. Returns the failures' messages: a failed asset does not stop the
    others, since each domain needs only its own."""
    steps: dict = {}
    for name in domains or names(runnable=True):
        for asset in get(name).assets:
            steps.setdefault(asset.install, (asset.what, []))[1].append(name)
    failures = []
    for install, (what, users) in steps.items():
        label = f"{what} ({', '.join(users)})"
        try:
            path = install(force)
        except (AssetMissingError, OSError, subprocess.CalledProcessError) as e:
            failures.append(f"{label}: {e}")
            report(f"FAILED {label}: {e}")
        else:
            report(f"ok     {label}: {path}")
    return failures
