//! Recognising Open WebUI's background tasks (title, tags, follow-ups, queries, ...) before
//! any other rule sees the prompt, and telling them apart from RAG-augmented user turns.
//!
//! The `X-OpenWebUI-Task` header decides when present. Without it the request itself is
//! read: fixed openers (emoji, MoA), system-message markers (legacy tool calling, memory
//! review), and for `### Task:`-style templates a score of markers (`### Task:`,
//! `<chat_history>`, `### Output`, `USER:` lines, a JSON output request) plus shape
//! (`stream: false`, one user message, `max_tokens` 1000 or 4). The kind comes from the
//! JSON key the template asks for (`"title"`, `"tags"`, `"follow_ups"`, `"queries"`,
//! `"text"`, `"prompt"`): Open WebUI parses exactly those keys, so even an admin-rewritten
//! template must name them. Keys and tags inside the embedded chat history, or in the text
//! an autocompletion continues, are ignored.

use crate::domain::InternalTask;
use crate::turn::Turn;

use super::text::clip;

/// How many bytes of a prompt the detector reads.
const MAX_TEMPLATE_SCAN_BYTES: usize = 32 * 1024;

/// What kind of turn this is, for the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnKind {
    /// An Open WebUI background task.
    Internal { task: InternalTask, reason: String },
    /// A user turn wrapped in Open WebUI's RAG template; `question` is the user's own text.
    Rag { question: String, reason: String },
    /// A plain user turn. `note` explains an ignored header, if any.
    User { note: Option<String> },
}

/// Classifies a turn as an internal task, a RAG-augmented user turn, or a user turn.
pub(crate) fn detect(turn: &Turn) -> TurnKind {
    let mut note = None;
    if let Some(h) = turn.signals.task_header.as_deref() {
        match InternalTask::from_header(h) {
            Some(task) => {
                return TurnKind::Internal {
                    task,
                    reason: format!("internal: header X-OpenWebUI-Task={task}"),
                };
            }
            None => {
                note = Some(format!(
                    "internal: unknown X-OpenWebUI-Task={:?} ignored",
                    clip(h, 64)
                ));
            }
        }
    }
    if let Some(kind) = by_system_message(turn) {
        return kind;
    }
    let prompt = clip(turn.prompt.trim_start(), MAX_TEMPLATE_SCAN_BYTES);
    if let Some(kind) = by_opener(prompt) {
        return kind;
    }
    let instructions = outside_history(without_typed_text(prompt)).to_ascii_lowercase();
    let task_marker = instructions.starts_with("### task");
    let rag_in_system = turn
        .signals
        .system
        .as_deref()
        .is_some_and(|s| s.contains("<context>"));
    let context_block = instructions.contains("<context>") && instructions.contains("</context>");
    let sources = instructions.contains("<source");
    if context_block || (task_marker && sources) || rag_in_system {
        return TurnKind::Rag {
            question: rag_question(prompt).to_owned(),
            reason: "rag: Open WebUI RAG template around a user question (user turn)".to_owned(),
        };
    }
    if let Some(kind) = by_template(turn, prompt, &instructions, task_marker) {
        return kind;
    }
    TurnKind::User { note }
}

fn by_system_message(turn: &Turn) -> Option<TurnKind> {
    let system = turn.signals.system.as_deref()?.trim_start();
    let task = if system.starts_with("Available Tools:") {
        InternalTask::FunctionCalling
    } else if clip(system, 512)
        .to_ascii_lowercase()
        .contains("private memory reviewer")
    {
        InternalTask::MemoryReview
    } else {
        return None;
    };
    Some(TurnKind::Internal {
        task,
        reason: format!("internal: {task} by its system message"),
    })
}

fn by_opener(prompt: &str) -> Option<TurnKind> {
    let head = clip(prompt, 160).to_ascii_lowercase();
    let task = if head.starts_with("your task is to reflect the speaker's") {
        InternalTask::EmojiGeneration
    } else if head.starts_with("you have been provided with a set of responses from various models")
    {
        InternalTask::MoaResponseGeneration
    } else {
        return None;
    };
    Some(TurnKind::Internal {
        task,
        reason: format!("internal: {task} by its fixed opening sentence"),
    })
}

fn by_template(
    turn: &Turn,
    prompt: &str,
    instructions: &str,
    task_marker: bool,
) -> Option<TurnKind> {
    let s = &turn.signals;
    if s.response.is_streamed() {
        return None;
    }
    let has_history_tag = prompt.contains("<chat_history>");
    let role_lines = prompt.starts_with("USER:") || prompt.contains("\nUSER:");
    let output_heading = [
        "### output",
        "### guidelines",
        "### examples",
        "### chat history",
    ]
    .iter()
    .any(|h| instructions.contains(h));
    let asks_json = instructions.contains("json");
    let marker = 3 * usize::from(task_marker)
        + 2 * usize::from(has_history_tag)
        + usize::from(output_heading)
        + usize::from(role_lines)
        + usize::from(asks_json);
    let single = s.user_message_count == 1 && s.message_count == 1;
    let shape = 1 + usize::from(single) + usize::from(matches!(s.max_tokens, Some(1000 | 4)));
    // Most turns stop here, before the search for the key a template wants back.
    if marker < 2 || marker + shape < 4 {
        return None;
    }
    let (task, hint) = kind_hint(instructions)?;
    Some(TurnKind::Internal {
        task,
        reason: format!(
            "internal: {task} by template (hint {hint}, markers {marker}, shape {shape})"
        ),
    })
}

/// The task kind a template asks for, from the JSON key it wants back.
fn kind_hint(instructions: &str) -> Option<(InternalTask, &'static str)> {
    let key = |k: &str| {
        instructions.contains(&format!("\"{k}\"")) || instructions.contains(&format!("'{k}'"))
    };
    // First: the text being completed ends the template, outside any history, so a
    // `"title"` the user typed must not make it a title task.
    if key("text") && (instructions.contains("autocomplet") || instructions.contains("<type>")) {
        return Some((InternalTask::AutocompleteGeneration, "text"));
    }
    if key("follow_ups") {
        return Some((InternalTask::FollowUpGeneration, "follow_ups"));
    }
    if key("queries") {
        return Some((InternalTask::QueryGeneration, "queries"));
    }
    if key("tags") {
        return Some((InternalTask::TagsGeneration, "tags"));
    }
    if key("title") {
        return Some((InternalTask::TitleGeneration, "title"));
    }
    if key("prompt") && instructions.contains("image") {
        return Some((InternalTask::ImagePromptGeneration, "prompt"));
    }
    let compaction = instructions.contains("compact") || instructions.contains("summar");
    if instructions.starts_with("### task") && compaction && instructions.contains("conversation") {
        return Some((InternalTask::ContextCompaction, "summary"));
    }
    None
}

/// The prompt without the text an autocompletion continues: the `<text>…</text>` that ends
/// it, after the `<type>…</type>` that names its kind. The user typed it, so tags and
/// quoted keys in it (`"title"`, `<source …>`) must not count.
fn without_typed_text(prompt: &str) -> &str {
    let body = prompt.trim_end();
    if !body.ends_with("</text>") {
        return prompt;
    }
    let from = body.rfind("</type>").map_or(0, |i| i + "</type>".len());
    match body[from..].find("<text>") {
        Some(i) => &body[..from + i + "<text>".len()],
        None => prompt,
    }
}

/// The template without the chat history it embeds (so quoted keys there do not count).
fn outside_history(prompt: &str) -> String {
    match (
        prompt.find("<chat_history>"),
        prompt.rfind("</chat_history>"),
    ) {
        (Some(a), Some(b)) if b >= a => {
            let mut s = String::with_capacity(prompt.len());
            s.push_str(&prompt[..a]);
            s.push_str(&prompt[b + "</chat_history>".len()..]);
            s
        }
        (Some(a), None) => prompt[..a].to_owned(),
        _ => prompt.to_owned(),
    }
}

/// The user's own question in a RAG-augmented prompt.
fn rag_question(prompt: &str) -> &str {
    if let (Some(a), Some(b)) = (prompt.find("<user_query>"), prompt.rfind("</user_query>"))
        && a + "<user_query>".len() <= b
    {
        return prompt[a + "<user_query>".len()..b].trim();
    }
    match prompt.rfind("</context>") {
        Some(i) => prompt[i + "</context>".len()..].trim(),
        None => prompt.trim(),
    }
}
