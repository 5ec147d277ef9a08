//! What Open WebUI sends to an Ollama URL, for the routing tests and the household
//! benchmark: its `### Task:` templates (written for this project after the markers in the
//! research notes, not copies of Open WebUI's text), the chat history as those templates
//! show it, the request bodies and the headers it adds when forwarding user info is on
//! (`ENABLE_FORWARD_USER_INFO_HEADERS`).

use serde_json::{Value, json};

use crate::chat::{ChatMessage, Role};

/// The forwarded user's id, name, and the chat the request belongs to.
pub const USER_ID_HEADER: &str = "X-OpenWebUI-User-Id";
pub const USER_NAME_HEADER: &str = "X-OpenWebUI-User-Name";
pub const CHAT_ID_HEADER: &str = "X-OpenWebUI-Chat-Id";
/// Which background task a request is (absent on a user's own turn).
pub const TASK_HEADER: &str = "X-OpenWebUI-Task";

/// A background task Open WebUI runs after an answer, on the chat's own model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// After the first answer.
    Title,
    /// After the first answer.
    Tags,
    /// After every answer.
    FollowUps,
}

impl Task {
    /// The `X-OpenWebUI-Task` value.
    pub fn header_value(self) -> &'static str {
        match self {
            Self::Title => "title_generation",
            Self::Tags => "tags_generation",
            Self::FollowUps => "follow_up_generation",
        }
    }

    /// How many of the chat's last messages the default template shows.
    pub fn window(self) -> usize {
        match self {
            Self::Title => 2,
            Self::Tags | Self::FollowUps => 6,
        }
    }

    /// The template's text with the chat's last [`Self::window`] messages in it.
    pub fn prompt(self, chat: &[ChatMessage]) -> String {
        let shown = chat_history(chat, self.window());
        match self {
            Self::Title => title(&shown),
            Self::Tags => tags(&shown),
            Self::FollowUps => follow_ups(&shown),
        }
    }

    /// What runs after an answer: follow-ups always, title and tags after the first.
    pub fn after_answer(first: bool) -> &'static [Task] {
        if first {
            &[Self::FollowUps, Self::Title, Self::Tags]
        } else {
            &[Self::FollowUps]
        }
    }
}

/// Who sends a request, as the forwarded headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    pub user_id: String,
    pub user_name: String,
    pub chat_id: String,
}

impl Forwarded {
    /// The headers of a user turn (`task: None`) or of a background task.
    pub fn headers(&self, task: Option<Task>) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            (USER_NAME_HEADER, self.user_name.clone()),
            (USER_ID_HEADER, self.user_id.clone()),
            (CHAT_ID_HEADER, self.chat_id.clone()),
        ];
        if let Some(task) = task {
            headers.push((TASK_HEADER, task.header_value().to_owned()));
        }
        headers
    }
}

/// A user turn as `POST /api/chat`: the whole chat so far, the new user message last.
pub fn chat_body(model: &str, messages: &[ChatMessage], stream: bool) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
        .collect();
    json!({"model": model, "messages": messages, "stream": stream})
}

/// A background task as `POST /api/chat`: one user message holding the template, not
/// streamed, to the chat's model.
pub fn task_body(model: &str, task: Task, chat: &[ChatMessage]) -> Value {
    chat_body(model, &[ChatMessage::user(task.prompt(chat))], false)
}

/// The last `last` messages of a chat as the templates show them (`USER: …`, one a line).
pub fn chat_history(chat: &[ChatMessage], last: usize) -> String {
    let start = chat.len().saturating_sub(last);
    let lines: Vec<(&str, &str)> = chat[start..]
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "USER",
                Role::Assistant => "ASSISTANT",
                Role::System => "SYSTEM",
                Role::Tool => "TOOL",
            };
            (role, m.content.as_str())
        })
        .collect();
    history(&lines)
}

/// Chat lines as the templates show them: `ROLE: text`, one a line.
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
