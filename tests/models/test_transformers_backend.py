"""The alternative runtime: transformers on the dequantized embedded GGUF, batched."""

import asyncio

import pytest

pytest.importorskip("transformers")

from lwm.models import load_model  # noqa: E402
from lwm.models.base import SamplingParams  # noqa: E402


@pytest.mark.slow
async def test_concurrent_requests_are_batched():
    model = load_model("hf:embedded")
    calls = []
    real = model._generate_batch
    model._generate_batch = lambda convs, s: calls.append(len(convs)) or real(convs, s)
    prompts = [[{"role": "user", "content": f"Print the number {i}."}] for i in range(3)]
    gens = await asyncio.gather(*(model.generate(p, SamplingParams(max_tokens=8)) for p in prompts))
    assert calls == [3]  # one batch for three requests submitted together
    assert all(g.text.strip() and 1 <= g.completion_tokens <= 8 for g in gens)
    solo = await model.generate(prompts[0], SamplingParams(max_tokens=8))
    assert solo.text == gens[0].text  # greedy, and left padding does not change the answer
    assert model.count_tokens("hello world") == 2
