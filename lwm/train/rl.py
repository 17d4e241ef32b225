"""``lwm train rl``: reinforcement learning with TRL's ``GRPOTrainer``, two objectives.

``agent``: a policy learns to do tasks by acting in an environment — the simulator (the
world model as the environment, the trained verdict of :mod:`lwm.verdict` as the reward
model by default), the real sandboxed environment, ``hybrid`` or ``replay``. The tasks are the train
split of the domains' task families (:mod:`lwm.domains.tasks`; held-out families are never
trained on). Every generation of a GRPO group plays the group's task from the same
start (the real environment's first screen, :func:`lwm.sim.starts.real_start`) against
a world that shares one memo, so identical situations get identical observations and cost
one model call. Episodes are multi-turn: the embedded model's chat template has no tool
calls (TRL refuses ``environment_factory`` for it), so this module drives them through
TRL's ``rollout_func``: the policy generates with the weights being trained, each answer
is read as an action (:func:`lwm.sim.policy.read_action`, the reading ``lwm agent eval``
uses), the environment answers, and its tokens join the completion masked out of the loss
(``env_mask``). Reward: the episode's verdict (1 achieved, else 0) plus ``format_weight``
× the share of the policy's answers that were one well-formed action and nothing else.

``fidelity``: the world model itself learns to predict real observations — GRPO on the
rows of a dataset made by ``lwm data build`` (the world-model messages as prompts), with a
rule reward: the mean of masked line F1 and edit similarity between the predicted and the
real observation (:func:`lwm.metrics.fidelity`, the domain's comparator), plus
``format_weight`` when the answer is inside the observation tag. This is reinforcement
learning for simulation fidelity, as the Qwen-AgentWorld release describes for its LWM.

Both train a PEFT LoRA adapter on ``model`` (``embedded``: SmolLM2-135M-Instruct
dequantized; ``embedded-warmup``: the same with the shipped world-model warm-up merged in,
the seed's "warm-up as the policy's starting point"; or a Hugging Face folder), save
checkpoints (``--resume`` continues), and write ``adapter/`` and ``adapter.gguf`` (for
llama.cpp: ``lwm agent eval --policy <base> --policy-adapter out/adapter.gguf``).
``episodes.jsonl`` records every training episode (agent objective) and ``rollouts.jsonl``
the seconds each step's rollouts spent generating, in the environment and on the verdict
(the rest of a step, in ``trainer_state.json``'s ``step_time``, is the update).

On GPUs the same command runs under ``accelerate launch -m lwm.cli train rl …``; with
``--vllm-server-base-url`` TRL's vLLM server generates for both objectives (``trl
vllm-serve``, docs/training.md): for ``agent``, each turn's answers of the active episodes
are one request to it (:meth:`AgentRollout._generate`), with the weights TRL synced before
the step.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from lwm import domains
from lwm.envs.base import Task
from lwm.envs.cache import ReplayCache
from lwm.errors import DataNotFoundError, RowFormatError, RunMismatchError, SandboxError
from lwm.jsonl import JsonlAppender, read_json, write_atomic
from lwm.loop import run_sync
from lwm.models import WORLD_MODEL, ModelSpec, check_reachable, prompt_cache_mb
from lwm.progress import library_progress
from lwm.schema import Trajectory
from lwm.sim.backends import backend_spec, sim_request, task_env_factory
from lwm.sim.env import DEFAULT_REWARD, DEFAULT_SAMPLING
from lwm.train.records import RUN_FILE, check_lr

OBJECTIVES = ("agent", "fidelity")


@dataclass
class RLConfig:
    """Settings of ``lwm train rl``.

    Attributes:
        out: run directory: checkpoints, ``adapter/``, ``adapter.gguf``, ``episodes.jsonl``,
            ``metrics.json``.
        objective: ``agent`` (a policy learns tasks in an environment) or ``fidelity`` (the
            world model learns to predict real observations).
        model: the model trained (a LoRA adapter on it): ``embedded``, ``embedded-warmup``
            (the world-model warm-up merged in) or a Hugging Face folder.
        domains: ``agent``: domains whose train task families are played (empty:
            ``terminal``; with ``tasks_file``, every domain of the file).
        tasks: ``agent``: distinct tasks per domain in the training set.
        tasks_file: ``agent``: train on the tasks of this task file (``lwm agent tasks``
            writes one; :func:`lwm.domains.tasks.read_task_file`) instead of the train
            families; ``tasks`` and ``max_task_steps`` then do not apply.
        max_task_steps: ``agent``: only task families a competent agent solves in at most
            this many actions.
        backend: ``agent``: ``sim`` (the world model), ``real``, ``hybrid`` or ``replay``.
        world_model: ``agent`` on ``sim``/``hybrid``: the world model (``embedded-warmup``,
            ``embedded``, a ``.gguf`` file, or the name served at ``base_url``).
        base_url: the world model's OpenAI-compatible endpoint.
        api_key: bearer token for ``base_url``.
        extra_body: ``agent``: fields added to each request to the world model's server
            (``base_url``), as ``lwm eval`` and ``lwm rollout`` send them (e.g. ``{"top_k": 20}``).
        reward: ``agent`` on ``sim``: ``verdict`` (the trained reward model's P(achieved),
            1 from 0.5 on), ``probe`` (the world model predicts the verifier's probe),
            ``judge`` or ``auto`` (the probe for tasks with a verifier, else the verdict).
        show_task: ``agent`` on ``sim``: show the world model the agent's instruction. Off by
            default: in closed loop a world model that knows the goal predicts it, and the
            policy is paid for prose (docs/results.md, stage 2).
        prediction: ``agent`` on ``sim``: what the world model is asked to write, ``full`` or
            ``change`` (:mod:`lwm.prediction`); default: the model's own (the shipped adapter's
            record says ``change``), ``full`` for a model behind ``base_url``.
        compact_tools: ``agent`` on ``sim``: tool lists as one-line signatures in the world
            model's system prompt; default: the model's own (yes for the shipped adapter), no
            behind ``base_url``.
        cache: ``hybrid``/``replay``: the replay cache file.
        max_turns: ``agent``: actions per episode at most.
        data: ``fidelity``: a dataset directory of ``lwm data build``.
        format_weight: weight of the format reward (the verdict or fidelity weighs 1).
        num_generations: completions per prompt (a GRPO group).
        prompts_per_step: prompts (tasks) per optimizer step.
        max_steps: optimizer steps in all (on resume, the new total).
        max_new_tokens: tokens the trained model writes per answer at most.
        temperature: sampling temperature of the trained model.
        lr: learning rate (linear decay).
        lora_r: LoRA rank (alpha = 2 × rank).
        beta: KL coefficient against the starting model (0: none, no reference model kept).
        save_steps: checkpoint every N steps (and at the end).
        seed: seed of the task set, the data order, LoRA initialization and sampling.
        resume: continue from the last checkpoint in ``out``.
        vllm_server_base_url: on GPUs: generate with TRL's vLLM server (``trl vllm-serve
            --model …``) at this URL instead of in-process; TRL pushes the trained weights
            to it before each step's rollouts. ``agent``: every answer of an episode (the
            rollout asks the server turn by turn); one training process.
    """

    out: Path
    objective: str = "agent"
    model: str = "embedded"
    domains: tuple[str, ...] = ()
    tasks: int = 64
    tasks_file: Path | None = None
    max_task_steps: int = 1
    backend: str = "sim"
    world_model: str = WORLD_MODEL
    base_url: str | None = None
    api_key: str = "EMPTY"
    extra_body: dict[str, Any] = field(default_factory=dict)
    reward: str = DEFAULT_REWARD
    show_task: bool = False
    prediction: str | None = None
    compact_tools: bool | None = None
    cache: Path | None = None
    max_turns: int = 2
    data: Path | None = None
    format_weight: float = 0.2
    num_generations: int = 4
    prompts_per_step: int = 2
    max_steps: int = 100
    max_new_tokens: int = 48
    temperature: float = 1.0
    lr: float = 1e-4
    lora_r: int = 16
    beta: float = 0.0
    save_steps: int = 25
    seed: int = 0
    resume: bool = False
    vllm_server_base_url: str | None = None

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.domains = tuple(dict.fromkeys(self.domains))  # a domain named twice is trained on once
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r} ({' or '.join(OBJECTIVES)})")
        if self.objective == "fidelity" and self.data is None:
            raise ValueError("the fidelity objective needs --data (a dataset directory of lwm data build)")
        for name in ("num_generations", "prompts_per_step", "max_steps", "max_new_tokens", "max_turns", "tasks",
                     "save_steps", "lora_r"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.num_generations < 2:
            raise ValueError("GRPO compares the completions of a group: num_generations must be at least 2")
        check_lr(self.lr)
        if not self.domains and not self.tasks_file:
            self.domains = ("terminal",)
        if self.tasks_file and not Path(self.tasks_file).is_file():
            raise DataNotFoundError(f"no task file {self.tasks_file}")
        if self.objective == "agent" and not self.tasks_file and self.tasks * len(self.domains) < self.prompts_per_step:
            raise ValueError(f"{self.tasks * len(self.domains)} tasks in all cannot fill a step of "
                             f"{self.prompts_per_step} prompts: raise --tasks or lower --prompts-per-step")
        from lwm.sim.env import REWARD_SOURCES

        if self.reward not in REWARD_SOURCES:
            raise ValueError(f"unknown reward source {self.reward!r} ({', '.join(REWARD_SOURCES)})")
        if self.objective != "agent" and (self.prediction is not None or self.compact_tools is not None):
            raise ValueError("prediction and compact_tools (--predict, --compact-tools) say how the agent objective "
                             "asks its world model; the fidelity objective trains on the data's own")
        if self.extra_body and (self.objective != "agent" or not backend_spec(self.backend).simulates
                                or self.base_url is None):
            raise ValueError("extra_body (--extra-body) goes to the agent objective's world model server "
                             "(--base-url, backend sim or hybrid)")
        if self.objective == "agent":  # refused here, before train_rl loads any model
            sim_request(self.backend, self.prediction, self.compact_tools)
            if backend_spec(self.backend).replays and self.cache is None:
                raise ValueError(f"the {self.backend} backend needs --cache (a replay cache file)")
            if backend_spec(self.backend).cache_only and not Path(self.cache).is_file():
                raise ValueError(f"--cache {self.cache} is not a file: replay plays only what a cache holds")
            for domain in () if self.tasks_file else self.domains:
                _train_families(domain, self.max_task_steps)

    def identity(self) -> dict[str, Any]:
        """What a resume must keep (everything but the run's length and its resume flag)."""
        d = {k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
             for k, v in asdict(self).items()}
        for k in ("out", "max_steps", "resume", "save_steps", "vllm_server_base_url", "api_key"):
            d.pop(k)
        for k in ("prediction", "compact_tools", "extra_body"):  # when not given: runs from before resume
            if d[k] is None or d[k] == {}:
                d.pop(k)
        if self.tasks_file:  # the file's content, not its name, makes the task set
            from lwm.domains.tasks import task_file_digest

            for k in ("tasks", "max_task_steps"):
                d.pop(k)
            d["tasks_file"] = task_file_digest(self.tasks_file)
        return d


@dataclass
class RLResult:
    """What a run produced.

    Attributes:
        out: the run directory.
        adapter: the final LoRA adapter folder.
        adapter_gguf: the adapter for llama.cpp (``None`` when export failed: the reason is
            in ``export_error``).
        steps: optimizer steps done in all.
        seconds: wall time of this invocation.
        mean_reward_first, mean_reward_last: the mean reward of the first and last logged steps.
        resumed_from: the checkpoint continued from.
    """

    out: Path
    adapter: Path
    adapter_gguf: Path | None
    steps: int
    seconds: float
    mean_reward_first: float | None
    mean_reward_last: float | None
    resumed_from: Path | None = None
    export_error: str | None = None
    log_history: list[dict] = field(default_factory=list)


# ------------------------------------------------------------------------------- agent


def _train_families(domain: str, max_steps: int) -> list:
    """The train families of ``domain`` of at most ``max_steps`` actions (KeyError: none for the domain)."""
    from lwm.domains.tasks import families

    pool = [f for f in families(domain, "train") if f.steps <= max_steps]
    if not pool:
        raise ValueError(f"no train task family of {domain} takes at most {max_steps} actions")
    return pool


def _distinct_tasks(pool: list, config: RLConfig) -> Iterator[Task]:
    """The distinct tasks of ``pool``, families in turn, until ``100 × tasks`` draws, or until
    64 draws per family in a row gave only tasks already drawn (the families are exhausted)."""
    from lwm.domains.tasks import task_key

    seen: set[str] = set()
    repeats = 0
    for seed in range(100 * config.tasks):
        task, _ = pool[seed % len(pool)].generate(config.seed * 100_003 + seed // len(pool))
        if task_key(task) in seen:
            repeats += 1
            if repeats > 64 * len(pool):  # the families are exhausted
                return
            continue
        repeats = 0
        seen.add(task_key(task))
        yield task


def agent_tasks(config: RLConfig) -> list[dict[str, Any]]:
    """The training tasks, each with its prompt (the policy's first messages: the
    instruction and the real first screen): ``config.tasks`` distinct tasks per domain from
    the train split of its families (those of at most ``max_task_steps`` actions), or the
    tasks of ``config.tasks_file``. Two tasks the policy cannot tell apart (the same
    prompt) count once.

    Raises:
        KeyError: a domain without task families.
        ValueError: too few distinct tasks; no task of the chosen domains in the task file,
            or one of a held-out family.
        RowFormatError, DataNotFoundError: a damaged, empty or missing task file.
    """
    from lwm.domains.tasks import read_task_file, refuse_heldout
    from lwm.sim.policy import agent_messages
    from lwm.sim.starts import real_start

    out, seen_prompts = [], set()

    def add(domain: str, task: Any) -> bool:
        start = None if backend_spec(config.backend).cache_only else real_start(domain, task)
        prompt = agent_messages(domains.get(domain), task, start.initial_observation if start else "", [], [])
        key = json.dumps(prompt, sort_keys=True)
        if key in seen_prompts:
            return False
        seen_prompts.add(key)
        out.append({"prompt": prompt, "domain": domain, "task": json.dumps(task.to_dict())})
        return True

    if config.tasks_file:
        listed = read_task_file(config.tasks_file)
        chosen = [item for item in listed if not config.domains or item[0] in config.domains]
        refuse_heldout(chosen, config.tasks_file)
        for domain, task, _ in chosen:
            add(domain, task)
        if not out:
            raise ValueError(f"{config.tasks_file} holds no task of {', '.join(config.domains)} "
                             f"(its domains: {', '.join(sorted({d for d, _, _ in listed}))})")
        if len(out) < config.prompts_per_step:
            raise ValueError(f"{config.tasks_file} holds {len(out)} distinct tasks of the chosen domains: too few "
                             f"for a step of {config.prompts_per_step} prompts")
        return out
    for domain in config.domains:
        pool = _train_families(domain, config.max_task_steps)
        too_few = f"the train families of {domain} gave too few distinct tasks for --tasks {config.tasks}"
        if sum(1 for _ in itertools.islice(_distinct_tasks(pool, config), config.tasks)) < config.tasks:
            raise ValueError(too_few)  # counted before any is started for real
        taken = 0
        for task in _distinct_tasks(pool, config):
            taken += add(domain, task)
            if taken == config.tasks:
                break
        if taken < config.tasks:
            raise ValueError(too_few)
    return out


class AgentRollout:
    """TRL's ``rollout_func`` for the agent objective: one episode per prompt (see the
    module docstring). ``prompts`` arrive in groups of ``num_generations`` equal prompts.

    Args:
        config: the run's settings.
        tasks: :func:`agent_tasks`.
        log: where each episode is appended (``episodes.jsonl``), or ``None``.
    """

    def __init__(self, config: RLConfig, tasks: list[dict[str, Any]], log: Path | None = None) -> None:
        self.config = config
        self.by_prompt = {json.dumps(t["prompt"], sort_keys=True): (t["domain"], Task.from_dict(json.loads(t["task"])))
                          for t in tasks}
        self.log = log
        self.calls = 0
        world = ModelSpec(config.world_model, base_url=config.base_url, api_key=config.api_key,
                          prompt_cache_mb=prompt_cache_mb(config.prompts_per_step * config.num_generations)) \
            if backend_spec(config.backend).simulates else None  # a step's episodes are simulated at once
        self.factories = {
            d: task_env_factory(d, config.backend, world, reward=config.reward, show_task=config.show_task,
                                max_turns=config.max_turns, prediction=config.prediction,
                                compact_tools=config.compact_tools, cache=str(config.cache) if config.cache else None,
                                sampling=replace(DEFAULT_SAMPLING, extra_body=dict(config.extra_body)))
            for d in dict.fromkeys(t["domain"] for t in tasks)}

    def __call__(self, prompts: list[list[dict]], trainer: Any) -> dict[str, list]:
        import torch
        from trl.models.utils import unwrap_model_for_generation

        from lwm.sim.policy import read_action, well_formed_answer

        tokenizer = trainer.processing_class
        memos: dict[str, dict] = {}  # one world per group: the same situation, the same observation
        episodes = []
        clock = {"generation": 0.0, "environment": 0.0, "reward": 0.0}
        t = time.monotonic()
        for messages in prompts:
            key = json.dumps(messages, sort_keys=True)
            domain, task = self.by_prompt[key]
            factory = self.factories[domain]
            if backend_spec(factory.backend).all_simulated:
                factory = replace(factory, options={**factory.options, "memo": memos.setdefault(key, {})})
            env = factory()
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            episodes.append({"domain": domain, "task": task, "env": env, "messages": list(messages),
                             "prompt_ids": ids, "completion": [], "mask": [], "said": [], "observations": [],
                             "formats": [], "active": True})
        resets = _each([e["env"] for e in episodes], "reset", [(e["task"],) for e in episodes])
        if failed := next((r for r in resets if isinstance(r, SandboxError)), None):
            for e in episodes:  # no action played yet: the machine's fault, not the policy's
                e["env"].close()
            raise failed
        eos = tokenizer.eos_token_id
        clock["environment"] += time.monotonic() - t
        for turn in range(self.config.max_turns):
            active = [e for e in episodes if e["active"]]
            if not active:
                break
            t = time.monotonic()
            texts = self._generate(trainer, tokenizer, active, torch, unwrap_model_for_generation)
            clock["generation"] += time.monotonic() - t
            t = time.monotonic()
            acting = []
            for e, (gen_ids, text) in zip(active, texts):
                e["completion"] += gen_ids
                e["mask"] += [1] * len(gen_ids)
                e["said"].append(text)
                spec = domains.get(e["domain"])
                e["formats"].append(well_formed_answer(spec, text))
                action = read_action(spec, text)
                if action is None:
                    e["active"] = False
                else:
                    acting.append((e, text, gen_ids, action))
            results = _each([e["env"] for e, *_ in acting], "step", [(action,) for *_, action in acting])
            for (e, text, gen_ids, _), result in zip(acting, results):
                if isinstance(result, SandboxError):  # the action broke its sandbox: a failure, recorded
                    e["broken"], e["active"] = f"{type(result).__name__}: {result}", False
                    continue
                e["observations"].append(result.observation)
                if result.done or turn == e["task"].turn_budget(self.config.max_turns) - 1:
                    e["active"] = False
                    continue
                env_ids = self._observation_tokens(tokenizer, e, text, ended=bool(gen_ids) and gen_ids[-1] == eos)
                e["completion"] += env_ids
                e["mask"] += [0] * len(env_ids)
            clock["environment"] += time.monotonic() - t
        t = time.monotonic()
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": None, "env_mask": [], "env_reward": [],
               "format_reward": []}
        try:
            judged = [e for e in episodes if "broken" not in e]
            verdicts = dict(zip(map(id, judged), _each([e["env"] for e in judged], "verify", [() for _ in judged])))
            trajectories = [getattr(e["env"], "trajectory", None) for e in episodes]  # closing drops them
        finally:
            for e in episodes:
                e["env"].close()
        for e, traj in zip(episodes, trajectories):
            if isinstance(verdict := verdicts.get(id(e), 0.0), SandboxError):  # broken by the verdict's probe
                e["broken"], verdict = f"{type(verdict).__name__}: {verdict}", 0.0
            fmt = sum(e["formats"]) / len(e["formats"]) if e["formats"] else 0.0
            self._record(trainer, e, verdict, fmt, traj)
            reward = 1.0 if (verdict or 0.0) >= 0.5 else 0.0
            if not e["completion"]:  # the trainer needs at least one token
                e["completion"], e["mask"] = [eos], [1]
            out["prompt_ids"].append(e["prompt_ids"])
            out["completion_ids"].append(e["completion"])
            out["env_mask"].append(e["mask"])
            out["env_reward"].append(reward)
            out["format_reward"].append(fmt)
        clock["reward"] = time.monotonic() - t
        self.calls += 1
        if self.log is not None and trainer.is_world_process_zero():
            with JsonlAppender(self.log.with_name("rollouts.jsonl")) as sink:
                sink.append({"step": trainer.state.global_step, "episodes": len(episodes),
                             **{f"{k}_seconds": round(v, 3) for k, v in clock.items()}})
        return out

    def _generate(self, trainer, tokenizer, active, torch, unwrap) -> list[tuple[list[int], str]]:
        """One answer for each active episode, sampled from the weights being trained: by
        TRL's vLLM when the trainer uses it, else by the model in-process."""
        seqs = [e["prompt_ids"] + e["completion"] for e in active]
        if getattr(trainer, "use_vllm", False):
            return [self._answer(tokenizer, row) for row in self._vllm(trainer, seqs)]
        width = max(len(s) for s in seqs)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs])
        attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs])
        with unwrap(trainer.model_wrapped, trainer.accelerator) as model, torch.no_grad():
            was_training = model.training
            model.eval()
            try:
                generated = model.generate(input_ids=input_ids.to(model.device),
                                           attention_mask=attention.to(model.device),
                                           do_sample=True, temperature=self.config.temperature, top_p=1.0,
                                           max_new_tokens=self.config.max_new_tokens, pad_token_id=pad,
                                           eos_token_id=tokenizer.eos_token_id)
            finally:
                model.train(was_training)
        return [self._answer(tokenizer, row) for row in generated[:, width:].tolist()]

    def _vllm(self, trainer, seqs: list[list[int]]) -> list[list[int]]:
        """One completion per sequence from TRL's vLLM generation (``trainer.vllm_generation``,
        the weights TRL synced before this step's rollouts), at most ``max_new_tokens``: TRL's
        own limit is the whole episode's completion."""
        if trainer.accelerator.num_processes > 1:  # TRL's server generation is collective: turns would diverge
            raise ValueError("the agent objective asks vLLM turn by turn: train with one process")
        vllm = trainer.vllm_generation
        episode_budget, vllm.max_completion_length = vllm.max_completion_length, self.config.max_new_tokens
        try:
            _, completions, _, _ = vllm.generate(prompts=seqs, images=None, num_generations=1)
        finally:
            vllm.max_completion_length = episode_budget
        return completions

    @staticmethod
    def _answer(tokenizer, row: list[int]) -> tuple[list[int], str]:
        """A generated row up to its end of turn (padding dropped), with its text."""
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if tokenizer.eos_token_id in row:
            row = row[: row.index(tokenizer.eos_token_id) + 1]
        while row and row[-1] == pad and pad != tokenizer.eos_token_id:
            row.pop()
        return row, tokenizer.decode(row, skip_special_tokens=True)

    @staticmethod
    def _observation_tokens(tokenizer, e: dict, text: str, ended: bool) -> list[int]:
        """The tokens the chat template puts between the agent's answer and its next one:
        the end of its turn, the observation as a user message, the next assistant header."""
        placeholder = "\ue000"  # a private-use character: the answer's place in the rendering
        said = [{"role": "assistant", "content": placeholder}]
        before = tokenizer.apply_chat_template(e["messages"] + said, tokenize=False)
        e["messages"] += [{"role": "assistant", "content": text},
                          {"role": "user", "content": f"Observation:\n{e['observations'][-1]}"}]
        after = tokenizer.apply_chat_template(e["messages"][:-2] + said + e["messages"][-1:], tokenize=False,
                                              add_generation_prompt=True)
        suffix = after[after.index(placeholder) + 1:]
        closing = before[before.index(placeholder) + 1:]  # e.g. "<|im_end|>\n" after an answer
        if ended and tokenizer.eos_token and closing.startswith(tokenizer.eos_token):
            suffix = suffix[len(tokenizer.eos_token):]  # the model wrote it already
        return tokenizer(suffix, add_special_tokens=False)["input_ids"]

    def _record(self, trainer, e: dict, verdict: float | None, fmt: float, traj: Trajectory | None) -> None:
        if self.log is None or not trainer.is_world_process_zero():
            return
        with JsonlAppender(self.log) as sink:
            sink.append({"step": trainer.state.global_step, "call": self.calls, "domain": e["domain"],
                         "task": e["task"].name, "instruction": e["task"].instruction, "said": e["said"],
                         "observations": e["observations"], "verdict": verdict, "format": round(fmt, 3),
                         "broken": e.get("broken"),
                         "probe_observation": traj.metadata.get("probe_observation") if traj else None})


def _each(envs: list[Any], method: str, args: list[tuple]) -> list[Any]:
    """``env.<method>(*args)`` for every environment, in order: the simulator's all at once
    (its ``a<method>`` on lwm's event loop: a served world model gets every request of the
    step in flight together), the others one after another (real environments hold
    thread-bound clients). An environment whose sandbox broke gives its
    :class:`~lwm.errors.SandboxError` as its result (its episode is a failure; the others
    go on); any other error is raised."""
    results: list[Any] = [None] * len(envs)
    together = [i for i, env in enumerate(envs) if hasattr(env, f"a{method}")]
    if together:
        async def gather() -> list[Any]:
            return await asyncio.gather(*(getattr(envs[i], f"a{method}")(*args[i]) for i in together),
                                        return_exceptions=True)

        for i, result in zip(together, run_sync(gather())):
            if isinstance(result, BaseException) and not isinstance(result, SandboxError):
                raise result
            results[i] = result
    for i, env in enumerate(envs):
        if i not in together:
            try:
                results[i] = getattr(env, method)(*args[i])
            except SandboxError as e:
                results[i] = e
    return results


def _env_reward(completions, env_reward, **_: Any) -> list[float]:
    return list(env_reward)


def _format_reward(completions, format_reward, **_: Any) -> list[float]:
    return list(format_reward)


# ---------------------------------------------------------------------------- fidelity


def fidelity_dataset(data: Path) -> Any:
    """The train split of a ``lwm data build`` directory as GRPO prompts: the world-model
    messages, what the model should write (the real observation, or its change in a dataset
    built with ``--predict change``), its volatile spans and domain.

    Raises:
        DataNotFoundError: no train split.
    """
    from datasets import Dataset

    from lwm.data.build import read_built

    examples, _ = read_built(Path(data))
    rows = [{"prompt": ex["prompt"], "domain": ex["domain"], **_written(ex)} for ex in examples["train"]]
    if not rows:
        raise DataNotFoundError(f"{data} holds no train examples")
    return Dataset.from_list(rows)


def _written(example: dict) -> dict[str, str]:
    """What the model should write for a built example, and its volatile spans: the
    observation, or in a dataset built with ``--predict change`` the change (the
    observation's last characters: the spans are moved with it, those before it dropped)."""
    from lwm.parse import parse_output

    observation, spans = example["observation"], example.get("volatile") or []
    written = parse_output(example["completion"][-1]["content"]).observation
    if written != observation:
        shift = len(observation) - len(written) if observation.endswith(written) else None
        spans = [] if shift is None else [[a - shift, b - shift] for a, b in spans if a >= shift]
    return {"observation": written, "volatile": json.dumps(spans)}


def _fidelity_reward(completions, observation, domain, volatile, **_: Any) -> list[float]:
    from lwm.metrics import fidelity
    from lwm.parse import parse_output

    out = []
    for completion, real, d, spans in zip(completions, observation, domain, volatile):
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        spec = domains.find(d)
        f = fidelity(parse_output(text).observation, real, [tuple(s) for s in json.loads(spans)],
                     spec.canonical if spec else None)
        out.append((f.line_f1 + f.edit_similarity) / 2)
    return out


def _tagged_reward(completions, **_: Any) -> list[float]:
    from lwm.parse import parse_output

    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [0.0 if {"no_observation_tag", "unclosed_observation_tag", "empty"} & set(parse_output(t).issues) else 1.0
            for t in texts]


# ----------------------------------------------------------------------------- the run


def train_rl(config: RLConfig, *, show_progress: bool = True) -> RLResult:
    """Run (or resume) GRPO; save checkpoints, the adapter and its GGUF export.

    Everything the run needs (tasks, cache, world model, data) is checked before the
    trained model loads.

    Raises:
        ValueError: bad settings (see :class:`RLConfig`), too few tasks, an empty replay cache.
        RowFormatError: a damaged task file (its file and line named).
        LwmError: ``cache`` is not a replay cache.
        RunMismatchError: resuming ``out`` with other settings.
        FileExistsError: ``out`` holds checkpoints and ``resume`` is false.
        ModelUnavailableError: the model, the world model or the training libraries are missing.
        DataNotFoundError: ``fidelity`` without train examples; a missing or empty task file.
    """
    with library_progress(show_progress):
        return _train_rl(config, show_progress)


def _train_rl(config: RLConfig, show_progress: bool) -> RLResult:
    import torch
    from peft import LoraConfig
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig, GRPOTrainer

    from lwm.train.sft import _load_base

    t0 = time.monotonic()
    out = config.out
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out} is a file, not a directory")
    last = get_last_checkpoint(str(out)) if out.is_dir() else None
    if last and not config.resume:
        raise FileExistsError(f"{out} already holds checkpoints (last: {Path(last).name}); pass --resume to continue "
                              "that run, or choose a new --out")
    if config.resume and not last:
        print(f"--resume: {out} holds no checkpoint yet; training starts from step 0", file=sys.stderr)
    run_file = out / RUN_FILE
    if run_file.is_file():
        recorded = read_json(run_file).get("settings", {})
        diff = {k: (recorded.get(k), v) for k, v in config.identity().items() if recorded.get(k) != v}
        if diff:
            raise RunMismatchError(out, diff)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rollout = None
    if config.objective == "agent":
        from datasets import Dataset

        tasks = agent_tasks(config)
        if config.cache is not None:  # not a replay cache, or nothing to replay: said now, not at the first episode
            cache = ReplayCache(config.cache)
            try:
                if backend_spec(config.backend).cache_only and not len(cache):
                    raise ValueError(f"--cache {config.cache} holds no observation: replay has nothing to play")
            finally:
                cache.close()
        rollout = AgentRollout(config, tasks, log=out / "episodes.jsonl")
        for factory in rollout.factories.values():  # load the world model now: a typo fails before training
            factory.world_model()
        if config.base_url and backend_spec(config.backend).simulates:
            check_reachable(config.base_url, config.api_key)  # a server that cannot be reached: said before training
        dataset = Dataset.from_list(tasks)
        reward_funcs, weights = [_env_reward, _format_reward], [1.0, config.format_weight]
    else:
        dataset = fidelity_dataset(config.data)
        reward_funcs, weights = [_fidelity_reward, _tagged_reward], [1.0, config.format_weight]
    model, tokenizer = _load_base(config.model)  # last: bad tasks, data or world model fail without the wait
    out.mkdir(parents=True, exist_ok=True)  # only now: a refused run leaves no folder behind
    if not run_file.is_file():  # recorded once everything it names was found: a typo does not lock --out
        write_atomic(run_file, json.dumps({"command": "lwm train rl", "settings": config.identity(),
                                           "config": {**config.identity(), "max_steps": config.max_steps}},
                                          indent=2) + "\n")
    batch = config.prompts_per_step * config.num_generations
    args = GRPOConfig(
        output_dir=str(out), max_steps=config.max_steps, learning_rate=config.lr, lr_scheduler_type="linear",
        per_device_train_batch_size=batch, gradient_accumulation_steps=1, num_generations=config.num_generations,
        # agent: the policy's answers and the observations between them (masked) form one completion
        max_completion_length=config.max_new_tokens + (1024 * config.max_turns if config.objective == "agent" else 0),
        temperature=config.temperature, beta=config.beta, reward_weights=weights, logging_steps=1,
        save_steps=config.save_steps, save_total_limit=2, seed=config.seed, use_cpu=not torch.cuda.is_available(),
        report_to=[], disable_tqdm=not show_progress, bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
        remove_unused_columns=False, log_completions=False,
        **({"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": config.vllm_server_base_url}
           if config.vllm_server_base_url else {}))
    peft = LoraConfig(r=config.lora_r, lora_alpha=2 * config.lora_r, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=peft, rollout_func=rollout)
    trainer.train(resume_from_checkpoint=last if config.resume and last else None)
    if trainer.state.global_step == 0:
        raise ValueError("the trainer ran no step (the dataset gave it no batch): raise --tasks or --max-steps")
    adapter = out / "adapter"
    trainer.save_model(str(adapter))
    tokenizer.save_pretrained(adapter)
    write_atomic(adapter / "lwm_adapter.json", json.dumps({"model": config.model, "lora": True,
                                                           "lora_r": config.lora_r,
                                                           "lora_alpha": 2 * config.lora_r}) + "\n")
    gguf, error = _export(adapter, config.model)
    history = [h for h in trainer.state.log_history if "reward" in h]
    result = RLResult(out, adapter, gguf, trainer.state.global_step, time.monotonic() - t0,
                      history[0]["reward"] if history else None, history[-1]["reward"] if history else None,
                      Path(last) if config.resume and last else None, error, trainer.state.log_history)
    write_atomic(out / "metrics.json", json.dumps({k: (str(v) if isinstance(v, Path) else v)
                                                   for k, v in asdict(result).items() if k != "log_history"},
                                                  indent=2) + "\n")
    return result


def export_adapter(adapter: Path, model: str) -> Path:
    """Write ``adapter`` as a GGUF LoRA for llama.cpp, ``adapter.parent / "adapter.gguf"``, against
    the GGUF the model came from (a shipped adapter merged in).

    Raises:
        as :func:`lwm.train.export.export_lora_gguf` and :func:`lwm.models.embedded.named_gguf`.
    """
    from lwm.models.embedded import named_gguf
    from lwm.train.export import export_lora_gguf

    base = named_gguf(model)  # the weights the adapter was trained on
    return export_lora_gguf(adapter, adapter.parent / "adapter.gguf", base=str(base) if base else None).path


def _export(adapter: Path, model: str) -> tuple[Path | None, str | None]:
    """:func:`export_adapter`, its failure returned as ``(None, reason)`` (a trained run keeps its adapter)."""
    from lwm.errors import LwmError

    try:
        return export_adapter(adapter, model), None
    except (LwmError, OSError, ValueError) as e:
        return None, f"{type(e).__name__}: {e}"


def trained_model(out: Path) -> Any:
    """The model a training run's adapter applies to, as its record (``lwm_train.json``)
    names it (``embedded`` when it names none).

    Raises:
        DataNotFoundError, RowFormatError: the record is missing or damaged (file and line).
    """
    path = Path(out) / RUN_FILE
    settings = read_json(path).get("settings", {})   # read_json refuses anything but an object
    if not isinstance(settings, dict):
        raise RowFormatError(path, 1, "its settings are not a JSON object")
    return settings.get("model", "embedded")


def policy_for(out: Path) -> tuple[str, str | None]:
    """``(policy, adapter)`` for ``lwm agent eval`` of a trained run: the GGUF the adapter
    applies to and ``adapter.gguf``.

    Raises:
        DataNotFoundError: the run has no exported adapter.
        RowFormatError: the run's record is damaged.
        ModelUnavailableError: the merged model (the base with its shipped adapter) cannot be
            written.
        ValueError: the run records a model name no model has.
    """
    out = Path(out)
    gguf = out / "adapter.gguf"
    if not gguf.is_file():
        raise DataNotFoundError(f"{out} has no adapter.gguf (the export failed or the run is unfinished)")
    from lwm.models.embedded import named_gguf

    model = trained_model(out)
    if model == "embedded" or not isinstance(model, str):  # the bundled model runs under its own name
        return "embedded", str(gguf)
    base = named_gguf(model)  # a shipped adapter merged in (embedded-warmup)
    return (str(base) if base else "embedded"), str(gguf)


__all__ = ["AgentRollout", "RLConfig", "RLResult", "agent_tasks", "fidelity_dataset", "policy_for", "train_rl",
           "trained_model"]
