//! The common entrance of the fake's generation routes: body parsing, knobs, latency,
//! injected failures and model lookup, with errors in each API's own shape
//! (Ollama `{"error":"..."}`, OpenAI `{"error":{"message","type","param","code"}}`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use std::sync::Arc;

use super::reply::{self, Last, Prompt, Reply};
use super::sim::{self, KeepAlive, Run, Sim, SimMessage, Want};
use super::{Call, Failure, Model, Shared, stream};

/// The in-stream error `error_after` sends.
pub(crate) const STREAM_ERROR: &str = "fake-llm: injected mid-stream error";

/// An error answer, boxed because a `Response` is large.
pub(crate) type Refusal = Box<Response>;

/// Which API a route belongs to, for the shape of its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    Ollama,
    OpenAi,
}

impl Api {
    pub(crate) fn error(self, status: StatusCode, message: &str) -> Response {
        self.error_with_code(status, message, None)
    }

    fn error_with_code(self, status: StatusCode, message: &str, code: Option<&str>) -> Response {
        let body = match self {
            Self::Ollama => serde_json::json!({ "error": message }),
            Self::OpenAi => {
                let kind = if status.is_server_error() {
                    "server_error"
                } else {
                    "invalid_request_error"
                };
                serde_json::json!({
                    "error": { "message": message, "type": kind, "param": null, "code": code }
                })
            }
        };
        (status, axum::Json(body)).into_response()
    }

    fn not_found(self, model: &str) -> Response {
        match self {
            Self::Ollama => self.error(
                StatusCode::NOT_FOUND,
                &format!("model \"{model}\" not found, try pulling it first"),
            ),
            Self::OpenAi => self.error_with_code(
                StatusCode::NOT_FOUND,
                &format!("The model `{model}` does not exist."),
                Some("model_not_found"),
            ),
        }
    }

    /// Ollama's answer when its queue is full (also on its OpenAI routes).
    fn busy(self) -> Response {
        self.error(
            StatusCode::SERVICE_UNAVAILABLE,
            "server busy, please try again.  maximum pending requests exceeded",
        )
    }

    fn fault(self, failure: Failure) -> Response {
        match failure {
            Failure::Drop => stream::dropped(),
            Failure::Status(503) if self == Self::Ollama => self.busy(),
            Failure::Status(code) => self.error(
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                "fake-llm: injected failure",
            ),
        }
    }

    /// Ollama's answer to `tools` for a model without the capability (on both APIs).
    pub(crate) fn tools_unsupported(self, model: &str) -> Response {
        self.error(
            StatusCode::BAD_REQUEST,
            &format!("registry.ollama.ai/library/{model} does not support tools"),
        )
    }

    /// Parses a JSON body, answering 400 in this API's shape when it is not one.
    pub(crate) fn parse<T: DeserializeOwned>(self, body: &[u8]) -> Result<T, Refusal> {
        serde_json::from_slice(body)
            .map_err(|e| Box::new(self.error(StatusCode::BAD_REQUEST, &e.to_string())))
    }

    /// Takes the knobs, waits the latency, applies an injected failure and finds the
    /// model. `chat` requests are numbered (for ids) and mark the model loaded.
    pub(crate) async fn admit<'a>(
        self,
        shared: &'a Shared,
        model: &str,
        chat: bool,
    ) -> Result<(Call, &'a Model), Refusal> {
        let call = shared.begin(model, chat);
        if !shared.pause(call.knobs.latency).await {
            let refusal = self.error(StatusCode::SERVICE_UNAVAILABLE, "fake-llm is shutting down");
            return Err(Box::new(refusal));
        }
        if let Some(failure) = call.fault {
            return Err(Box::new(self.fault(failure)));
        }
        let found = shared
            .model(model)
            .ok_or_else(|| Box::new(self.not_found(model)))?;
        if chat && shared.sim.is_none() {
            found.mark_loaded();
        }
        Ok((call, found))
    }

    /// The realistic mode's generation: fits the prompt into the context window, plans the
    /// reply from what is left, waits its turn on the machine (load, eviction, slot) and
    /// starts the run. The caller waits for the tokens as they come due.
    pub(crate) async fn realistic(
        self,
        shared: &Shared,
        sim: &Arc<Sim>,
        call: &Call,
        model: &Model,
        ask: Ask,
        mut prompt: Prompt,
    ) -> Result<(Run, Reply), Refusal> {
        let num_ctx = ask
            .num_ctx
            .unwrap_or(sim.realism.num_ctx)
            .min(model.spec.context_length)
            .max(1);
        let last_user = match ask.messages.last() {
            Some(m) if m.role == "user" => m.text.clone(),
            _ => String::new(),
        };
        let load_only = ask.messages.is_empty();
        let fitted = sim::fit(ask.messages, num_ctx);
        if let Last::User(text) = &mut prompt.last {
            fitted.last_user().unwrap_or_default().clone_into(text);
        }
        prompt.prompt_tokens = fitted.tokens;
        let reply = reply::plan(
            model,
            prompt,
            call.script.as_deref(),
            call.knobs.tokens,
            Some(sim.realism.answer_tokens),
            call.knobs.answers,
        );
        let speed = model.spec.speed.unwrap_or(sim.realism.speed);
        let want = Want {
            model: &model.spec.name,
            speed,
            num_ctx,
            keep_alive: ask.keep_alive,
            load_only,
        };
        let lease = tokio::select! {
            admitted = sim.admit(want) => admitted.map_err(|_| Box::new(self.busy()))?,
            () = shared.shutdown.cancelled() => {
                let refusal = self.error(StatusCode::SERVICE_UNAVAILABLE, "fake-llm is shutting down");
                return Err(Box::new(refusal));
            }
        };
        let run = Run::start(
            lease,
            fitted,
            speed,
            &model.spec.name,
            last_user,
            &reply.content,
        );
        Ok((run, reply))
    }

    /// The stream knobs applied to a non-streamed answer: a stall never answers (until
    /// shutdown drops the connection), an in-stream error becomes a 500.
    pub(crate) async fn whole_answer_fault(self, shared: &Shared, call: &Call) -> Option<Response> {
        if call.knobs.stall_after.is_some() {
            shared.shutdown.cancelled().await;
            return Some(stream::dropped());
        }
        if call.knobs.error_after.is_some() {
            return Some(self.error(StatusCode::INTERNAL_SERVER_ERROR, STREAM_ERROR));
        }
        None
    }

    /// Admits an embedding request (`{"model","input"}` on both APIs) and computes the
    /// vectors; also returns the input word count for usage.
    pub(crate) async fn embed<'a>(
        self,
        shared: &'a Shared,
        body: &[u8],
    ) -> Result<(&'a Model, Vec<Vec<f32>>, u32), Refusal> {
        let req: EmbedBody = self.parse(body)?;
        let (_, model) = self.admit(shared, &req.model, false).await?;
        let inputs = reply::inputs(&req.input);
        let vectors = inputs
            .iter()
            .map(|t| reply::shortened(reply::embed(t), req.dimensions))
            .collect();
        Ok((model, vectors, reply::count_words(inputs.iter().copied())))
    }
}

/// What a chat request asks of the realistic machine.
pub(crate) struct Ask {
    pub messages: Vec<SimMessage>,
    pub num_ctx: Option<u32>,
    pub keep_alive: Option<KeepAlive>,
}

/// Waits for a whole (non-streamed) answer of `tokens` tokens to be generated; `false`
/// when the server shuts down first.
pub(crate) async fn generate_whole(run: &mut Run, tokens: u32, shared: &Shared) -> bool {
    run.whole = true;
    run.total = tokens;
    if tokens > 0 && !run.until_due(tokens - 1, &shared.shutdown).await {
        return false;
    }
    run.sent = tokens;
    true
}

#[derive(Deserialize)]
struct EmbedBody {
    model: String,
    /// Both APIs: the vectors cut to this size (and normalised again).
    dimensions: Option<usize>,
    #[serde(default)]
    input: Value,
}
