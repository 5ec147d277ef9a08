//! Errors as clients see them: one enum, an exhaustive status-code match, and two wire
//! shapes (OpenAI `{"error":{"message","type","code"}}`, Ollama `{"error":"..."}`).
//! 5xx bodies never carry internals; the cause is logged once here.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::domain::TaskId;
use crate::lang::Lang;
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
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
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
            Self::NotFound(_) | Self::UnknownModel(_) => StatusCode::NOT_FOUND,
            Self::NoModels(_) | Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Busy { .. } => StatusCode::GATEWAY_TIMEOUT,
            Self::Upstream { .. } => StatusCode::BAD_GATEWAY,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn kind(&self) -> (&'static str, &'static str) {
        match self {
            Self::BadRequest { .. } => ("invalid_request_error", "invalid_request"),
            Self::Unauthorized => ("authentication_error", "invalid_api_key"),
            Self::NotFound(_) => ("invalid_request_error", "not_found"),
            Self::UnknownModel(_) => ("invalid_request_error", "model_not_found"),
            Self::NoModels(_) => ("server_error", "no_models"),
            Self::Busy { .. } => ("server_error", "cluster_busy"),
            Self::Upstream { .. } => ("server_error", "backend_error"),
            Self::Unavailable(_) => ("server_error", "unavailable"),
            Self::Internal(_) => ("server_error", "internal_error"),
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
            Self::Upstream { task_id, .. } => *task_id,
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

/// Errors about a recorded task name it in a header too, like successful answers do.
fn with_task_header(mut res: Response, task_id: Option<TaskId>) -> Response {
    if let Some(id) = task_id
        && let Ok(v) = axum::http::HeaderValue::from_str(&id.to_string())
    {
        res.headers_mut().insert("x-coordinator-task-id", v);
    }
    res
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        let task_id = self.task_id();
        with_task_header(
            (self.status(), Json(self.openai_body())).into_response(),
            task_id,
        )
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
        self.0.log();
        let task_id = self.0.task_id();
        let res = (self.0.status(), Json(json!({"error": self.0.to_string()}))).into_response();
        with_task_header(res, task_id)
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
                tracing::error!(error = %s, "task store failed");
                Self::Unavailable("the task store is unavailable; nothing was recorded".to_owned())
            }
            SubmitError::Queue { task_id, source } => {
                tracing::error!(task_id = %task_id, error = %source, "queue failed");
                Self::Unavailable(format!(
                    "task {task_id} was recorded but could not be queued; it will be queued again when the queue is back"
                ))
            }
            e @ SubmitError::Job { .. } => Self::Internal(e.to_string()),
        }
    }
}
