//! Errors as clients see them: one enum, an exhaustive status-code match, and two wire
//! shapes (OpenAI `{"error":{"message","type","code"}}`, Ollama `{"error":"..."}`).
//! 5xx bodies never carry internals; the cause is logged once here.

use axum::Json;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::domain::TaskId;
use crate::lang::Lang;
use crate::limits::Refusal;
use crate::routing::RouteError;
use crate::service::SubmitError;
use crate::turn::TurnError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest {
        message: String,
        param: Option<String>,
    },
    #[error("missing or invalid API key")]
    Unauthorized,
    /// The key is valid but may not do this (another person's memories).
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    UnknownModel(String),
    #[error("{0}")]
    NoModels(String),
    /// The task waited past the route timeout; it stays queued and recorded.
    #[error("{}", busy_message(*.task_id, *.waited_s, *.lang))]
    Busy {
        task_id: TaskId,
        waited_s: u64,
        lang: Lang,
    },
    /// A backend failed; the message names it and is safe to show.
    #[error("{message}")]
    Upstream {
        message: String,
        task_id: Option<TaskId>,
    },
    /// Refused before anything was recorded; try again after `retry_after_s`.
    #[error("{}", limited_message(*.refusal, *.lang))]
    Limited { refusal: Refusal, lang: Lang },
    #[error("{0}")]
    Unavailable(String),
    /// The process is shutting down: the task (if one was made) stays queued for the
    /// next start; try again shortly.
    #[error("{}", shutdown_message(*.task_id, *.lang))]
    ShuttingDown { task_id: Option<TaskId>, lang: Lang },
    /// The task store cannot write: nothing was recorded; try again shortly.
    #[error("{}", store_message(*.lang))]
    StoreUnavailable { lang: Lang },
    #[error("internal error")]
    Internal(String),
    /// A browser request from a web page not listed in `[server] allowed_origins`.
    #[error(
        "requests from web pages at {0} are not allowed; list the origin in [server] allowed_origins to allow it"
    )]
    OriginNotAllowed(String),
    #[error("{method} is not allowed on {path}")]
    MethodNotAllowed { method: String, path: String },
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The client did not send its request in time.
    #[error("{0}")]
    RequestTimeout(String),
    /// The connection cap is reached.
    #[error("too many open connections; try again shortly")]
    TooManyConnections,
}

/// Which wire shape an error takes: the route's own. `/api/*` is Ollama's front door;
/// `/v1/messages` Anthropic's; the rest of `/v1/*` and Coordinator's own routes answer
/// like OpenAI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorShape {
    OpenAi,
    Ollama,
    /// `{"type":"error","error":{"type","message"}}` (see [`crate::api::anthropic`]).
    Anthropic,
}

impl ErrorShape {
    pub fn for_path(path: &str) -> Self {
        if path == "/v1/messages" || path.starts_with("/v1/messages/") {
            Self::Anthropic
        } else if path == "/api" || path.starts_with("/api/") {
            Self::Ollama
        } else {
            Self::OpenAi
        }
    }
}

impl ApiError {
    /// The same error with its message in the language of the user's prompt, for the
    /// refusals a chat shows (too many requests, a store that cannot write, a shutdown).
    /// Others are unchanged: their messages are made in the prompt's language already.
    pub fn in_language(self, lang: Lang) -> Self {
        match self {
            Self::Limited { refusal, .. } => Self::Limited { refusal, lang },
            Self::StoreUnavailable { .. } => Self::StoreUnavailable { lang },
            Self::ShuttingDown { task_id, .. } => Self::ShuttingDown { task_id, lang },
            other => other,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
            param: None,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) | Self::UnknownModel(_) => StatusCode::NOT_FOUND,
            Self::NoModels(_)
            | Self::Unavailable(_)
            | Self::StoreUnavailable { .. }
            | Self::ShuttingDown { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Busy { .. } => StatusCode::GATEWAY_TIMEOUT,
            Self::Limited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Upstream { .. } => StatusCode::BAD_GATEWAY,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::OriginNotAllowed(_) => StatusCode::FORBIDDEN,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::TooManyConnections => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn kind(&self) -> (&'static str, &'static str) {
        match self {
            Self::BadRequest { .. } => ("invalid_request_error", "invalid_request"),
            Self::Unauthorized => ("authentication_error", "invalid_api_key"),
            Self::Forbidden(_) => ("permission_error", "forbidden"),
            Self::NotFound(_) => ("invalid_request_error", "not_found"),
            Self::UnknownModel(_) => ("invalid_request_error", "model_not_found"),
            Self::NoModels(_) => ("server_error", "no_models"),
            Self::Busy { .. } => ("server_error", "cluster_busy"),
            Self::Limited { refusal, .. } => ("rate_limit_error", refusal.code()),
            Self::Upstream { .. } => ("server_error", "backend_error"),
            Self::Unavailable(_) => ("server_error", "unavailable"),
            Self::StoreUnavailable { .. } => ("server_error", "store_unavailable"),
            Self::ShuttingDown { .. } => ("server_error", "shutting_down"),
            Self::Internal(_) => ("server_error", "internal_error"),
            Self::OriginNotAllowed(_) => ("permission_error", "origin_not_allowed"),
            Self::MethodNotAllowed { .. } => ("invalid_request_error", "method_not_allowed"),
            Self::PayloadTooLarge { .. } => ("invalid_request_error", "request_too_large"),
            Self::UnsupportedMediaType(_) => ("invalid_request_error", "unsupported_media_type"),
            Self::RequestTimeout(_) => ("invalid_request_error", "request_timeout"),
            Self::TooManyConnections => ("server_error", "too_many_connections"),
        }
    }

    fn log(&self) {
        if let Self::Internal(cause) = self {
            tracing::error!(cause = %cause, "request failed with an internal error");
        }
    }

    /// The task this error is about, if any.
    pub fn task_id(&self) -> Option<TaskId> {
        match self {
            Self::Busy { task_id, .. } => Some(*task_id),
            Self::Upstream { task_id, .. } | Self::ShuttingDown { task_id, .. } => *task_id,
            _ => None,
        }
    }

    /// OpenAI's error object.
    pub fn openai_body(&self) -> serde_json::Value {
        let (kind, code) = self.kind();
        let param = match self {
            Self::BadRequest { param, .. } => param.clone(),
            _ => None,
        };
        let mut body = json!({"error": {"message": self.to_string(), "type": kind, "code": code, "param": param}});
        if let Some(id) = self.task_id() {
            body["error"]["task_id"] = json!(id.to_string());
        }
        body
    }
}

fn busy_message(task_id: TaskId, waited_s: u64, lang: Lang) -> String {
    match lang {
        Lang::Ja => format!(
            "クラスタが混雑しています: タスク {task_id} は {waited_s} 秒待っても回答を始めていません。キューには残っていて、GET /tasks/{task_id} で結果を確認できます。"
        ),
        Lang::En => format!(
            "the cluster is busy: task {task_id} has not started answering after {waited_s} s; it is still queued and can be read at GET /tasks/{task_id}"
        ),
    }
}

/// How long a client is asked to wait when the task store cannot write.
const STORE_RETRY_S: u64 = 5;

/// How long a client is asked to wait when the process is shutting down (a restart).
const SHUTDOWN_RETRY_S: u64 = 10;

fn shutdown_message(task_id: Option<TaskId>, lang: Lang) -> String {
    match (task_id, lang) {
        (Some(id), Lang::Ja) => format!(
            "Coordinator が再起動のため停止中です。タスク {id} はキューに残り、次の起動後に実行されます（GET /tasks/{id} で結果を確認できます）。{SHUTDOWN_RETRY_S} 秒ほど待ってからもう一度お試しください。"
        ),
        (Some(id), Lang::En) => format!(
            "Coordinator is shutting down; task {id} stays queued and runs after the next start (GET /tasks/{id} shows it); try again in {SHUTDOWN_RETRY_S} s"
        ),
        (None, Lang::Ja) => format!(
            "Coordinator が再起動のため停止中です。何も記録していません。{SHUTDOWN_RETRY_S} 秒ほど待ってからもう一度お試しください。"
        ),
        (None, Lang::En) => format!(
            "Coordinator is shutting down; nothing was recorded; try again in {SHUTDOWN_RETRY_S} s"
        ),
    }
}

fn store_message(lang: Lang) -> String {
    match lang {
        Lang::Ja => format!(
            "タスクを記録できないため、受け付けられませんでした（記録用データベースに書き込めません）。{STORE_RETRY_S} 秒ほど待ってからもう一度お試しください。"
        ),
        Lang::En => format!(
            "the task store cannot write right now, so nothing was recorded; try again in {STORE_RETRY_S} s"
        ),
    }
}

fn limited_message(refusal: Refusal, lang: Lang) -> String {
    let s = refusal.retry_after_s();
    match (refusal, lang) {
        (Refusal::TooFast { .. }, Lang::Ja) => {
            format!("リクエストが多すぎます。{s} 秒ほど待ってからもう一度お試しください。")
        }
        (Refusal::TooFast { .. }, Lang::En) => {
            format!("too many requests: try again in {s} s")
        }
        (Refusal::LaneFull { .. }, Lang::Ja) => format!(
            "このモデルの待ち行列が満杯です。何も記録していません。{s} 秒ほど待ってからもう一度お試しください。"
        ),
        (Refusal::LaneFull { .. }, Lang::En) => {
            format!("the queue for this model is full; nothing was recorded: try again in {s} s")
        }
        (Refusal::PersonFull { .. }, Lang::Ja) => format!(
            "あなたの依頼がすでにたくさん待っています。何も記録していません。{s} 秒ほど待ってからもう一度お試しください。"
        ),
        (Refusal::PersonFull { .. }, Lang::En) => format!(
            "you have as many requests waiting as you may; nothing was recorded: try again in {s} s"
        ),
    }
}

/// Errors about a recorded task name it in a header too, like successful answers do; a
/// refusal says when to come back.
fn with_task_header(mut res: Response, error: &ApiError) -> Response {
    if let Some(id) = error.task_id()
        && let Ok(v) = HeaderValue::from_str(&id.to_string())
    {
        res.headers_mut().insert("x-coordinator-task-id", v);
    }
    let retry_after = match error {
        ApiError::Limited { refusal, .. } => Some(refusal.retry_after_s()),
        ApiError::StoreUnavailable { .. } => Some(STORE_RETRY_S),
        ApiError::ShuttingDown { .. } => Some(SHUTDOWN_RETRY_S),
        _ => None,
    };
    if let Some(s) = retry_after {
        res.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from(s),
        );
    }
    res
}

impl ApiError {
    /// The response in `shape`: the one place both wire shapes are written.
    pub fn into_shaped_response(self, shape: ErrorShape) -> Response {
        self.log();
        let body = match shape {
            ErrorShape::OpenAi => self.openai_body(),
            ErrorShape::Ollama => json!({"error": self.to_string()}),
            ErrorShape::Anthropic => self.anthropic_body(),
        };
        let mut res = (self.status(), Json(body)).into_response();
        if matches!(self, Self::RequestTimeout(_) | Self::PayloadTooLarge { .. }) {
            // The rest of the body is not read: the connection cannot carry another request.
            res.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        with_task_header(res, &self)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_shaped_response(ErrorShape::OpenAi)
    }
}

/// The same error in Ollama's shape, for `/api/*` routes.
#[derive(Debug)]
pub struct OllamaError(pub ApiError);

impl From<ApiError> for OllamaError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

impl IntoResponse for OllamaError {
    fn into_response(self) -> Response {
        self.0.into_shaped_response(ErrorShape::Ollama)
    }
}

impl From<super::http::BodyError> for ApiError {
    fn from(e: super::http::BodyError) -> Self {
        Self::BadRequest {
            message: e.to_string(),
            param: (e.path != "body").then(|| e.path.clone()),
        }
    }
}

/// A body that could not be read: too large (413), too slow (408), or cut off (400).
impl From<BytesRejection> for ApiError {
    fn from(e: BytesRejection) -> Self {
        if let Some(late) = find_cause::<crate::server::BodyTimedOut>(&e) {
            return Self::RequestTimeout(late.to_string());
        }
        if let BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) = e {
            return Self::PayloadTooLarge {
                limit: super::http::BODY_LIMIT,
            };
        }
        Self::bad_request(format!("could not read the request body: {e}"))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> Self {
        Self::bad_request(e.body_text())
    }
}

/// The first `E` in `err`'s chain of causes.
fn find_cause<'a, E: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        next = e.source();
    }
    None
}

/// A request that cannot become a turn is the client's mistake; the message names the field.
impl From<TurnError> for ApiError {
    fn from(e: TurnError) -> Self {
        Self::BadRequest {
            message: e.to_string(),
            param: Some(e.field().to_owned()),
        }
    }
}

impl From<RouteError> for ApiError {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::NoModels => Self::NoModels(e.to_string()),
            RouteError::UnknownModel { .. } | RouteError::NotOnWorker { .. } => {
                Self::UnknownModel(e.to_string())
            }
            #[allow(unreachable_patterns)]
            other => Self::BadRequest {
                message: other.to_string(),
                param: Some("model".to_owned()),
            },
        }
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> Self {
        match e {
            SubmitError::Route(r) => r.into(),
            SubmitError::Store(s) => {
                tracing::error!(error = %s, "task store failed; the turn was refused");
                Self::StoreUnavailable { lang: Lang::En }
            }
            SubmitError::Queue { task_id, source } => {
                tracing::error!(task_id = %task_id, error = %source, "queue failed");
                Self::Unavailable(format!(
                    "task {task_id} was recorded but could not be queued; it will be queued again when the queue is back"
                ))
            }
            SubmitError::ShuttingDown => Self::ShuttingDown {
                task_id: None,
                lang: Lang::En,
            },
            SubmitError::Limited(refusal) => Self::Limited {
                refusal,
                lang: Lang::En,
            },
            e @ SubmitError::Job { .. } => Self::Internal(e.to_string()),
            // In the prompt's language, naming what is too long.
            SubmitError::TooLong(e) => Self::BadRequest {
                message: e.to_string(),
                param: Some("messages".to_owned()),
            },
        }
    }
}
