"""The real terminal: prompts, state across turns, Ctrl-C, waits, and clean shutdown."""

import json
import time

import pytest
from conftest import needs_sandbox

from lwm.domains.terminal import keys
from lwm.domains.terminal.env import TerminalEnv
from lwm.domains.terminal.spec import parse_action
from lwm.envs.base import Task
from lwm.errors import ActionFormatError, EnvironmentClosedError, SandboxError

pytestmark = needs_sandbox


@pytest.fixture
def env():
    e = TerminalEnv()
    e.reset(Task("t"))
    yield e
    e.close()


def last_line(screen: str) -> str:
    return screen.split("\n")[-1]


def test_reset_shows_a_prompt_in_app():
    with TerminalEnv() as env:
        assert env.reset(Task("t")) == "root@sandbox:/app#"


def test_cd_changes_the_prompt(env):
    obs = env.step(keys("cd /tmp\n")).observation
    assert last_line(obs) == "root@sandbox:/tmp#"
    obs = env.step(keys("cd\n")).observation
    assert last_line(obs) == "root@sandbox:~#"


def test_variable_persists_across_turns(env):
    env.step(keys("export GREETING=hello-world\n"))
    obs = env.step(keys("echo $GREETING\n")).observation
    assert obs.split("\n")[-2] == "hello-world"


def test_ctrl_c_stops_sleep(env):
    obs = env.step(keys(("sleep 100\n", 0.3))).observation
    assert last_line(obs) == "root@sandbox:/app# sleep 100"  # still running: no new prompt
    obs = env.step(keys(("C-c", 0.3))).observation
    assert obs.split("\n")[-2:] == ["^C", "root@sandbox:/app#"]


def test_wait_shows_output_that_arrives_later(env):
    obs = env.step(keys(("sleep 1; echo late-output\n", 0.2))).observation
    assert last_line(obs) == "root@sandbox:/app# sleep 1; echo late-output"  # no output, no prompt yet
    obs = env.step(keys(("", 1.5))).observation
    assert obs.split("\n")[-2:] == ["late-output", "root@sandbox:/app#"]


def test_setup_and_seed_files_are_applied_before_first_screen():
    with TerminalEnv() as env:
        first = env.reset(Task("t", files={"/app/a.txt": "alpha\n"}, setup=("mkdir -p d", "echo beta > d/b.txt")))
        assert first == "root@sandbox:/app#"
        obs = env.step(keys("cat a.txt d/b.txt\n")).observation
        assert obs.split("\n")[1:3] == ["alpha", "beta"]


def test_empty_action_means_done(env):
    r = env.step("[]")
    assert r.done and last_line(r.observation) == "root@sandbox:/app#"


def test_long_action_is_capped():
    with TerminalEnv(max_action_seconds=0.5) as env:
        env.reset(Task("t"))
        t0 = time.monotonic()
        r = env.step(keys(("", 5.0)))
        assert time.monotonic() - t0 < 2 and r.info["duration_capped"]
        t0 = time.monotonic()  # typing counts too: many items, many newlines
        r = env.step(json.dumps([{"keystrokes": "\n" * 200, "duration": 0}] * 200))
        assert time.monotonic() - t0 < 3 and r.info["duration_capped"]


def test_agent_cannot_change_what_the_screen_is(env):
    r = env.step(keys("tmux -S /run/tmux/tmux.sock set -g window-size manual \\; resize-window -x 1000 -y 500\n"))
    lines = r.observation.split("\n")
    assert len(lines) <= 24 and max(map(len, lines)) <= 80


def test_killing_tmux_is_a_clean_error():
    env = TerminalEnv()
    env.reset(Task("t"))
    with pytest.raises(SandboxError):
        env.step(keys("tmux -S /run/tmux/tmux.sock kill-server\n"))
    env.close()


def test_a_fork_bomb_shows_the_shells_errors_and_the_episode_goes_on(env):
    # The shell is capped below the controller (RLIMIT_NPROC): the controller still forks
    # its tmux clients, so every step returns the screen, as a real terminal shows it.
    bomb = env.step(keys((":(){ :|:& };:\n", 2.0))).observation
    assert "bash: fork: retry: Resource temporarily unavailable" in bomb
    env.step(keys(("C-c", 0.5)))  # a screen, not an error (the bomb's copies keep printing over it)
    env.step(keys(("echo survived > /app/after.txt\n", 0.5)))  # a builtin: needs no fork
    waited = env.probe("for i in $(seq 50); do test -s /app/after.txt && break; sleep 0.2; done; cat /app/after.txt")
    assert waited == "survived\n"


def test_processes_show_no_host_path(env):
    from conftest import SHOW_PROCESSES, host_paths_in

    env.step(keys((f"{{ {SHOW_PROCESSES}; }} > /tmp/seen.txt 2>&1\n", 1.0)))  # as the agent, in its shell
    seen = env.probe("cat /tmp/seen.txt")
    assert "bash --rcfile /root/.bashrc -i" in seen and "HOME=/root" in seen  # ps and the environments
    assert host_paths_in(seen, env._sandbox) == []


def test_exit_ends_the_episode_with_a_readable_screen(env):
    r = env.step(keys(("exit\n", 0.3)))
    assert "exit" in r.observation and r.done and r.info["shell_exited"]


def test_close_kills_background_processes():
    env = TerminalEnv()
    env.reset(Task("t"))
    env.step(keys("sleep 1000 &\n"))
    uid = env._sandbox.uid
    env.close()
    time.sleep(0.2)
    from conftest import procs_of

    assert procs_of(uid) == []
    with pytest.raises(EnvironmentClosedError):
        env.step(keys("ls\n"))


@pytest.mark.parametrize("bad", ["not json", '{"keys": "ls"}', '[{"keystrokes": 3}]',
                                 '[{"keystrokes": "ls", "duration": -1}]', '"ls"',
                                 '[{"keystrokes": "a\\u0000b"}]', '[{"keystrokes": "\\ud800"}]',
                                 '[{"keystrokes": "ls", "duration": NaN}]', '[{"keystrokes": "ls", "duration": 1e400}]',
                                 json.dumps([{"keystrokes": "x" * 9000}]), json.dumps([{"keystrokes": ""}] * 300)])
def test_malformed_actions_are_rejected(env, bad):
    with pytest.raises(ActionFormatError):
        env.step(bad)


def test_parse_action_forms():
    assert parse_action('[{"keystrokes": "C-c"}]')[0].is_key_name
    assert not parse_action('[{"keystrokes": "Enter the dragon"}]')[0].is_key_name
    assert parse_action('{"keystrokes": "ls\\n", "duration": 1}')[0].duration == 1.0
    assert parse_action(json.dumps([])) == []


def test_trailing_semicolons_are_typed(env):
    obs = env.step(keys("echo a; echo b;\n")).observation
    assert obs.split("\n")[:3] == ["root@sandbox:/app# echo a; echo b;", "a", "b"]
    obs = env.step(keys("find /app -maxdepth 0 -exec echo found {} \\;\n")).observation
    assert obs.split("\n")[-2] == "found /app"


def test_setup_is_finished_and_out_of_history():
    with TerminalEnv() as env:
        env.reset(Task("t", setup=("sleep 0.5", "echo done > /tmp/flag")))
        obs = env.step(keys("cat /tmp/flag; history | wc -l\n")).observation
        assert obs.split("\n")[1:3] == ["done", "1"]


def test_sandbox_is_a_plain_debian(env):
    obs = env.step(keys("ls /usr/local | wc -l; echo $PATH\n")).observation
    assert obs.split("\n")[1:3] == ["0", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]


def test_snapshot_restore_brings_files_back(env):
    env.step(keys("echo one > a.txt\n"))
    snap = env.snapshot()
    env.step(keys("echo two > a.txt; rm -f /root/.bashrc; touch /tmp/later\n"))
    env.restore(snap)
    obs = env.step(keys("cat a.txt; ls /tmp | wc -l; test -f /root/.bashrc && echo rc\n")).observation
    assert obs.split("\n")[-4:-1] == ["one", "0", "rc"]


def test_verify_runs_the_check_beside_the_shell():
    from lwm.envs.base import Check

    task = Task("t", check=Check("cat /app/out.txt", "42", "equals"))
    with TerminalEnv() as env:
        env.reset(task)
        assert env.verify() == 0.0  # no file yet: the probe prints nothing
        env.step(keys("echo 42 > out.txt\n"))
        assert env.verify() == 1.0
        assert "cat /app/out.txt" not in env.screen()  # the probe is not typed into the agent's shell
    with TerminalEnv() as env:
        env.reset(Task("unchecked"))
        assert env.verify() is None


def test_random_policy_is_seeded():
    from lwm.domains.terminal.suite import random_scripts

    assert random_scripts(3, 4) == random_scripts(3, 4)
    assert random_scripts(3, 4) != random_scripts(4, 4)
    assert all(4 <= len(e.actions) <= 7 for e in random_scripts(0, 20))


def test_a_bad_snapshot_changes_nothing(env):
    env.step(keys("echo kept > a.txt\n"))
    with pytest.raises(SandboxError, match="restore failed"):
        env.restore(b"not a tar archive")
    assert env.step(keys("cat a.txt\n")).observation.split("\n")[-2] == "kept"


def test_a_failed_answer_leaves_the_terminal_unusable_not_out_of_step(env):
    env._control.max_reply_bytes = 64  # any screen is larger: the read fails half-way
    with pytest.raises(SandboxError, match="exceeded"):
        env.step(keys("echo hi\n"))
    with pytest.raises(SandboxError, match="unusable after an earlier failure"):
        env.step(keys("echo again\n"))


def test_ground_change_puts_the_echo_of_typed_keys_right():
    from lwm.domains.terminal.spec import ground_change

    prompt = "root@sandbox:/app/a#"
    long = "touch project/src/main.py project/tests/test_main.py project/docs/README.md"
    action = json.dumps([{"keystrokes": long + "\n", "duration": 0.3}])
    echo = f"{prompt} {long}"
    wrapped = f"{echo[:80]}\n{echo[80:]}"
    # a miscopied command that the model wrapped, or cut short, and another directory's prompt
    assert ground_change(f"{echo[:80]}\n{echo[80:-3]}\n{prompt}", prompt, action) == f"{wrapped}\n{prompt}"
    assert ground_change(f"{prompt} touch project/src/main.py\n{prompt}", prompt, action) == f"{wrapped}\n{prompt}"
    assert ground_change(f"{echo}x\n{prompt}", prompt, action) == f"{wrapped}\n{prompt}"   # written unwrapped
    assert ground_change("root@sandbox:/app# ls\nb\nroot@sandbox:/app#", prompt, keys("ls\n")) == \
        f"{prompt} ls\nb\nroot@sandbox:/app#"   # the output and the new prompt stay the model's
    # no Enter: nothing runs, whatever the model thought
    assert ground_change(f"{prompt} rm -rf x\nremoved", prompt, keys("rm -rf x", "C-c")) == \
        f"{prompt} rm -rf x^C\n{prompt}"
    assert ground_change(f"{prompt} echo hi\nhi\n{prompt}", prompt, keys("echo hi")) == f"{prompt} echo hi"
    assert ground_change(f"{prompt} ech\n{prompt}", prompt, keys("echo", "BSpace")) == f"{prompt} ech"
    screen = "\n".join(f"line {i}" for i in range(10)) + f"\n{prompt}"
    untouched = [
        (f"{prompt} ls\n" + "x" * 80 + f"\n{prompt}", prompt, "not json"),
        (f"{prompt} l\n{prompt}", prompt, keys("l", "Tab", "\n")),                # completion
        (f"{prompt} rm x^C\n{prompt} ls\na\n{prompt}", prompt, keys("rm x", "C-c", "ls\n")),  # C-c, then a line
        (f"{prompt} ls /usr/\nbin\n{prompt}", prompt, keys("ls /us\t\n")),       # a tab typed as text
        (f"{prompt} ls\na\n{prompt}", prompt, keys("rm -rf x\x15ls\n")),         # C-u cleared the line
        (f"{prompt} echo 你好\n你好\n{prompt}", prompt, keys("echo 你好 \n")),   # wide characters
        ("> fi\nyes\nroot@sandbox:/app#", "$ if true; then\n>", keys("fi\n")),   # a continuation line
        (">>> 1 + 1\n2\n>>>", ">>>", keys("1 + 1\n")),                           # a program reads the keys
        (f"{prompt} echo $HOME\n/root\n{prompt}", f"{prompt} echo $", keys("HOME\n")),  # typed text ending in $
        ("#\nhi\nhi", "#", keys("hi\n")),                                        # a line that is only #
        (f"{prompt} sleep 1\n{prompt}", f"{prompt} sleep 1", keys("C-c")),   # C-c while a command runs
        (f"{prompt}\n[1]+  Done                    sleep 1\n{prompt}", prompt, keys("\n")),  # a job's notice
        (f"{prompt} bg-done\nls", prompt, keys("ls")),                       # a job printed while typing
        (f"{prompt} done\n{prompt}", prompt, keys("")),                       # a wait: nothing typed
        # the screen scrolled: the change starts on a later line
        ("\n".join([f"{prompt} seq 22", *map(str, range(1, 23)), prompt]), screen, keys("true\nseq 22\n")),
        ("\n".join(["# Title", *("text",) * 22, prompt]), screen, keys("cat notes.md\n")),
    ]
    for change, previous, act in untouched:
        assert ground_change(change, previous, act) == change, change


@needs_sandbox
def test_ground_change_leaves_every_real_change_as_it_is():
    """A perfect answer stays perfect: the change of each real screen comes back unchanged
    (long commands that wrap, a new directory's prompt, a continuation line, completion, a
    background job that prints on the prompt's line, a job's notice after Enter, a tab and
    C-u typed as text, wide characters, output that scrolls the screen, typed text ending in
    $, a program that reads the keys)."""
    from lwm.domains.terminal.spec import ground_change, observed_change

    steps = [keys("mkdir -p a/b && cd a/b\n"), keys("echo " + "word " * 30 + "\n"), keys("echo 'one\n"),
             keys("two'\n"), keys("ls /us", "Tab", "\n"), keys("(sleep 0.5; echo bg-done) &\n"),
             keys("", duration=1.0), keys("sleep 0.2 &\n"), keys("\n", duration=0.5), keys("ls /us\t\n"),
             keys("rm -rf x\x15echo cleared\n"), keys("echo 你好\n"), keys("seq 30\n"), keys("echo $"),
             keys("HOME\n"), keys("echo " + "a" * 40 + " " * 30 + "b" * 20 + "\n"),   # wrapped in spaces, trimmed
             keys("python3 -q\n", duration=1.0), keys("1 + 1\n"), keys("exit()\n")]
    env = TerminalEnv()
    previous, checked = env.reset(Task("t")), 0
    for action in steps:
        observation = env.step(action).observation
        change = observed_change(previous, action, observation)
        if change is not None:
            assert ground_change(change, previous, action) == change, (action, change)
            checked += 1
        previous = observation
    env.close()
    assert checked >= 15


def _typed(text: str, duration: float = 0.5) -> str:
    return json.dumps([{"keystrokes": text, "duration": duration}])


def test_prose_typed_into_bash_is_answered_as_bash_answers_it():
    """Domain.certain on the real shell: every answer it gives is the real screen (lines
    that wrap, scroll, quote), and it leaves alone what it cannot know (lines typed ahead among them)."""
    from lwm import domains

    terminal = domains.get("terminal")
    words = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India", "Juliet", "Kilo"]
    answered = [_typed("Done with the task.\n"), _typed('The text is "otter cherry 407"\n'),
                _typed("It said 'hi there', see *.txt # a comment\n"), _typed("Second: done\n"),
                json.dumps([{"keystrokes": "Split across", "duration": 0.1}, {"keystrokes": "Enter", "duration": 0.4}]),
                *(_typed(f"{w} is a word of the alphabet used over the radio, on a line that wraps once\n")
                  for w in words)]
    left = [_typed("ls\n"), _typed("You can't.\n"), _typed("Quick\n", 0.05), _typed("echo hi\n"), _typed("then\n"),
            _typed("Bang! no\n"), _typed("First line\nSecond line\n"), _typed("Typed without Enter"),
            _typed("C-c"), _typed("PS1='$ '\n"), _typed("Zed\n"), _typed("Results: `ls`\n")]
    env = TerminalEnv()
    start = env.reset(Task("t"))
    system, turns, certain = env.system_prompt(), [], []
    try:
        for action in answered + left:
            want = env.step(action).observation
            got = terminal.certain(action, turns, system, start)
            assert got is None or got == want, (action, got, want)
            if got is not None:
                certain.append(action)
            turns.append((action, want))
    finally:
        env.close()
    assert certain == answered   # after a variable set (PS1 draws the prompt), all is left to the model


def test_prose_is_not_answered_where_bash_may_not_be_reading_it():
    from lwm import domains

    terminal, prose = domains.get("terminal"), _typed("Done.\n")
    assert terminal.certain(prose, [], "", "root@sandbox:/app#") is not None
    for previous in ("root@sandbox:/app# sleep 10", "postgres=#", ">>>", "> ", ""):   # busy, psql, python, a quote
        assert terminal.certain(prose, [], "", previous) is None, previous
    running = [(_typed("sleep 100 &\n"), "root@sandbox:/app# sleep 100 &\n[1] 7\nroot@sandbox:/app#")]
    assert terminal.certain(prose, running, "", "root@sandbox:/app#") is None   # a background job may print


def test_explore_scripts_are_seeded_and_well_formed():
    import pytest

    from lwm.domains.terminal import spec
    from lwm.domains.terminal.explore import explore_scripts

    first, again, other = explore_scripts(3, 20), explore_scripts(3, 20), explore_scripts(4, 20)
    assert [s.actions for s in first] == [s.actions for s in again] != [s.actions for s in other]
    assert len({s.task.name for s in first}) == 20
    for s in first:
        assert 4 <= len(s.actions) <= 10 and s.task.family == "explore" and s.task.check is None
        for action in s.actions:
            (press,) = spec.parse_action(action)  # one well-formed keystroke action per command
            assert press.keystrokes.endswith("\n")
    assert explore_scripts(3, 0) == []
    with pytest.raises(ValueError):
        explore_scripts(3, -1)
