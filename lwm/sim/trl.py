"""Environments for TRL's ``GRPOTrainer(environment_factory=…)``, over :func:`lwm.sim.make_env`.

TRL's contract (``trl/trainer/grpo_trainer.py``, TRL 1.16; docs "OpenEnv Integration",
section "How environment_factory works"):

* ``environment_factory`` is a zero-argument callable returning an environment; the
  trainer makes one instance per concurrent rollout, pools them and reuses them across
  batches (so ``reset`` must fully restart an episode).
* ``reset(**row)`` is called before each rollout with every dataset column of the example
  (``prompt`` included); a returned string is appended to the last user message (no
  separator is added), ``None`` adds nothing.
* Every other public *function* on the class (``inspect.getmembers(type(env),
  inspect.isfunction)``, names not starting with ``_``, except ``reset`` and
  ``get_reward``) becomes a tool; its schema comes from the type hints and the
  Google-style docstring (``transformers.utils.get_json_schema``). A tool that raises has
  ``{"error": str(exception)}`` fed back to the model.
* An optional ``get_reward() -> float`` makes the environment own the reward (an extra
  reward column named after the class, weight 1; ``reward_funcs`` becomes optional).

Here: one tool per domain taking one action in the domain's format, named and described
by the domain's agent tool (:attr:`lwm.domains.Domain.tool`: ``run_keystrokes`` for the
terminal, ``run_sql`` for db, ``run_cell`` for code …); ``get_reward`` follows the reward rule of
:mod:`lwm.sim.adapter` and, when the policy stopped before ending the episode, asks for
the verdict on the state reached. ``close`` is deliberately private (``_close``): any
public method would become a tool.

Which task a rollout plays (the ``reset`` row): a ``task`` column (a task name among the
factory's ``tasks``, or a dict of :class:`~lwm.envs.base.Task` fields), else an
``instruction`` column (a task of that instruction), else a task of ``tasks`` chosen by a
stable hash of the prompt, so that every generation of a GRPO group plays the same task.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lwm import domains
from lwm.envs.base import Task
from lwm.models import ModelSpec
from lwm.models.base import ChatModel
from lwm.sim.adapter import Episode, coerce_task
from lwm.sim.backends import EnvFactory, env_factory


class WorldToolEnv:
    """A TRL tool environment over one :func:`make_env` environment (see the module
    docstring). Use :func:`environment_factory`, which gives each domain its own subclass
    whose tool is named and documented for that domain.

    Attributes:
        reward: the episode's reward so far (0.0 until it ends or :meth:`get_reward`).
        done: the episode has ended (further tool calls raise).
        episode: the underlying :class:`~lwm.sim.adapter.Episode`.
    """

    def __init__(self, factory: EnvFactory, *, tasks: Sequence[Task | Mapping[str, Any]] = (),
                 include_instruction: bool = True) -> None:
        self.episode = Episode(factory, tasks=tasks)
        self.include_instruction = include_instruction
        self.reward = 0.0
        self.done = False

    def reset(self, **kwargs: Any) -> str | None:
        """Start the rollout's episode (see the module docstring for the task chosen).

        Returns:
            ``"\\n\\n"`` + the task's instruction (when the prompt does not already hold it)
            and the initial observation, to be appended to the prompt; ``None`` when both
            are empty.
        """
        task = self._task_for(kwargs)
        first = self.episode.reset(task)
        self.reward, self.done = 0.0, False
        parts = []
        current = self.episode.task
        if self.include_instruction and current is not None and current.instruction \
                and current.instruction not in _prompt_text(kwargs.get("prompt")):
            parts.append(f"Task: {current.instruction}")
        if first:
            parts.append(f"Initial observation:\n{first}")
        return "\n\n" + "\n\n".join(parts) if parts else None

    def act(self, action: str) -> str:
        """Take one action in the environment and return the observation that follows.

        Args:
            action: the action, as text in the environment's action format.

        Returns:
            The next observation.
        """
        return self._act(action)

    def _act(self, action: str) -> str:
        if self.done:
            raise ValueError("The episode has ended: no more actions.")
        t = self.episode.step(domains.get(self.episode.domain).tool.to_action(action))
        if t.done:
            self.done = True
            self.reward = t.reward
            note = "truncated: turn limit reached" if t.truncated else "ended"
            return f"{t.observation}\n\n[episode {note}]"
        return t.observation

    def get_reward(self) -> float:
        """The episode's reward: the verdict at its end, asked for now if the policy
        stopped acting before ending it (0.0 when there is no verdict)."""
        if self.episode.trajectory is not None:
            self.reward = self.episode.final_reward()
        return self.reward

    # -- not tools ----------------------------------------------------------------------
    @property
    def trajectory(self):
        """The episode so far (:class:`~lwm.schema.Trajectory`)."""
        return self.episode.trajectory

    def _close(self) -> None:
        """Release the environment (sandboxes of the ``real`` backend)."""
        self.episode.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _task_for(self, row: Mapping[str, Any]) -> Task | None:
        tasks = self.episode.tasks
        if row.get("task") is not None:
            return coerce_task(row["task"], tasks)
        if row.get("instruction"):
            name = str(row.get("task_name") or "task-" + _digest(row["instruction"])[:12])
            return Task(name, instruction=str(row["instruction"]))
        if not tasks:
            return None
        return tasks[int(_digest(_prompt_text(row.get("prompt"))), 16) % len(tasks)]


def _prompt_text(prompt: Any) -> str:
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def tool_env_class(domain: str) -> type[WorldToolEnv]:
    """The :class:`WorldToolEnv` subclass of ``domain``: its tool named and documented as the
    domain's agent tool (:attr:`lwm.domains.Domain.tool`). One class per domain (TRL matches
    environment-owned rewards by exact class).

    Raises:
        UnknownDomainError: no such domain.
    """
    spec = domains.get(domain).tool
    name = spec.name
    fmt = spec.description.replace("\n", "\n    ")

    def tool(self, action: str) -> str:
        return self._act(action)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = (f"Take one action in the {domain} environment and return the observation that follows.\n\n"
                    f"    {fmt}\n\n"
                    f"    Args:\n        action: the action, as text in the {domain} action format described above.\n\n"
                    f"    Returns:\n        The next observation.\n    ")
    cls_name = "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", domain)) + "WorldEnv"
    attrs: dict[str, Any] = {"__module__": __name__, "__doc__": f"The {domain} domain as a TRL tool environment."}
    attrs[name] = tool
    if name != "act":
        # One tool per domain: a property is not a function, so TRL does not list `act`.
        attrs["act"] = property(lambda self: getattr(self, name), doc=f"Alias of `{name}` (not a tool).")
    cls = type(cls_name, (WorldToolEnv,), attrs)
    return cls


def environment_factory(domain: str, backend: str = "sim", *, model: ChatModel | ModelSpec | str | None = None,
                        tasks: Sequence[Task | Mapping[str, Any]] = (), include_instruction: bool = True,
                        **make_env_kwargs: Any) -> Callable[[], WorldToolEnv]:
    """A zero-argument callable making fresh, independent tool environments of ``domain``
    on ``backend``, for ``GRPOTrainer(environment_factory=…)``.

    Args:
        domain: e.g. ``terminal``.
        backend: ``sim`` (default), ``real``, ``replay`` or ``hybrid``.
        model: the world model, shared by every instance (a :class:`~lwm.models.ModelSpec` or a
            name such as ``"embedded-warmup"`` is loaded once per process).
        tasks: the tasks rollouts play (see the module docstring).
        include_instruction: prepend ``Task: <instruction>`` to the initial observation when
            the prompt does not already contain the instruction.
        make_env_kwargs: passed to :func:`lwm.sim.backends.env_factory` (``cache``,
            ``max_turns`` …).

    Raises:
        as :class:`~lwm.sim.backends.EnvFactory` (checked here, once).

    Example:
        >>> factory = environment_factory("terminal", "sim", model=load_model("embedded-warmup"))  # doctest: +SKIP
        >>> trainer = GRPOTrainer(model=…, train_dataset=…, environment_factory=factory)  # doctest: +SKIP
    """
    factory = env_factory(domain, backend, model=model, **make_env_kwargs)
    tasks = tuple(coerce_task(t) for t in tasks)
    cls = tool_env_class(domain)

    def make() -> WorldToolEnv:
        return cls(factory, tasks=tasks, include_instruction=include_instruction)

    make.__name__ = f"{cls.__name__}_factory"
    return make
