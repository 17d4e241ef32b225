"""lwm train rl: TRL's GRPOTrainer really instantiated and stepped, on the embedded
SmolLM2-135M, with episodes played against a world model (a stand-in server on loopback:
the world model's quality is not what these tests are about) and real task verifiers."""

from __future__ import annotations

import json

import pytest
from conftest import needs_sandbox
from servers import chat_stub, completion

pytest.importorskip("trl")

from lwm.envs.cache import ReplayCache  # noqa: E402
from lwm.errors import LwmError, RunMismatchError  # noqa: E402
from lwm.train.rl import AgentRollout, RLConfig, agent_tasks, train_rl  # noqa: E402

SCREEN = "root@sandbox:/app# ls\nnotes.txt\nroot@sandbox:/app#"


def world(body):
    return completion(f"<predicted_observation>{SCREEN}</predicted_observation>")


@needs_sandbox
@pytest.mark.slow
def test_grpo_steps_in_the_simulator_save_export_and_resume(tmp_path):
    with chat_stub(world) as (url, log):
        config = RLConfig(out=tmp_path / "rl", domains=("terminal",), tasks=2, num_generations=2, prompts_per_step=1,
                          max_steps=1, max_new_tokens=8, max_turns=2, save_steps=1, world_model="stand-in",
                          base_url=url, reward="probe")
        res = train_rl(config, show_progress=False)
    assert res.steps == 1 and res.adapter.is_dir() and res.adapter_gguf is not None and res.adapter_gguf.is_file()
    episodes = [json.loads(line) for line in (tmp_path / "rl" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 2 and len({e["task"] for e in episodes}) == 1  # one group: one task
    assert all(e["verdict"] in (0.0, 1.0) and 0.0 <= e["format"] <= 1.0 for e in episodes)
    # each observation is the stand-in world model's, or bash's own answer to a line of prose (Domain.certain)
    assert all(o == SCREEN or o.endswith(": command not found\nroot@sandbox:/app#")
               for e in episodes for o in e["observations"])
    ran = [e for e in episodes if SCREEN in e["observations"]]
    assert all(e["probe_observation"] is not None for e in ran)  # the probe's prediction is kept
    assert bool(log) or not ran, "the world model was asked"
    assert not any("Task Instruction" in json.dumps(body["messages"]) for body in log)  # the goal is not shown
    metrics = json.loads((tmp_path / "rl" / "metrics.json").read_text())
    assert metrics["steps"] == 1 and metrics["adapter_gguf"].endswith("adapter.gguf")
    with pytest.raises(FileExistsError, match="--resume"):
        train_rl(config, show_progress=False)
    with pytest.raises(RunMismatchError, match="num_generations"):
        train_rl(RLConfig(**{**config.__dict__, "num_generations": 3, "resume": True}), show_progress=False)


@needs_sandbox
@pytest.mark.slow
def test_environment_tokens_are_masked_out_of_the_loss(tmp_path):
    """The completion the trainer scores: the policy's tokens (mask 1) and, between its
    answers, the chat template's rendering of each observation (mask 0)."""
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from lwm.train.sft import _load_base

    with chat_stub(world) as (url, _):
        config = RLConfig(out=tmp_path, domains=("terminal",), tasks=1, prompts_per_step=1, max_turns=3, max_new_tokens=6,
                          world_model="stand-in", base_url=url)
        tasks = agent_tasks(config)
        rollout = AgentRollout(config, tasks)
        model, tokenizer = _load_base("embedded")
        trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                              args=GRPOConfig(output_dir=str(tmp_path / "t"), use_cpu=True, num_generations=2,
                                              per_device_train_batch_size=2, report_to=[]),
                              train_dataset=__import__("datasets").Dataset.from_list(tasks),
                              processing_class=tokenizer, peft_config=LoraConfig(r=4, target_modules="all-linear"),
                              rollout_func=rollout)
        out = rollout([tasks[0]["prompt"]] * 2, trainer)
    for ids, mask in zip(out["completion_ids"], out["env_mask"]):
        assert len(ids) == len(mask) and mask[0] == 1
        env_text = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
        own_text = tokenizer.decode([t for t, m in zip(ids, mask) if m == 1])
        assert SCREEN not in own_text
        if 0 in mask:  # the policy acted before its last turn: the observation was shown to it
            assert f"Observation:\n{SCREEN}" in env_text and "assistant" in env_text
    assert set(out["env_reward"]) <= {0.0, 1.0} and len(out["format_reward"]) == 2


class VLLMStandIn:
    """A stand-in for TRL's ``VLLMGeneration`` (the real one needs a GPU, vLLM and NCCL):
    its ``generate`` contract (token ids in, completion ids out), answering ``ls``."""

    def __init__(self, tokenizer):
        self.tokenizer, self.max_completion_length, self.calls = tokenizer, 999, []

    def generate(self, prompts, images, num_generations):
        self.calls.append({"prompts": prompts, "max_tokens": self.max_completion_length, "n": num_generations})
        answer = self.tokenizer("ls", add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        return prompts, [answer for _ in prompts], None, None


@needs_sandbox
@pytest.mark.slow
def test_the_agent_objective_generates_with_trls_vllm(tmp_path):
    """With ``use_vllm`` the rollout asks TRL's vLLM generation turn by turn, each answer
    within ``max_new_tokens`` (TRL's own limit is restored), on the episode so far."""
    from types import SimpleNamespace

    from lwm.train.sft import _load_base

    _, tokenizer = _load_base("embedded")
    vllm = VLLMStandIn(tokenizer)
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=vllm, processing_class=tokenizer,
                              accelerator=SimpleNamespace(num_processes=1), state=SimpleNamespace(global_step=0),
                              is_world_process_zero=lambda: True)
    with chat_stub(world) as (url, _):
        config = RLConfig(out=tmp_path, domains=("terminal",), tasks=1, prompts_per_step=1, max_turns=2,
                          max_new_tokens=7, world_model="stand-in", base_url=url)
        tasks = agent_tasks(config)
        out = AgentRollout(config, tasks)([tasks[0]["prompt"]] * 2, trainer)
    assert [c["max_tokens"] for c in vllm.calls] == [7, 7] and vllm.max_completion_length == 999
    assert [len(c["prompts"]) for c in vllm.calls] == [2, 2] and all(c["n"] == 1 for c in vllm.calls)
    first, second = vllm.calls[0]["prompts"][0], vllm.calls[1]["prompts"][0]
    assert second[: len(first)] == first and SCREEN in tokenizer.decode(second[len(first):])  # the episode so far
    assert tokenizer.decode([t for t, m in zip(out["completion_ids"][0], out["env_mask"][0]) if m]).count("ls") == 2
    trainer.accelerator.num_processes = 2
    with chat_stub(world) as (url, _), pytest.raises(ValueError, match="one process"):
        AgentRollout(RLConfig(**{**config.__dict__, "base_url": url}), tasks)([tasks[0]["prompt"]] * 2, trainer)


class Answers(VLLMStandIn):
    """The stand-in, answering each prompt of a call with the next of ``answers``."""

    def __init__(self, tokenizer, answers):
        super().__init__(tokenizer)
        self.answers = answers

    def generate(self, prompts, images, num_generations):
        ids = [self.tokenizer(a, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
               for a in self.answers[: len(prompts)]]
        return prompts, ids, None, None


@needs_sandbox
@pytest.mark.slow
def test_an_episode_that_breaks_its_sandbox_is_a_failure_and_the_others_go_on(tmp_path):
    """On the real backend, an action that breaks its sandbox (``tmux kill-server``) ends
    its episode as a failure, recorded as broken; the group's other episodes are played and
    judged as usual."""
    from types import SimpleNamespace

    from lwm.train.sft import _load_base

    _, tokenizer = _load_base("embedded")
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=Answers(tokenizer, ["tmux kill-server", "ls"]),
                              processing_class=tokenizer, accelerator=SimpleNamespace(num_processes=1),
                              state=SimpleNamespace(global_step=0), is_world_process_zero=lambda: True)
    config = RLConfig(out=tmp_path, domains=("terminal",), tasks=1, prompts_per_step=1, max_turns=1,
                      max_new_tokens=12, backend="real")
    tasks = agent_tasks(config)
    out = AgentRollout(config, tasks, log=tmp_path / "episodes.jsonl")([tasks[0]["prompt"]] * 2, trainer)
    assert out["env_reward"] == [0.0, 0.0] and len(out["completion_ids"]) == 2
    broken, played = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert "SandboxError" in broken["broken"] and broken["verdict"] == 0.0 and broken["observations"] == []
    assert played["broken"] is None and played["observations"] and played["verdict"] == 0.0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="num_generations must be at least 2"):
        RLConfig(out="x", num_generations=1)
    for lr in (float("inf"), float("nan"), 0.0, -1e-4, 10.0):   # an infinite one trained NaN weights
        with pytest.raises(ValueError, match=r"lr must be a number in \(0, 1\]"):
            RLConfig(out="x", lr=lr)
    with pytest.raises(ValueError, match="needs --data"):
        RLConfig(out="x", objective="fidelity")
    with pytest.raises(ValueError, match="unknown objective"):
        RLConfig(out="x", objective="vibes")
    with pytest.raises(KeyError, match="no task families for domain 'web'"):
        RLConfig(out="x", domains=("web",))
    with pytest.raises(KeyError, match="unknown domain 'nowhere'"):
        RLConfig(out="x", domains=("nowhere",))
    with pytest.raises(ValueError, match="unknown backend 'dream'"):
        RLConfig(out="x", backend="dream")
    with pytest.raises(ValueError, match="the hybrid backend needs --cache"):
        RLConfig(out="x", backend="hybrid")
    with pytest.raises(ValueError, match="is not a file: replay plays only what a cache holds"):
        RLConfig(out="x", backend="replay", cache="/nonexistent/cache.sqlite")
    with pytest.raises(ValueError, match="1 tasks in all cannot fill a step of 2 prompts"):
        RLConfig(out="x", domains=("terminal", "terminal"), tasks=1)  # one domain, named twice
    with pytest.raises(ValueError, match="unknown prediction mode 'diff'"):
        RLConfig(out="x", prediction="diff")
    with pytest.raises(ValueError, match="not real"):
        RLConfig(out="x", backend="real", compact_tools=True)
    with pytest.raises(ValueError, match="the fidelity objective trains on the data's own"):
        RLConfig(out="x", objective="fidelity", data="d", prediction="full")
    with pytest.raises(ValueError, match="extra_body .* world model server"):
        RLConfig(out="x", extra_body={"top_k": 20})   # the in-process world model takes none


def test_the_world_model_is_asked_as_told_and_the_run_records_it():
    told = RLConfig(out="x", tasks=2, prompts_per_step=1, base_url="http://127.0.0.1:9/v1", world_model="served",
                    prediction="change", compact_tools=True)
    options = AgentRollout(told, agent_tasks(told)).factories["terminal"].options
    assert options["prediction"] == "change" and options["compact_tools"] is True
    assert told.identity()["prediction"] == "change"
    # not told: the model's own, and not recorded (runs from before the settings resume)
    assert "prediction" not in RLConfig(out="x", tasks=2, prompts_per_step=1).identity()
    # the server's extra fields go with every world-model request, and are part of the run
    extra = RLConfig(out="x", tasks=2, prompts_per_step=1, base_url="http://127.0.0.1:9/v1", world_model="served",
                     extra_body={"top_k": 20})
    assert AgentRollout(extra, agent_tasks(extra)).factories["terminal"].sampling.extra_body == {"top_k": 20}
    assert extra.identity()["extra_body"] == {"top_k": 20} and "extra_body" not in told.identity()


def test_bad_settings_are_refused_before_a_model_loads_or_a_sandbox_starts(tmp_path, monkeypatch):
    import lwm.sim.starts
    import lwm.train.sft

    def never(*_, **__):
        raise AssertionError("reached")

    monkeypatch.setattr(lwm.train.sft, "_load_base", never)
    monkeypatch.setattr(lwm.sim.starts, "real_start", never)
    # swe's one-action train families hold about a thousand distinct tasks: counted, not started
    with pytest.raises(ValueError, match="the train families of swe gave too few distinct tasks for --tasks 5000"):
        train_rl(RLConfig(out=tmp_path / "run", domains=("swe",), backend="real", tasks=5000), show_progress=False)
    (tmp_path / "file").write_text("")
    with pytest.raises(FileExistsError, match="is a file"):
        train_rl(RLConfig(out=tmp_path / "file"), show_progress=False)
    (tmp_path / "notes.txt").write_text("not a database, not a cache\n")
    with pytest.raises(LwmError, match="notes.txt: not a replay cache"):
        train_rl(RLConfig(out=tmp_path / "run", backend="replay", cache=tmp_path / "notes.txt"), show_progress=False)
    ReplayCache(tmp_path / "empty.sqlite").close()
    with pytest.raises(ValueError, match="empty.sqlite holds no observation: replay has nothing to play"):
        train_rl(RLConfig(out=tmp_path / "run", backend="replay", cache=tmp_path / "empty.sqlite"), show_progress=False)


def test_a_run_that_could_not_take_a_step_is_refused_before_it_starts():
    with pytest.raises(ValueError, match="cannot fill a step of 2 prompts"):
        RLConfig(out="x", tasks=1)
    with pytest.raises(ValueError, match="unknown reward source 'bogus'"):
        RLConfig(out="x", reward="bogus")


def test_training_tasks_from_a_task_file(tmp_path):
    from lwm.domains.tasks import task_set, write_task_file
    from lwm.envs.cache import ReplayCache
    from lwm.errors import DataNotFoundError, RowFormatError

    tasks, cache = tmp_path / "tasks.jsonl", tmp_path / "cache.sqlite"
    ReplayCache(cache).close()  # replay: prompts without a real first screen, no sandbox needed here
    write_task_file(tasks, [(d, t, s) for d in ("db", "code") for t, s in task_set(d, "train", 2, seed=3)])
    every = agent_tasks(RLConfig(out=tmp_path / "a", tasks_file=tasks, backend="replay", cache=cache))
    assert [t["domain"] for t in every] == ["db", "db", "code", "code"]
    assert json.loads(every[0]["task"])["name"] == task_set("db", "train", 2, seed=3)[0][0].name
    assert [t["domain"] for t in agent_tasks(RLConfig(out=tmp_path / "b", tasks_file=tasks, domains=("code",),
                                                      backend="replay", cache=cache))] == ["code", "code"]
    with pytest.raises(ValueError, match=r"holds no task of terminal \(its domains: code, db\)"):
        agent_tasks(RLConfig(out=tmp_path / "c", tasks_file=tasks, domains=("terminal",), backend="replay",
                             cache=cache))
    with pytest.raises(DataNotFoundError, match="no task file"):
        RLConfig(out=tmp_path / "d", tasks_file=tmp_path / "missing.jsonl")
    tasks.write_text(tasks.read_text() + "{oops\n")
    with pytest.raises(RowFormatError, match=r"tasks.jsonl:5: not valid JSON"):
        train_rl(RLConfig(out=tmp_path / "e", tasks_file=tasks, backend="replay", cache=cache))  # no model loaded
    assert not (tmp_path / "e").exists()  # a refused run leaves no folder behind


def test_fidelity_rewards_compare_what_the_model_should_write():
    """In a dataset built with --predict change the reference is the change, its volatile
    spans moved with it."""
    from lwm.train.rl import _written

    screen = "root@sandbox:/app# date\nTue 10:01\nroot@sandbox:/app# date\nTue 10:02\nroot@sandbox:/app#"
    change = "root@sandbox:/app# date\nTue 10:02\nroot@sandbox:/app#"
    shift = len(screen) - len(change)
    example = {"observation": screen, "volatile": [[24, 33], [shift + 24, shift + 33]],
               "completion": [{"role": "assistant", "content": f"<predicted_observation>\n{change}\n</predicted_observation>"}]}
    assert _written(example) == {"observation": change, "volatile": "[[24, 33]]"}
    full = {**example, "completion": [{"role": "assistant",
                                       "content": f"<predicted_observation>\n{screen}\n</predicted_observation>"}]}
    assert _written(full) == {"observation": screen, "volatile": json.dumps(example["volatile"])}


def test_a_world_model_server_that_cannot_be_reached_is_said_before_training(tmp_path):
    from lwm.errors import ModelUnavailableError

    config = RLConfig(out=tmp_path / "rl", domains=("db",), backend="sim", base_url="http://127.0.0.1:9/v1",
                      world_model="foo", max_steps=1, num_generations=2, prompts_per_step=1, tasks=2)
    with pytest.raises(ModelUnavailableError, match="cannot reach http://127.0.0.1:9/v1"):
        train_rl(config, show_progress=False)
    assert not (tmp_path / "rl").exists()
