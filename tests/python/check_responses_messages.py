"""The official `openai` client on `POST /v1/responses` and the official `anthropic`
client on `POST /v1/messages`, whole and streamed, with function calls / tool use, against
a running Coordinator in front of the fake LLM. Called by check_clients.py.
"""

import anthropic
import openai

TOOL_MODEL = "llama3.1:8b"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}


def check_responses(check, base, model):
    expected = f"Echo from {model}: hello from python"
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused")

    res = client.responses.create(model=model, input="hello from python", instructions="be brief")
    check(res.output_text == expected, f"responses: whole answer: {res.output_text!r}")
    check(res.status == "completed" and res.usage.output_tokens > 0, "responses: completed with usage")

    with client.responses.stream(model=model, input="hello from python") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    check("".join(deltas) == expected and len(deltas) > 1, "responses: streamed in pieces")
    check(final.output_text == expected, "responses: the stream's final response")

    events = client.responses.create(model=model, input="hello from python", stream=True)
    kinds = [e.type for e in events]
    check(kinds[0] == "response.created" and kinds[-1] == "response.completed",
          f"responses: raw events from created to completed: {kinds[:2]}…{kinds[-1:]}")

    more = client.responses.create(model=model, input="and now?", previous_response_id=res.id)
    check(more.previous_response_id == res.id and more.output_text.endswith("and now?"),
          "responses: previous_response_id continues the conversation")
    try:
        client.responses.create(model=model, input="x", previous_response_id="resp_nope")
        check(False, "responses: an unknown previous_response_id is an error")
    except openai.BadRequestError as e:
        check("previous_response_id" in str(e), "responses: an unknown previous_response_id is a 400 naming it")

    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
    asked = client.responses.create(
        model=TOOL_MODEL, input='call tool get_weather {"city":"Kashiwa"}', tools=tools
    )
    calls = [item for item in asked.output if item.type == "function_call"]
    check(len(calls) == 1 and calls[0].name == "get_weather", "responses: a function call")
    answered = client.responses.create(
        model=TOOL_MODEL,
        previous_response_id=asked.id,
        tools=tools,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 24C"}],
    )
    check("sunny, 24C" in answered.output_text, f"responses: the call's output answered: {answered.output_text!r}")


def check_messages(check, base, model):
    expected = f"Echo from {model}: hello from python"
    client = anthropic.Anthropic(base_url=base, api_key="unused")
    hello = [{"role": "user", "content": "hello from python"}]

    msg = client.messages.create(model=model, max_tokens=200, system="be brief", messages=hello)
    check(msg.content[0].text == expected, f"anthropic: whole answer: {msg.content!r}")
    check(msg.stop_reason == "end_turn" and msg.usage.output_tokens > 0, "anthropic: end_turn with usage")

    with client.messages.stream(model=model, max_tokens=200, messages=hello) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    check("".join(pieces) == expected and len(pieces) > 1, "anthropic: streamed in pieces")
    check(final.content[0].text == expected and final.stop_reason == "end_turn",
          "anthropic: the stream's final message")

    kinds = [e.type for e in client.messages.create(model=model, max_tokens=200, messages=hello, stream=True)]
    check(kinds[0] == "message_start" and kinds[-1] == "message_stop",
          f"anthropic: raw events from message_start to message_stop: {kinds}")

    try:
        client.messages.create(model="no-such-model", max_tokens=10, messages=hello)
        check(False, "anthropic: unknown model is an error")
    except anthropic.NotFoundError as e:
        check(model in str(e), "anthropic: unknown model is a 404 naming the models")

    tools = [{"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER}]
    ask = {"role": "user", "content": 'call tool get_weather {"city":"Kashiwa"}'}
    used = client.messages.create(model=TOOL_MODEL, max_tokens=100, tools=tools, messages=[ask])
    blocks = [b for b in used.content if b.type == "tool_use"]
    check(used.stop_reason == "tool_use" and blocks and blocks[0].input == {"city": "Kashiwa"},
          "anthropic: a tool use")
    result = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": blocks[0].id, "content": "sunny, 24C"}]}
    with client.messages.stream(model=TOOL_MODEL, max_tokens=100, tools=tools,
                                messages=[ask, {"role": "assistant", "content": used.content}, result]) as stream:
        text = "".join(stream.text_stream)
    check("sunny, 24C" in text, f"anthropic: the tool result answered: {text!r}")
