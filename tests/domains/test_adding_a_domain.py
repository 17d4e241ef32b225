"""docs/adding-a-domain.md, proven: a small domain (a key-value store that runs inside the
sandbox) registered through the public API alone, then collected, evaluated and simulated."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import pytest
from conftest import needs_sandbox

from lwm import domains
from lwm.data.collect import CollectConfig, collect
from lwm.domains import AgentTool, Domain
from lwm.envs import Check, StepResult, Task
from lwm.envs.controller import ControlledEnvironment, Controller
from lwm.envs.episode import Script
from lwm.envs.sandbox import Sandbox
from lwm.errors import ActionFormatError, EnvironmentClosedError, SandboxError
from lwm.eval.baselines import load_predictor
from lwm.eval.runner import EvalConfig, evaluate, load_rows
from lwm.models.base import FunctionChatModel
from lwm.sim import make_env

NAME = "kv"

# 1. The world-model side: system prompt, action parser, reference guess.
SYSTEM_PROMPT = ("You are a Key-Value Store World Model. Actions are SET <key> <value>, GET <key>, DEL <key> or "
                 "KEYS; predict the store's answer exactly: OK, the value, (nil), the number deleted or the sorted "
                 "keys one per line. Write it inside <predicted_observation></predicted_observation>.")


def parse_action(text: str) -> list[str]:
    words = text.strip().split(" ", 2)
    arity = {"SET": 3, "GET": 2, "DEL": 2, "KEYS": 1}
    if not words or words[0] not in arity or len(words) != arity[words[0]]:
        raise ActionFormatError(NAME, text, "expected SET <key> <value>, GET <key>, DEL <key> or KEYS")
    return words


def trivial_observation(action: str, previous: str = "", system: str = "") -> str:
    return "OK" if action.startswith("SET ") else ""


# 2. The real environment: a store inside the sandbox, behind a controller.
CONTROLLER = """\
import json, sys
store = {}
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    op, *args = json.loads(line)["action"]
    if op == "SET":
        store[args[0]] = args[1]; out = "OK"
    elif op == "GET":
        out = store.get(args[0], "(nil)")
    elif op == "DEL":
        out = str(int(store.pop(args[0], None) is not None))
    else:
        out = "\\n".join(sorted(store))
    print(json.dumps({"observation": out}), flush=True)
"""


class KvEnv(ControlledEnvironment):
    domain = NAME

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def reset(self, task: Task | None = None) -> str:
        self.close()
        self.task = task or Task("empty")
        self._sandbox = Sandbox()
        (self._sandbox.ctl_dir / "ctl.py").write_text(CONTROLLER)
        self._control = Controller(self._sandbox, ["python3", "-I", "/run/lwm/ctl.py"], "the store")
        if self._control.read(time.monotonic() + 15) != {"ready": True}:
            raise SandboxError("the store did not start")
        for action in self.task.setup:
            self._control.request({"action": parse_action(action)}, timeout=5)
        return ""

    def step(self, action: str) -> StepResult:
        if self._control is None:
            raise EnvironmentClosedError("call reset() before step()")
        try:
            words = parse_action(action)
        except ActionFormatError as e:
            return StepResult(f"ERR {e.reason}", info={"action_error": e.reason})
        return StepResult(self._control.request({"action": words}, timeout=5)["observation"])


# 3. The bundled suite: scripted episodes, one with a verifier.
SUITE = SimpleNamespace(
    SCRIPTS=[
        Script(Task("kv-set-get", family="basics", instruction="Store colour=blue.",
                    check=Check("GET colour", "blue", "equals")),
               ("SET colour blue", "GET colour", "KEYS")),
        Script(Task("kv-delete", family="basics", setup=("SET a 1", "SET b 2")),
               ("KEYS", "DEL a", "GET a", "DEL a", "oops")),
    ],
    EXTENDED=frozenset(),
)

KV = Domain(
    name=NAME,
    description="a key-value store; actions are SET/GET/DEL/KEYS commands",
    system_prompt=lambda: SYSTEM_PROMPT,
    parse_action=parse_action,
    action_format="One command: SET <key> <value>, GET <key>, DEL <key> or KEYS.",
    action_lang="text",
    tool=AgentTool("run_command", "Run one store command, e.g. SET colour blue, and return the answer."),
    trivial_observation=trivial_observation,
    environment=KvEnv,
    suite=lambda: SUITE,
)


@pytest.fixture
def kv():
    domains.register(KV, replace=True)
    yield KV
    domains.unregister("kv")


def test_a_registered_domain_is_known_everywhere(kv):
    assert domains.get("kv") is kv and "kv" in domains.names() and "kv" in domains.names(runnable=True)
    assert domains.find("kv") is kv and domains.find("nowhere") is None
    with pytest.raises(ValueError, match="exists"):
        domains.register(kv)  # no silent replacement
    with pytest.raises(ValueError, match="exactly one of environment and import_only"):
        Domain("bad", "", lambda: "", parse_action, "", AgentTool("t", "d"))


@needs_sandbox
def test_collect_eval_and_simulate_a_new_domain(kv, tmp_path):
    res = collect(CollectConfig(out=tmp_path / "data", domain="kv", workers=2), show_progress=False)
    assert res.trajectories == 4 and not res.failed
    trajs = [json.loads(line) for line in (tmp_path / "data" / "trajectories.jsonl").read_text().splitlines()]
    first = next(t for t in trajs if t["id"] == "kv/kv-set-get/run0")
    assert [t["observation"] for t in first["turns"]] == ["OK", "blue", "colour"] and first["reward"] == 1.0
    second = next(t for t in trajs if t["id"] == "kv/kv-delete/run0")
    assert [t["observation"] for t in second["turns"]] == ["a\nb", "1", "(nil)", "0",
                                                           "ERR expected SET <key> <value>, GET <key>, DEL <key> "
                                                           "or KEYS"]

    rows = load_rows(tmp_path / "data")
    assert len(rows) == 8 and "```text\nSET colour blue\n```" in rows[0].prompt[0]
    summary = asyncio.run(evaluate(EvalConfig(out=tmp_path / "eval"), load_predictor("baseline:trivial"), rows=rows,
                                   show_progress=False))
    assert summary["rows"] == 8 and summary["failed"] == 0
    assert summary["domains"]["kv"]["exact"] == 12.5  # the one SET of the rows is guessed "OK"

    store: dict[str, str] = {}

    def world(messages):  # a world model that knows the store's rules (the designed test seam)
        op, *args = messages[-1]["content"].split("```text\n", 1)[1].split("\n", 1)[0].split(" ", 2)
        if op == "SET":
            store[args[0]] = args[1]
            return "<predicted_observation>OK</predicted_observation>"
        return f"<predicted_observation>{store.get(args[0], '(nil)')}</predicted_observation>"

    env = make_env("kv", "sim", model=FunctionChatModel(world, "kv-oracle"), judge_rewards=False)
    env.reset(Task("sim"), initial_observation="")
    assert env.step("SET x 7").observation == "OK" and env.step("GET x").observation == "7"
    assert env.trajectory.turns[1].provenance.kind == "simulated"


def test_bad_specs_are_refused_where_they_are_made():
    with pytest.raises(ValueError, match="lower-case letters"):
        Domain("../escape", "", lambda: "", parse_action, "", AgentTool("t", "d"), import_only="x")
    with pytest.raises(ValueError, match="system_prompt must be callable"):
        Domain("kv2", "", SYSTEM_PROMPT, parse_action, "", AgentTool("t", "d"), import_only="x")


def test_an_installed_package_registers_a_domain_by_entry_point(tmp_path, monkeypatch):
    """What `[project.entry-points."lwm.domains"]` gives: every process (the CLI's too)
    finds the domain on first use."""
    from importlib.metadata import EntryPoint

    (tmp_path / "kv_plugin.py").write_text(
        "from lwm.domains import AgentTool, Domain\n"
        "DOMAIN = Domain('kvplug', 'a plugin', lambda **s: 'P', str, 'text', AgentTool('run', 'run it'),"
        " import_only='a test plugin')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(domains, "_entry_points",
                        lambda: {"kvplug": EntryPoint("kvplug", "kv_plugin:DOMAIN", "lwm.domains")})
    try:
        assert domains.get("kvplug").description == "a plugin" and "kvplug" in domains.names()
    finally:
        domains.unregister("kvplug")
