"""lwm check-env: every built-in domain passes its named checks, and a domain written with
the usual mistakes fails the check that names each one."""

from __future__ import annotations

import itertools
import sys
from types import SimpleNamespace

import pytest
from conftest import needs_sandbox
from typer.testing import CliRunner

from lwm import domains
from lwm.cli import app
from lwm.domains import AgentTool, Domain
from lwm.domains.check import check_env
from lwm.envs import EnvironmentBase, StepResult, Task
from lwm.envs.episode import Script
from lwm.errors import ActionFormatError, EnvironmentClosedError, NoRealEnvironmentError, UnknownDomainError

runner = CliRunner()
_clock = itertools.count()


def parse(text: str) -> str:
    if not text.startswith("say "):
        raise ActionFormatError("echo", text, "expected say <words>")
    return text[4:]


class Echo(EnvironmentBase):
    """A tiny in-memory environment (the subject under test: nothing to sandbox). Its
    flaws are switched on one by one."""

    domain = "echo"

    def __init__(self, flaw: str = "") -> None:
        self.flaw, self.open, self.closed_once = flaw, False, False

    def reset(self, task: Task) -> str:
        self.task, self.open = task, True
        return 42 if self.flaw == "reset-int" else "ready"

    def system_prompt(self) -> str:
        return "An echo service. Answer inside <predicted_observation></predicted_observation>."

    def step(self, action: str) -> StepResult:
        if not self.open:
            raise (RuntimeError if self.flaw == "closed" else EnvironmentClosedError)("not running")
        try:
            words = parse(action)
        except ActionFormatError as e:
            if self.flaw == "raises":
                raise ValueError("cannot parse") from e
            return StepResult(f"[invalid action] {e.reason}", info={"action_error": e.reason})
        if self.flaw == "clock":
            words += f" at {next(_clock)}"
        info = {"observation": "mine", "action": 1, "prov": 2} if self.flaw == "info-keys" else {}
        return StepResult(words, terminated="yes" if self.flaw == "done-str" else False, info=info)

    def close(self) -> None:
        if self.flaw == "close-twice" and self.closed_once:
            raise RuntimeError("already closed")
        self.open, self.closed_once = False, True


SCRIPT = Script(Task("hello", family="echo", instruction="say hi"), ("say hi", "say there"))


def echo(flaw: str = "") -> Domain:
    return Domain(name="echo", description="an echo service",
                  system_prompt=lambda **_: "An echo service.", parse_action=parse, action_format="say <words>",
                  tool=AgentTool("say", "Say words."), action_lang="text",
                  environment=lambda **_: Echo(flaw), suite=lambda: SimpleNamespace(SCRIPTS=[SCRIPT], EXTENDED=()))


def statuses(domain: Domain) -> dict[str, str]:
    return {c.name: c.status for c in check_env(domain)}


def test_a_sound_domain_passes_every_check():
    # an environment's info may use any key, even those of lwm's own recording
    assert set(statuses(echo("info-keys")).values()) == {"pass", "skip"}   # skip: no certain answer
    assert statuses(echo()) == {"construct": "pass", "reset": "pass", "step": "pass", "malformed action": "pass",
                                "certain answer": "skip", "deterministic": "pass", "closed": "pass"}


@pytest.mark.parametrize("flaw, failed, status", [
    ("reset-int", "reset", "fail"),
    ("done-str", "step", "fail"),
    ("raises", "malformed action", "fail"),
    ("clock", "deterministic", "warn"),
    ("closed", "closed", "fail"),   # step before reset raises RuntimeError: named, not a crash of the check
    ("close-twice", "closed", "fail"),
])
def test_each_flaw_is_named(flaw, failed, status):
    checks = {c.name: c for c in check_env(echo(flaw))}
    assert checks[failed].status == status, checks[failed]
    others = [n for n, c in checks.items() if c.status not in ("pass", "skip") and n != failed]
    assert others == (["malformed action"] if flaw == "reset-int" else [])  # it plays through the real backend


def test_the_wrong_error_before_reset_is_named():
    [closed] = [c for c in check_env(echo("closed")) if c.name == "closed"]
    assert closed.detail.startswith("step() before reset() must raise EnvironmentClosedError; it raised RuntimeError")


def test_a_constructor_that_raises_is_a_failed_check_and_a_suite_without_scripts_is_refused():
    class Broken(Echo):
        def __init__(self, flaw=""):
            raise RuntimeError("ctor boom")

    broken = Domain(**{**echo().__dict__, "environment": lambda **_: Broken()})
    checks = {c.name: c for c in check_env(broken)}
    assert checks["construct"].status == "fail" and "RuntimeError: ctor boom" in checks["construct"].detail
    empty = Domain(**{**echo().__dict__, "suite": lambda: SimpleNamespace(SCRIPTS=[], EXTENDED=())})
    with pytest.raises(ValueError, match="its suite has no core script"):
        check_env(empty)
    unreadable = Domain(**{**echo().__dict__, "suite": lambda: SimpleNamespace()})
    with pytest.raises(ValueError, match="its suite cannot be read: AttributeError"):
        check_env(unreadable)


def test_a_check_that_raises_says_where():
    [malformed] = [c for c in check_env(echo("raises")) if c.name == "malformed action"]
    assert "ValueError: cannot parse" in malformed.detail and "test_check_env.py:" in malformed.detail


@needs_sandbox
def test_the_built_in_terminal_passes_from_the_cli():
    result = runner.invoke(app, ["check-env", "terminal"])
    assert result.exit_code == 0, result.output
    assert result.output.count(" pass ") == 6 and "[invalid" in result.output


@needs_sandbox
def test_the_code_interpreter_answers_a_cell_that_does_not_compile_as_the_simulator_does():
    [certain] = [c for c in check_env(domains.get("code")) if c.name == "certain answer"]
    assert certain.status == "pass" and certain.detail.startswith("3 actions answered"), certain


@needs_sandbox
def test_the_sqlite_shell_answers_broken_sql_as_the_simulator_does():
    [certain] = [c for c in check_env(domains.get("db")) if c.name == "certain answer"]
    assert certain.status == "pass" and "'not an action;'" in certain.detail, certain


def test_a_domain_by_module_and_attribute(tmp_path, monkeypatch):
    (tmp_path / "my_echo.py").write_text("from test_check_env import echo\nDOMAIN = echo('closed')\nOTHER = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent))
    assert domains.load("my_echo:DOMAIN").name == "echo"
    result = runner.invoke(app, ["check-env", "my_echo:DOMAIN"])
    assert result.exit_code == 1 and "1 of 7 checks failed: closed" in result.output.replace("\n", " ")
    (tmp_path / "quits.py").write_text("raise SystemExit(0)\n")
    result = runner.invoke(app, ["check-env", "quits:DOMAIN"])
    assert result.exit_code == 2 and "importing 'quits' failed: SystemExit" in result.output
    result = runner.invoke(app, ["check-env", "my_echo:OTHER"])
    assert result.exit_code == 2 and "is int, not a lwm.domains.Domain" in result.output
    sys.modules.pop("my_echo", None)


def test_bad_names_are_refused():
    with pytest.raises(UnknownDomainError):
        domains.load("nowhere")
    with pytest.raises(ValueError, match="importing 'no_such_module' failed: ModuleNotFoundError"):
        domains.load("no_such_module:DOMAIN")
    with pytest.raises(ValueError, match="module lwm.domains has no attribute 'NOPE'"):
        domains.load("lwm.domains:NOPE")
    with pytest.raises(NoRealEnvironmentError, match="use `lwm import`"):
        check_env(domains.get("os"))
    assert runner.invoke(app, ["check-env", "nowhere"]).exit_code == 2
