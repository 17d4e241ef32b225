"""Seeded agent task families (lwm.tasks): contracts without a sandbox, then every family's
reference solution, empty episode and a plausible wrong attempt played in the real environment."""

import json
import re

import pytest
from conftest import needs_sandbox

from lwm import domains
from lwm.domains.db.tasks import on_engine
from lwm.domains.tasks import TaskFamily, families, heldout_families, task_domains, task_key, task_set, wrong_attempt
from lwm.envs import Check, Task

ALL = [(d, f.name) for d in task_domains() for f in families(d)]


def _family(domain, name):
    return next(f for f in families(domain) if f.name == name)


# -- without a sandbox ----------------------------------------------------------------------
def test_every_domain_has_families_with_unique_names_and_a_quarter_held_out():
    for domain in task_domains():
        fams = families(domain)
        names = [f.name for f in fams]
        assert len(fams) >= 7 and len(set(names)) == len(names)
        assert all(f.domain == domain for f in fams)
        assert any(f.steps == 1 for f in fams) and any(f.steps >= 2 for f in fams)
        train, held = families(domain, "train"), heldout_families(domain)
        assert {f.name for f in train} | {f.name for f in held} == set(names)
        assert not {f.name for f in train} & {f.name for f in held}
        assert set(domains.get(domain).tasks().HELD_OUT) == {f.name for f in held}  # no typo
        assert 0.2 <= len(held) / len(fams) <= 0.34, domain
        # held-out families cover a one-action task and a multi-step one
        assert {f.steps == 1 for f in held} == {True, False}, domain


@pytest.mark.parametrize("domain,name", ALL)
def test_family_is_deterministic_and_well_formed(domain, name):
    family = _family(domain, name)
    lengths = set()
    for seed in range(20):
        task, solution = family.generate(seed)
        assert (task, solution) == family.generate(seed)
        assert task.name == f"{name}-{seed}" and task.family == name and task.instruction.strip()
        check = task.check
        if check.match == "regex":
            re.compile(check.expect)
        elif check.match == "contains":  # an error message quoting the probe must not pass
            assert check.expect not in check.probe
        assert all(isinstance(a, str) and a for a in solution)
        lengths.add(len(solution))
    assert min(lengths) == family.steps


@pytest.mark.parametrize("domain,name", ALL)
def test_family_gives_many_distinct_tasks(domain, name):
    keys_ = {task_key(_family(domain, name).generate(seed)[0]) for seed in range(100)}
    assert len(keys_) >= 40, f"{domain}/{name}: {len(keys_)} distinct tasks in 100 seeds"


def test_task_set_is_distinct_deterministic_and_respects_the_split():
    for domain in task_domains():
        held = {f.name for f in heldout_families(domain)}
        train = task_set(domain, "train", 60, seed=3)
        assert len({task_key(t) for t, _ in train}) == 60
        assert not {t.family for t, _ in train} & held
        assert {t.family for t, _ in train} == {f.name for f in families(domain, "train")}
        assert [t for t, _ in train] == [t for t, _ in task_set(domain, "train", 60, seed=3)]
        assert [t for t, _ in train] != [t for t, _ in task_set(domain, "train", 60, seed=4)]
        assert {t.family for t, _ in task_set(domain, "heldout", 12, seed=0)} == held
    assert task_set("code", "all", 0) == []


def test_task_set_refuses_more_tasks_than_the_families_hold(monkeypatch):
    import lwm.domains.code.tasks as code_tasks

    def tiny(rng):  # three distinct tasks in all
        value = rng.randint(1, 3)
        return Task("t", family="tiny", check=Check("print(x)", str(value))), (f"x = {value}",)

    monkeypatch.setattr(code_tasks, "FAMILIES", [TaskFamily("tiny", "code", 1, "x = 1, 2 or 3", tiny)])
    monkeypatch.setattr(code_tasks, "HELD_OUT", ())
    assert sorted(t.check.expect for t, _ in task_set("code", "train", 3)) == ["1", "2", "3"]
    with pytest.raises(ValueError, match="gave only 3 distinct tasks; asked for 4"):
        task_set("code", "train", 4)


def test_bad_input_is_refused_clearly():
    with pytest.raises(KeyError, match="unknown domain 'nope'.*terminal"):
        families("nope")
    with pytest.raises(KeyError, match="no task families for domain 'search'.*terminal"):
        families("search")
    with pytest.raises(KeyError, match="no task families"):
        task_set("android", "train", 3)
    with pytest.raises(ValueError, match="unknown split 'test'"):
        families("db", "test")
    family = families("db")[0]
    for seed in ("3", 3.0, True, None):
        with pytest.raises(TypeError, match="seed must be an int"):
            family.generate(seed)
    with pytest.raises(TypeError, match="n must be an int"):
        task_set("db", "train", "5")
    with pytest.raises(ValueError, match="n must be >= 0"):
        task_set("db", "train", -1)


def test_every_family_task_survives_its_file_form_and_bad_checks_are_refused():
    for domain, name in ALL:
        task, _ = _family(domain, name).generate(3)
        assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task
    with pytest.raises(ValueError, match="regex '\\(a' does not compile"):
        Check("cat x", "(a", "regex")
    with pytest.raises(ValueError, match="match is contains, equals or regex, not 'glob'"):
        Check("cat x", "a", "glob")
    with pytest.raises(ValueError, match="a task's setup is a list of texts"):
        Task.from_dict({"name": "t", "setup": "touch a"})  # not seven one-letter commands
    with pytest.raises(ValueError, match="a task is an object"):
        Task.from_dict("make-dir")  # a recorded task_spec that is not one


def test_every_family_has_a_wrong_attempt():
    for domain in task_domains():
        assert set(domains.get(domain).tasks().WRONG) == {f.name for f in families(domain)}, domain
    task, solution = families("db")[0].generate(0)
    with pytest.raises(KeyError, match="no wrong attempt for the family db/no-such"):
        wrong_attempt("db", "no-such", task, solution)


# -- in the real environments ---------------------------------------------------------------
@pytest.fixture(scope="module")
def envs():
    opened = {}

    def get(domain):
        if domain not in opened:
            opened[domain] = domains.get(domain).make_env()
        return opened[domain]

    yield get
    for env in opened.values():
        env.close()


def _play(env, task, actions):
    env.reset(task)
    for action in actions:
        env.step(action)
    return env.verify()


@needs_sandbox
@pytest.mark.parametrize("domain,name", ALL)
def test_reference_solves_and_nothing_or_a_wrong_attempt_does_not(envs, domain, name):
    env, family = envs(domain), _family(domain, name)
    for seed in (0, 1):
        task, solution = family.generate(seed)
        assert _play(env, task, solution) == 1.0, (seed, task.instruction, solution)
    assert _play(env, task, ()) == 0.0
    wrong = wrong_attempt(domain, name, task, solution)
    assert wrong != solution
    assert _play(env, task, wrong) == 0.0, (task.instruction, wrong)


@needs_sandbox
@pytest.mark.parametrize("name", [f.name for f in families("db")])
def test_db_tasks_play_on_postgres_too(envs, name):
    task, solution = _family("db", name).generate(5)
    task, env = on_engine(task, "postgres"), envs("db")
    assert _play(env, task, solution) == 1.0
    assert _play(env, task, ()) == 0.0


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("domain,name", ALL)
def test_reference_solves_many_seeds(envs, domain, name):
    family = _family(domain, name)
    for seed in range(2, 7):
        task, solution = family.generate(seed)
        assert _play(envs(domain), task, solution) == 1.0, (seed, task.instruction, solution)
