"""The OpenAI-compatible backend against real HTTP servers."""

import asyncio
import json

import pytest
from conftest import make_data
from fastapi import FastAPI, Request
from servers import chat_stub, completion, free_port, lwm_serve_model, serve_app, vllm_style_server
from starlette.responses import Response

from lwm.errors import ModelUnavailableError
from lwm.eval.runner import EvalConfig, evaluate
from lwm.models import load_model
from lwm.models.base import SamplingParams
from lwm.models.embedded import EMBEDDED_NAME
from lwm.models.openai_compat import OpenAIChatModel

MESSAGES = [{"role": "system", "content": "You simulate a Linux terminal."},
            {"role": "user", "content": "echo hi"}]


@pytest.fixture(scope="module")
def served():
    with lwm_serve_model() as base_url:
        yield base_url


async def test_generate_against_lwm_serve_model(served):
    model = load_model(EMBEDDED_NAME, base_url=served)
    gen = await model.generate(MESSAGES, SamplingParams(temperature=0.0, max_tokens=12))
    assert gen.text.strip()
    assert 1 <= gen.completion_tokens <= 12 and gen.prompt_tokens > 5
    assert gen.finish_reason in ("stop", "length")
    again = await model.generate(MESSAGES, SamplingParams(temperature=0.0, max_tokens=12))
    assert again.text == gen.text  # greedy decoding is deterministic
    await model.aclose()


async def test_extra_body_is_passed_through(served):
    model = load_model(EMBEDDED_NAME, base_url=served)
    gen = await model.generate(MESSAGES, SamplingParams(max_tokens=50, extra_body={"max_tokens": 2}))
    assert gen.completion_tokens <= 2  # the body's value reached the server
    await model.aclose()


async def test_eval_through_the_server(served, tmp_path):
    data = make_data(tmp_path, episodes=1, turns=3)
    model = load_model(EMBEDDED_NAME, base_url=served, concurrency=4)
    cfg = EvalConfig(out=tmp_path / "run", data=data, sampling=SamplingParams(max_tokens=24))
    summary = await evaluate(cfg, model, show_progress=False)
    assert summary["rows"] == 3 and summary["failed"] == 0
    assert summary["run"]["model"] == EMBEDDED_NAME and summary["run"]["sampling"]["max_tokens"] == 24
    await model.aclose()


async def test_reasoning_content_and_retries_on_transient_errors(tmp_path):
    with vllm_style_server(fail_first=2) as (base_url, log):
        model = load_model("served", base_url=base_url)
        gen = await model.generate(MESSAGES, SamplingParams(seed=7))
        assert gen.reasoning == "the command prints hi" and "hi" in gen.text
        assert len(log) == 3 and log[-1]["seed"] == 7  # two 503s retried with backoff
        await model.aclose()


async def test_unreachable_endpoint_failures_are_counted(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=2)
    model = OpenAIChatModel("nothing", f"http://127.0.0.1:{free_port()}/v1", timeout=5, max_retries=0)
    summary = await evaluate(EvalConfig(out=tmp_path / "run", data=data), model, show_progress=False)
    assert summary["rows"] == 2 and summary["failed"] == 2
    assert summary["errors"] == {"APIConnectionError": 2}


def test_prompt_cache_counts_whole_states():
    from lwm.models.embedded import LlamaCppChatModel, bounded_ram_cache

    llm = LlamaCppChatModel()._llm
    cache = bounded_ram_cache(capacity_bytes=300 << 20)
    for i in range(6):
        llm.reset()
        llm.eval(llm.tokenize(f"state number {i}".encode()))
        cache[llm.input_ids[: llm.n_tokens].tolist()] = llm.save_state()
    state = next(iter(cache.cache_state.values()))
    per_state = state.llama_state_size + state.scores.nbytes + state.input_ids.nbytes
    assert state.scores.nbytes > state.llama_state_size  # what the library's own count leaves out
    assert cache.cache_size <= 300 << 20 and len(cache.cache_state) == min(6, (300 << 20) // per_state)


async def test_a_prompt_cache_resumes_interleaved_conversations_with_the_same_answers():
    """Two conversations asked in turn: with a prompt cache the in-process model keeps each
    one's KV state, and greedy answers are those of a model without the cache."""
    from lwm.models.embedded import LlamaCppChatModel

    def conversation(name: str, turns: int) -> list[dict]:
        msgs = [{"role": "system", "content": f"You simulate the shell of machine {name}."}]
        for t in range(turns):
            msgs += [{"role": "user", "content": f"$ echo {name}{t}"}, {"role": "assistant", "content": f"{name}{t}"}]
        return msgs + [{"role": "user", "content": f"$ echo {name}{turns}"}]

    sampling = SamplingParams(temperature=0.0, max_tokens=6)
    order = [conversation("alpha", 1), conversation("beta", 1), conversation("alpha", 2), conversation("beta", 2)]
    cached, plain = LlamaCppChatModel(prompt_cache_bytes=600 << 20), LlamaCppChatModel()
    try:
        with_cache = [(await cached.generate(m, sampling)).text for m in order]
        without = [(await plain.generate(m, sampling)).text for m in order]
        assert with_cache == without
        assert len(cached._llm.cache.cache_state) >= 2  # a state per conversation
        assert plain._llm.cache is None
    finally:
        await cached.aclose()
        await plain.aclose()


SSE_ERROR = (
    'data: {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
    'data: {"error": {"message": "CUDA out of memory", "type": "InternalServerError"}}\n\n'
)


@pytest.mark.parametrize("answer, message", [
    ({"error": {"message": "model 'x' not found", "type": "invalid_request_error"}},
     "the server answered with an error: model 'x' not found"),
    ({"object": "error", "message": "This model's maximum context length is 2048 tokens.", "type": "BadRequestError",
      "param": None, "code": 400},  # vLLM's ErrorResponse
     "the server answered with an error: This model's maximum context length is 2048 tokens."),
    ({"error": "upstream timed out"}, "the server answered with an error: upstream timed out"),
    (Response(SSE_ERROR, media_type="text/event-stream"), "the server answered with an error: CUDA out of memory"),
    ({"id": "x", "object": "chat.completion", "choices": [], "model": "m"}, "the server answered without a completion"),
    (Response("{not json", media_type="application/json"), "the server's answer is not valid JSON: b'{not json'"),
    (Response(b'{"choices": "\xff"}', media_type="application/json"), "the server's answer is not valid JSON"),
    (completion(5), "the server's message content is not text: 5"),
    # a 200 answer whose JSON is not a completion at all, or whose choices are malformed
    ([1, 2, 3], "the server answered without a completion (no choices with a message): '[1,2,3]'"),
    (None, "the server answered without a completion (no choices with a message): 'null'"),
    (42, "the server answered without a completion (no choices with a message): '42'"),
    ({"id": "x", "object": "chat.completion", "choices": "many", "model": "m"},
     "the server answered without a completion"),
    ({"id": "x", "object": "chat.completion", "choices": [{"index": 0}], "model": "m"},
     "the server answered without a completion"),
])
async def test_error_answers_with_status_200_raise_the_servers_message(answer, message):
    with chat_stub(lambda body: answer) as (base_url, log):
        model = load_model("served", base_url=base_url)
        with pytest.raises(ModelUnavailableError) as e:
            await model.generate(MESSAGES, SamplingParams())
        assert str(e.value).startswith(f"{base_url}: {message}") and len(log) == 1
        await model.aclose()


async def test_error_answers_are_counted_with_the_servers_message(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=2)
    answer = {"object": "error", "message": "prompt too long", "type": "BadRequestError", "code": 400}
    with chat_stub(lambda body: answer) as (base_url, _):
        model = load_model("served", base_url=base_url)
        summary = await evaluate(EvalConfig(out=tmp_path / "run", data=data), model, show_progress=False)
        await model.aclose()
    assert summary["failed"] == 2 and summary["errors"] == {"ModelUnavailableError": 2}
    record = json.loads((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()[0])
    assert record["error"].endswith("the server answered with an error: prompt too long")


async def test_a_malformed_usage_is_no_count_not_a_crash():
    answer = {**completion("hi"), "usage": {"prompt_tokens": "many", "completion_tokens": -3}}
    with chat_stub(lambda body: answer) as (base_url, _):
        model = load_model("served", base_url=base_url)
        gen = await model.generate(MESSAGES, SamplingParams())
        assert (gen.text, gen.prompt_tokens, gen.completion_tokens) == ("hi", None, None)
        await model.aclose()


async def test_finish_reason_and_token_counts_are_returned():
    usage = {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}
    answers = iter([completion("<predicted_observation>hi", "length", usage), completion("hi", "stop")])
    with chat_stub(lambda body: next(answers)) as (base_url, _):
        model = load_model("served", base_url=base_url)
        gen = await model.generate(MESSAGES, SamplingParams(max_tokens=12))
        assert (gen.text, gen.finish_reason, gen.prompt_tokens, gen.completion_tokens) == (
            "<predicted_observation>hi", "length", 31, 12)
        gen = await model.generate(MESSAGES, SamplingParams())  # a server that reports no usage
        assert (gen.finish_reason, gen.prompt_tokens, gen.completion_tokens) == ("stop", None, None)
        await model.aclose()


async def test_content_in_parts_is_joined():
    parts = [{"type": "text", "text": "echo "}, {"type": "text", "text": "hi"}]
    with chat_stub(lambda body: completion(parts)) as (url, _):
        model = load_model("stub", base_url=url)
        assert (await model.generate(MESSAGES, SamplingParams())).text == "echo hi"
        await model.aclose()


async def test_text_utf8_cannot_encode_is_sent_with_a_replacement_character():
    """A lone surrogate (a \\ud800 escape in data) made every request of a row fail."""
    with chat_stub(lambda body: completion(body["messages"][-1]["content"])) as (url, log):
        model = load_model("stub", base_url=url)
        gen = await model.generate([{"role": "user", "content": "a\ud800b"}], SamplingParams())
    assert gen.text == "a\ufffdb" and log[0]["messages"][0]["content"] == "a\ufffdb"


async def test_requests_in_flight_reach_the_concurrency_across_connection_pools():
    # 150 in flight needs three HTTP clients (OpenAIChatModel.SHARD connections each):
    # the server holds every request until 150 are open at once, and never sees more.
    open_now, most = 0, 0
    reached = asyncio.Event()
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        nonlocal open_now, most
        open_now += 1
        most = max(most, open_now)
        if open_now >= 150:
            reached.set()
        try:
            await asyncio.wait_for(reached.wait(), timeout=10)
        except TimeoutError:
            pass
        open_now -= 1
        return completion("<predicted_observation>ok</predicted_observation>")

    with serve_app(app) as url:
        model = OpenAIChatModel("stub", f"{url}/v1", concurrency=150, max_retries=0)
        assert len(model._clients) == 3
        gens = await asyncio.gather(*(model.generate(MESSAGES, SamplingParams()) for _ in range(200)))
        await model.aclose()
    assert most == 150 and all("ok" in g.text for g in gens)


def test_the_served_model_refuses_what_would_crash_or_stall_it(served):
    """An invalid grammar used to end the process (a segfault in libllama); a 30 MB body kept
    it busy; malformed requests answered 500 with internal paths."""
    import httpx

    url = f"{served}/chat/completions"
    bad_grammar = httpx.post(url, json={"messages": MESSAGES, "max_tokens": 2, "grammar": "root ::= ("}, timeout=30)
    assert bad_grammar.status_code == 400 and "grammar" in bad_grammar.json()["error"]["message"]
    huge = httpx.post(url, content=b"x" * (30 << 20), headers={"content-type": "application/json"}, timeout=60)
    assert huge.status_code == 413
    for body in (b"[1, 2, 3]", b'{"messages": "hello"}', b'{"messages": [{"role": "user", "content": 5}]}',
                 b'{"messages": []}', b'{"messages": [{"content": "hi"}]}', b"",
                 b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}',
                 b'{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"abc": 1}}',
                 b'{"messages": [{"role": "user", "content": "\\udc80"}]}'):
        r = httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=30)
        assert 400 <= r.status_code < 500, (body, r.text)   # refused before the runtime sees it
        assert "/lwm/" not in r.text and ".py" not in r.text
    ok = httpx.post(url, json={"messages": MESSAGES, "max_tokens": 2}, timeout=60)   # still serving
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] is not None
