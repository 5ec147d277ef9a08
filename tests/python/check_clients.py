"""Drives a running Coordinator with the official `openai`, `ollama` and `anthropic` Python
clients.

Usage: python check_clients.py http://127.0.0.1:PORT MODEL
Exits non-zero (with the failed check named) when any answer is not what the fake LLM
behind Coordinator says.
"""

import sys

import ollama
import openai

from check_responses_messages import check_messages, check_responses


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
    check_responses(check, base, model)
    check_messages(check, base, model)
    print("python clients: all checks passed")


if __name__ == "__main__":
    main()
