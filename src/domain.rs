//! Domain newtypes shared by every layer: raw strings stop at the API boundary.
//!
//! Each type has a `parse` constructor that rejects what the rest of the system
//! must never see (empty names, whitespace in model names, malformed task ids).

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use crate::queue::priority::Priority;

/// Lower-case hex of `bytes`: how hashes become ids and names (`key-1a2b3c4d`, `h-…`).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Why a value could not become a domain type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what}: {reason}")]
pub struct ParseError {
    pub what: &'static str,
    pub reason: String,
}

impl ParseError {
    fn new(what: &'static str, reason: impl Into<String>) -> Self {
        Self {
            what,
            reason: reason.into(),
        }
    }
}

/// A task id: UUID v7, so ids sort by creation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(Uuid);

impl TaskId {
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }

    pub fn parse(s: &str) -> Result<Self, ParseError> {
        Uuid::parse_str(s.trim())
            .map(Self)
            .map_err(|e| ParseError::new("task id", e.to_string()))
    }

    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl Default for TaskId {
    fn default() -> Self {
        Self::new()
    }
}

impl From<Uuid> for TaskId {
    fn from(u: Uuid) -> Self {
        Self(u)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A validated string; shared, so a clone (and the request path clones names often) is a
/// reference count, not an allocation.
macro_rules! string_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(std::sync::Arc<str>);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = ParseError;
            fn try_from(s: String) -> Result<Self, ParseError> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0.as_ref().to_owned()
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_newtype!(
    /// A model name as a backend knows it (`qwen2.5:7b`, `gpt-4o-mini`).
    ModelName
);

impl ModelName {
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ParseError::new("model name", "it is empty"));
        }
        if s.len() > 256 {
            return Err(ParseError::new("model name", "it is longer than 256 bytes"));
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ParseError::new(
                "model name",
                format!("{s:?} contains whitespace or control characters"),
            ));
        }
        Ok(Self(s.into()))
    }

    /// Whether two names are the same model as Ollama names it: `x` is `x:latest`.
    pub fn names_same_model(&self, other: &ModelName) -> bool {
        fn base(m: &ModelName) -> &str {
            m.as_str().strip_suffix(":latest").unwrap_or(m.as_str())
        }
        base(self) == base(other)
    }
}

string_newtype!(
    /// A worker (machine) name: `moon`, `gpu-desktop`.
    WorkerName
);

impl WorkerName {
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ParseError::new("worker name", "it is empty"));
        }
        if s.len() > 64 {
            return Err(ParseError::new("worker name", "it is longer than 64 bytes"));
        }
        if !s
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(ParseError::new(
                "worker name",
                format!("{s:?} may only hold letters, digits, '-', '_' and '.'"),
            ));
        }
        Ok(Self(s.into()))
    }
}

string_newtype!(
    /// A conversation thread: Open WebUI's chat id, a client's own id, or a stable hash.
    ThreadId
);

impl ThreadId {
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ParseError::new("thread id", "it is empty"));
        }
        if s.len() > 256 {
            return Err(ParseError::new("thread id", "it is longer than 256 bytes"));
        }
        if s.chars().any(char::is_control) {
            return Err(ParseError::new(
                "thread id",
                "it contains control characters",
            ));
        }
        Ok(Self(s.into()))
    }
}

string_newtype!(
    /// A person of the household: the owner of tasks and memories. The name of their API
    /// key (`alice`), a flat key's stable hash (`key-1a2b3c4d`), `<key>/<user id>` for a
    /// user a trusted front end vouches for (`openwebui/6f1c…`), or [`Person::DEFAULT`]
    /// when no keys are configured.
    Person
);

impl Person {
    /// Who owns everything when no API keys are configured (and every row from before
    /// there were people).
    pub const DEFAULT: &'static str = "default";

    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ParseError::new("person", "it is empty"));
        }
        if s.len() > 200 {
            return Err(ParseError::new("person", "it is longer than 200 bytes"));
        }
        if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(ParseError::new(
                "person",
                format!("{s:?} contains whitespace or control characters"),
            ));
        }
        Ok(Self(s.into()))
    }

    /// The person of a household without keys.
    pub fn default_person() -> Self {
        Self(Self::DEFAULT.into())
    }

    /// Whether this is [`Person::DEFAULT`].
    pub fn is_default(&self) -> bool {
        self.as_str() == Self::DEFAULT
    }
}

impl Default for Person {
    fn default() -> Self {
        Self::default_person()
    }
}

string_newtype!(
    /// A web page's origin as browsers send it in `Origin`: `scheme://host[:port]`, lower
    /// case, without the scheme's default port (`http://192.168.1.10:3000`).
    WebOrigin
);

impl WebOrigin {
    /// Accepts `http`/`https` origins; a trailing `/` is allowed, a path, query or user
    /// name is not. Equal origins parse to equal values (`HTTP://Host:80/` is `http://host`).
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        let url = reqwest::Url::parse(s)
            .map_err(|e| ParseError::new("origin", format!("{s:?} is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(ParseError::new(
                "origin",
                format!("{s:?} is not an http(s)://host[:port] origin"),
            ));
        }
        if url.path() != "/"
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err(ParseError::new(
                "origin",
                format!("{s:?} has more than scheme, host and port (an origin has no path)"),
            ));
        }
        Ok(Self(url.origin().ascii_serialization().into()))
    }
}

string_newtype!(
    /// What a prompt is about (`general`, `code`, or a domain of `[routing.domains]`): it
    /// picks the model of an `auto` turn.
    Domain
);

impl Domain {
    pub const GENERAL: &'static str = "general";
    pub const CODE: &'static str = "code";

    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ParseError::new("domain", "it is empty"));
        }
        if s.len() > 64 {
            return Err(ParseError::new("domain", "it is longer than 64 bytes"));
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ParseError::new(
                "domain",
                format!("{s:?} contains whitespace or control characters"),
            ));
        }
        Ok(Self(s.into()))
    }

    pub fn general() -> Self {
        Self(Self::GENERAL.into())
    }
}

/// A queue lane: one kind of work, and the key of its queue (`tasks:llm:<model>`,
/// `tasks:llm:<model>@<worker>`, `tasks:web`, `tasks:rag`, `tasks:utility`), written and
/// parsed in one place ([`Display`](fmt::Display) and [`FromStr`](std::str::FromStr)).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Lane {
    /// A model's generations: any worker serving the model takes them, or only
    /// `pinned_worker` (`model@worker` routing).
    Llm {
        model: ModelName,
        pinned_worker: Option<WorkerName>,
    },
    /// Rewritten into a query, searched, answered with the results (or without them).
    Web,
    /// The household's documents.
    Rag,
    /// Open WebUI's background tasks that a model answers.
    Utility,
}

impl Lane {
    const LLM_PREFIX: &'static str = "tasks:llm:";

    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        let bad = || {
            ParseError::new(
                "lane",
                format!(
                    "{s:?} is not tasks:llm:<model>[@<worker>], tasks:web, tasks:rag or tasks:utility"
                ),
            )
        };
        match s {
            "tasks:web" => return Ok(Self::Web),
            "tasks:rag" => return Ok(Self::Rag),
            "tasks:utility" => return Ok(Self::Utility),
            _ => {}
        }
        let rest = s.strip_prefix(Self::LLM_PREFIX).ok_or_else(bad)?;
        let (model, worker) = match rest.split_once('@') {
            Some((m, w)) => (m, Some(w)),
            None => (rest, None),
        };
        // Parsed as given: a lane is a key, never trimmed inside.
        if model.trim() != model || worker.is_some_and(|w| w.trim() != w) {
            return Err(bad());
        }
        Ok(Self::Llm {
            model: ModelName::parse(model).map_err(|_| bad())?,
            pinned_worker: worker
                .map(WorkerName::parse)
                .transpose()
                .map_err(|_| bad())?,
        })
    }

    /// The shared lane of a model: any worker that serves the model may take from it.
    pub fn llm(model: &ModelName) -> Self {
        Self::Llm {
            model: model.clone(),
            pinned_worker: None,
        }
    }

    /// The lane of a model pinned to one worker (`model@worker` routing).
    pub fn llm_pinned(model: &ModelName, worker: &WorkerName) -> Self {
        Self::Llm {
            model: model.clone(),
            pinned_worker: Some(worker.clone()),
        }
    }

    /// Whether the lane is pinned to one worker (`tasks:llm:<model>@<worker>`): only that
    /// worker takes from it, so its jobs are never placed or failed over elsewhere.
    pub fn is_pinned(&self) -> bool {
        matches!(
            self,
            Self::Llm {
                pinned_worker: Some(_),
                ..
            }
        )
    }

    /// Whether this is a model's own lane (not web, RAG or utility).
    pub fn is_llm(&self) -> bool {
        matches!(self, Self::Llm { .. })
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Llm {
                model,
                pinned_worker: None,
            } => write!(f, "{}{model}", Self::LLM_PREFIX),
            Self::Llm {
                model,
                pinned_worker: Some(w),
            } => write!(f, "{}{model}@{w}", Self::LLM_PREFIX),
            Self::Web => f.write_str("tasks:web"),
            Self::Rag => f.write_str("tasks:rag"),
            Self::Utility => f.write_str("tasks:utility"),
        }
    }
}

impl std::str::FromStr for Lane {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        Self::parse(s)
    }
}

impl TryFrom<String> for Lane {
    type Error = ParseError;

    fn try_from(s: String) -> Result<Self, ParseError> {
        Self::parse(&s)
    }
}

impl From<Lane> for String {
    fn from(lane: Lane) -> String {
        lane.to_string()
    }
}

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Queued,
    Running,
    Done,
    Failed,
    /// Stopped before its end: its client went away or asked (`POST /tasks/{id}/cancel`).
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Result<Self, ParseError> {
        match s.trim() {
            "queued" => Ok(Self::Queued),
            "running" => Ok(Self::Running),
            "done" => Ok(Self::Done),
            "failed" => Ok(Self::Failed),
            "cancelled" => Ok(Self::Cancelled),
            other => Err(ParseError::new(
                "task status",
                format!("{other:?} is not queued, running, done, failed or cancelled"),
            )),
        }
    }

    pub fn is_final(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Cancelled)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Open WebUI's background tasks (its `{{TASK}}` header values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InternalTask {
    TitleGeneration,
    TagsGeneration,
    FollowUpGeneration,
    QueryGeneration,
    AutocompleteGeneration,
    EmojiGeneration,
    ImagePromptGeneration,
    FunctionCalling,
    MoaResponseGeneration,
    MemoryReview,
    ContextCompaction,
}

impl InternalTask {
    pub const ALL: [InternalTask; 11] = [
        Self::TitleGeneration,
        Self::TagsGeneration,
        Self::FollowUpGeneration,
        Self::QueryGeneration,
        Self::AutocompleteGeneration,
        Self::EmojiGeneration,
        Self::ImagePromptGeneration,
        Self::FunctionCalling,
        Self::MoaResponseGeneration,
        Self::MemoryReview,
        Self::ContextCompaction,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::TitleGeneration => "title_generation",
            Self::TagsGeneration => "tags_generation",
            Self::FollowUpGeneration => "follow_up_generation",
            Self::QueryGeneration => "query_generation",
            Self::AutocompleteGeneration => "autocomplete_generation",
            Self::EmojiGeneration => "emoji_generation",
            Self::ImagePromptGeneration => "image_prompt_generation",
            Self::FunctionCalling => "function_calling",
            Self::MoaResponseGeneration => "moa_response_generation",
            Self::MemoryReview => "memory_review",
            Self::ContextCompaction => "context_compaction",
        }
    }

    /// Parses a `{{TASK}}` header value; `None` for empty or unknown values.
    pub fn from_header(s: &str) -> Option<Self> {
        let s = s.trim();
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for InternalTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_without_a_tag_is_the_latest_one() {
        let m = |s: &str| ModelName::parse(s).unwrap();
        assert!(m("nomic-embed-text").names_same_model(&m("nomic-embed-text:latest")));
        assert!(m("x:latest").names_same_model(&m("x")));
        assert!(m("x").names_same_model(&m("x")));
        assert!(!m("x:7b").names_same_model(&m("x")));
        assert!(!m("x").names_same_model(&m("xy")));
    }

    #[test]
    fn task_ids_are_v7_and_round_trip() {
        let id = TaskId::new();
        assert_eq!(id.as_uuid().get_version_num(), 7);
        assert_eq!(TaskId::parse(&id.to_string()), Ok(id));
        assert!(TaskId::parse("not-a-uuid").is_err());
    }

    #[test]
    fn origins_parse_to_what_browsers_send() {
        for (given, canonical) in [
            ("http://192.168.1.10:3000", "http://192.168.1.10:3000"),
            ("HTTP://OpenWebUI.lan:80/", "http://openwebui.lan"),
            ("https://chat.home:443", "https://chat.home"),
            ("http://[::1]:8080", "http://[::1]:8080"),
        ] {
            assert_eq!(
                WebOrigin::parse(given).unwrap().as_str(),
                canonical,
                "{given}"
            );
        }
        for bad in [
            "",
            "null",
            "*",
            "openwebui.lan:3000",
            "ftp://h",
            "http://h/chat",
            "http://h/?q",
            "http://u@h",
            "file:///tmp/x",
        ] {
            assert!(WebOrigin::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn model_names_reject_blank_and_spaces() {
        assert!(ModelName::parse("qwen2.5:7b").is_ok());
        assert!(ModelName::parse("  ").is_err());
        assert!(ModelName::parse("qwen 7b").is_err());
    }

    #[test]
    fn lanes_parse_only_known_shapes() {
        let m = ModelName::parse("qwen2.5:7b").unwrap();
        let w = WorkerName::parse("moon").unwrap();
        assert_eq!(Lane::llm(&m).to_string(), "tasks:llm:qwen2.5:7b");
        assert_eq!(
            Lane::llm_pinned(&m, &w).to_string(),
            "tasks:llm:qwen2.5:7b@moon"
        );
        assert!(Lane::llm_pinned(&m, &w).is_pinned());
        assert!(!Lane::llm(&m).is_pinned() && !Lane::Web.is_pinned());
        for ok in [
            "tasks:web",
            "tasks:rag",
            "tasks:utility",
            "tasks:llm:a",
            "tasks:llm:a@b",
            "tasks:llm:qwen2.5:7b@moon",
        ] {
            let lane = Lane::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(lane.to_string(), ok, "one spelling each way");
            assert_eq!(ok.parse::<Lane>(), Ok(lane.clone()));
            let json = serde_json::to_string(&lane).unwrap();
            assert_eq!(json, format!("\"{ok}\""), "serialized as its key");
            assert_eq!(serde_json::from_str::<Lane>(&json).unwrap(), lane);
        }
        assert_eq!(Lane::parse("tasks:web"), Ok(Lane::Web));
        for bad in [
            "tasks:",
            "tasks:llm:",
            "web",
            "tasks:llm:a b",
            "tasks:llm:a@",
        ] {
            assert!(Lane::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn internal_task_header_values() {
        for t in InternalTask::ALL {
            assert_eq!(InternalTask::from_header(t.as_str()), Some(t));
        }
        assert_eq!(InternalTask::from_header(""), None);
        assert_eq!(InternalTask::from_header("something_else"), None);
    }
}
