//! Open WebUI-style task templates for the tests, written for this project after the
//! markers in the research notes (not copies of Open WebUI's text).

pub fn history(lines: &[(&str, &str)]) -> String {
    lines
        .iter()
        .map(|(role, text)| format!("{role}: {text}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn with_history(head: &str, json: &str, chat: &str) -> String {
    format!(
        "### Task:\n{head}\n### Guidelines:\n- Use the chat's primary language.\n- Today's date is 2026-05-01; do not search.\n\
         ### Output:\nJSON format: {json}\n### Chat History:\n<chat_history>\n{chat}\n</chat_history>"
    )
}

pub fn title(chat: &str) -> String {
    with_history(
        "Write a short 3-5 word title with an emoji that sums up the conversation.",
        r#"{ "title": "your title" }"#,
        chat,
    )
}

pub fn tags(chat: &str) -> String {
    with_history(
        "Pick 1-3 broad tags for the main themes of the chat, then up to 2 narrow ones.",
        r#"{ "tags": ["tag1", "tag2"] }"#,
        chat,
    )
}

pub fn follow_ups(chat: &str) -> String {
    with_history(
        "Suggest 3-5 follow-up questions the user might ask next.",
        r#"{ "follow_ups": ["question?"] }"#,
        chat,
    )
}

pub fn queries(chat: &str) -> String {
    with_history(
        "Decide whether search queries are needed and write 1-3 broad ones in the chat's language. \
         Prefer generating queries; return an empty list only when nothing can be searched.",
        r#"{ "queries": ["query1", "query2"] }"#,
        chat,
    )
}

pub fn image_prompt(chat: &str) -> String {
    with_history(
        "Write a detailed prompt for an image generation model from the conversation.",
        r#"{ "prompt": "detailed image description" }"#,
        chat,
    )
}

pub fn autocomplete(kind: &str, text: &str) -> String {
    format!(
        "### Task:\nYou are an autocompletion system. Continue the text in <text> for the completion type in <type>.\n\
         ### Output Rules:\n- Return JSON: {{ \"text\": \"<completion>\" }}\n- Keep it short.\n\
         <type>{kind}</type>\n<text>{text}</text>"
    )
}

pub fn compaction(chat: &str) -> String {
    format!(
        "### Task:\nCompact the conversation below into a faithful summary that keeps decisions, \
         names, numbers and open questions. Plain text, no preamble.\n<chat_history>\n{chat}\n</chat_history>"
    )
}

pub fn emoji(message: &str) -> String {
    format!(
        "Your task is to reflect the speaker's likely facial expression through a fitting emoji. \
         Reply with one emoji only.\n\nMessage: ```{message}```"
    )
}

pub fn moa(prompt: &str) -> String {
    format!(
        "You have been provided with a set of responses from various models to the latest user query: \
         \"{prompt}\"\n\nMerge them into one answer.\n\nResponses:\n\"\"\"A\"\"\"\n\n\"\"\"B\"\"\""
    )
}

pub fn rag(question: &str) -> String {
    format!(
        "### Task:\nAnswer the user query using the provided context, citing [id] where it applies.\n\
         ### Guidelines:\n- If unsure, say so.\n<context>\n<source id=\"1\" name=\"notes.md\">The latest release \
         fixed the error in the code path.</source>\n</context>\n\n{question}"
    )
}

pub const TOOLS_SYSTEM: &str = "Available Tools: [{\"name\": \"get_weather\", \"description\": \"Weather today\"}]\n\n\
    Choose the right tool(s) for the query and return only JSON: {\"tool_calls\": [{\"name\": \"\", \"parameters\": {}}]}";

pub const MEMORY_SYSTEM: &str =
    "You are Open WebUI's private memory reviewer. Return only valid JSON.";
