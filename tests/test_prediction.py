"""Prediction modes (lwm.prediction): the terminal's change renderer, rows as a change-mode
model reads them, compact tool lists and rephrased system prompts."""

from __future__ import annotations

import json

import pytest
from conftest import needs_sandbox

from lwm import domains
from lwm.domains.terminal.spec import keys, observed_change, render_change, trivial_observation
from lwm.parse import observation_text
from lwm.prediction import (
    change_row,
    check_prediction,
    full_observation,
    request,
    request_format,
    row_prediction,
)
from lwm.prediction import (
    observed_change as row_change,
)
from lwm.prompts import PHRASINGS, UNSEEN_PHRASING, compact_tools, rephrase
from lwm.schema import Provenance, Trajectory, Turn, rows_from_trajectory

P = "root@sandbox:/app# "
SYSTEM = domains.get("terminal").system_prompt()
TOOLS = [{"name": "read_file", "description": "Read a file. More words.", "inputSchema": {
             "type": "object", "properties": {"path": {"type": "string"}, "head": {"type": "number"}},
             "required": ["path"]}},
         {"name": "ping", "parameters": {"type": "object", "properties": {}}}]


def prompt_of(name: str) -> str:
    """The domain's system prompt (tool servers with TOOLS as their tool list)."""
    spec = domains.get(name)
    return {"fs": lambda: spec.system_prompt(TOOLS), "mcp": lambda: spec.system_prompt("sqlite", TOOLS)}.get(
        name, spec.system_prompt)()


def screen(*lines: str) -> str:
    return "\n".join(lines).rstrip()


# --------------------------------------------------------------------------- terminal renderer

@pytest.mark.parametrize("previous, action, observation", [
    (P, keys("ls\n"), screen(P + "ls", "a.txt  b.txt", P)),  # output and a new prompt
    (screen(P + "pwd", "/app", P), keys("cd /tmp\n"), screen(P + "pwd", "/app", P + "cd /tmp", "root@sandbox:/tmp#")),
    (P, keys("sleep 30\n"), screen(P + "sleep 30")),  # still running: no prompt
    (P, keys("cat quar", "Tab", "\n"), screen(P + "cat quarterly.txt", "Q1: 10", P)),  # completion
    (screen(P + "echo \"a", ">"), keys("b\"\n"), screen(P + "echo \"a", "> b\"", "a", "b", P)),  # continuation
    (P, keys("ls"), screen(P + "ls")),  # typed, no Enter
])
def test_change_renders_back_into_the_real_screen(previous, action, observation):
    change = observed_change(previous, action, observation, SYSTEM)
    assert change is not None
    assert render_change(change, previous, action, SYSTEM) == observation
    # the change is what follows the previous screen's lines above the cursor's line
    assert observation.endswith(change) and len(change) <= len(observation)


def test_a_full_screen_scrolls_and_long_lines_wrap():
    previous = screen(*[f"line {i}" for i in range(23)], P)
    observation_lines = [f"line {i}" for i in range(3, 23)] + [P + "seq 2", "1", "2", P.rstrip()]
    observation = screen(*observation_lines)
    change = observed_change(previous, keys("seq 2\n"), observation, SYSTEM)
    assert change == screen(P + "seq 2", "1", "2", P)
    assert render_change(change, previous, "", SYSTEM) == observation
    wide = render_change("x" * 100, P, "", "tmux window of 40 columns and 5 rows")
    assert wide.split("\n") == ["x" * 40, "x" * 40, "x" * 20]


def test_a_cleared_screen_has_no_change_and_blank_lines_do_not_count():
    previous = screen(P + "echo hi", "hi", P)
    assert observed_change(previous, keys("clear\n"), P, SYSTEM) is None
    assert render_change("", previous, keys("sleep 9\n"), SYSTEM) == screen(P + "echo hi", "hi")
    # trailing blank lines and spaces (an imported row, a generated first screen) are not lines
    assert observed_change(previous + "\n   \n", "", screen(P + "echo hi", "hi", P + "ls", "x", P) + "\n  ", SYSTEM) == \
        screen(P + "ls", "x", P)
    assert observed_change("", "", "", SYSTEM) == ""
    # the trivial guess is one change: the echoed command and a fresh prompt
    assert render_change(screen(P + "ls", P), previous, "", SYSTEM) == trivial_observation(keys("ls\n"), previous, SYSTEM)


# --------------------------------------------------------------------------- web renderer

PAGE = "\n".join(["URL: http://shop.test/cart", "Title: Cart - Shop", "", "RootWebArea 'Cart - Shop', focused",
                   "\t[3] link 'Shop'", "\t\tStaticText 'home'", "\t[4] textbox 'Coupon'", "\t[5] button 'Apply'"])


def page(*tree: str, header: str = "URL: http://shop.test/cart\nTitle: Cart - Shop") -> str:
    return "\n".join([header, "", "RootWebArea 'Cart - Shop', focused", *tree])


@pytest.mark.parametrize("observation, change", [
    # a field filled: its node and the text line below it, nothing else
    (page("\t[3] link 'Shop'", "\t\tStaticText 'home'", "\t[4] textbox 'Coupon', value='X1', focused",
          "\t\tStaticText 'X1'", "\t[5] button 'Apply'"),
     "URL: http://shop.test/cart\nTitle: Cart - Shop\n\n\t[4] textbox 'Coupon', value='X1', focused\n\t\tStaticText 'X1'"),
    # a failed action: the header with its Error line, the page unchanged
    (page("\t[3] link 'Shop'", "\t\tStaticText 'home'", "\t[4] textbox 'Coupon'", "\t[5] button 'Apply'",
          header="URL: http://shop.test/cart\nTitle: Cart - Shop\nError: Could not find element with bid \"9\""),
     "URL: http://shop.test/cart\nTitle: Cart - Shop\nError: Could not find element with bid \"9\""),
    # a node added (the ids no longer match): the whole page
    (page("\t[3] link 'Shop'", "\t[4] textbox 'Coupon'", "\t[5] StaticText 'Invalid coupon'", "\t[6] button 'Apply'"),
     None),
    # another page with the same ids: the ids match, so only the changed nodes and the new header
    (page("\t[3] link 'Shop'", "\t\tStaticText 'home'", "\t[4] textbox 'Coupon'", "\t[5] button 'Apply'",
          header="URL: http://shop.test/cart?x=1\nTitle: Cart - Shop"),
     "URL: http://shop.test/cart?x=1\nTitle: Cart - Shop"),
])
def test_web_changes_render_back_into_the_page(observation, change):
    web = domains.get("web")
    written = web.observed_change(PAGE, "", observation, "")
    assert written == (observation if change is None else change)
    assert web.render_change(written, PAGE, "", "") == observation


def test_web_changes_the_model_gets_wrong_are_drawn_as_written():
    web = domains.get("web")
    # no header: the previous URL and Title (without an Error line) are kept
    assert web.render_change("\t[5] button 'Apply', focused", PAGE, "", "").split("\n")[:2] == PAGE.split("\n")[:2]
    # a node the page does not have is added at the end; text before the first node is ignored
    drawn = web.render_change("URL: u\nTitle: t\n\nStaticText 'stray'\n\t[77] button 'New'", PAGE, "", "")
    assert drawn == "\n".join(["URL: u", "Title: t", "", *PAGE.split("\n")[3:], "\t[77] button 'New'"])
    # slips a small model makes: no blank line after the header, keys in another case, spaces
    # for tabs, Windows line ends, a header line left out (kept from the previous page)
    new_page = "URL: http://shop.test/\nTitle: Shop\n\nRootWebArea 'Shop'\n\t[9] link 'Cart'"
    assert web.render_change(new_page.replace("\n\n", "\n"), PAGE, "", "") == new_page
    assert web.render_change(new_page.replace("URL:", "url:"), PAGE, "", "") == new_page.replace("URL:", "url:")
    assert web.render_change(new_page.replace("\t", "    ").replace("\n", "\r\n"), PAGE, "", "") == \
        new_page.replace("\t", "    ")
    assert web.render_change("Title: Cart!\n\n\t[5] button 'Apply', focused", PAGE, "", "") == \
        PAGE.replace("Title: Cart - Shop", "Title: Cart!").replace("'Apply'", "'Apply', focused")
    assert web.render_change("Error: no element 9", PAGE, "", "").split("\n")[:3] == \
        [*PAGE.split("\n")[:2], "Error: no element 9"]
    # an observation without a header or a RootWebArea line renders back from nothing
    assert web.observed_change(PAGE, "", "just text", "") is None
    assert web.observed_change("", "", PAGE, "") == PAGE


# --------------------------------------------------------------------------- rows in mode change

def terminal_row(turn: int = 3):
    prov = Provenance(kind="real", source="test")
    outputs = ["a.txt", "hello", "3"]
    screens, turns = [P.rstrip()], []
    for i, (cmd, out) in enumerate(zip(["ls", "cat a.txt", "wc -c < a.txt"], outputs), start=1):
        screens.append(screen(*screens[-1].split("\n")[:-1], P + cmd, out, P))
        turns.append(Turn(index=i, action=keys(cmd + "\n"), observation=screens[-1], provenance=prov))
    traj = Trajectory(id="terminal/t/run0", domain="terminal", system_prompt=SYSTEM, initial_observation=P.rstrip(),
                      turns=turns)
    return rows_from_trajectory(traj)[turn - 1]


def test_change_row_writes_history_as_changes_and_keeps_the_ground_truth():
    row = terminal_row()
    changed = change_row(row)
    assert domains.get("terminal").change_instruction in changed.system_str
    assert observation_text(changed.response[1]) == screen(P + "cat a.txt", "hello", P)
    assert changed.ground_truth == row.ground_truth  # scored against the full screen
    assert row_change(row) == screen(P + "wc -c < a.txt", "3", P)
    messages, _ = request(row, "change")
    assert messages[0]["content"] == changed.system_str and "cat a.txt\nhello" in messages[4]["content"]
    assert request(row, "full")[0] == request(row)[0]


def test_full_observation_draws_the_screen_from_the_change():
    row = terminal_row()
    predicted = screen(P + "wc -c < a.txt", "3", P)
    assert full_observation(row, predicted, "change") == observation_text(row.ground_truth)
    assert full_observation(row, predicted, "full") == predicted
    assert full_observation(row, " \n", "change") == " \n"  # nothing written: no credit for the old screen


def test_raw_command_output_is_not_a_screen_so_a_perfect_answer_stays_perfect():
    """Third-party terminal traces often hold each command's raw output, not a screen:
    drawing an answer onto the previous output would add that output's lines."""
    prov = Provenance(kind="real", source="test")
    outputs = ["a.txt\nb.txt\nc.txt", "hello world", "3 a.txt\n5 b.txt\n8 total"]
    traj = Trajectory(id="terminal/raw/run0", domain="terminal", system_prompt="You are a Linux shell.", turns=[
        Turn(index=i, action=keys(cmd + "\n"), observation=out, provenance=prov)
        for i, (cmd, out) in enumerate(zip(["ls", "cat a.txt", "wc -l *"], outputs), start=1)])
    rows = rows_from_trajectory(traj)
    assert [row_prediction(r, "change") for r in rows] == ["full"] * 3   # turn 1: nothing to draw on
    for row in rows:
        truth = observation_text(row.ground_truth)
        assert full_observation(row, truth, "change") == truth
        assert request(row, "change") == request(row, "full")
    # lwm's own screens keep the change mode, a cleared screen among them included
    assert [row_prediction(terminal_row(t), "change") for t in (1, 2, 3)] == ["change"] * 3
    assert row_prediction(terminal_row(), "full") == "full"


def test_domains_without_a_renderer_are_the_same_in_both_modes():
    prov = Provenance(kind="real", source="test")
    traj = Trajectory(id="db/t/run0", domain="db", system_prompt="SQL", turns=[
        Turn(index=i, action=f"SELECT {i};", observation=str(i), provenance=prov) for i in (1, 2)])
    row = rows_from_trajectory(traj)[1]
    assert change_row(row) is row and row_change(row) == "2"
    assert full_observation(row, "2", "change") == "2"


def test_unknown_prediction_modes_are_refused_and_models_say_how_they_are_asked():
    assert check_prediction("change") == "change"
    with pytest.raises(ValueError, match="full, change"):
        check_prediction("diff")

    class Trained:
        prediction, compact_tools = "change", True

    assert request_format(object()) == ("full", False)
    assert request_format(Trained()) == ("change", True)
    assert request_format(Trained(), "full", False) == ("full", False)
    with pytest.raises(ValueError):
        request_format(Trained(), "diff")


# --------------------------------------------------------------------------- compact tools

def test_tool_lists_become_signatures():
    system = "Tools:\n[\n" + ",\n".join(json.dumps(t) for t in TOOLS) + "\n]\nKeep state.\n{\"not\": \"a tool\"}"
    assert compact_tools(system) == ("Tools:\n- read_file(path: string, head?: number): Read a file\n- ping()\n"
                                     "Keep state.\n{\"not\": \"a tool\"}")
    fs = prompt_of("fs")
    assert "- read_file(path: string, head?: number): Read a file\n- ping()\n\n" in compact_tools(fs)
    assert "inputSchema" in fs and "inputSchema" not in compact_tools(fs)
    assert compact_tools(SYSTEM) == SYSTEM


@pytest.mark.parametrize("text, expected", [
    ('[\n{"name":"a","inputSchema":{"type":"object","properties":{}}}\n]', "- a()"),  # the list ends the prompt
    ('A\n[\n{"name":"a","inputSchema":{"type":"object"}}\n]\nB\n[\n{"type":"function","function":{"name":"c",'
     '"description":null,"parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}\n]',
     "A\n- a()\nB\n- c(q: string)"),  # two lists; OpenAI's wrapper; a null description
    ('{"name":"x","inputSchema":{"type":"object","required":5,"properties":{"p":1}},"description":["?"]}',
     "- x(p?: any)"),  # odd required / property / description
    ('{"name":"config","parameters":{"debug":true}}', '{"name":"config","parameters":{"debug":true}}'),  # not a schema
    ("See:\n[\n- foo(bar)\n]", "See:\n[\n- foo(bar)\n]"),  # brackets around nothing rewritten stay
])
def test_odd_tool_lists(text, expected):
    assert compact_tools(text) == expected


def test_request_compacts_tool_lists_only_when_asked():
    prov = Provenance(kind="real", source="test")
    traj = Trajectory(id="fs/t/run0", domain="fs", system_prompt=prompt_of("fs"),
                      turns=[Turn(index=1, action='{"name": "list_allowed_directories", "arguments": {}}',
                                  observation="Allowed directories:\n/app", provenance=prov)])
    row = rows_from_trajectory(traj)[0]
    assert request(row, compact=True)[0][0]["content"] == compact_tools(row.system_str)
    assert request(row)[0][0]["content"] == row.system_str


# --------------------------------------------------------------------------- phrasings

@pytest.mark.parametrize("name", ["terminal", "db", "code", "fs", "mcp", "search", "web", "swe"])
def test_every_domain_prompt_is_rephrased(name):
    system = prompt_of(name)
    assert rephrase(system, 0) == system
    for phrasing in range(1, len(PHRASINGS)):
        text = rephrase(system, phrasing)
        assert text.split("\n")[0] != system.split("\n")[0], (name, phrasing)
        assert "Write brief reasoning" not in text and "<predicted_observation>" in text
    assert rephrase("another benchmark's prompt", UNSEEN_PHRASING) == "another benchmark's prompt"
    with pytest.raises(IndexError):
        rephrase(system, len(PHRASINGS))


def test_modes_and_phrasings_out_of_range_are_refused():
    row = terminal_row()
    for call in (lambda: request(row, "diff"), lambda: full_observation(row, "x", "diff")):
        with pytest.raises(ValueError, match="prediction mode"):
            call()
    for bad in (-1, True, len(PHRASINGS), "1"):
        with pytest.raises(IndexError, match="phrasing"):
            rephrase(SYSTEM, bad)


@needs_sandbox
@pytest.mark.parametrize("name", ["terminal", "fs", "mcp", "db", "code", "search", "web", "swe"])
def test_a_perfect_answer_scores_100_in_every_mode(name):
    """Issue 23's rule on each domain's real episode (its first suite script): the answer a
    perfect model writes in each mode (the whole observation; in ``change`` mode, the change
    where the row is asked for one) becomes the real observation, every metric 1.0."""
    from lwm.envs.episode import ScriptedPolicy, play_episode
    from lwm.envs.recorded import RealBackendEnv
    from lwm.metrics import FIDELITY_METRICS, fidelity

    spec = domains.get(name)
    script = spec.scripts()[0]
    traj = play_episode(RealBackendEnv(name, spec.make_env()), ScriptedPolicy([script]), script.task,
                        max_turns=len(script.actions))
    rows = rows_from_trajectory(traj)
    assert len(rows) == len(script.actions)
    if spec.render_change:  # the change mode is really exercised
        assert any(row_prediction(r, "change") == "change" for r in rows)
    for row in rows:
        truth = observation_text(row.ground_truth)
        for mode in ("full", "change"):
            asked = row_prediction(row, mode)
            perfect = row_change(row) if asked == "change" else truth
            if perfect is None:  # no change draws this screen back (after `clear`): asked whole next time
                continue
            scores = fidelity(full_observation(row, perfect, mode), truth, canonical=spec.canonical).to_dict()
            assert all(scores[m] == 1.0 for m in FIDELITY_METRICS), (name, row.turn_idx, mode, scores)
