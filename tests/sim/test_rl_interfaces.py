"""The interfaces RL trainers consume: Gymnasium, TRL's environment_factory, OpenEnv."""

import asyncio
import contextlib
import inspect

import pytest
from conftest import needs_sandbox
from servers import serve_app

from lwm.domains.terminal import keys
from lwm.envs.base import Check, Task
from lwm.errors import EnvironmentClosedError
from lwm.models.base import FunctionChatModel

gym = pytest.importorskip("gymnasium")

TASKS = [Task("alpha", instruction="create alpha.txt"), Task("beta", instruction="create beta.txt"),
         Task("gamma", instruction="create gamma.txt", options={"initial_observation": "root@sandbox:/app# "})]


def echo_model(seen: list | None = None, achieved: bool = True):
    """A scripted world model (the pattern of test_sim): the observation names the turn and
    the last action's first line, so isolation between episodes is visible."""
    def fn(messages):
        if seen is not None:
            seen.append(messages)
        if "reward model" in messages[0]["content"]:
            return '{"achieved": %s, "reward": %d, "rationale": "scripted"}' % (str(achieved).lower(), achieved)
        turn = messages[-1]["content"].split("\n", 1)[0]
        return f"<think>hidden</think><predicted_observation>obs of {turn}</predicted_observation>"
    return FunctionChatModel(fn, name="scripted-wm")


# -- Gymnasium --------------------------------------------------------------------------
def test_gym_env_passes_the_checker():
    from gymnasium.utils.env_checker import check_env

    import lwm.sim.gym  # noqa: F401  (registers the ids)

    env = gym.make("lwm/Terminal-v0", model=echo_model(), tasks=TASKS, max_turns=4, render_mode="ansi", reward="judge")
    check_env(env.unwrapped)
    env.close()
    # The module:id form imports lwm.sim.gym itself.
    generic = gym.make("lwm.sim.gym:lwm/World-v0", domain="db", model=echo_model())
    assert generic.unwrapped.domain == "db" and generic.unwrapped.backend == "sim"
    generic.close()


def test_a_task_without_a_verifier_is_judged_by_the_trained_verdict():
    from lwm.sim.gym import WorldEnv

    env = WorldEnv("terminal", "sim", model=echo_model(), tasks=TASKS[:1], max_turns=1)
    env.reset()
    _, reward, _, truncated, info = env.step(keys("touch alpha.txt\n"))
    assert truncated and 0.0 <= info["verdict"] <= 1.0 and reward == info["verdict"]
    assert env.episode.env.trajectory.metadata["reward_source"] == "verdict"
    env.close()


def test_gym_text_spaces_cover_unicode():
    from lwm.sim.gym import UnicodeText

    space = UnicodeText(10)
    assert space.contains("") and space.contains("日本語 ✓ 🙂\n\t") and space.contains("x" * 10)
    assert not space.contains("x" * 11) and not space.contains(b"bytes") and not space.contains("\ud800")
    assert isinstance(space, gym.spaces.Text) and space.contains(space.sample())


def test_gym_full_episode_on_sim():
    from lwm.sim.gym import WorldEnv

    env = WorldEnv("terminal", "sim", model=echo_model(), tasks=TASKS, max_turns=5, render_mode="ansi", reward="judge")
    obs, info = env.reset(seed=7)
    again, info_again = env.reset(seed=7)
    assert (obs, info["task"]) == (again, info_again["task"])  # seeded task draw
    obs, info = env.reset(options={"task": "gamma"})
    assert obs == "root@sandbox:/app# " and info["instruction"] == "create gamma.txt"
    o1, r1, term1, trunc1, i1 = env.step(keys("touch gamma.txt\n"))
    assert (o1, r1, term1, trunc1) == ("obs of ### Turn 1", 0.0, False, False)
    assert i1["provenance"]["kind"] == "simulated" and i1["reasoning"] == "hidden" and i1["turn"] == 1
    o2, r2, term2, trunc2, i2 = env.step("[]")  # the terminal's "done"
    assert (r2, term2, trunc2) == (1.0, True, False) and i2["verdict"] == 1.0
    assert ">>> []" in env.render()
    with pytest.raises(EnvironmentClosedError, match="episode has ended"):
        env.step(keys("ls\n"))
    env.reset(options={"task": {"name": "adhoc", "instruction": "x"}})
    with pytest.raises(TypeError, match="action is a string"):
        env.step(42)
    env.close()
    env.close()  # twice is fine


def test_gym_truncation_and_a_failed_verdict():
    from lwm.sim.gym import WorldEnv

    env = WorldEnv("terminal", "sim", model=echo_model(achieved=False), tasks=TASKS[:1], max_turns=2, reward="judge")
    env.reset()
    assert env.step(keys("ls\n"))[1:4] == (0.0, False, False)
    _, reward, terminated, truncated, info = env.step(keys("ls\n"))
    assert (reward, terminated, truncated) == (0.0, False, True) and info["verdict"] == 0.0
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"level": 3})
    with pytest.raises(ValueError, match="needs a world model"):
        WorldEnv("terminal", "sim")


@needs_sandbox
def test_gym_episode_on_the_real_terminal():
    from lwm.sim.gym import WorldEnv

    task = Task("answer", instruction="write 42 to out.txt", check=Check("cat /app/out.txt", "42", "equals"))
    env = WorldEnv("terminal", "real", tasks=[task])
    try:
        obs, info = env.reset(seed=0)
        assert info["task"] == "answer" and obs in env.observation_space
        obs, reward, terminated, truncated, info = env.step(keys(("echo 42 > out.txt\n", 0.5)))
        assert (reward, terminated, truncated) == (0.0, False, False) and info["provenance"]["kind"] == "real"
        _, reward, terminated, truncated, info = env.step("[]")
        assert (reward, terminated, truncated) == (1.0, True, False)
    finally:
        env.close()


# -- TRL environment_factory ------------------------------------------------------------
def trl_tools(env) -> dict:
    """The tools TRL's GRPOTrainer finds on an environment (trl/trainer/grpo_trainer.py)."""
    return {name: getattr(env, name) for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


def test_trl_factory_makes_fresh_independent_instances():
    from lwm.sim.trl import environment_factory

    factory = environment_factory("terminal", "sim", model=echo_model(), tasks=TASKS, max_turns=3, reward="judge")
    a, b = factory(), factory()
    assert a is not b and type(a) is type(b) and type(a).__name__ == "TerminalWorldEnv"
    assert inspect.signature(factory).parameters == {} and callable(a.reset) and callable(a.get_reward)
    tools = trl_tools(a)
    assert list(tools) == ["run_keystrokes"]  # one tool; close, act … are not tools
    assert "keystrokes" in inspect.getdoc(tools["run_keystrokes"]) and "Args:" in tools["run_keystrokes"].__doc__
    prompt = [{"role": "user", "content": "Solve the task."}]
    # alpha has no initial observation: the world model writes one
    assert a.reset(prompt=prompt, task="alpha") == "\n\nTask: create alpha.txt\n\nInitial observation:\nobs of ### Start of the episode"
    assert b.reset(prompt=prompt, task="gamma") == \
        "\n\nTask: create gamma.txt\n\nInitial observation:\nroot@sandbox:/app# "
    assert a.run_keystrokes(keys("touch alpha.txt\n")) == "obs of ### Turn 1"
    assert len(a.trajectory.turns) == 1 and len(b.trajectory.turns) == 0  # no shared state
    assert a.trajectory.task == "create alpha.txt" and b.trajectory.task == "create gamma.txt"


def test_trl_reset_and_step_semantics():
    from lwm.sim.trl import environment_factory

    factory = environment_factory("terminal", "sim", model=echo_model(), tasks=TASKS, max_turns=3, reward="judge")
    env = factory()
    row = {"prompt": [{"role": "user", "content": "Please create alpha.txt now."}]}
    env.reset(**row)
    first_task = env.episode.task.name
    for _ in range(3):  # the same prompt (a GRPO group) always plays the same task
        other = factory()
        other.reset(**row)
        assert other.episode.task.name == first_task
    # The instruction already in the prompt is not repeated; an `instruction` column makes a task.
    assert env.reset(prompt=[{"role": "user", "content": "create alpha.txt"}], task="alpha") == "\n\nInitial observation:\nobs of ### Start of the episode"
    assert env.reset(prompt="p", instruction="list files") == "\n\nTask: list files\n\nInitial observation:\nobs of ### Start of the episode"
    assert env.episode.task.instruction == "list files"
    # Ending the episode sets the reward; further calls raise (TRL feeds the error back).
    env.reset(prompt="p", task="beta")
    assert env.reward == 0.0 and not env.done
    assert env.run_keystrokes("[]").endswith("[episode ended]") and env.done and env.reward == 1.0
    with pytest.raises(ValueError, match="episode has ended"):
        env.run_keystrokes(keys("ls\n"))
    assert env.get_reward() == 1.0
    # A policy that stops without ending the episode still gets the verdict on its state.
    env.reset(prompt="p", task="beta")
    env.run_keystrokes(keys("ls\n"))
    assert env.get_reward() == 1.0
    # Reused (pooled) instances start over on reset.
    env.reset(prompt="p", task="alpha")
    assert (env.reward, env.done, len(env.trajectory.turns)) == (0.0, False, 0)
    with pytest.raises(KeyError, match="no task named"):
        env.reset(prompt="p", task="nope")


def test_trl_tool_schema_matches_transformers():
    pytest.importorskip("transformers")
    from transformers.utils import get_json_schema

    from lwm.sim.trl import tool_env_class

    for domain, tool in [("terminal", "run_keystrokes"), ("db", "run_sql"), ("code", "run_cell"), ("mcp", "call_tool")]:
        cls = tool_env_class(domain)
        assert list(trl_tools(cls.__new__(cls))) == [tool]
        schema = get_json_schema(getattr(cls, tool))["function"]
        assert schema["name"] == tool and schema["parameters"]["required"] == ["action"]
        assert schema["parameters"]["properties"]["action"]["type"] == "string"


# -- OpenEnv server ---------------------------------------------------------------------
@contextlib.contextmanager
def running_server(**app_kwargs):
    """A real OpenEnv HTTP/WebSocket server (uvicorn, in a thread) on a free port."""
    pytest.importorskip("uvicorn")
    pytest.importorskip("openenv")
    from lwm.sim.openenv_server import make_app

    app = make_app("terminal", "sim", model=echo_model(), tasks=TASKS, **app_kwargs, reward="judge")
    with serve_app(app) as url:
        yield url


@pytest.fixture(scope="module")
def server():
    with running_server(max_sessions=8, max_turns=4) as url:
        yield url


def test_openenv_concurrent_sessions_are_isolated(server):
    from lwm.sim.openenv_server import WorldAction, WorldClient

    async def episode(task: str, actions: list[str]):
        async with WorldClient(server) as client:
            first = await client.reset(task=task)
            results = [await client.step(WorldAction(text=a)) for a in actions]
            return first, results, await client.state()

    async def both():
        # commands (ls): the world model answers them (a name that is no command is bash's error)
        return await asyncio.gather(episode("alpha", [keys("ls a\n"), keys("ls b\n"), keys("ls c\n")]),
                                    episode("gamma", [keys("ls x\n")]))

    (first_a, steps_a, state_a), (first_g, steps_g, state_g) = asyncio.run(both())
    assert first_a.observation.task == "alpha" and first_a.observation.instruction == "create alpha.txt"
    assert first_g.observation.text == "root@sandbox:/app# "
    assert [r.observation.text for r in steps_a] == [f"obs of ### Turn {i}" for i in (1, 2, 3)]
    assert [r.observation.text for r in steps_g] == ["obs of ### Turn 1"]  # not turn 4: its own history
    assert (state_a.step_count, state_g.step_count) == (3, 1) and (state_a.task, state_g.task) == ("alpha", "gamma")
    assert len(state_a.trajectory["turns"]) == 3 and len(state_g.trajectory["turns"]) == 1
    assert state_a.episode_id != state_g.episode_id
    assert steps_a[0].observation.info["provenance"]["kind"] == "simulated" and steps_a[0].reward == 0.0


def test_openenv_errors_are_answers_not_crashes(server):
    import httpx

    from lwm.sim.openenv_server import WorldAction, WorldClient

    with WorldClient(server).sync() as client:
        with pytest.raises(RuntimeError, match="reset"):  # step before reset
            client.step(WorldAction(text=keys("ls\n")))
        with pytest.raises(RuntimeError, match="no task named"):
            client.reset(task="nope")
        client.reset(task="beta")
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):  # not an action of this server
            client.step({"keystrokes": "ls"})
        ok = client.step(WorldAction(text=keys("ls\n")))  # the session survived
        assert ok.observation.text == "obs of ### Turn 1"
        end = client.step(WorldAction(text="[]"))
        assert end.done and end.reward == 1.0 and client.state().reward == 1.0
        with pytest.raises(RuntimeError, match="episode has ended"):
            client.step(WorldAction(text=keys("ls\n")))
        assert client.reset(seed=3).observation.task in {"alpha", "beta", "gamma"}
    assert httpx.get(f"{server}/health").json()["status"] == "healthy"
    one_shot = httpx.post(f"{server}/reset", json={"task": "alpha"}).json()
    assert one_shot["observation"]["task"] == "alpha" and one_shot["done"] is False
    refused = httpx.post(f"{server}/step", json={"action": {"text": "[]"}})
    assert refused.status_code == 409 and "/ws" in refused.json()["detail"]
    assert httpx.post(f"{server}/reset", json={"task": "nope"}).status_code == 400


def test_openenv_refuses_sessions_beyond_capacity():
    import json

    from websockets.sync.client import connect

    from lwm.sim.openenv_server import WorldClient

    with running_server(max_sessions=1) as url, WorldClient(url).sync() as first:
        assert first.reset(task="alpha").observation.task == "alpha"
        with connect(url.replace("http", "ws") + "/ws") as second:  # the server answers, then closes
            answer = json.loads(second.recv(timeout=10))
        assert answer["type"] == "error" and answer["data"]["code"] == "CAPACITY_REACHED"
        assert first.step({"text": keys("ls\n")}).observation.text == "obs of ### Turn 1"  # unaffected


def test_openenv_app_rejects_bad_arguments_early():
    pytest.importorskip("openenv")
    from lwm.sim.openenv_server import make_app

    with pytest.raises(ValueError, match="needs a world model"):
        make_app("terminal", "sim")
    with pytest.raises(ValueError, match="unknown backend"):
        make_app("terminal", "dream", model=echo_model())
    with pytest.raises(KeyError, match="unknown domain"):
        make_app("nowhere", "sim", model=echo_model())
