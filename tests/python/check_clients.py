"""Drives a running Coordinator with the official `openai`, `ollama` and `anthropic` Python
clients.

Usage: python check_clients.py http://127.0.0.1:PORT MODEL
Exits non-zero (with the failed check named) when any answer is not what the fake LLM
behind Coordinator says.
"""

import sys
import urllib.request

import ollama
import openai
from check_responses_messages import check_messages, check_responses

EMBEDDER = "nomic-embed-text"


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}")


def main():
    base, model = sys.argv[1], sys.argv[2]
    expected = f"Echo from {model}: hello from python"

    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused")
    ids = [m.id for m in client.models.list().data]
    check("auto" in ids and model in ids, f"openai: models list has auto and {model}: {ids}")

    res = client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hello from python"}]
    )
    check(res.choices[0].message.content == expected, "openai: non-streaming answer")
    check(res.choices[0].finish_reason == "stop", "openai: finish_reason stop")

    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "hello from python"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage, pieces = "", None, 0
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces += 1
                text += choice.delta.content
    check(text == expected, f"openai: streamed answer: {text!r}")
    check(pieces > 1, f"openai: streamed in pieces ({pieces})")
    check(usage is not None and usage.completion_tokens > 0, "openai: usage chunk")

    try:
        client.chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "x"}]
        )
        check(False, "openai: unknown model is an error")
    except openai.NotFoundError as e:
        check(model in str(e), "openai: unknown model is a 404 naming the models")

    oc = ollama.Client(host=base)
    names = [m.model for m in oc.list().models]
    check(model in names, f"ollama: list has {model}: {names}")
    res = oc.chat(model=model, messages=[{"role": "user", "content": "hello from python"}])
    check(res.message.content == expected, "ollama: non-streaming answer")
    check(res.done, "ollama: done")
    text = "".join(
        part.message.content
        for part in oc.chat(
            model=model,
            messages=[{"role": "user", "content": "hello from python"}],
            stream=True,
        )
    )
    check(text == expected, "ollama: streamed answer")
    check_text_completions(base, model)
    check_embeddings_and_models(base, model)
    check_responses(check, base, model)
    check_messages(check, base, model)
    print("python clients: all checks passed")


def check_text_completions(base, model):
    """`/api/generate` and `/v1/completions`, streamed and not, with a suffix (FIM)."""
    oc = ollama.Client(host=base)
    res = oc.generate(model=model, prompt="hello from python", system="Be brief.")
    check(res.response == f"Echo from {model}: hello from python", "ollama: generate")
    check(res.done and res.done_reason == "stop", "ollama: generate done")
    text = "".join(
        part.response
        for part in oc.generate(
            model=model, prompt="def f():", suffix="return 1", stream=True,
            options={"temperature": 0}, keep_alive="5m",
        )
    )
    check(text == f"Echo from {model}: def f(): [suffix: return 1]", f"ollama: streamed FIM generate: {text!r}")
    res = oc.generate(model=model, prompt="2 + 2 =", raw=True)
    check(res.response == f"Echo from {model}: 2 + 2 =", "ollama: raw generate")

    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused")
    res = client.completions.create(model=model, prompt="Once upon", max_tokens=50)
    check(res.choices[0].text == f"Echo from {model}: Once upon", "openai: legacy completion")
    check(res.object == "text_completion" and res.usage.completion_tokens > 0, "openai: completion object and usage")
    text = ""
    for chunk in client.completions.create(model=model, prompt="let x =", suffix=";", stream=True):
        text += "".join(c.text for c in chunk.choices)
    check(text == f"Echo from {model}: let x = [suffix: ;]", f"openai: streamed FIM completion: {text!r}")


def check_embeddings_and_models(base, model):
    """Embeddings on both APIs, `show`, `/`, and model management refused."""
    oc = ollama.Client(host=base)
    res = oc.embed(model=EMBEDDER, input=["the cat sat", "私の猫"])
    check(len(res.embeddings) == 2 and len(res.embeddings[0]) == 64, "ollama: embed")
    legacy = oc.embeddings(model=EMBEDDER, prompt="the cat sat")
    check(list(legacy.embedding) == list(res.embeddings[0]), "ollama: legacy embeddings")

    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused")
    # The SDK asks for base64 unless told otherwise, and decodes it.
    b64 = client.embeddings.create(model=EMBEDDER, input="the cat sat")
    floats = client.embeddings.create(model=EMBEDDER, input=["the cat sat"], encoding_format="float")
    same = all(abs(a - b) < 1e-6 for a, b in zip(b64.data[0].embedding, floats.data[0].embedding))
    check(len(b64.data[0].embedding) == 64 and same, "openai: embeddings in base64 and floats")
    short = client.embeddings.create(model=EMBEDDER, input="the cat sat", dimensions=16)
    check(len(short.data[0].embedding) == 16, "openai: embeddings with dimensions")

    shown = oc.show(model)
    check("completion" in (shown.capabilities or []), "ollama: show from the machine")
    with urllib.request.urlopen(base + "/") as r:
        check(r.read() == b"Ollama is running", "GET / says Ollama is running")
    with urllib.request.urlopen(urllib.request.Request(base + "/", method="HEAD")) as r:
        check(r.status == 200, "HEAD /")
    refusals = [
        ("pull", lambda: oc.pull(model)),
        ("push", lambda: oc.push(model)),
        ("create", lambda: oc.create(model="mine", from_=model)),
        ("copy", lambda: oc.copy(model, "mine")),
        ("delete", lambda: oc.delete(model)),
    ]
    for name, call in refusals:
        try:
            call()
            check(False, f"ollama: {name} is refused")
        except ollama.ResponseError as e:
            check(e.status_code == 403 and "managed on the machines" in str(e), f"ollama: {name} is refused: {e}")


if __name__ == "__main__":
    main()
