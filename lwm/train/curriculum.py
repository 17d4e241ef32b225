"""Which task families an agent can learn from now (``lwm agent curriculum``).

GRPO learns only where a group of attempts sometimes succeeds, and rejection sampling only
where some attempt is accepted: a family the policy never solves gives no signal, one it
always solves teaches nothing new. From an ``lwm agent eval`` run of the policy on the
**train** families (its ``summary.json``: success per family), the curriculum keeps the
families whose success is between ``low`` and ``high``, and writes a task file of new tasks
of those families (seeds the evaluation did not use) for ``lwm train rl --tasks-file`` or
``lwm train rft --tasks-file``. Widening the curriculum later is the same command with a
lower ``low``; every choice is recorded beside the task file (``<file>.json``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from lwm.domains.tasks import families, task_key, write_task_file
from lwm.envs.base import Task
from lwm.errors import DataNotFoundError
from lwm.jsonl import read_json, write_atomic
from lwm.schema import read_trajectories


def family_table(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{"domain", "family", "n", "successes", "rate", "split"}]`` from an agent
    evaluation's summary (its ``families``).

    Raises:
        ValueError: the summary has no per-family table (an evaluation from before it
            existed: run it again), or names a family its domain does not have.
    """
    table = summary.get("families")
    if not isinstance(table, dict) or not table:
        raise ValueError("the agent evaluation's summary has no per-family success (run lwm agent eval again)")
    rows = []
    for key, group in table.items():
        domain, _, name = key.partition("/")
        try:
            known = {f.name: f for f in families(domain)}
        except KeyError:
            known = {}
        if name not in known:
            raise ValueError(f"unknown family {key!r} in the agent evaluation (expected <domain>/<family> of a "
                             "domain's task families)")
        held = name in {f.name for f in families(domain, "heldout")}
        s = group.get("success") if isinstance(group, dict) else None
        if not (isinstance(s, dict) and all(isinstance(s.get(k), int) for k in ("n", "successes"))
                and (s.get("rate") is None or isinstance(s["rate"], (int, float)))):
            raise ValueError(f"malformed success of {key!r} in the agent evaluation: expected "
                             '{"success": {"n": int, "successes": int, "rate": number or null}}')
        rows.append({"domain": domain, "family": name, "n": s["n"], "successes": s["successes"], "rate": s["rate"],
                     "split": "heldout" if held else "train"})
    return rows


def choose(rows: list[dict[str, Any]], low: float, high: float) -> list[dict[str, Any]]:
    """``rows`` with ``chosen`` set: a train family whose success rate is in ``[low, high]``
    (a held-out family never is: it is never trained on).

    >>> choose([{"rate": 0.25, "split": "train"}, {"rate": 0.0, "split": "train"},
    ...         {"rate": 0.5, "split": "heldout"}], 0.05, 0.9)[0]["chosen"]
    True
    """
    if not 0 <= low <= high <= 1:
        raise ValueError(f"need 0 <= low <= high <= 1, got low={low}, high={high}")
    return [{**r, "chosen": r["split"] == "train" and r["rate"] is not None and low <= r["rate"] <= high}
            for r in rows]


def write_curriculum(run: Path, out: Path, *, low: float = 0.05, high: float = 0.9, tasks_per_family: int = 16,
                     seed: int = 1) -> list[dict[str, Any]]:
    """Choose the families of an agent evaluation ``run`` and write ``tasks_per_family`` new
    tasks of each to the task file ``out`` (seeds drawn from ``seed``, tasks of the
    evaluation skipped), and the table to ``<out>.json``.

    Args:
        run: an ``lwm agent eval`` run directory of the policy on the train families.
        out: the task file to write.
        low: the lowest success rate of a family kept (a family never solved gives no signal).
        high: the highest success rate of a family kept (one always solved teaches nothing).
        tasks_per_family: new tasks written per chosen family.
        seed: seed of the new tasks' seeds.

    Returns:
        the table (:func:`choose`), with ``written`` tasks per chosen family.

    Raises:
        DataNotFoundError: ``run`` has no summary.json or no episodes.jsonl.
        RowFormatError: a line of its episodes.jsonl is not an episode (file and line named).
        ValueError: as :func:`family_table`; bad bounds, or no family within them (the table
            is in the message).
    """
    summary_path = Path(run) / "summary.json"
    if not summary_path.is_file():
        raise DataNotFoundError(f"{run} has no summary.json (an lwm agent eval run directory)")
    rows = choose(family_table(read_json(summary_path)), low, high)
    if not any(r["chosen"] for r in rows):
        table = ", ".join(f"{r['domain']}/{r['family']} {r['successes']}/{r['n']}"
                          + (" (held out: never trained on)" if r["split"] == "heldout" else "") for r in rows)
        raise ValueError(f"no train family with a success rate in [{low}, {high}]: {table}")
    episodes = Path(run) / "episodes.jsonl"
    if not episodes.is_file():  # its tasks must be known to be left out
        raise DataNotFoundError(f"{run} has no episodes.jsonl: the evaluation is unfinished (run it again to finish "
                                "it), or not an lwm agent eval run directory")
    # the evaluation's own tasks are not reused
    seen = {task_key(Task.from_dict(spec)) for t in read_trajectories(episodes)
            if (spec := t.metadata.get("task_spec"))}
    rng = random.Random(f"curriculum/{seed}")
    items = []
    for r in rows:
        r["written"] = 0
        if not r["chosen"]:
            continue
        family = next(f for f in families(r["domain"]) if f.name == r["family"])
        base = rng.randrange(1 << 30)
        for k in range(100 * tasks_per_family):
            if r["written"] == tasks_per_family:
                break
            task, solution = family.generate(base + k)
            if (key := task_key(task)) not in seen:
                seen.add(key)
                items.append((r["domain"], task, solution))
                r["written"] += 1
    write_task_file(out, items)
    write_atomic(Path(f"{out}.json"), json.dumps({"run": str(run), "low": low, "high": high, "seed": seed,
                                                  "tasks_per_family": tasks_per_family, "families": rows},
                                                 indent=1) + "\n")
    return rows
