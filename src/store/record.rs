//! Rows of the `tasks` table as Rust types.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::chat::ToolCall;
use crate::domain::{
    Domain, InternalTask, Lane, ModelName, Person, Priority, TaskId, TaskStatus, ThreadId,
    WorkerName,
};

/// A task as the service records it, before any worker touches it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewTask {
    pub task_id: TaskId,
    pub created_at: DateTime<Utc>,
    /// Whose task it is: only they (and an admin) can read it back or follow it.
    pub person: Person,
    pub thread_id: ThreadId,
    /// The user's original prompt, and nothing else.
    pub prompt: String,
    pub domain: Domain,
    pub model: ModelName,
    pub queue: Lane,
    pub status: TaskStatus,
    /// Set for tasks that are finished on insert (rule-answered internal tasks).
    pub response: Option<String>,
    pub worker_id: Option<WorkerName>,
    /// How many times a worker took it: 1 for a task handed to a worker with its row
    /// (`running` on insert), else 0.
    pub attempts: i64,
    pub internal_task: Option<InternalTask>,
    pub web_search: bool,
    pub reasons: Vec<String>,
    /// The serialised job, for tasks that go to a queue.
    pub job: Option<String>,
    /// False when the turn is never to become conversation memory for what only its
    /// request showed: the user asked so, an Open WebUI temporary chat, a turn carrying
    /// retrieved documents (see [`crate::memory::policy`]).
    pub remember: bool,
    /// Which waiting work goes first (interactive, background, batch).
    pub priority: Priority,
    /// What the model's window made of the request (`num_ctx` is written when it ends).
    pub context: ContextNote,
    /// The conversation as JSON chat messages, for a turn a client may continue by
    /// reference (see [`crate::turn::Turn::keep_conversation`]); `None` for others.
    pub conversation: Option<String>,
}

/// What fitting a request into its model's window did (see [`crate::context`]): nothing
/// is cut without the row saying so. `None` for a task that went to no model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ContextNote {
    /// Earlier messages left out: by `[history]` limits and by the window, oldest first.
    pub history_dropped: Option<i64>,
    /// Memory items left out, lowest score first.
    pub memory_dropped: Option<i64>,
    /// The estimated tokens of the prompt as sent (history, memory and prompt).
    pub estimated_prompt_tokens: Option<i64>,
    /// The window sent to the backend (Ollama's `num_ctx`), when one was.
    pub num_ctx: Option<i64>,
}

/// Where an answer's tool calls start in a task's `response`: the text, then this, then
/// the calls as JSON (see [`recorded_response`]).
const TOOL_CALLS_MARK: &str = "[tool_calls] ";

/// An answer as a task's `response` keeps it: its text, then any tool calls it made.
pub fn recorded_response(content: &str, calls: &[ToolCall]) -> String {
    if calls.is_empty() {
        return content.to_owned();
    }
    let calls = serde_json::to_string(calls).unwrap_or_default();
    format!("{content}{TOOL_CALLS_MARK}{calls}")
}

/// A task's `response` read back into the text and the tool calls
/// ([`recorded_response`] undone); a text that only looks like it is all text.
pub fn recorded_answer(response: &str) -> (String, Vec<ToolCall>) {
    if let Some((content, calls)) = response.rsplit_once(TOOL_CALLS_MARK)
        && let Ok(calls) = serde_json::from_str::<Vec<ToolCall>>(calls)
    {
        return (content.to_owned(), calls);
    }
    (response.to_owned(), Vec::new())
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskOutcome {
    pub status: TaskStatus,
    pub at: DateTime<Utc>,
    pub worker_id: Option<WorkerName>,
    pub response: Option<String>,
    pub error: Option<String>,
    pub fallback_used: bool,
    pub fallback_reason: Option<String>,
    pub queue_wait_ms: Option<i64>,
    pub first_token_ms: Option<i64>,
    pub total_ms: Option<i64>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    /// The window sent to the backend, when one was.
    pub num_ctx: Option<i64>,
}

impl TaskOutcome {
    pub fn failed(at: DateTime<Utc>, error: impl Into<String>) -> Self {
        Self {
            error: Some(error.into()),
            ..Self::ended(TaskStatus::Failed, at)
        }
    }

    /// Done at `at`, with nothing else known yet (the caller adds the answer, the times).
    pub fn done(at: DateTime<Utc>) -> Self {
        Self::ended(TaskStatus::Done, at)
    }

    fn ended(status: TaskStatus, at: DateTime<Utc>) -> Self {
        Self {
            status,
            at,
            worker_id: None,
            response: None,
            error: None,
            fallback_used: false,
            fallback_reason: None,
            queue_wait_ms: None,
            first_token_ms: None,
            total_ms: None,
            prompt_tokens: None,
            completion_tokens: None,
            num_ctx: None,
        }
    }
}

/// A whole row, as `GET /tasks/{id}` and `coordinator tasks show` present it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRecord {
    pub task_id: TaskId,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub person: Person,
    pub thread_id: ThreadId,
    pub prompt: String,
    pub domain: Domain,
    pub model: ModelName,
    pub worker_id: Option<WorkerName>,
    pub queue: Lane,
    pub status: TaskStatus,
    pub response: Option<String>,
    pub error: Option<String>,
    pub internal_task: Option<InternalTask>,
    pub web_search: bool,
    pub fallback_used: bool,
    pub fallback_reason: Option<String>,
    pub reasons: Vec<String>,
    #[serde(skip)]
    pub job: Option<String>,
    pub attempts: i64,
    pub queue_wait_ms: Option<i64>,
    pub first_token_ms: Option<i64>,
    pub total_ms: Option<i64>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    /// False when the user asked that this turn not be remembered, or forgot its memory.
    pub remember: bool,
    /// Interactive for rows written before priorities existed.
    pub priority: Priority,
    /// What the model's window made of the request.
    pub context: ContextNote,
    /// The conversation kept for a turn a client may continue by reference.
    #[serde(skip)]
    pub conversation: Option<String>,
}

/// Which tasks `list` returns.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub status: Option<TaskStatus>,
    /// Only internal tasks (Open WebUI background tasks).
    pub internal_only: bool,
    pub thread_id: Option<ThreadId>,
    /// Only this person's tasks.
    pub person: Option<Person>,
    pub limit: u32,
}

impl TaskFilter {
    /// The statement listing `columns` of the tasks this filter selects, newest first:
    /// each value behind the placeholder `mark(n)` (n from 1), then the limit behind the
    /// last one. Returns it with the values to bind before the limit, in order.
    pub(crate) fn list_statement(
        &self,
        columns: &str,
        mark: impl Fn(usize) -> String,
    ) -> (String, Vec<&str>) {
        let (clause, values) = self.where_clause(&mark);
        let sql = format!(
            "SELECT {columns} FROM tasks {clause} ORDER BY created_at DESC, task_id DESC LIMIT {}",
            mark(values.len() + 1)
        );
        (sql, values)
    }

    /// The `WHERE` clause of the conditions this filter sets (empty when it sets none),
    /// each value behind the placeholder `mark(n)` (n from 1), and the values to bind in
    /// that order. Only the conditions set are written: a catch-all form such as
    /// `(?1 IS NULL OR status = ?1)` hides from the planner which index fits, and then a
    /// store of a million tasks is read whole to find the few queued ones.
    fn where_clause(&self, mark: impl Fn(usize) -> String) -> (String, Vec<&str>) {
        let mut conditions = Vec::new();
        let mut values = Vec::new();
        let given = [
            ("status", self.status.map(TaskStatus::as_str)),
            ("thread_id", self.thread_id.as_ref().map(ThreadId::as_str)),
            ("person", self.person.as_ref().map(Person::as_str)),
        ];
        for (column, value) in given {
            if let Some(value) = value {
                values.push(value);
                conditions.push(format!("{column} = {}", mark(values.len())));
            }
        }
        if self.internal_only {
            conditions.push("internal_task IS NOT NULL".to_owned());
        }
        let clause = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        (clause, values)
    }
}

/// Builds a [`TaskRecord`] from a database row of either store: the columns that decode
/// the same way in SQLite and PostgreSQL are read here, the text columns parsed into their
/// domain types (`$corrupt` makes the error for one that does not parse); the three that
/// differ (the id, the status text and the reasons) are decoded by the caller and passed in.
macro_rules! task_record_from_row {
    ($r:expr, $task_id:expr, $status:expr, $reasons:expr, $corrupt:expr) => {{
        let corrupt = $corrupt;
        let text =
            |column: &str| -> Result<String, StoreError> { Ok($r.try_get::<String, _>(column)?) };
        let parsed = |column: &'static str, value: String| corrupt(format!("{column}: {value:?}"));
        TaskRecord {
            task_id: $task_id,
            created_at: $r.try_get("created_at")?,
            updated_at: $r.try_get("updated_at")?,
            person: {
                let v = text("person")?;
                Person::parse(&v).map_err(|_| parsed("person", v))?
            },
            thread_id: {
                let v = text("thread_id")?;
                ThreadId::parse(&v).map_err(|_| parsed("thread_id", v))?
            },
            prompt: $r.try_get("prompt")?,
            domain: {
                let v = text("domain")?;
                Domain::parse(&v).map_err(|_| parsed("domain", v))?
            },
            model: {
                let v = text("model")?;
                ModelName::parse(&v).map_err(|_| parsed("model", v))?
            },
            worker_id: match $r.try_get::<Option<String>, _>("worker_id")? {
                Some(v) => Some(WorkerName::parse(&v).map_err(|_| parsed("worker_id", v))?),
                None => None,
            },
            queue: {
                let v = text("queue")?;
                Lane::parse(&v).map_err(|_| parsed("queue", v))?
            },
            status: $status,
            response: $r.try_get("response")?,
            error: $r.try_get("error")?,
            internal_task: match $r.try_get::<Option<String>, _>("internal_task")? {
                Some(v) => {
                    Some(InternalTask::from_header(&v).ok_or_else(|| parsed("internal_task", v))?)
                }
                None => None,
            },
            web_search: $r.try_get("web_search")?,
            fallback_used: $r.try_get("fallback_used")?,
            fallback_reason: $r.try_get("fallback_reason")?,
            reasons: $reasons,
            job: $r.try_get("job")?,
            attempts: $r.try_get("attempts")?,
            queue_wait_ms: $r.try_get("queue_wait_ms")?,
            first_token_ms: $r.try_get("first_token_ms")?,
            total_ms: $r.try_get("total_ms")?,
            prompt_tokens: $r.try_get("prompt_tokens")?,
            completion_tokens: $r.try_get("completion_tokens")?,
            remember: $r.try_get("remember")?,
            priority: {
                let v = text("priority")?;
                Priority::parse(&v).map_err(|_| parsed("priority", v))?
            },
            context: ContextNote {
                history_dropped: $r.try_get("history_dropped")?,
                memory_dropped: $r.try_get("memory_dropped")?,
                estimated_prompt_tokens: $r.try_get("estimated_prompt_tokens")?,
                num_ctx: $r.try_get("num_ctx")?,
            },
            conversation: $r.try_get("conversation")?,
        }
    }};
}
pub(crate) use task_record_from_row;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_answer_reads_back_with_its_tool_calls() {
        let calls = vec![ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: r#"{"a":1}"#.into(),
        }];
        let text = recorded_response("let me see", &calls);
        assert_eq!(recorded_answer(&text), ("let me see".to_owned(), calls));
        assert_eq!(recorded_response("plain", &[]), "plain");
        let odd = "a [tool_calls] that is not JSON";
        assert_eq!(recorded_answer(odd), (odd.to_owned(), Vec::new()));
    }
}
