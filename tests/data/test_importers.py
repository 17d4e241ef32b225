"""Importers: os (OSWorld traj.jsonl) and android (AndroidWorld JSON) logs, and your own
traces of any domain (--format transitions: episodes and (history, action, observation) triples)."""

import json
import os
from pathlib import Path

import pytest

from lwm.data.importers import NO_REAL_ENVIRONMENT, import_logs
from lwm.domains.android import spec as android
from lwm.domains.os import spec as os_domain
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.schema import read_rows, read_trajectories, rows_from_trajectory

FIX = Path(__file__).parents[1] / "fixtures" / "importers"
H = os_domain.A11Y_HEADER
CHROME = "results/pyautogui/a11y_tree/gpt-4o/chrome/bb5e4c0d-f964-439c-97b6-bdb9747de3f4"
CALC = "results/computer_13/a11y_tree/claude/libreoffice_calc/0a2e43bf-b26c-4631-a966-af9dfa12c9e5"


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_os_directory_of_osworld_results(tmp_path):
    res = import_logs("os", FIX / "os", tmp_path)
    assert (res.trajectories, res.rows, res.turns, res.skipped) == (2, 5, 5, [])
    trajs = {t.id: t for t in read_trajectories(tmp_path / "trajectories.jsonl")}
    assert sorted(trajs) == [f"os/{CALC}", f"os/{CHROME}"]

    chrome = trajs[f"os/{CHROME}"]
    assert chrome.domain == "os" and chrome.task == "Open Chrome and go to the settings page."
    assert chrome.reward == 1.0 and chrome.system_prompt == os_domain.system_prompt()
    assert chrome.initial_observation == (
        f'{H}\nlabel\tHome\t""\t\t\t(0, 0)\t(70, 64)\npush-button\tGoogle Chrome\t""\t\t\t(0, 64)\t(70, 64)')
    assert [t.action for t in chrome.turns] == [
        "import pyautogui\npyautogui.click(35, 96)", "pyautogui.typewrite('chrome://settings\\n')", "DONE"]
    assert [t.index for t in chrome.turns] == [1, 2, 3]
    assert chrome.turns[1].observation == (
        f'{H}\nframe\tNew Tab - Google Chrome\t""\t\t\t(70, 27)\t(1850, 1053)\n'
        f'entry\tAddress and search bar\tchrome://settings\t\t\t(180, 80)\t(1200, 34)')
    prov = chrome.turns[0].provenance
    assert prov.kind == "real" and prov.source == f"import/osworld:{CHROME}/traj.jsonl"
    assert chrome.metadata["step_nums"] == [1, 2, 3]

    # computer_13 actions are canonical JSON; raw AT-SPI XML (inline and in a sidecar file)
    # is linearized like OSWorld: hidden nodes dropped, quotes doubled, classes kept.
    calc = trajs[f"os/{CALC}"]
    assert calc.task == 'Type \'say "hi"\' into A1.' and calc.reward == 0.0 and calc.initial_observation == ""
    assert [t.action for t in calc.turns] == [
        '{"action_type": "TYPING", "text": "say \\"hi\\""}',
        '{"action_type": "HOTKEY", "keys": ["ctrl", "shift", "s"]}']
    assert calc.turns[0].observation == (
        f'{H}\npush-button\tSave\t""\tGtkButton\t\t(40, 60)\t(24, 24)\n'
        f'table-cell\tA1\t"say ""hi"""\t\t\t(60, 200)\t(80, 20)')
    assert calc.turns[1].observation.split("\n")[2] == 'menu-item\tSave As...\t""\t\t\t(70, 90)\t(200, 22)'

    rows = list(read_rows(res.rows_path))
    assert res.rows_path == tmp_path / "os_test.jsonl"
    assert [(r.id, r.turn_idx, r.total_turns) for r in rows] == [
        (f"os/{CALC}", 1, 2), (f"os/{CALC}", 2, 2),
        (f"os/{CHROME}", 1, 3), (f"os/{CHROME}", 2, 3), (f"os/{CHROME}", 3, 3)]
    last = rows[-1]
    assert last.task == "os" and last.system_str == chrome.system_prompt
    assert last.current_prompt == "### Turn 3\n\n**Action:**\n```python\nDONE\n```"
    assert "**Current State:**" in last.prompt[0] and "```python\nimport pyautogui" in last.prompt[0]
    assert last.ground_truth == f"**Environment Observation:**\n```\n{chrome.turns[2].observation}\n```"
    assert '**Action:**\n```json\n{"action_type": "TYPING", "text": "say \\"hi\\""}\n```' in rows[0].prompt[0]

    m = _manifest(tmp_path)
    assert m["domain"] == "os" and m["real_environment"] is False and m["notice"] == NO_REAL_ENVIRONMENT
    assert (m["files"], m["episodes_found"], m["trajectories"], m["rows"], m["turns"]) == (2, 2, 2, 5, 5)
    assert (m["verified_episodes"], m["achieved_episodes"], m["skipped"]) == (2, 1, [])


def test_rows_round_trip_unchanged(tmp_path):
    from lwm.data.importers import _action_lang
    from lwm.schema import write_rows

    for fmt, src in (("os", FIX / "os"), ("android", FIX / "android")):
        res = import_logs(fmt, src, tmp_path / fmt)
        rows = list(read_rows(res.rows_path))
        rebuilt = [r for t in read_trajectories(res.trajectories_path)
                   for r in rows_from_trajectory(t, action_lang=_action_lang(fmt, t))]
        assert [r.model_dump() for r in rows] == [r.model_dump() for r in rebuilt]
        write_rows(tmp_path / f"{fmt}_again.jsonl", rows)
        assert (tmp_path / f"{fmt}_again.jsonl").read_bytes() == res.rows_path.read_bytes()


def test_os_malformed_episodes_are_skipped_with_reasons(tmp_path):
    res = import_logs("os", FIX / "os_bad", tmp_path)
    assert res.trajectories == 1 and [t.id for t in read_trajectories(res.trajectories_path)] == ["os/good"]
    assert res.skipped == [
        {"episode": "badjson", "file": "badjson/traj.jsonl", "line": 2,
         "reason": "not valid JSON (Expecting ',' delimiter at column 50)"},
        {"episode": "empty", "file": "empty/traj.jsonl", "line": 0, "reason": "no steps (the file is empty)"},
        {"episode": "noaction", "file": "noaction/traj.jsonl", "line": 1,
         "reason": "step_num 1: missing field 'action'"},
        {"episode": "notree", "file": "notree/traj.jsonl", "line": 1, "reason": res.skipped[3]["reason"]},
    ]
    assert res.skipped[3]["reason"].startswith("step_num 1: no accessibility tree (looked for a11y_tree")
    m = _manifest(tmp_path)
    assert m["skipped_episodes"] == 4 and m["episodes_found"] == 5 and m["skipped"] == res.skipped


def test_strict_raises_naming_file_and_line(tmp_path):
    with pytest.raises(RowFormatError) as e:
        import_logs("os", FIX / "os_bad" / "badjson" / "traj.jsonl", tmp_path, strict=True)
    assert e.value.path == FIX / "os_bad" / "badjson" / "traj.jsonl" and e.value.line == 2
    assert str(e.value).startswith(f"{FIX / 'os_bad' / 'badjson' / 'traj.jsonl'}:2: not valid JSON")
    assert not (tmp_path / "trajectories.jsonl").exists()  # nothing half-written

    with pytest.raises(RowFormatError, match=r"truncated\.json:3: not valid JSON"):
        import_logs("android", FIX / "android_bad" / "truncated.json", tmp_path, strict=True)
    with pytest.raises(RowFormatError, match=r"lines\.jsonl:2: not valid JSON"):
        import_logs("android", FIX / "android_bad", tmp_path, strict=True)
    with pytest.raises(RowFormatError, match=r"os_episodes\.jsonl:2: 'steps' must be a list"):
        import_logs("os", FIX / "os_episodes.jsonl", tmp_path, strict=True)


def test_os_single_jsonl_one_episode_per_line(tmp_path):
    res = import_logs("os", FIX / "os_episodes.jsonl", tmp_path)
    (traj,) = read_trajectories(res.trajectories_path)
    assert traj.id == "os/notes-1" and traj.task == "Open the text editor." and traj.reward == 1.0
    assert traj.initial_observation == H
    assert traj.turns[0].action == '{"action": "left_click", "coordinate": [35, 400]}'
    assert traj.turns[0].observation == f'{H}\nframe\tUntitled Document 1 - gedit\t""\t\t\t(70, 27)\t(1850, 1053)'
    assert traj.turns[0].provenance.source == "import/osworld:os_episodes.jsonl"
    assert res.skipped == [{"episode": "notes-2", "file": "os_episodes.jsonl", "line": 2,
                            "reason": "'steps' must be a list of step records"}]


def test_os_single_traj_file(tmp_path):
    res = import_logs("os", FIX / "os" / CHROME / "traj.jsonl", tmp_path)
    (traj,) = read_trajectories(res.trajectories_path)
    assert traj.id == "os/bb5e4c0d-f964-439c-97b6-bdb9747de3f4" and len(traj.turns) == 3
    assert traj.task.startswith("Open Chrome") and traj.turns[0].provenance.source == "import/osworld:traj.jsonl"


def test_android_directory(tmp_path):
    res = import_logs("android", FIX / "android", tmp_path)
    assert (res.trajectories, res.rows, res.turns) == (2, 4, 4)
    trajs = {t.id: t for t in read_trajectories(res.trajectories_path)}
    assert sorted(trajs) == ["android/episodes/clock_alarm", "android/wifi-off"]

    clock = trajs["android/episodes/clock_alarm"]
    assert clock.task == "Create an alarm labelled Gym." and clock.reward == 0.0
    assert clock.system_prompt == android.system_prompt()
    assert clock.metadata["task_template"] == "ClockAddAlarm" and clock.metadata["seed"] == 30
    assert clock.initial_observation == (
        'UI elements (2):\n'
        '[0] TextView text="Clock" desc="Clock" id=com.google.android.apps.nexuslauncher:id/icon clickable '
        'bounds=[60,1700][260,1950]\n'
        '[1] TextView text="Phone" clickable bounds=[300,1700][500,1950]')
    # Actions come from the JSON after "Action:" in action_output; each observation is the
    # next step's before_element_list; the final status step has none and is dropped.
    assert [t.action for t in clock.turns] == [
        '{"action_type": "open_app", "app_name": "Clock"}', '{"action_type": "click", "index": 1}']
    assert clock.turns[0].observation == (
        'UI elements (2):\n'
        '[0] TextView text="Alarm" desc="Alarm" id=com.google.android.deskclock:id/tab_menu_alarm clickable '
        'selected bounds=[0,2206][270,2337]\n'
        '[1] ImageButton desc="Add alarm" clickable bounds=[474,1917][606,2049]')
    assert clock.turns[1].observation == (
        'UI elements (2):\n'
        '[0] EditText hint="Label" clickable editable focused bounds=[0,300][1080,400]\n'
        '[1] Button text="Cancel" clickable disabled bounds=[600,500][800,600]')
    prov = clock.turns[0].provenance
    assert (prov.kind, prov.source) == ("real", "import/androidworld:episodes/clock_alarm.json")
    assert res.dropped_turns == [{"episode": "android/episodes/clock_alarm", "turn": 3,
                                  "action": '{"action_type": "status", "goal_status": "infeasible"}',
                                  "reason": "last step has no recorded next observation"}]

    # uiautomator-style elements (string booleans, "[l,t][r,b]" bounds), after lists, a
    # verbatim string observation, null action fields dropped.
    wifi = trajs["android/wifi-off"]
    assert wifi.reward == 1.0 and [t.action for t in wifi.turns] == [
        '{"action_type": "click", "index": 0}', '{"action_type": "answer", "text": "Wi-Fi is off"}']
    assert wifi.initial_observation.endswith(
        '[0] Switch text="Wi‑Fi" id=android:id/switch_widget clickable checkable checked bounds=[900,400][1040,480]')
    assert wifi.turns[0].observation.endswith("clickable checkable bounds=[900,400][1040,480]")
    assert wifi.turns[1].observation == "Settings › Network: Wi‑Fi off"

    rows = list(read_rows(res.rows_path))
    assert [(r.id, r.turn_idx, r.total_turns, r.task) for r in rows] == [
        ("android/wifi-off", 1, 2, "android"), ("android/wifi-off", 2, 2, "android"),
        ("android/episodes/clock_alarm", 1, 2, "android"), ("android/episodes/clock_alarm", 2, 2, "android")]
    assert rows[3].current_prompt == '### Turn 2\n\n**Action:**\n```json\n{"action_type": "click", "index": 1}\n```'
    m = _manifest(tmp_path)
    assert m["skipped"] == [{"episode": "broken", "file": "episodes/batch.jsonl", "line": 2,
                             "reason": "field 'goal' (the task instruction) is missing or empty"}]
    assert len(m["dropped_turns"]) == 1 and m["format"] == "androidworld"


def test_android_malformed(tmp_path):
    res = import_logs("android", FIX / "android_bad", tmp_path)
    assert [t.id for t in read_trajectories(res.trajectories_path)] == ["android/ok"]
    assert [(s["episode"], s["file"], s["line"]) for s in res.skipped] == [
        ("lines/2", "lines.jsonl", 2), ("nomiddle", "lines.jsonl", 3), ("truncated", "truncated.json", 3)]
    assert res.skipped[0]["reason"].startswith("not valid JSON")
    assert "step 0: no observation after the action" in res.skipped[1]["reason"]


def test_empty_or_missing_source(tmp_path):
    (tmp_path / "empty").mkdir()
    for fmt in ("os", "android"):
        with pytest.raises(DataNotFoundError, match="no .* logs found"):
            import_logs(fmt, tmp_path / "empty", tmp_path / "out")
    with pytest.raises(DataNotFoundError, match="no such file"):
        import_logs("os", tmp_path / "nope", tmp_path / "out")
    with pytest.raises(ValueError, match="unknown import format"):
        import_logs("web", tmp_path / "empty", tmp_path / "out")


def test_all_bad_still_writes_outputs_and_manifest(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.json").write_text('{"goal": "g", "steps": [{"action": {"no_type": 1}}]}')
    res = import_logs("android", src, tmp_path / "out")
    assert res.trajectories == 0 and res.rows_path.read_text() == "" and res.trajectories_path.read_text() == ""
    assert res.skipped == [{"episode": "a", "file": "a.json", "line": 0, "reason": "step 0: action has no 'action_type'"}]
    # Re-importing into an output directory inside the source does not read the output.
    res2 = import_logs("android", src, src / "out")
    assert _manifest(src / "out")["files"] == 1 and res2.skipped == res.skipped


def test_render_ui_elements_is_deterministic():
    el = {"text": 'a "b"\nc', "class_name": "android.widget.CheckBox", "is_checkable": True, "is_checked": True,
          "is_visible": False, "bbox_pixels": {"x_min": 1.0, "x_max": 3.0, "y_min": 2.0, "y_max": 4.0}}
    assert android.render_ui_elements([el]) == (
        'UI elements (1):\n[0] CheckBox text="a \\"b\\"\\nc" checkable checked invisible bounds=[1,2][3,4]')
    assert android.render_ui_elements([]) == "UI elements (0):"
    with pytest.raises(TypeError):
        android.render_ui_elements(["x"])
    assert android.format_action({"index": 2, "action_type": "click", "x": None}) == \
        '{"action_type": "click", "index": 2}'


def test_system_prompts_and_notice():
    assert os_domain.NAME == "os" and android.NAME == "android"
    assert NO_REAL_ENVIRONMENT == "os and android have no real environment here; these trajectories are imported logs"
    assert H in os_domain.system_prompt() and "pyautogui" in os_domain.system_prompt()
    assert "<predicted_observation>" in android.system_prompt() and "input_text" in android.system_prompt()
    assert "2400" in android.system_prompt() and "1280" in os_domain.system_prompt(width=1280)
    import lwm.data.importers as imp
    assert NO_REAL_ENVIRONMENT in " ".join(imp.__doc__.split()) and NO_REAL_ENVIRONMENT in \
        " ".join(imp.import_logs.__doc__.split())


def test_os_initial_state_record_and_missing_sidecar(tmp_path):
    ep = tmp_path / "src" / "ep1"
    ep.mkdir(parents=True)
    lines = [{"step_num": 0, "action": None, "a11y_tree": f"{H}\nlabel\tStart\t\"\"\t\t\t(0, 0)\t(1, 1)"},
             {"step_num": 1, "action": "WAIT", "a11y_tree_file": "missing.xml"}]
    (ep / "traj.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = import_logs("os", tmp_path / "src", tmp_path / "out")
    assert res.trajectories == 0 and res.skipped[0]["line"] == 2
    assert res.skipped[0]["reason"].startswith("step_num 1: cannot read a11y_tree_file 'missing.xml'")
    (ep / "missing.xml").write_text(f"{H}\n")
    (traj,) = read_trajectories(import_logs("os", tmp_path / "src", tmp_path / "out").trajectories_path)
    assert traj.initial_observation.endswith("label\tStart\t\"\"\t\t\t(0, 0)\t(1, 1)")
    assert [(t.index, t.action, t.observation) for t in traj.turns] == [(1, "WAIT", H)] and traj.id == "os/ep1"


def test_parse_action_and_canonical():
    from lwm.errors import ActionFormatError

    assert os_domain.parse_action("pyautogui.click(1, 2)") == "pyautogui.click(1, 2)"
    assert os_domain.parse_action(" DONE\n") == "DONE"
    assert os_domain.parse_action('{"action_type": "CLICK", "x": 1}') == {"action_type": "CLICK", "x": 1}
    for bad in ("", "pyautogui.click(1,", "{nope", "{}"):
        with pytest.raises(ActionFormatError):
            os_domain.parse_action(bad)
    assert android.parse_action('{"action_type": "click", "index": 2, "x": null}') == {"action_type": "click", "index": 2}
    assert android.parse_action({"action_type": "scroll", "direction": "down"})["direction"] == "down"
    for bad in ("[1]", '{"action_type": "fly"}', '{"action_type": "click"}', '{"action_type": "click", "index": -1}',
                '{"action_type": "input_text", "index": 1}', '{"action_type": "scroll", "direction": "in"}'):
        with pytest.raises(ActionFormatError):
            android.parse_action(bad)
    assert os_domain.canonical("a  \nb\t\n\n") == "a\nb\t" and android.canonical("\na\nb  \n") == "a\nb"
    from lwm import domains
    assert domains.get("os").canonical is os_domain.canonical and domains.get("android").canonical is android.canonical


def test_side_files_outside_the_episode_and_links_are_refused(tmp_path):
    canary = tmp_path / "secret.txt"
    canary.write_text("host secret")
    ep = tmp_path / "logs" / "ep1"
    ep.mkdir(parents=True)
    (ep / "traj.jsonl").write_text(json.dumps({"step_num": 1, "action": "pyautogui.click(1, 2)",
                                               "a11y_tree_file": str(canary)}) + "\n")
    res = import_logs("os", tmp_path / "logs", tmp_path / "out")
    assert res.trajectories == 0 and "outside the episode directory" in res.skipped[0]["reason"]
    (ep / "result.txt").symlink_to("/dev/zero")
    (ep / "traj.jsonl").write_text(json.dumps({"step_num": 1, "action": "pyautogui.click(1, 2)",
                                               "a11y_tree": "tag\tname"}) + "\n")
    res = import_logs("os", tmp_path / "logs", tmp_path / "out2")
    assert res.trajectories == 0 and "result.txt" in res.skipped[0]["file"]
    assert "host secret" not in (tmp_path / "out").joinpath("manifest.json").read_text()


# --------------------------------------------------------------------- --format transitions


def _jsonl(path: Path, *records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_transitions_episodes_with_aliases(tmp_path):
    from lwm.data.transitions import import_transitions
    from lwm.domains.terminal import spec as terminal

    _jsonl(tmp_path / "src" / "runs" / "eps.jsonl",
           {"id": "ep-a", "instruction": "Show the notes.", "initial_observation": "$ \n", "reward": True,
            "turns": [{"command": "ls", "output": "notes.txt\n"},
                      ["cat notes.txt", "buy milk\n"],
                      {"action": "true", "next_observation": ""}]},
           {"steps": [{"action": [{"keystrokes": "pwd\n", "duration": 0.5}], "observation": "/app"}],
            "reward": 0.25, "domain": "terminal"})
    res = import_transitions(tmp_path / "src", tmp_path / "out", domain="terminal")
    assert (res.trajectories, res.rows, res.turns, res.skipped, res.domain) == (2, 4, 4, [], "terminal")
    a, b = read_trajectories(res.trajectories_path)
    assert (a.id, a.domain, a.task, a.initial_observation, a.reward) == ("ep-a", "terminal", "Show the notes.", "$ ", 1.0)
    assert [(t.index, t.action, t.observation) for t in a.turns] == [
        (1, "ls", "notes.txt"), (2, "cat notes.txt", "buy milk"), (3, "true", "")]
    assert a.system_prompt == terminal.system_prompt()  # neither given nor in the record: the domain's default
    assert a.turns[0].provenance.kind == "real" and a.turns[0].provenance.source == "import/transitions:runs/eps.jsonl"
    assert a.metadata == {"record": "episode", "format": "transitions", "file": "runs/eps.jsonl", "line": 1}
    # an action given as JSON is stored as one-line JSON text; a default id names file and line
    assert (b.id, b.reward, b.turns[0].action) == ("runs/eps-2", 0.25, '[{"keystrokes": "pwd\\n", "duration": 0.5}]')

    rows = list(read_rows(res.rows_path))
    assert res.rows_path == tmp_path / "out" / "terminal_test.jsonl"
    assert [(r.id, r.turn_idx, r.total_turns, r.task) for r in rows] == [
        ("ep-a", 1, 3, "terminal"), ("ep-a", 2, 3, "terminal"), ("ep-a", 3, 3, "terminal"),
        ("runs/eps-2", 1, 1, "terminal")]
    # plain command lines are not the terminal's keystroke JSON: fenced as text; keystroke JSON as json
    assert "**Current State:**\n```\n$ \n```" in rows[0].prompt[0] and "```text\nls\n```" in rows[0].prompt[0]
    assert rows[3].current_prompt == '### Turn 1\n\n**Action:**\n```json\n[{"keystrokes": "pwd\\n", "duration": 0.5}]\n```'
    assert rows[1].ground_truth == "**Environment Observation:**\n```\nbuy milk\n```"
    m = _manifest(tmp_path / "out")
    assert (m["format"], m["domain"], m["real_environment"], m["files"], m["records_found"]) == (
        "transitions", "terminal", True, 1, 2)
    assert (m["episode_records"], m["transition_records"], m["rows"], m["verified_episodes"], m["achieved_episodes"]) == (
        2, 0, 4, 2, 1)


def test_transitions_triples_give_one_row_each_with_their_history(tmp_path):
    from lwm.data.transitions import import_transitions

    t1 = {"action": "mkdir a", "observation": ""}
    t2 = {"command": "ls", "output": "a\n"}
    src = _jsonl(tmp_path / "triples.jsonl",
                 {"task": "Make a directory.", "history": [], **t1},
                 {"task": "Make a directory.", "history": [t1], **t2},
                 {"task": "Make a directory.", "history": [t1, ["ls", "a\n"]], "action": "ls -d a/",
                  "observation": "a/\n"})
    res = import_transitions(src, tmp_path / "out", domain="terminal")
    assert (res.trajectories, res.rows, res.turns) == (3, 3, 6)  # one row per triple, not one per turn of each
    rows = list(read_rows(res.rows_path))
    assert [(r.id, r.turn_idx, r.total_turns) for r in rows] == [
        ("triples-1", 1, 1), ("triples-2", 2, 2), ("triples-3", 3, 3)]
    last = rows[2]
    assert len(last.prompt) == 3 and last.prompt[0].startswith("### Turn 1\n\n**Task Instruction:**\nMake a directory.")
    assert "```text\nmkdir a\n```" in last.prompt[0] and "```text\nls\n```" in last.prompt[1]
    assert last.current_prompt == "### Turn 3\n\n**Action:**\n```text\nls -d a/\n```"
    assert last.prompt[2].startswith(last.current_prompt) and "Predict the environment's next observation" in last.prompt[2]
    assert last.response == ["**Environment Observation:**\n```\n\n```", "**Environment Observation:**\n```\na\n```",
                             "**Environment Observation:**\n```\na/\n```"]
    assert rows[1].ground_truth.endswith("```\na\n```")
    trajs = list(read_trajectories(res.trajectories_path))
    assert [t.metadata["record"] for t in trajs] == ["transition"] * 3
    assert (_manifest(tmp_path / "out")["transition_records"], _manifest(tmp_path / "out")["episode_records"]) == (3, 0)


def test_transitions_one_json_document_object_or_list(tmp_path):
    from lwm.data.transitions import import_transitions

    src = tmp_path / "src"
    src.mkdir()
    (src / "one.json").write_text(json.dumps(
        {"id": "single", "task": "t", "turns": [{"action": "SELECT 1;", "observation": "1"}]}, indent=2))
    (src / "many.json").write_text(json.dumps([
        {"action": "SELECT 2;", "observation": "2\n"},
        {"action": "SELECT 3;"},
        "not an object",
        {"action": "SELECT 4;", "observation": "4", "history": [["SELECT 2;", "2"]]},
    ], indent=2))
    (src / "notes.txt").write_text("ignored: neither .json nor .jsonl")
    res = import_transitions(src, tmp_path / "out", domain="db")
    trajs = {t.id: t for t in read_trajectories(res.trajectories_path)}
    assert sorted(trajs) == ["many-item1", "many-item4", "single"] and res.rows == 3
    assert trajs["single"].metadata["line"] == 1 and trajs["many-item4"].metadata["item"] == 4
    assert res.skipped == [
        {"episode": "many-item2", "file": "many.json", "line": 1,
         "reason": "item 2: the record has no observation (expected one of observation, output, next_observation)"},
        {"episode": "many-item3", "file": "many.json", "line": 1, "reason": "item 3: expected a JSON object, got string"},
    ]
    rows = list(read_rows(res.rows_path))
    assert all("```sql\nSELECT" in r.current_prompt for r in rows)  # the db parser takes SQL: its fence language
    # a pretty-printed document broken on its 3rd line is one error there, not one per line
    (src / "one.json").write_text('{\n  "action": "SELECT 1;",\n  "observation": 1 2\n}\n')
    res = import_transitions(src / "one.json", tmp_path / "out2", domain="db")
    assert res.skipped == [{"episode": "one-3", "file": "one.json", "line": 3,
                            "reason": "not valid JSON (Expecting ',' delimiter at column 20)"}]


def test_transitions_system_prompt_precedence(tmp_path):
    from lwm.data.transitions import import_transitions
    from lwm.domains.db import spec as db

    src = _jsonl(tmp_path / "t.jsonl",
                 {"id": "own", "system_prompt": "the record's prompt", "action": "SELECT 1;", "observation": "1"},
                 {"id": "none", "action": "SELECT 1;", "observation": "1"})
    prompts = lambda res: {t.id: t.system_prompt for t in read_trajectories(res.trajectories_path)}  # noqa: E731
    assert prompts(import_transitions(src, tmp_path / "a", domain="db")) == {
        "own": "the record's prompt", "none": db.system_prompt()}
    assert prompts(import_transitions(src, tmp_path / "b", domain="db", system_prompt="given")) == {
        "own": "given", "none": "given"}
    rows = list(read_rows(tmp_path / "b" / "db_test.jsonl"))
    assert [r.system_str for r in rows] == ["given", "given"]
    # a domain whose default prompt needs settings (fs: the tool list) gets an empty one, counted
    res = import_transitions(src, tmp_path / "c", domain="fs")
    assert prompts(res)["none"] == "" and _manifest(tmp_path / "c")["empty_system_prompts"] == 1


def test_transitions_bad_records_are_skipped_with_file_line_and_reason(tmp_path):
    from lwm.data.transitions import import_transitions

    ok = {"action": "ls", "observation": "a"}
    _jsonl(tmp_path / "src" / "mixed.jsonl",
           {"id": "good", **ok},
           [ok],
           "{not json",
           {"id": "nums", "action": "ls", "observation": 5},
           {"id": "null", "action": "ls", "observation": None},
           {"id": "turn2", "turns": [ok, {"action": "pwd"}]},
           {"id": "good", **ok},
           {"id": "other", "domain": "db", **ok},
           {"id": "rew", "reward": 3, **ok},
           {"hello": "world"},
           {"id": "hist", "history": "ls", **ok},
           {"id": "both", "turns": [ok], **ok},
           {"id": "noturns", "turns": []},
           {"id": "bad-turn", "steps": [["ls", "a", "b"]]},
           {"id": "num-action", "action": 7, "observation": "x"},
           {"id": "task", "task": ["x"], **ok},
           {"id": "noact", "output": "x"})
    res = import_transitions(tmp_path / "src", tmp_path / "out", domain="terminal")
    assert [t.id for t in read_trajectories(res.trajectories_path)] == ["good"] and res.rows == 1
    assert [(s["episode"], s["file"], s["line"], s["reason"]) for s in res.skipped] == [
        ("mixed-2", "mixed.jsonl", 2, "expected a JSON object, got list"),
        ("mixed-3", "mixed.jsonl", 3, "not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
        ("nums", "mixed.jsonl", 4, "'observation' must be a string (the environment's text), got number"),
        ("null", "mixed.jsonl", 5, "'observation' must be a string (the environment's text), got null"),
        ("turn2", "mixed.jsonl", 6,
         "turn 2 has no observation (expected one of observation, output, next_observation)"),
        ("good", "mixed.jsonl", 7, "duplicate trajectory id 'good' (first at mixed.jsonl:1)"),
        ("other", "mixed.jsonl", 8, "the record's domain is 'db', but this import is of 'terminal'"),
        ("rew", "mixed.jsonl", 9, "'reward' must be a number in [0, 1] or a boolean, got 3"),
        ("mixed-10", "mixed.jsonl", 10, "neither an episode ('turns' or 'steps') nor a transition ('action' and "
                                        "'observation'); keys: 'hello'"),
        ("hist", "mixed.jsonl", 11, "'history' must be a list of turns, got string"),
        ("both", "mixed.jsonl", 12, "both 'turns' and 'action': an episode has turns, a transition an action and "
                                    "an observation, not both"),
        ("noturns", "mixed.jsonl", 13, "'turns' is empty: an episode needs at least one turn"),
        ("bad-turn", "mixed.jsonl", 14, "turn 1: a turn as a list is [action, observation], got 3 items"),
        ("num-action", "mixed.jsonl", 15, "'action' must be a string, an object or a list, got number"),
        ("task", "mixed.jsonl", 16, "'task' must be a string, got list"),
        ("noact", "mixed.jsonl", 17, "the record has no action (expected one of action, command)"),
    ]
    m = _manifest(tmp_path / "out")
    assert m["skipped"] == res.skipped and (m["records_found"], m["skipped_records"], m["trajectories"]) == (17, 16, 1)


def test_transitions_strict_and_missing_input(tmp_path):
    from lwm.data.transitions import import_transitions
    from lwm.errors import UnknownDomainError

    src = _jsonl(tmp_path / "t.jsonl", {"action": "ls", "observation": "a"}, {"action": "ls", "output": None})
    with pytest.raises(RowFormatError) as e:
        import_transitions(src, tmp_path / "out", domain="terminal", strict=True)
    assert (e.value.path, e.value.line) == (src, 2)
    assert str(e.value) == f"{src}:2: 'output' must be a string (the environment's text), got null"
    assert not (tmp_path / "out").exists()  # nothing half-written
    (tmp_path / "list.json").write_text('[{"action": "ls", "observation": "a"}, {"action": "ls"}]')
    with pytest.raises(RowFormatError, match=r"list\.json:1: item 2: the record has no observation"):
        import_transitions(tmp_path / "list.json", tmp_path / "out", domain="terminal", strict=True)

    with pytest.raises(UnknownDomainError, match="unknown domain 'nope'"):
        import_transitions(src, tmp_path / "out", domain="nope")
    with pytest.raises(DataNotFoundError, match="no such file"):
        import_transitions(tmp_path / "missing", tmp_path / "out", domain="terminal")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.txt").write_text("{}")
    with pytest.raises(DataNotFoundError, match=r"no \*\.json or \*\.jsonl files"):
        import_transitions(tmp_path / "empty", tmp_path / "out", domain="terminal")
    # an empty file is listed, not silently passed over; the output directory is never read back
    (tmp_path / "empty" / "e.jsonl").write_text("\n")
    res = import_transitions(tmp_path / "empty", tmp_path / "empty" / "out", domain="terminal")
    assert res.trajectories == 0 and res.skipped == [
        {"episode": "e", "file": "e.jsonl", "line": 0, "reason": "no records (the file is empty, or an empty list)"}]
    res = import_transitions(tmp_path / "empty", tmp_path / "empty" / "out", domain="terminal")
    assert _manifest(tmp_path / "empty" / "out")["files"] == 1 and len(res.skipped) == 1


def test_transitions_rows_evaluate_with_the_trivial_baseline(tmp_path):
    import asyncio

    from lwm.data.transitions import import_transitions
    from lwm.eval.baselines import load_predictor
    from lwm.eval.runner import EvalConfig, evaluate, load_rows

    res = import_transitions(FIX / "transitions" / "shell_triples.jsonl", tmp_path / "data", domain="terminal")
    assert (res.trajectories, res.rows, res.skipped) == (2, 2, [])
    rows = load_rows(tmp_path / "data")
    assert [(r.id, r.turn_idx) for r in rows] == [("count-lines/1", 1), ("count-lines/2", 2)]
    assert rows[1].system_str.startswith("You simulate a Linux shell") and "```text\nls src\n```" in rows[1].prompt[0]
    summary = asyncio.run(evaluate(EvalConfig(out=tmp_path / "eval"), load_predictor("baseline:trivial"), rows=rows,
                                   show_progress=False))
    assert summary["rows"] == 2 and summary["failed"] == 0 and "terminal" in summary["domains"]


def test_cli_import_transitions_and_exit_codes(tmp_path):
    from typer.testing import CliRunner

    from lwm.cli import app

    runner = CliRunner()
    fixture = str(FIX / "transitions" / "shell_triples.jsonl")
    (tmp_path / "prompt.txt").write_text("from a file\n")
    r = runner.invoke(app, ["import", "--format", "transitions", "--domain", "terminal", fixture,
                            "--system-prompt", f"@{tmp_path / 'prompt.txt'}", "--out", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    assert "imported 2 trajectories, 3 turns, 2 rows" in r.output and "no real environment" not in r.output
    assert {t.system_prompt for t in read_trajectories(tmp_path / "a" / "trajectories.jsonl")} == {"from a file"}

    bad = _jsonl(tmp_path / "bad.jsonl", {"action": "ls"}, {"action": "pwd", "observation": 1})
    r = runner.invoke(app, ["import", "--format", "transitions", "--domain", "terminal", str(bad),
                            "--out", str(tmp_path / "b")])
    assert r.exit_code == 1 and "nothing imported: 2 records skipped, first: bad.jsonl:1: the record has no " \
                                "observation" in r.output
    r = runner.invoke(app, ["import", "--format", "android", fixture, "--out", str(tmp_path / "c")])
    assert r.exit_code == 1 and "nothing imported: 2 episodes skipped" in r.output and "field 'goal'" in r.output

    r = runner.invoke(app, ["import", "--format", "transitions", fixture, "--out", str(tmp_path / "d")])
    assert r.exit_code == 2 and "--format transitions needs --domain" in r.output
    r = runner.invoke(app, ["import", "--format", "os", "--domain", "terminal", fixture, "--out", str(tmp_path / "d")])
    assert r.exit_code == 2 and "--domain and --system-prompt go with --format transitions" in r.output
    r = runner.invoke(app, ["import", "--format", "csv", fixture, "--out", str(tmp_path / "d")])
    assert r.exit_code == 2 and "--format must be one of os, android, transitions" in r.output
    r = runner.invoke(app, ["import", "--format", "transitions", "--domain", "nope", fixture, "--out", str(tmp_path / "d")])
    assert r.exit_code == 2 and "unknown domain 'nope'" in r.output
    assert not (tmp_path / "d").exists()
    os.mkfifo(tmp_path / "pipe")   # a hostile tester's: @FILE of a pipe waited forever, of /dev/zero filled memory
    for source in (tmp_path / "pipe", "/dev/zero"):
        r = runner.invoke(app, ["import", "--format", "transitions", "--domain", "terminal", fixture,
                                "--system-prompt", f"@{source}", "--out", str(tmp_path / "e")])
        assert r.exit_code == 2 and "not a regular file" in r.output, r.output


def test_os_and_android_files_holding_one_json_document(tmp_path):
    # A JSONL log written as one (pretty-printed) JSON document is read, not refused line by line.
    ep = {"goal": "Turn Wi-Fi off.", "is_successful": 1,
          "steps": [{"action": {"action_type": "click", "index": 0}, "before_element_list": "screen 0",
                     "after_element_list": "screen 1"}]}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "eps.jsonl").write_text(json.dumps([ep, {**ep, "goal": ""}, ep], indent=2))
    res = import_logs("android", tmp_path / "a", tmp_path / "out-a")
    assert sorted(t.id for t in read_trajectories(res.trajectories_path)) == ["android/eps/1", "android/eps/3"]
    assert res.skipped == [{"episode": "eps/2", "file": "eps.jsonl", "line": 1,
                            "reason": "item 2: field 'goal' (the task instruction) is missing or empty"}]
    step = {"step_num": 1, "action": "pyautogui.click(1, 2)", "a11y_tree": "tag\tname"}
    (tmp_path / "o" / "ep1").mkdir(parents=True)
    (tmp_path / "o" / "ep1" / "traj.jsonl").write_text(json.dumps(step, indent=2))
    (traj,) = read_trajectories(import_logs("os", tmp_path / "o", tmp_path / "out-o").trajectories_path)
    assert [(t.action, t.observation) for t in traj.turns] == [("pyautogui.click(1, 2)", "tag\tname")]
