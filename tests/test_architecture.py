"""The shape of the code (docs/architecture.md): the import contract, no import cycles,
every error class in lwm/errors.py, the registry the only dynamic import."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import grimp

LWM = Path(__file__).resolve().parents[1] / "lwm"


def test_the_import_contract_holds():
    lint = Path(sys.executable).with_name("lint-imports")  # import-linter, a dev dependency
    env = {**os.environ, "PYTHONPATH": str(LWM.parent)}  # this checkout's lwm, whatever the venv installed
    r = subprocess.run([str(lint), "--no-cache"], cwd=LWM.parent, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_no_module_imports_itself_back_through_others():
    graph = grimp.build_graph("lwm")
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    # Tarjan's strongly connected components: any component of two or more modules is a cycle.
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    # A package's __init__ that re-exports its own submodules is not a cycle in the data flow.
    real = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)]
    assert real == []


def test_every_error_class_lives_in_errors_py():
    elsewhere = []
    for path in LWM.rglob("*.py"):
        if path.name == "errors.py" or path.name == "controller.py":  # controllers run alone inside the sandbox
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and (b.id.endswith("Error") or b.id == "Exception") for b in node.bases):
                elsewhere.append(f"{path.relative_to(LWM.parent)}:{node.name}")
    assert elsewhere == []


def test_the_registry_is_the_only_dynamic_import():
    found = {str(p.relative_to(LWM.parent)) for p in LWM.rglob("*.py") if "importlib.import_module(" in p.read_text()}
    assert found == {"lwm/domains/__init__.py"}  # the registry's lazy loading (get, Lazy)


def test_lint_is_clean():
    ruff = Path(sys.executable).with_name("ruff")  # a dev dependency; rules in pyproject.toml
    r = subprocess.run([str(ruff), "check", "lwm", "tests", "bench"], cwd=LWM.parent, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]


#: The public API (``import lwm``): a change here is a change users see, so it is made on
#: purpose, in this list and in docs/interfaces.md.
PUBLIC_API = [
    "BenchRow", "ChatModel", "Check", "CollectConfig", "Control", "Domain", "EnvFactory", "EvalConfig", "ModelSpec",
    "Provenance", "ReplayCache", "RolloutConfig", "SamplingParams", "Sandbox", "SandboxLimits", "Script", "SimEnv",
    "StepResult", "Task", "Trajectory", "Transition", "Turn", "collect", "evaluate", "fidelity", "import_logs",
    "import_transitions", "load_model", "load_rows", "make_env", "observation_text", "parse_output", "play_episode",
    "read_rows", "rollout", "rows_from_trajectory", "run_eval", "volatile_spans", "wm2real", "write_rows",
]


def test_the_public_api_is_locked_and_every_name_resolves():
    import lwm

    assert lwm.__all__ == PUBLIC_API
    for name in PUBLIC_API:
        assert getattr(lwm, name) is not None, name
