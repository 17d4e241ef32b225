"""What a domain is: one typed spec (:class:`Domain`) holding everything ``lwm`` knows about it.

A domain's folder (``lwm/domains/<name>/``) builds its spec in ``__init__.py`` from its
modules: ``spec.py`` (world-model system prompt, action parser and format, comparator,
reference guess), ``env.py`` (the real environment), ``controller.py`` (what runs inside
the sandbox), ``suite.py`` (scripted episodes). Heavy modules (the environment, the
suite) are imported only when used, through the small functions the spec holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from lwm.envs.base import invalid_action
from lwm.errors import ActionFormatError, NoRealEnvironmentError

_NAME = re.compile(r"[a-z][a-z0-9_]*")

if TYPE_CHECKING:
    from lwm.envs.base import RealEnvironment, Task
    from lwm.envs.episode import Script


@dataclass(frozen=True)
class AgentTool:
    """The tool an agent (a policy) calls to act in the domain: one action in its format.

    Attributes:
        name: the tool's name (``run_keystrokes``, ``run_sql`` …): a Python identifier.
        description: what the agent reads: what the tool does and the action format, with
            an example.
        argument: the name of the tool's one string argument (the action text).
        to_action: turns what the agent wrote into the domain's action (default: as is;
            the terminal's takes a plain command line as well as keystroke JSON).
        well_formed: whether what the agent wrote looks like one action of this tool (a
            command on one line, SQL ending a statement, Python that compiles): the format
            reward of RL. Default: non-empty.
        fence: the language tag of a Markdown code block holding one action as the agent
            writes it, as chat models do unasked (the ``fenced`` form of the rows
            :func:`lwm.train.rft.accepted_examples` learns). Default ``None``: the domain's
            ``action_lang``; the terminal's agent writes a command line (``bash``), not the
            keystroke JSON of its rows.
    """

    name: str
    description: str
    argument: str = "action"
    to_action: Callable[[str], str] = field(default=str.strip)
    well_formed: Callable[[str], bool] = field(default=bool)
    fence: str | None = None

    def schema(self) -> dict[str, Any]:
        """The tool as an OpenAI-style function definition (``{"type": "function", …}``):
        one required string argument, the action."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "required": [self.argument], "properties": {
                self.argument: {"type": "string", "description": "the action, in the format described above"}}}}}


@dataclass(frozen=True)
class Asset:
    """A tool a domain's real environment needs, installed by ``lwm setup`` into ``$LWM_HOME``.

    Attributes:
        what: what it is (one line).
        install: ``install(force) -> path``; idempotent unless ``force``; raises
            :class:`~lwm.errors.AssetMissingError` (or ``OSError``) on failure.
    """

    what: str
    install: Callable[[bool], Path]


def _never(action: str) -> bool:
    return False


def _same_action(probe: str) -> str:
    return probe


def _whole_observation(probe: str, observation: str) -> str:
    return observation


@dataclass(frozen=True)
class TaskOption:
    """A setting a domain's tasks may carry in ``Task.options``.

    Attributes:
        name: the key.
        values: what it takes, for people and error messages (``a number of seconds in (0, 3600]``).
        valid: whether a value is one of those.
    """

    name: str
    values: str
    valid: Callable[[Any], bool]

    @classmethod
    def choice(cls, name: str, choices: tuple[str, ...]) -> TaskOption:
        """An option that takes one of ``choices``."""
        return cls(name, " or ".join(map(repr, choices)), lambda value: value in choices)


def is_text(value: Any) -> bool:
    """A :attr:`TaskOption.valid` for text."""
    return isinstance(value, str)


def is_texts(value: Any) -> bool:
    """A :attr:`TaskOption.valid` for a list of texts."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _argv_lists(value: Any) -> bool:
    return isinstance(value, list) and all(is_texts(v) and v for v in value)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


#: Options every domain's tasks may carry.
COMMON_TASK_OPTIONS = (
    TaskOption("system_prompt", "text: the world model's system prompt for this task (the sim backend)", is_text),
    TaskOption("max_turns", "a whole number >= 1: the task's own turn budget (a run's --max-turns stays the ceiling)",
               _positive_int),
)
#: ``shell_setup`` of the tool-server domains: commands run in the sandbox before the server starts.
SHELL_SETUP = TaskOption("shell_setup", "a list of argv lists of texts, run in the sandbox before the server",
                         _argv_lists)


class Refusal(NamedTuple):
    """A malformed action refused: why (``reason``) and what the environment answered."""

    reason: str
    observation: str




@dataclass(frozen=True)
class Domain:
    """Everything ``lwm`` knows about one domain.

    Attributes:
        name: e.g. ``terminal``.
        description: one line: the real environment and the shape of its actions.
        system_prompt: ``system_prompt(**settings) -> str``, the world-model system prompt
            (settings are the domain's: terminal size, database engine, tool list …).
        parse_action: ``parse_action(text)`` checks an action and returns its parsed form;
            raises :class:`~lwm.errors.ActionFormatError`.
        action_format: the action format in a few lines (for people and prompts).
        action_lang: the info string of the fence around actions in AgentWorldBench rows.
        tool: the tool an agent calls to act.
        canonical: the deterministic comparator's normal form of an observation
            (``None``: compared as text).
        rubric: the judge's system prompt for scoring this domain's observations.
        reward_rubric: what counts as success in this domain, for the reward model that
            judges whether an episode achieved its task (:func:`lwm.sim.reward.judge_reward`).
        ends_episode: whether an action is the agent's "done" (e.g. the terminal's ``[]``).
        task_options: the settings its tasks may carry in ``Task.options`` besides
            :data:`COMMON_TASK_OPTIONS` (:meth:`check_task`).
        invalid_answer: ``(reason, previous) -> observation | None``, what the real
            environment answers to an action :attr:`parse_action` refuses (``reason`` is the
            :class:`~lwm.errors.ActionFormatError`'s, ``previous`` the last observation);
            ``None``: it takes the action anyway. The simulator answers the same
            (:meth:`refusal`), so a malformed action looks the same in both backends.
        certain_answer: ``(action, turns, system, start) -> observation | None``, the real
            environment's answer where the action alone decides it (code: a cell that does
            not parse shows its syntax error and runs nothing; db: SQL that runs nothing or
            does not parse; terminal: a line of plain words whose first is no command),
            given the episode's earlier turns as ``(action, observation)`` pairs (oldest
            first, the reset excluded), the world model's system prompt and the episode's
            first observation; ``None``: the world model predicts it. The simulator answers it (:meth:`certain`),
            so no model invents an answer there. Only for actions that run nothing: an episode
            of such answers and refusals keeps its start's reward (:meth:`SimEnv.averify
            <lwm.sim.env.SimEnv.averify>`).
        trivial_observation: ``(action, previous, system) -> observation``, the reference
            guess of ``lwm eval --model baseline:trivial`` (``None``: the empty guess).
        environment: ``environment(**options) -> RealEnvironment``, a fresh real
            environment (``None`` when the domain is import only).
        import_only: why there is no real environment here (``None`` when there is one).
        suite: ``suite()`` returns the domain's suite module (``suite.py``: ``SCRIPTS``, its
            scripted episodes, ``EXTENDED``, the names of those beyond the core suite, and
            optionally ``explore(seed, n)``, seeded exploration episodes).
        assets: what ``lwm setup`` installs for the real environment.
        probe_action: a task verifier's probe as an action of the domain, for a world model
            to answer (the terminal's verifier runs a shell command beside the screen; the
            world model predicts screens: it gets the command typed at the prompt).
        probe_output: ``probe_output(probe, observation)``: what the real probe would print,
            read from the world model's predicted observation of :attr:`probe_action` (the
            terminal: the lines after the echoed command; code: stdout and the traceback).
        render_change: ``render_change(change, previous, action, system) -> observation``,
            the full observation from what an action changed (mode ``change`` of
            :mod:`lwm.prediction`); ``None``: the domain's observation is the action's result
            alone, written whole in both modes.
        observed_change: ``observed_change(previous, action, observation, system)``, the
            inverse: the change that :attr:`render_change` turns into ``observation``, or
            ``None`` when there is none (given with :attr:`render_change`).
        change_instruction: what a world model in mode ``change`` is told to write (added
            to the system prompt).
        rules_out: ``rules_out(observation, action, system) -> bool``, whether the action
            alone rules a predicted full observation out (code: a syntax error reported for a
            cell that compiles); the simulator and ``lwm eval`` then give the
            :attr:`trivial_observation` instead and count the answer (parse issue ``ruled
            out``). A real observation must never be ruled out (``lwm check-env`` checks
            it on its actions; given with :attr:`trivial_observation`).
        ground_change: ``ground_change(change, previous, action, system) -> change``, a
            predicted change with what the action alone decides put right before it is
            drawn (the terminal: the echo of typed keystrokes at a shell's prompt); a real
            observation's change must come back unchanged (given with :attr:`render_change`).
        tasks: ``tasks()`` returns the domain's agent task families (``tasks.py``:
            ``FAMILIES``, a list of :class:`~lwm.domains.tasks.TaskFamily`, and ``HELD_OUT``,
            the names of the families never trained on); ``None``: no task families.
        actions_name_values: whether an agent achieving a task types the values the task
            gives it (quoted text, paths, snake_case names) into its actions, as in a shell,
            SQL, code or a tool call's arguments; the trained verdict then gives 0 to an
            episode whose actions never name one (:func:`lwm.verdict.unnamed_values`). Off
            where actions mostly point at elements or positions, or were not measured (web,
            android, os, search).
    """

    name: str
    description: str
    system_prompt: Callable[..., str]
    parse_action: Callable[[str], Any]
    action_format: str
    tool: AgentTool
    action_lang: str = "json"
    canonical: Callable[[str], str] | None = None
    rubric: str = ""
    reward_rubric: str = ""
    ends_episode: Callable[[str], bool] = _never
    task_options: tuple[TaskOption, ...] = ()
    invalid_answer: Callable[[str, str], str | None] = invalid_action
    certain_answer: Callable[[str, Sequence[tuple[str, str]], str, str], str | None] | None = None
    trivial_observation: Callable[[str, str, str], str] | None = None
    environment: Callable[..., RealEnvironment] | None = None
    import_only: str | None = None
    suite: Callable[[], ModuleType] | None = None
    assets: tuple[Asset, ...] = field(default_factory=tuple)
    probe_action: Callable[[str], str] = _same_action
    probe_output: Callable[[str, str], str] = _whole_observation
    tasks: Callable[[], ModuleType] | None = None
    render_change: Callable[[str, str, str, str], str] | None = None
    observed_change: Callable[[str, str, str, str], str | None] | None = None
    change_instruction: str = ""
    ground_change: Callable[[str, str, str, str], str] | None = None
    rules_out: Callable[[str, str, str], bool] | None = None
    actions_name_values: bool = False

    def check_task(self, task: Task) -> None:
        """Refuse a task this domain cannot start: an option it does not know or a value
        of the wrong kind (a task file is refused line by line before anything is played).

        >>> from lwm import domains
        >>> from lwm.envs.base import Task
        >>> domains.get("code").check_task(Task("t", options={"cell_timeout": "abc"}))
        Traceback (most recent call last):
        ...
        ValueError: option cell_timeout='abc' of a task of code: expected a number of seconds in (0, 3600]

        Raises:
            ValueError: the first problem found.
        """
        known = {o.name: o for o in (*COMMON_TASK_OPTIONS, *self.task_options)}
        for name, value in task.options.items():
            if name not in known:
                raise ValueError(f"unknown option {name!r} of a task of {self.name}; known: {', '.join(sorted(known))}")
            if not known[name].valid(value):
                raise ValueError(f"option {name}={value!r:.80} of a task of {self.name}: expected {known[name].values}")

    def accepts(self, action: str) -> bool:
        """Whether ``action`` follows the domain's action format (:attr:`parse_action` takes
        it; a parser that fails on odd input with ``TypeError``/``ValueError`` refuses too).

        >>> from lwm import domains
        >>> domains.get("terminal").accepts("ls -la"), domains.get("terminal").accepts('[{"keystrokes": "ls"}]')
        (False, True)
        """
        try:
            self.parse_action(action)
        except (ActionFormatError, TypeError, ValueError):
            return False
        return True

    def refusal(self, action: str, previous: str = "") -> Refusal | None:
        """The real environment's answer when it refuses ``action`` as malformed, or
        ``None`` when it would take it (an import-only domain takes every action: there is
        no real answer to give).

        >>> from lwm import domains
        >>> domains.get("terminal").refusal("ls -la").observation
        '[invalid action] not JSON (Expecting value)'
        >>> domains.get("terminal").refusal('[{"keystrokes": "ls"}]') is None
        True
        """
        if self.import_only is not None:
            return None
        try:
            self.parse_action(action)
        except ActionFormatError as e:
            answer = self.invalid_answer(e.reason, previous)
            return None if answer is None else Refusal(e.reason, answer)
        return None

    def certain(self, action: str, turns: Sequence[tuple[str, str]] = (), system: str = "",
                start: str = "") -> str | None:
        """The real environment's answer to a well-formed ``action`` that the action alone
        decides (:attr:`certain_answer`) after the episode's earlier ``turns`` (``(action,
        observation)`` pairs, oldest first) from its first observation ``start``, or
        ``None``: the world model predicts it.

        >>> from lwm import domains
        >>> domains.get("code").certain("print(1").splitlines()[-1]
        "SyntaxError: '(' was never closed"
        >>> domains.get("code").certain("print(1)"), domains.get("terminal").certain("[]")
        (None, None)
        """
        if not isinstance(system, str) or not isinstance(start, str) or not isinstance(turns, Sequence) or \
                isinstance(turns, str) or not all(isinstance(turn, (tuple, list)) and len(turn) == 2 and
                                                  all(isinstance(x, str) for x in turn) for turn in turns):
            raise TypeError("certain(action, turns, system, start): turns are (action, observation) pairs of str, "
                            "system a str, start a str")
        if self.certain_answer is None or not self.accepts(action):
            return None
        return self.certain_answer(action, turns, system, start)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"a domain's name is lower-case letters, digits and _ (it names files and ids), "
                             f"not {self.name!r}")
        if (self.environment is None) == (self.import_only is None):
            raise ValueError(f"domain {self.name!r}: give exactly one of environment and import_only")
        if not self.tool.name.isidentifier():
            raise ValueError(f"domain {self.name!r}: tool name {self.tool.name!r} is not an identifier")
        if (self.render_change is None) != (self.observed_change is None) or (
                self.render_change is not None and not self.change_instruction):
            raise ValueError(f"domain {self.name!r}: render_change, observed_change and change_instruction "
                             "come together")
        if self.ground_change is not None and self.render_change is None:
            raise ValueError(f"domain {self.name!r}: ground_change puts a change right: it needs render_change")
        if self.rules_out is not None and self.trivial_observation is None:
            raise ValueError(f"domain {self.name!r}: rules_out replaces an answer by the trivial guess: it needs "
                             "trivial_observation")
        for part in ("system_prompt", "parse_action", "ends_episode", "probe_action", "probe_output",
                     "trivial_observation", "certain_answer", "canonical", "environment", "suite", "tasks",
                     "render_change", "observed_change", "ground_change", "rules_out"):
            value = getattr(self, part)
            if value is not None and not callable(value):
                raise ValueError(f"domain {self.name!r}: {part} must be callable, not {type(value).__name__} "
                                 f"(e.g. system_prompt=lambda **settings: PROMPT)")

    @property
    def runnable(self) -> bool:
        """Whether the domain has a real environment here."""
        return self.environment is not None

    def make_env(self, **options: Any) -> RealEnvironment:
        """A fresh real environment (keyword arguments go to its class).

        Raises:
            NoRealEnvironmentError: the domain is import only (the message says why).
        """
        if self.environment is None:
            raise NoRealEnvironmentError(f"no real environment for domain {self.name!r} ({self.import_only}; "
                                         "use `lwm import`)")
        return self.environment(**options)

    def scripts(self, extended: bool = False) -> list[Script]:
        """The bundled scripted episodes (``extended``: also those beyond the core suite).

        Raises:
            NoRealEnvironmentError: the domain has no suite (import only).
        """
        if self.suite is None:
            why = f" ({self.import_only}; use `lwm import`)" if self.import_only else ""
            raise NoRealEnvironmentError(f"no bundled suite for domain {self.name!r}{why}")
        suite = self.suite()
        return [s for s in suite.SCRIPTS if extended or s.task.name not in suite.EXTENDED]

    def explore_scripts(self, seed: int, n: int) -> list[Script]:
        """``n`` seeded exploration episodes (the suite module's ``explore(seed, n)``:
        random files and everyday actions on them, for training data at scale).

        Raises:
            NoRealEnvironmentError: the domain has no suite (import only).
            ValueError: the domain's suite has no exploration generator.
        """
        self.scripts()  # the same error as the suite's when there is none
        explore = getattr(self.suite(), "explore", None)
        if explore is None:
            raise ValueError(f"domain {self.name!r} has no exploration episodes (terminal has)")
        return explore(seed, n)
