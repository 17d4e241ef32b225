"""The simulator: SimEnv, reward judge, controls, replay cache and the four backends."""

import asyncio

import pytest
from conftest import needs_sandbox

from lwm.domains.terminal import keys
from lwm.envs.base import Check, Task
from lwm.errors import EnvironmentClosedError
from lwm.models.base import FunctionChatModel, Generation
from lwm.sim import CacheMissError, Control, ReplayCache, SimEnv, make_env
from lwm.sim.reward import build_reward_messages, parse_verdict

PROMPT = "You simulate a terminal."


def echo_model(seen: list | None = None):
    """A scripted stand-in for a world model: answers with reasoning and a tagged observation
    naming the last user message's turn, so history handling is visible."""
    def fn(messages):
        if seen is not None:
            seen.append(messages)
        if "reward model" in messages[0]["content"]:
            return 'thinking… {"achieved": true, "reward": 1, "rationale": "the file exists"}'
        turn = messages[-1]["content"].split("\n", 1)[0]
        return f"<think>secret reasoning</think><predicted_observation>obs of {turn}</predicted_observation>"
    return FunctionChatModel(fn, name="scripted-wm")


def test_sim_step_keeps_observations_not_reasoning():
    seen = []
    env = SimEnv("terminal", echo_model(seen), system_prompt=PROMPT, judge_rewards=False)
    assert env.reset(Task("t", instruction="make a file"), initial_observation="root@sandbox:/app#") == \
        "root@sandbox:/app#"
    r1 = env.step(keys("touch a\n"))
    r2 = env.step(keys("ls\n"))
    assert (r1.observation, r2.observation) == ("obs of ### Turn 1", "obs of ### Turn 2")
    assert r2.info["reasoning"] == "secret reasoning" and r2.info["parse_issues"] == []
    # Turn 2's prompt holds turn 1's observation, never its reasoning.
    history = "\n".join(m["content"] for m in seen[1])
    assert "obs of ### Turn 1" in history and "secret reasoning" not in history
    assert seen[1][0] == {"role": "system", "content": PROMPT}
    assert "root@sandbox:/app#" in seen[0][1]["content"] and "make a file" in seen[0][1]["content"]
    prov = env.trajectory.turns[1].provenance
    assert prov.kind == "simulated" and prov.source == "scripted-wm" and prov.sampling["temperature"] == 0.0


def test_fork_is_independent():
    env = SimEnv("terminal", echo_model(), system_prompt=PROMPT, judge_rewards=False)
    env.reset(Task("t"))
    env.step(keys("a\n"))
    twin = env.fork()
    twin.step(keys("b\n"))
    assert len(env.trajectory.turns) == 1 and len(twin.trajectory.turns) == 2
    snap = twin.snapshot()
    twin.step(keys("c\n"))
    twin.restore(snap)
    assert [t.index for t in twin.trajectory.turns] == [1, 2]


def test_episode_end_is_judged_and_truncation_counts():
    env = SimEnv("terminal", echo_model(), system_prompt=PROMPT, max_turns=2, reward="judge")
    env.reset(Task("t", instruction="create a.txt"))
    assert env.step(keys("touch a.txt\n")).done is False
    last = env.step(keys("ls\n"))
    assert last.done and last.truncated and not last.terminated and last.reward == 1.0
    assert env.trajectory.reward == 1.0 and env.trajectory.metadata["reward_rationale"] == "the file exists"
    env.reset(Task("t2", instruction="x"))
    done = env.step("[]")  # the terminal's own "done" action
    assert done.done and done.terminated and not done.truncated
    env.reset(Task("t3", instruction="x", options={"max_turns": 1}))   # the task's own budget, under the ceiling
    assert env.step(keys("ls\n")).truncated


def test_controls_reach_the_prompt_and_provenance():
    seen = []
    env = SimEnv("terminal", echo_model(seen), system_prompt=PROMPT, judge_rewards=False,
                 controls=(Control("error", "disk full"), Control.parse("paginate:10 per page")))
    env.reset(Task("t"))
    env.step(keys("ls\n"))
    assert "disk full" in seen[0][0]["content"] and "10 per page" in seen[0][0]["content"]
    assert env.trajectory.turns[0].provenance.controls == ["error:disk full", "paginate:10 per page"]
    with pytest.raises(ValueError, match="needs a detail"):
        Control("world")
    with pytest.raises(ValueError, match="unknown control"):
        Control.parse("explode")


def test_step_before_reset_is_a_clear_error():
    with pytest.raises(EnvironmentClosedError):
        SimEnv("terminal", echo_model()).step(keys("ls\n"))


@pytest.mark.parametrize("text,reward", [
    ('{"achieved": false, "reward": 0, "rationale": "no file"}', 0.0),
    ('<think>{"reward": 1}</think> final: {"achieved": true}', 1.0),
    ('{"reward": 7}', 1.0),  # clipped into [0, 1]
    ('{"score": 0.5, "rationale": "half"}', 0.5),
])
def test_parse_verdict(text, reward):
    assert parse_verdict(text).reward == reward


def test_unreadable_verdict_is_reported_not_guessed():
    v = parse_verdict("I think it worked.")
    assert v.reward is None and "no JSON verdict" in v.error
    env = SimEnv("terminal", FunctionChatModel(lambda m: "maybe"), system_prompt=PROMPT, reward="judge")
    env.reset(Task("t", instruction="x"))
    env.trajectory.turns = []
    assert env.verify() is None and "reward_error" in env.trajectory.metadata


def test_reward_prompt_cuts_long_observations():
    env = SimEnv("terminal", echo_model(), system_prompt=PROMPT, judge_rewards=False)
    env.reset(Task("t", instruction="x"), initial_observation="y" * 10000)
    messages = build_reward_messages(env.trajectory, max_observation_chars=100)
    assert "characters cut" in messages[1]["content"] and len(messages[1]["content"]) < 1000


def test_cache_keys_separate_every_input(tmp_path):
    cache = ReplayCache(tmp_path / "c.sqlite")
    from lwm.envs.cache import cache_key

    base = ("terminal", "p", [("", "s")], "a")
    keys_ = {cache_key(*base), cache_key("db", *base[1:]), cache_key(*base[:3], "b"),
             cache_key(*base, source="m"), cache_key(*base, source="m", sampling={"temperature": 1})}
    assert len(keys_) == 5
    cache.put(cache_key(*base), "obs", {"kind": "real"})
    cache.put(cache_key(*base), "other", {"kind": "real"})  # first write wins
    assert cache.get(cache_key(*base)) == ("obs", {"kind": "real"}) and len(cache) == 1


def test_make_env_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown backend"):
        make_env("terminal", "dream")
    with pytest.raises(ValueError, match="needs a world model"):
        make_env("terminal", "sim")
    with pytest.raises(ValueError, match="needs a cache"):
        make_env("terminal", "replay")
    with pytest.raises(CacheMissError, match="no recorded start"):
        make_env("terminal", "replay", cache=tmp_path / "c.sqlite").reset(Task("never"))


@needs_sandbox
def test_real_then_replay_then_hybrid(tmp_path):
    cache = tmp_path / "cache.sqlite"
    task = Task("demo", instruction="write 42 to out.txt", check=Check("cat /app/out.txt", "42", "equals"))
    actions = [keys("echo 42 > out.txt\n"), keys("cat out.txt\n")]
    real = make_env("terminal", "real", cache=cache)
    first = real.reset(task)
    real_obs = [real.step(a).observation for a in actions]
    assert real.verify() == 1.0 and real.trajectory.reward == 1.0
    real.close()
    assert real_obs[1].split("\n")[-2] == "42"

    replay = make_env("terminal", "replay", cache=cache)
    assert replay.reset(task) == first
    steps = [replay.step(a) for a in actions]
    assert [s.observation for s in steps] == real_obs
    assert steps[0].info["provenance"]["kind"] == "replayed"
    with pytest.raises(CacheMissError):
        replay.step(keys("ls\n"))  # a new situation

    seen = []
    hybrid = make_env("terminal", "hybrid", cache=cache, model=echo_model(seen))
    assert hybrid.reset(task) == first
    assert hybrid.step(actions[0]).info["route"] == "cache"
    fresh = hybrid.step(keys("echo more >> out.txt; cat out.txt\n"))  # a miss: the real env catches up, then plays
    assert fresh.info["route"] == "real" and fresh.observation.split("\n")[-3:-1] == ["42", "more"]
    assert hybrid.verify() == 0.0  # the real verifier: out.txt is no longer just 42
    hybrid.close()

    replayed = make_env("terminal", "hybrid", cache=cache, model=echo_model())
    replayed.reset(task)
    assert [replayed.step(a).info["route"] for a in actions] == ["cache", "cache"]
    assert replayed.verify() == 1.0 and replayed.real is not None  # the real verdict, after catching up
    replayed.close()

    sim_only = make_env("terminal", "hybrid", cache=cache, model=echo_model(), route="sim-only")
    sim_only.reset(task)
    assert sim_only.step(actions[0]).info["route"] == "cache"
    r = sim_only.step(keys("whoami\n"))
    assert r.info["route"] == "sim" and r.observation == "obs of ### Turn 2"
    assert [t.provenance.kind for t in sim_only.trajectory.turns] == ["replayed", "simulated"]


def test_initial_observation_is_generated_when_the_task_has_none():
    seen = []
    env = SimEnv("terminal", echo_model(seen), system_prompt=PROMPT, judge_rewards=False)
    first = env.reset(Task("t", instruction="list the files"))
    assert first == "obs of ### Start of the episode" and env.trajectory.metadata["initial_observation"] == "generated"
    assert "list the files" in seen[0][1]["content"]
    given = env.reset(Task("t", options={"initial_observation": "root@sandbox:/app#"}))
    assert given == "root@sandbox:/app#" and len(seen) == 1  # no model call


def test_dense_rewards_judge_every_step():
    env = SimEnv("terminal", echo_model(), system_prompt=PROMPT, judge_every_step=True, reward="judge")
    env.reset(Task("t", instruction="create a.txt"), initial_observation="$")
    assert env.step(keys("touch a.txt\n")).reward == 1.0 and env.trajectory.reward == 1.0


@pytest.mark.slow
def test_simulation_with_the_embedded_model():
    from lwm.models import load_model
    from lwm.models.base import SamplingParams

    wm = load_model("embedded")
    env = SimEnv("terminal", wm, sampling=SamplingParams(max_tokens=24, stop=("</predicted_observation>",)),
                 max_turns=2, judge_sampling=SamplingParams(max_tokens=48))
    # a task with a verifier: the default reward is still the trained verdict, not the probe
    env.reset(Task("t", instruction="print hello", check=Check("cat /app/hello.txt", "hello", "equals")),
              initial_observation="root@sandbox:/app#")
    first = env.step(keys("echo hello\n"))
    last = env.step(keys("ls\n"))
    assert isinstance(first.observation, str) and last.done and last.truncated
    assert env.trajectory.turns[0].provenance.source == "SmolLM2-135M-Instruct-Q4_1"
    assert last.info["completion_tokens"] <= 24
    # The default reward model, the trained verdict, gives a probability: never unreadable.
    assert 0.0 <= env.trajectory.reward <= 1.0 and env.trajectory.metadata["reward_source"] == "verdict"


def test_the_trained_verdict_is_the_default_reward_everywhere():
    import dataclasses
    import inspect

    from lwm.eval.agent import AgentEvalConfig
    from lwm.sim.backends import task_env_factory
    from lwm.sim.env import DEFAULT_REWARD
    from lwm.sim.rollout import RolloutConfig
    from lwm.train.rft import RFTConfig
    from lwm.train.rl import RLConfig

    assert DEFAULT_REWARD == "verdict"
    assert inspect.signature(SimEnv).parameters["reward"].default == DEFAULT_REWARD
    assert inspect.signature(task_env_factory).parameters["reward"].default == DEFAULT_REWARD
    for config in (AgentEvalConfig, RolloutConfig, RFTConfig, RLConfig):
        assert {f.name: f.default for f in dataclasses.fields(config)}["reward"] == DEFAULT_REWARD, config


def test_probe_verification_through_the_world_model_is_never_part_of_the_episode():
    """The reward: the world model predicts the screen after the verifier's probe command,
    the command's output is read off it, and the verifier's own comparison decides; the
    probe is not a turn of the episode."""
    seen = []

    def world(messages):
        seen.append(messages)
        command = messages[-1]["content"].split('"keystrokes": "')[1].split("\\n")[0]
        output = "42\n" if command == "cat /app/out.txt" else ""
        return (f"<predicted_observation>root@sandbox:/app# {command}\n{output}root@sandbox:/app# "
                "</predicted_observation>")

    probe = SimEnv("terminal", FunctionChatModel(world), system_prompt=PROMPT, max_turns=1, reward="probe")
    probe.reset(Task("p", instruction="write 42 to out.txt", check=Check("cat /app/out.txt", "42", "equals")),
                initial_observation="root@sandbox:/app#")
    end = probe.step(keys("touch out.txt\n"))
    assert end.reward == 1.0 and probe.trajectory.metadata["reward_source"] == "probe"
    assert probe.trajectory.metadata["probe_observation"] == "42" and len(probe.trajectory.turns) == 1
    assert "Task Instruction" in seen[-1][1]["content"]
    hidden = SimEnv("terminal", FunctionChatModel(world), system_prompt=PROMPT, max_turns=1, show_task=False,
                    reward="probe")
    hidden.reset(Task("q", instruction="write 7", check=Check("cat /app/out.txt", "7")), initial_observation="")
    assert hidden.step(keys("touch out.txt\n")).reward == 0.0 and "Task Instruction" not in seen[-1][1]["content"]
    no_check = SimEnv("terminal", FunctionChatModel(world), system_prompt=PROMPT, reward="probe")
    no_check.reset(Task("r", instruction="anything"), initial_observation="")
    assert no_check.verify() is None and "no verifier" in no_check.trajectory.metadata["reward_error"]


def test_a_group_shares_one_world():
    """Environments sharing a memo: the same situation is one model call and one observation."""
    calls = []

    def world(messages):
        calls.append(1)
        return f"<predicted_observation>answer {len(calls)}</predicted_observation>"

    memo: dict = {}
    group = [SimEnv("terminal", FunctionChatModel(world), system_prompt=PROMPT, judge_rewards=False, memo=memo)
             for _ in range(4)]
    for env in group:
        env.reset(Task("same"), initial_observation="root@sandbox:/app#")
    first = [env.step(keys("ls\n")).observation for env in group]
    assert first == ["answer 1"] * 4 and len(calls) == 1
    assert [env.trajectory.turns[0].observation for env in group] == ["answer 1"] * 4
    diverged = group[0].step(keys("pwd\n")).observation
    same_again = group[1].step(keys("pwd\n"))
    assert diverged == same_again.observation == "answer 2" and same_again.info["memo_hit"] and len(calls) == 2


def test_a_probe_answer_cut_at_max_tokens_decides_nothing():
    from lwm.models.base import Generation

    class Cut(FunctionChatModel):
        async def generate(self, messages, sampling):
            return Generation("<predicted_observation>root@sandbox:/app# cat /app/out.txt\n4", finish_reason="length")

    env = SimEnv("terminal", Cut(lambda m: ""), system_prompt=PROMPT, judge_rewards=False, reward="probe")
    env.reset(Task("p", check=Check("cat /app/out.txt", "42", "equals")), initial_observation="")
    assert env.verify() is None and "cut at max_tokens" in env.trajectory.metadata["reward_error"]


async def test_a_group_asking_at_once_is_one_model_call():
    """Generations of a group step concurrently: the same situation still costs one call;
    a failed call is raised to every waiter and tried again by the next asker."""
    calls = []

    class SlowWorld(FunctionChatModel):
        async def generate(self, messages, sampling):
            calls.append(1)
            await asyncio.sleep(0.05)  # all four ask before the first answer arrives
            if len(calls) == 1:
                raise ConnectionError("the server went away")
            return Generation(text=f"<predicted_observation>answer {len(calls)}</predicted_observation>",
                              finish_reason="stop")

    memo: dict = {}
    group = [SimEnv("terminal", SlowWorld(None), system_prompt=PROMPT, judge_rewards=False, memo=memo)
             for _ in range(4)]
    for env in group:
        await env.areset(Task("same"), initial_observation="root@sandbox:/app#")
    failed = await asyncio.gather(*(env.astep(keys("ls\n")) for env in group), return_exceptions=True)
    assert [type(r) for r in failed] == [ConnectionError] * 4 and len(calls) == 1 and memo == {}
    steps = await asyncio.gather(*(env.astep(keys("ls\n")) for env in group))
    assert [s.observation for s in steps] == ["answer 2"] * 4 and len(calls) == 2
    assert [s.info["memo_hit"] for s in steps] == [False, True, True, True]


def test_sim_in_change_mode_draws_each_screen_from_the_last():
    def fn(messages):
        cmd = messages[-1]["content"].split('"keystrokes": "')[1].split("\\n")[0]
        return f"<predicted_observation>root@sandbox:/app# {cmd}\nout of {cmd}\nroot@sandbox:/app#</predicted_observation>"

    env = SimEnv("terminal", FunctionChatModel(fn, name="change-wm"), judge_rewards=False, prediction="change")
    env.reset(Task("t"), initial_observation="root@sandbox:/app#")
    env.step(keys("ls\n"))
    second = env.step(keys("pwd\n"))
    assert second.observation == ("root@sandbox:/app# ls\nout of ls\nroot@sandbox:/app# pwd\nout of pwd\n"
                                  "root@sandbox:/app#")
    assert second.info["change"] == "root@sandbox:/app# pwd\nout of pwd\nroot@sandbox:/app#"
    with pytest.raises(ValueError, match="prediction mode"):
        SimEnv("terminal", FunctionChatModel(fn), prediction="diff")


@needs_sandbox
def test_a_tool_server_without_a_prompt_starts_from_the_real_server():
    from lwm import domains

    task = domains.get("fs").scripts()[0].task
    env = SimEnv("fs", FunctionChatModel(lambda m: "<predicted_observation>x</predicted_observation>"),
                 judge_rewards=False)
    first = env.reset(task)
    assert "read_text_file" in env.trajectory.system_prompt  # the real server's tool list
    assert env.trajectory.metadata["initial_observation"] == "real" and first
    assert env.step('{"name": "list_allowed_directories", "arguments": {}}').observation == "x"


def test_a_malformed_action_gets_the_real_environments_answer_not_the_models():
    seen = []
    env = SimEnv("terminal", echo_model(seen), system_prompt=PROMPT, judge_rewards=False)
    env.reset(Task("t"), initial_observation="root@sandbox:/app#")
    r = env.step("ls -la")   # a shell line, not the terminal's keystroke list
    assert r.observation == "[invalid action] not JSON (Expecting value)"
    assert r.info["action_error"] == "not JSON (Expecting value)" and seen == []   # the model was not asked
    assert env.trajectory.turns[0].provenance.source == "terminal/refusal"
    assert env.step(keys("ls\n")).observation == "obs of ### Turn 2"   # a well-formed one is predicted


@pytest.mark.parametrize("domain, action, answer", [
    ("db", "", None),   # an empty line is typed into the client like any other
    ("db", "SELECT 1;\x01", "lwm: action not sent to the client: "),
    ("search", "python docs", "Error: invalid tool call: not JSON"),
    ("swe", "grep foo", "<tool_use_error>Malformed tool call: not JSON"),
    ("mcp", '{"arguments": {}}', "[invalid action] 'name' must be"),
    ("os", "this is prose", None),   # import-only: no real answer to copy
    ("terminal", "[" * 100000 + "]" * 100000, "[invalid action] nested too deeply"),   # a hostile tester's
])
def test_each_domain_refuses_as_its_real_environment_does(domain, action, answer):
    from lwm import domains

    refused = domains.get(domain).refusal(action)
    assert (refused is None) if answer is None else refused.observation.startswith(answer)


def test_the_browser_keeps_the_page_and_says_why():
    from lwm import domains

    page = "URL: http://site/\nTitle: Shop\nError: old\n\n[3] link 'Cart'"
    assert domains.get("web").refusal("click 3", page).observation == \
        "URL: http://site/\nTitle: Shop\nError: invalid action: not a function call (invalid syntax)\n\n[3] link 'Cart'"


@needs_sandbox
@pytest.mark.parametrize("domain, action", [("terminal", "echo hi"), ("db", "SELECT 1;\x01"), ("code", "\ud800")])
def test_the_simulator_and_the_real_environment_answer_a_malformed_action_alike(domain, action):
    real = make_env(domain, "real")
    first = real.reset(Task("t"))
    want = real.step(action)
    real.close()
    sim = SimEnv(domain, echo_model(), system_prompt=PROMPT, judge_rewards=False)
    sim.reset(Task("t"), initial_observation=first)
    got = sim.step(action)
    assert got.observation == want.observation and got.info["action_error"] == want.info["action_error"]


def test_a_task_sets_its_own_turn_budget_under_the_runs_ceiling():
    from lwm.envs.episode import Script, ScriptedPolicy, play_episode

    actions = tuple(keys(f"echo {i}\n") for i in range(4))
    for own, ceiling, played in ((2, 5, 2), (3, 1, 1), (None, 3, 3)):
        task = Task("t", options={} if own is None else {"max_turns": own})
        env = SimEnv("terminal", echo_model(), system_prompt=PROMPT, judge_rewards=False)
        traj = play_episode(env, ScriptedPolicy([Script(task, actions)]), task, max_turns=ceiling, verify=False)
        assert len(traj.turns) == played


@pytest.mark.parametrize("domain, answer, well_formed", [
    ("terminal", "grep -c ERROR /app/log.txt > /app/count.txt", True),
    ("terminal", "LANG=C sort -u names.txt", True),
    ("terminal", "```bash\nls -la\n```", True),
    ("terminal", "Create the file /app/out.txt with the word hello", False),   # prose the shell would take
    ("terminal", "Let's list the files", False),                               # an unclosed quote
    ("terminal", "I ran: ls", False),
    ("db", "SELECT name FROM people;", True),
    ("db", "The row is inserted;", False),
    ("db", "SELECT name FROM people; This lists the names.", False),   # prose after the statement
    ("db", "Sure! ```sql\nSELECT 1;\n```", False),                             # prose around the block
    ("db", "```sql\nSELECT 1;\n```\nOutput:\n```\n1\n```", False),               # two blocks, not one
    ("code", "print('done')", True),
    ("code", "Write the text into the file", False),
    ("fs", '{"name": "list_directory", "arguments": {"path": "/app"}}', True),
    ("fs", "list the directory", False),
    ("mcp", '{"name": "list_tables", "arguments": {}}', True),
    ("mcp", "List the tables, then read the first one.", False),
    ("search", '{"name": "web_search", "arguments": {"query": ["json pretty print indent"]}}', True),
    ("search", "Search the web for how to pretty-print JSON", False),
    ("web", "click('23')", True),
    ("web", "Click the login button", False),
    ("swe", '{"name": "bash", "arguments": {"command": "python3 -m unittest -q"}}', True),
    ("swe", "Run the tests and fix the failing one", False),
    ("terminal", "DONE", True),
])
def test_an_answer_is_well_formed_only_when_it_is_one_action_and_nothing_else(domain, answer, well_formed):
    from lwm import domains
    from lwm.sim.policy import well_formed_answer

    assert well_formed_answer(domains.get(domain), answer) is well_formed


def test_the_first_of_several_blocks_is_the_action_not_all_of_them_read_as_one():
    from lwm import domains
    from lwm.sim.policy import action_text, read_action

    cell = "```python\ndef f():\n    return 1\n\nf()\n```\n\nOutput:\n```\n1\n```"   # a small model's habit
    assert action_text(cell) == "def f():\n    return 1\n\nf()"
    terminal = domains.get("terminal")
    assert read_action(terminal, "```bash\nls\n```\n```bash\npwd\n```") == terminal.tool.to_action("ls")
    assert action_text("```python\nprint('```')\n```") == "print('```')"   # a fence mid-line is no fence line


@needs_sandbox
def test_a_cell_that_does_not_compile_is_answered_as_the_real_interpreter_answers_it():
    from lwm import domains

    code = domains.get("code")
    cells = ["x = 1", "x = (", "print(x", "import os\nos._exit(3)", "def f(:\n    pass", "x = 2 +\n", "%time 1",
             "1 + 1", "'\\x00' + b'\0'", "return 1", "eval('1 +')", "raise SyntaxError('no')",
             "compile('x = (', '<cell 14>', 'exec')"]
    real = make_env("code", "real")
    real.reset(Task("t"))
    system, seen, certain = real.system_prompt(), [], 0
    for cell in cells:
        want = real.step(cell).observation
        got = code.certain(cell, seen, system)
        assert got is None or got == want, cell
        assert not code.rules_out(want, cell, system), cell   # a real answer is never ruled out
        certain += got is not None
        seen.append((cell, want))
    real.close()
    assert certain == 5   # the five cells that do not compile, numbered across the restart


def test_a_syntax_error_the_model_writes_for_a_cell_that_compiles_is_replaced_by_the_trivial_guess():
    invented = '<predicted_observation>[error]\n  File "<cell 1>", line 1\n    s = 20\nSyntaxError: invalid syntax' \
        '</predicted_observation>'
    env = SimEnv("code", FunctionChatModel(lambda m: invented), judge_rewards=False)
    env.reset(Task("t"), initial_observation="")
    r = env.step("s = 20")
    assert r.observation == "(no output)" and r.info["parse_issues"] == ["ruled out"]
    assert env.trajectory.metadata["parse_issues"] == {"ruled out": 1}
    # a cell that compiles only in part (``return`` outside a function): the error may be real
    assert env.step("return 1").observation.startswith("[error]") and env.parse_issues == {"ruled out": 1}


def test_the_simulator_answers_prose_typed_into_bash_without_the_model():
    seen = []
    env = SimEnv("terminal", echo_model(seen), judge_rewards=False)
    env.reset(Task("t"), initial_observation="root@sandbox:/app#")   # the first screen: what the line is typed on
    r = env.step('[{"keystrokes": "The file is ready.\\n", "duration": 0.5}]')
    assert r.observation == ("root@sandbox:/app# The file is ready.\nbash: The: command not found\n"
                             "root@sandbox:/app#")
    assert seen == [] and env.trajectory.turns[0].provenance.source == "terminal/certain"
    env.step('[{"keystrokes": "ls\\n", "duration": 0.5}]')   # a command: the model answers
    assert len(seen) == 1


def test_the_simulator_answers_sql_that_runs_nothing_or_does_not_parse_without_the_model():
    from lwm.domains.db import spec

    seen = []
    env = SimEnv("db", echo_model(seen), system_prompt=spec.system_prompt("sqlite", ("CREATE TABLE customers (id, name)",)),
                 judge_rewards=False)
    env.reset(Task("t"), initial_observation="")
    assert env.step("SELECT name FROM customers").observation == ""  # unfinished: the shell waits
    assert env.step("WHERE id = 3;").observation == "obs of ### Turn 2"  # now it runs: the model answers
    r = env.step("Here is the query:\nSELECT 1;")
    assert r.observation.startswith('Parse error: near "Here": syntax error\n')
    assert env.step("SELECT * FROM nope;").observation == "Parse error: no such table: nope"  # the setup's schema
    assert len(seen) == 1 and [t.provenance.source for t in env.trajectory.turns] == ["db/certain", "scripted-wm",
                                                                                       "db/certain", "db/certain"]


def test_the_simulator_answers_a_cell_that_does_not_compile_without_the_model():
    seen = []
    env = SimEnv("code", echo_model(seen), judge_rewards=False)
    env.reset(Task("t"), initial_observation="(no output)")
    assert env.step("x = 1").observation == "obs of ### Turn 1"
    r = env.step("print(x")
    assert r.observation.startswith('[error]\n  File "<cell 2>", line 1\n    print(x\n')
    assert len(seen) == 1 and env.trajectory.turns[1].provenance.source == "code/certain"
    other = SimEnv("code", echo_model(seen), system_prompt="You simulate a persistent Python 2.7 interpreter.",
                   judge_rewards=False)   # another version's messages: the model answers
    other.reset(Task("t"), initial_observation="(no output)")
    assert other.step("print(x").observation == "obs of ### Turn 1" and len(seen) == 2


@needs_sandbox
def test_an_episode_that_ran_nothing_keeps_the_reward_of_its_real_start(monkeypatch, tmp_path):
    monkeypatch.setenv("LWM_HOME", str(tmp_path))  # a fresh cache of starts
    task = Task("t", instruction="Add Tim to people.", setup=("CREATE TABLE people (name TEXT)",),
                check=Check("SELECT count(*) AS n FROM people WHERE name = 'Tim';", "1", "regex"),
                options={"engine": "sqlite"})
    seen = []
    env = SimEnv("db", echo_model(seen), reward="probe", real_start=True)
    env.reset(task)
    assert env.trajectory.metadata["reward_at_start"] == 0.0  # the real verifier on the untouched database
    env.step("Sure! Here is the query:")        # prose: unfinished, nothing runs
    env.step("INSERT INTO people VALUES ('Tim');")  # joined to the prose: a parse error, nothing runs
    env.step("\x01")                              # refused as malformed
    assert env.verify() == 0.0 and env.trajectory.metadata["reward_source"] == "unchanged" and seen == []
    ran = SimEnv("db", echo_model(seen), reward="probe", real_start=True)
    ran.reset(task)
    ran.step("INSERT INTO people VALUES ('Tim');")  # it runs: the model answers, the probe is asked
    ran.verify()
    assert ran.trajectory.metadata["reward_source"] == "probe" and len(seen) == 2
