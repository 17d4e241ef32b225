"""The terminal domain: bash in tmux; actions are keystrokes, observations are screens.

Action format: :data:`ACTION_FORMAT`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lwm.errors import ActionFormatError

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action format (AgentWorldBench terminal, after Terminal-Bench's Terminus agent): a JSON
list of ``{"keystrokes": str, "duration": float}``. ``keystrokes`` is typed literally
(``\\n`` presses Enter) unless it is exactly a tmux key name (``C-c``, ``C-d``, ``Up``,
``Escape`` …); an empty string types nothing and only waits. ``duration`` is the time in
seconds to wait after typing before the screen is read. The empty list ``[]`` means the
agent is done.
"""
NAME = "terminal"
DEFAULT_DURATION = 0.5
MAX_KEYSTROKES = 8192  # characters per item (tmux's command size limit is about 16 KB)
MAX_ITEMS = 256
#: tmux key names accepted as special keys (``man tmux``, KEY BINDINGS).
_KEY_NAME = re.compile(
    r"^(?:[CMS]-)*(?:Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|"
    r"PageUp|PageDown|PgUp|PgDn|NPage|PPage|IC|DC|F(?:[1-9]|1[0-2]))$|^(?:[CMS]-)+\S$"
)

SYSTEM_PROMPT = """\
You are a Terminal World Model: you simulate a Linux machine's terminal exactly.

Environment: bash running in a tmux window of {width} columns and {height} rows, as root, \
hostname `{hostname}`, working directory /app, home /root. The prompt looks like \
`root@{hostname}:/app# `. Standard Debian tools, git and python3 are installed; there is no network.

Each turn you receive the agent's action: a JSON list of {{"keystrokes", "duration"}} items. \
Keystrokes are typed into the terminal (a newline presses Enter; names like C-c or C-d are \
key presses); duration is how many seconds pass before the screen is read. An empty \
keystroke string only waits.

Predict the screen exactly as tmux would show it after the action: everything visible, \
including earlier lines still on screen, the echoed command, its output and the new \
prompt (or nothing new if the command is still running). Keep the state of the machine \
(files, directory, variables, running processes) consistent across turns.

Write brief reasoning, then the screen inside <predicted_observation></predicted_observation>.\
"""


@dataclass(frozen=True)
class Keystroke:
    """One item of a terminal action.

    Attributes:
        keystrokes: text typed (``\\n`` = Enter) or a single tmux key name.
        duration: seconds to wait afterwards (≥ 0).
    """

    keystrokes: str
    duration: float = DEFAULT_DURATION

    @property
    def is_key_name(self) -> bool:
        return bool(_KEY_NAME.match(self.keystrokes))


def parse_action(action: str | list) -> list[Keystroke]:
    """Parse a terminal action.

    Args:
        action: the JSON text, or the already decoded list.

    Returns:
        the keystrokes in order; ``[]`` means the agent is done.

    Raises:
        ActionFormatError: not a JSON list of objects with a string ``keystrokes`` and a
            non-negative number ``duration``.
    """
    try:
        text = action if isinstance(action, str) else json.dumps(action)
    except (TypeError, ValueError, RecursionError):
        raise ActionFormatError(NAME, repr(action)[:200], "not text or JSON") from None
    if isinstance(action, str):
        try:
            action = json.loads(action)
        except json.JSONDecodeError as e:
            raise ActionFormatError(NAME, text, f"not JSON ({e.msg})") from None
        except RecursionError:
            raise ActionFormatError(NAME, text, "nested too deeply") from None
    if isinstance(action, dict):  # a single item is accepted as a list of one
        action = [action]
    if not isinstance(action, list):
        raise ActionFormatError(NAME, text, "expected a JSON list of {keystrokes, duration}")
    if len(action) > MAX_ITEMS:
        raise ActionFormatError(NAME, text, f"{len(action)} items; at most {MAX_ITEMS}")
    out = []
    for i, item in enumerate(action):
        if not isinstance(item, dict) or not isinstance(item.get("keystrokes"), str):
            raise ActionFormatError(NAME, text, f"item {i} needs a string 'keystrokes'")
        keystrokes = item["keystrokes"]
        if len(keystrokes) > MAX_KEYSTROKES:
            raise ActionFormatError(NAME, text, f"item {i}: keystrokes longer than {MAX_KEYSTROKES} characters")
        if not _typable(keystrokes):
            raise ActionFormatError(NAME, text, f"item {i}: keystrokes contain a NUL or an unencodable character")
        duration = item.get("duration", DEFAULT_DURATION)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 <= duration < math.inf:
            raise ActionFormatError(NAME, text, f"item {i}: 'duration' must be a finite number ≥ 0")
        out.append(Keystroke(keystrokes, float(duration)))
    return out


def _typable(text: str) -> bool:
    # Control characters other than NUL can be typed; lone surrogates cannot be encoded.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\0" not in text


def keys(*items: str | tuple[str, float], duration: float = 0.3) -> str:
    """A terminal action from keystroke strings or ``(keystrokes, duration)`` pairs.

    >>> keys("ls\\n")
    '[{"keystrokes": "ls\\\\n", "duration": 0.3}]'
    >>> keys(("sleep 2\\n", 0.5), ("", 2.0))
    '[{"keystrokes": "sleep 2\\\\n", "duration": 0.5}, {"keystrokes": "", "duration": 2.0}]'
    """
    return format_action([{"keystrokes": text, "duration": dur}
                          for text, dur in (item if isinstance(item, tuple) else (item, duration) for item in items)])


#: bash's reserved words and builtins: a command line may start with any of them.
_BASH_WORDS = frozenset("""
! [[ { ( case coproc for function if select time until while . : [ alias bg bind break builtin caller cd command
compgen complete compopt continue declare dirs disown echo enable eval exec exit export false fc fg getopts hash help
history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt source
suspend test times trap true type typeset ulimit umask unalias unset wait
""".split())


def one_command(text: str) -> bool:
    """Whether an agent wrote one command line (or keystroke JSON): the format it is asked
    for. A line counts when its first word (after ``VAR=value`` assignments) is a bash
    reserved word or builtin, a path, or a program on ``PATH`` (the sandbox shows the
    host's ``/usr``), and its quotes close: a sentence restating the task is prose, not a
    command, though the shell would take it.

    >>> one_command("grep -c ERROR /app/log.txt > /app/count.txt"), one_command("Create the file /app/out.txt")
    (True, False)
    """
    import shlex
    import shutil

    stripped = text.strip()
    if stripped.startswith("["):
        return True   # keystrokes: the action format itself decides
    if not stripped or "\n" in stripped:
        return False
    try:
        words = shlex.split(stripped, comments=True)
    except ValueError:   # an unclosed quote: "Let's …"
        return False
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)] or ["true"]
    first = words[0]
    return first in _BASH_WORDS or "/" in first or shutil.which(first) is not None


def probe_keys(command: str) -> str:
    """A verifier's shell command typed at the prompt (for a world model that predicts screens)."""
    return keys(command.rstrip("\n") + "\n", duration=1.0)


def command_output(command: str, screen: str) -> str:
    """What ``command`` printed, read off a screen on which it was typed: the lines after
    its echo (which may wrap over several lines) up to the next prompt; the whole screen
    when the echo is not found.

    >>> command_output("cat a.txt", "root@box:/app# ls\\nx\\nroot@box:/app# cat a.txt\\n42\\nroot@box:/app# ")
    '42'
    """
    flat, where = "", []  # the screen without its line breaks, and where each character was
    for i, ch in enumerate(screen):
        if ch != "\n":
            flat += ch
            where.append(i)
    at = flat.rfind(command.strip())
    if at < 0:
        return screen
    rest = screen[where[at + len(command.strip()) - 1] + 1:].split("\n")[1:]
    lines = []
    for line in rest:
        if _PROMPT_END.search(line) and "@" in line:
            break
        lines.append(line)
    return "\n".join(lines).strip("\n")


def agent_action(text: str) -> str:
    """The terminal action for an agent's answer: the keystroke JSON when it is one, else the
    text typed as a command line with Enter, the screen read one second later.

    >>> agent_action("ls -la")
    '[{"keystrokes": "ls -la\\\\n", "duration": 1.0}]'
    >>> agent_action('[{"keystrokes": "C-c", "duration": 0.2}]')
    '[{"keystrokes": "C-c", "duration": 0.2}]'
    """
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            parse_action(stripped)
            return stripped
        except ActionFormatError:
            pass
    return keys(stripped + "\n", duration=1.0)


def format_action(keys: list[Keystroke] | list[dict]) -> str:
    """The canonical JSON text of an action (what trajectories and rows store)."""
    items = [k if isinstance(k, dict) else {"keystrokes": k.keystrokes, "duration": k.duration} for k in keys]
    return json.dumps(items, ensure_ascii=False)


def system_prompt(width: int = 80, height: int = 24, hostname: str = "sandbox") -> str:
    """The world-model system prompt for a terminal of this size."""
    return SYSTEM_PROMPT.format(width=width, height=height, hostname=hostname)


def ends_episode(action: str) -> bool:
    """Whether the action is the agent's "done" (the empty list ``[]``)."""
    try:
        return parse_action(action) == []
    except ActionFormatError:
        return False


_SIZE = re.compile(r"tmux window of (\d+) columns and (\d+) rows")
_PROMPT = re.compile(r"The prompt looks like `([^`]+)`")
# A heuristic: a line ending in # or $ is taken for a shell prompt.
_PROMPT_END = re.compile(r"[#$]\s*$")
# What tmux key names do on a shell's command line (others are taken to do nothing visible).
_KEY_TEXT = {"Enter": "\n", "C-m": "\n", "C-j": "\n", "Space": " ", "Tab": "", "BSpace": "\b", "C-h": "\b",
             "C-c": "^C\n"}


def trivial_observation(action: str, previous: str = "", system: str = "") -> str:
    """The domain-aware trivial guess (a baseline, not a world model): the previous
    screen with the typed text echoed at the cursor and, after every Enter, a fresh copy
    of the last prompt; ``C-c`` shows ``^C``, backspace deletes; lines wrap at the
    terminal's width and only the last screenful is kept (size and prompt read from the
    system prompt; default 80 × 24, ``root@sandbox:/app#``). It knows no command's output.
    An action that is not the terminal's JSON types nothing."""
    m = _SIZE.search(system)
    width, height = (max(1, int(m.group(1))), max(1, int(m.group(2)))) if m else (80, 24)
    m = _PROMPT.search(system)
    default_prompt = m.group(1).rstrip() + " " if m else "root@sandbox:/app# "
    try:
        keys = parse_action(action)
    except ActionFormatError:
        keys = []
    *done, last = previous.rstrip("\n").split("\n")
    at_prompt = bool(_PROMPT_END.search(last))
    prompt = last.rstrip() + " " if at_prompt else default_prompt
    line = prompt if at_prompt or not previous.strip() else last
    for key in keys:
        for ch in _KEY_TEXT.get(key.keystrokes, "") if key.is_key_name else key.keystrokes:
            if ch in "\n\r":  # a carriage return is Enter to the shell
                done.append(line)
                line = prompt
            elif ch in "\b\x7f":  # backspace stops at the prompt
                line = line[: max(len(prompt) if line.startswith(prompt) else 0, len(line) - 1)]
            elif ch.isprintable():  # tabs (completion) and other control characters show nothing
                line += ch
    done.append(line)
    wrapped = [row[i : i + width] for row in done for i in range(0, max(len(row), 1), width)]
    return "\n".join(r.rstrip() for r in wrapped[-height:]).rstrip("\n")


def _size(system: str) -> tuple[int, int]:
    m = _SIZE.search(system)
    return (max(1, int(m.group(1))), max(1, int(m.group(2)))) if m else (80, 24)


def _screen_lines(text: str) -> list[str]:
    """A screen's lines as tmux shows them: trailing spaces and trailing blank lines removed."""
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


#: What a world model predicting changes (``lwm.prediction``, mode ``change``) is told.
CHANGE_INSTRUCTION = """\
Write only the part of the screen that the action changes: the cursor's line as it now \
reads (the prompt with the echoed keystrokes) and every line below it (the commands' output, \
then the new prompt once the command has finished). Do not repeat the lines above the \
cursor's line: they are drawn for you. Earlier turns in this conversation are shown the \
same way.\
"""


def render_change(change: str, previous: str, action: str = "", system: str = "") -> str:
    """The full screen from a predicted change (mode ``change`` of :mod:`lwm.prediction`):
    the previous screen's lines above the cursor's line (its last line), then ``change``
    (the cursor's line as it now reads and the lines below it). Lines wrap at the terminal's
    width (read from the system prompt, default 80 × 24) and the last screenful is kept. The
    action is not needed: the change echoes it.

    >>> render_change("root@sandbox:/app# ls\\na.txt\\nroot@sandbox:/app# ", "$ pwd\\n/app\\nroot@sandbox:/app# ")
    '$ pwd\\n/app\\nroot@sandbox:/app# ls\\na.txt\\nroot@sandbox:/app#'
    """
    width, height = _size(system)
    above = _screen_lines(previous)[:-1]
    rows = above + [row[i : i + width].rstrip() for row in _screen_lines(change)
                    for i in range(0, max(len(row), 1), width)]
    return "\n".join(_screen_lines("\n".join(rows[-height:])))


#: A shell's prompt with nothing typed after it (``root@sandbox:/app#``, ``bash-5.2$``).
_BARE_PROMPT = re.compile(r"\S+[#$]")
#: A line that starts with a shell's prompt.
_PROMPT_LINE = re.compile(r"\S+[#$](?: |$)")
#: Keys that press Enter, and the keys :func:`trivial_observation` draws exactly at a prompt.
_ENTER_KEYS = frozenset({"Enter", "C-m", "C-j"})
_DRAWN_KEYS = frozenset({"Space", "BSpace", "C-h", "C-c"})
#: How many characters a model's echo line may differ from the echo's and still wrap on.
_SLACK = 8


def _typed_echo(previous: str, action: str, system: str) -> list[str] | None:
    """The lines :func:`trivial_observation` draws for ``action`` from the cursor's line on."""
    echo = observed_change(previous, action, trivial_observation(action, previous, system), system)
    return None if echo is None else echo.split("\n")


def ground_change(change: str, previous: str, action: str, system: str = "") -> str:
    """``change`` (a world model's, mode ``change``) with what the action alone decides put
    right, when the cursor's line is a shell's bare prompt (``user@host:dir#`` or ``$``
    form, nothing typed after it: nothing runs in the foreground):

    * keys typed without Enter (text, backspaces, ``C-c``) run nothing: unless the model's
      last line already ends with what the cursor's line then reads (output a background
      job printed may come before it), the change is the typed text echoed, as
      :func:`trivial_observation` draws it;
    * otherwise the first lines, the cursor's line with the text typed up to the first
      Enter, are that text as typed (wrapped at the terminal's width): a small model
      miscopies long commands and prompts. The lines the model wrote for that echo are its
      first line and, up to the echo's own count, those after a line about as long as the
      echo's line there (a longer line holds the whole echo, which the renderer wraps); its
      lines after them (the output, the next prompt) are kept.

    Left as it is when the action is not the terminal's JSON; when a key name (``Tab``,
    ``Up``; before an Enter, any) or a control character typed as text (a tab completes,
    ``C-u`` clears the line) comes before the first Enter; for text that is not ASCII (wide
    characters take two columns); for a wait that types nothing or blank lines entered (a
    background job may print); when the change starts neither on the cursor's line nor on a
    prompt; and when the screen may have scrolled (the change's lines below the previous
    ones fill it).

    >>> ground_change("~$ ls -l a.t\\na.txt\\n~$", "~$", '[{"keystrokes": "ls -la a.txt\\\\n"}]')
    '~$ ls -la a.txt\\na.txt\\n~$'
    >>> ground_change("~$ rm -rf x\\n~$", "~$", '[{"keystrokes": "rm -rf x"}]')
    '~$ rm -rf x'
    """
    try:
        keys = parse_action(action)
    except ActionFormatError:
        return change
    before = _screen_lines(previous)
    lines, cursor = change.split("\n"), before[-1] if before else ""
    # a real change starts on the cursor's line unless the screen scrolled; a model's may start
    # on another directory's prompt
    if not (keys and _BARE_PROMPT.fullmatch(cursor) and (lines[0].startswith(cursor) or _PROMPT_LINE.match(lines[0]))) \
            or len(before) - 1 + len(lines) >= _size(system)[1]:
        return change  # not at a bare prompt, or the screen may have scrolled
    typed, names = "", False  # the text typed before the first Enter; whether a key name came before it
    for key in keys:
        if key.is_key_name and key.keystrokes in _ENTER_KEYS:
            typed += "\n"
            break
        if key.is_key_name and key.keystrokes not in _DRAWN_KEYS:
            return change  # a key whose effect is not only text (completion, history, clearing)
        names |= key.is_key_name
        typed += "" if key.is_key_name else key.keystrokes.replace("\r", "\n")
        if "\n" in typed:
            break
    typed, entered = typed.split("\n", 1)[0], "\n" in typed
    if entered and names:  # C-c or a backspace on the line Enter runs: drawn whole by the model
        return change
    if not typed.isascii() or re.search(r"[\x00-\x07\x09-\x1f]", typed):
        return change  # wide characters, or control characters the shell acts on
    if not entered:
        echo = _typed_echo(previous, action, system)
        if echo is None or not (typed or any(k.is_key_name for k in keys)):
            return change  # a wait: a background job may print
        shown = echo[-1][len(cursor):].strip() if len(echo) == 1 else echo[-1].strip()
        return change if shown and lines[-1].rstrip().endswith(shown) else "\n".join(echo)
    if not typed.strip():  # nothing echoed: what the cursor's line now reads is the model's to say
        return change
    echoed = _typed_echo(previous, format_action([{"keystrokes": typed, "duration": 0}]), system)
    if echoed is None:
        return change
    # the model's echo goes on below a line about as long as the echo's line there (tmux trims a
    # wrapped line's trailing spaces; a longer line holds the whole echo, a shorter one cut it)
    written = 1
    while written < min(len(lines), len(echoed)) and abs(len(lines[written - 1]) - len(echoed[written - 1])) <= _SLACK:
        written += 1
    return "\n".join(echoed + lines[written:])


def observed_change(previous: str, action: str, observation: str, system: str = "") -> str | None:
    """The change :func:`render_change` turns back into ``observation`` (the shortest: as
    many of the screen's first lines as possible are the previous screen's), or ``None``
    when no change does (``clear``, a full-screen program: the screen no longer continues
    the previous one). Typing appends to the cursor's line, so the change's first line
    starts with what that line held, unless the screen filled up and scrolled it away; text
    where that is not so is not a screen (a command's raw output after another's).

    >>> observed_change("$ pwd\\n/app\\n$", "", "$ pwd\\n/app\\n$ ls\\na.txt\\n$")
    '$ ls\\na.txt\\n$'
    >>> observed_change("a.txt\\nb.txt", "", "hello") is None
    True
    """
    before = _screen_lines(previous)
    above, cursor = before[:-1], before[-1] if before else ""
    after = _screen_lines(observation)
    target = "\n".join(after)
    scrolled = len(after) >= _size(system)[1]
    for kept in range(min(len(above), len(after)), -1, -1):
        continues = kept == len(after) or after[kept].startswith(cursor) or (scrolled and kept == 0)
        if continues and after[:kept] == above[len(above) - kept:]:
            change = "\n".join(after[kept:])
            if render_change(change, previous, action, system) == target:
                return change
    return None


#: The prompt the sandbox's bash draws (``PS1='\u@\h:\w\$ '``), with nothing typed after it.
_SHELL_PROMPT = re.compile(r"[a-z_][a-z0-9_-]*@[A-Za-z0-9.-]+:\S*[#$]")
#: A first word bash looks up as a command's name (not a path, an assignment or syntax).
_COMMAND_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.,:+-]*")
#: A line whose first word (group 1) is such a name and whose other words expand to nothing
#: that runs or prints: no expansion (``$``, backquotes), escape, history (``!``), operator
#: or brace; quotes closed on the line. (A glob that matches nothing stays as it is; one
#: that matches prints nothing either.)
_PLAIN_LINE = re.compile(r" *(" + _COMMAND_NAME.pattern + r")(?: (?:[^\"'$`\\!|&;<>(){}]|\"[^\"$`\\!]*\"|'[^']*')*)?")
#: Reserved words (``compgen -k``) beyond the builtins: syntax where they stand first.
_RESERVED = frozenset("! [[ ]] { } case coproc do done elif else esac fi for function if in select then time until "
                      "while".split())
#: What an earlier action may have typed that makes a name a command, changes what bash
#: does with one or what it draws (an alias, a function, ``PATH``, options, any variable such
#: as ``PS1`` or ``PROMPT_COMMAND``), reads the next line itself (``read``), or leaves a job
#: that may print later (``&``, ``setsid``, ``nohup``, ``bg``): the line is then the model's.
_CHANGES_LOOKUP = re.compile(r"\b(?:alias|function|PATH|hash|enable|command_not_found_handle|set|shopt|trap|exec|"
                             r"source|bind|ulimit|declare|typeset|readonly|export|unset|read|select|setsid|nohup|"
                             r"disown|bg|fg)\b|\(\s*\)|(?:^|\n)\s*\.\s|&|(?:^|[\s;|(])[A-Za-z_][A-Za-z0-9_]*\+?=")
#: Seconds after the Enter that the screen is read at least: bash answers at once, but tmux
#: draws it a moment later.
_ANSWER_SECONDS = 0.2


def _typed_line(keys: list[Keystroke]) -> tuple[str, float] | None:
    """The one line ``keys`` type, then Enter (as text or a key name) and nothing after it,
    with the seconds waited from the Enter on; else ``None`` (another key name, no Enter, or
    several lines)."""
    text, after = "", 0.0
    for key in keys:
        if key.is_key_name and key.keystrokes not in _ENTER_KEYS:
            return None
        typed = "\n" if key.is_key_name else key.keystrokes
        text += typed
        after = key.duration if "\n" in typed else after + key.duration
    if text.count("\n") != 1 or not text.endswith("\n"):
        return None
    return text[:-1], after


def certain_answer(action: str, turns: Sequence[tuple[str, str]], system: str = "", start: str = "") -> str | None:
    """The screen after a line of plain words whose first is no command, typed at bash's
    bare prompt and entered: bash runs nothing and prints ``bash: WORD: command not found``
    and a new prompt, as a line of prose typed into the shell gets. ``None`` (the world model
    predicts it) unless all of this holds: the cursor's line of the previous screen (the last
    of ``turns``, else ``start``) is the sandbox's bash prompt with nothing typed; the action
    types one line of printable ASCII, then Enter, and waits at least 0.2 s after it (lines
    typed ahead while bash runs one may be echoed twice); its words expand to nothing that
    runs or prints (quotes closed on the line; no ``$``, backquote, backslash, ``!``, operator
    or brace: :data:`_PLAIN_LINE`); its first word is a name (no ``/``, no ``=``), not a
    reserved word or builtin and not a program on the sandbox's ``PATH`` (the sandbox shows
    the host's ``/usr``); and no earlier action typed that name or anything that could make
    it a command, change what bash draws, read the line itself or print later
    (:data:`_CHANGES_LOOKUP`; ``C-z``).

    >>> screen = certain_answer('[{"keystrokes": "Done with the task.\\\\n", "duration": 0.5}]', [], "",
    ...                         "root@sandbox:/app#")
    >>> print(screen)
    root@sandbox:/app# Done with the task.
    bash: Done: command not found
    root@sandbox:/app#
    """
    import shutil

    from lwm.envs.sandbox import DEFAULT_ENV

    try:
        typed = _typed_line(parse_action(action))
    except ActionFormatError:
        return None
    previous = turns[-1][1] if turns else start
    cursor = (_screen_lines(previous) or [""])[-1]
    if typed is None or typed[1] < _ANSWER_SECONDS or not _SHELL_PROMPT.fullmatch(cursor):
        return None
    line = typed[0]
    if not line.isascii() or not line.isprintable() or not (plain := _PLAIN_LINE.fullmatch(line)):
        return None
    name = plain.group(1)
    if name in _BASH_WORDS or name in _RESERVED or shutil.which(name, path=DEFAULT_ENV["PATH"]) is not None:
        return None
    for earlier, _ in turns:
        try:
            keys = parse_action(earlier)
        except ActionFormatError:
            continue   # refused: it typed nothing
        text = "".join(k.keystrokes for k in keys if not k.is_key_name)
        if name in text or _CHANGES_LOOKUP.search(text) or \
                any(k.is_key_name and k.keystrokes == "C-z" for k in keys):   # a stopped job may go on later
            return None
    change = f"{cursor} {line}".rstrip() + f"\nbash: {name}: command not found\n{cursor}"
    return render_change(change, previous, action, system)
