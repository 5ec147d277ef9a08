//! One person's Open WebUI session against a row's [`Route`]: each user turn a streamed
//! `POST /api/chat` with the chat so far; after an answer that ran to its end, the
//! background tasks Open WebUI sends to the same model, one after another and not
//! streamed, while the person reads and types the next turn. A turn the person stops
//! closes its stream after some tokens and gets no background tasks; its partial answer
//! stays in the chat, as in Open WebUI.
//!
//! Every request is bounded by [`Context::timeout`]. Times are measured on the wall clock
//! and reported in life time (wall × scale).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio::task::JoinSet;

use super::route::{Lease, Route};
use super::workload::{Person, TurnPlan};
use crate::chat::ChatMessage;
use crate::testkit::owui::{self, Forwarded, Task};

/// What every session of a row shares.
#[derive(Debug)]
pub struct Context {
    pub http: reqwest::Client,
    pub route: Route,
    /// Life seconds per wall second.
    pub scale: f64,
    /// The longest any one request may take, in wall time.
    pub timeout: Duration,
}

impl Context {
    pub fn wall(&self, life: Duration) -> Duration {
        life.div_f64(self.scale)
    }

    pub fn life(&self, wall: Duration) -> Duration {
        wall.mul_f64(self.scale)
    }
}

/// How a user turn went. Times are life time since the request was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub marker: String,
    /// To the first non-empty content token.
    pub ttft: Option<Duration>,
    /// To the end of an answer that ran to its end.
    pub total: Option<Duration>,
    /// Content tokens (stream lines) received.
    pub received: u32,
    /// Pressed Stop.
    pub stopped: bool,
    pub error: Option<String>,
    /// When the client closed its connection before the answer's end (it pressed Stop or
    /// gave up waiting): tokens generated for it after this were for nobody.
    pub left_at: Option<Instant>,
}

/// How a background task went.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskOutcome {
    pub task: Task,
    pub took: Duration,
    pub error: Option<String>,
}

/// Everything one person's session did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    pub turns: Vec<TurnOutcome>,
    pub tasks: Vec<TaskOutcome>,
}

/// Runs `person`'s whole session, background tasks included.
pub async fn run(ctx: Arc<Context>, person: Person) -> Session {
    let who = Forwarded {
        user_id: person.user_id.clone(),
        user_name: person.name.clone(),
        chat_id: person.chat_id.clone(),
    };
    tokio::time::sleep(ctx.wall(person.start)).await;
    let mut chat: Vec<ChatMessage> = Vec::new();
    let mut background = JoinSet::new();
    let mut session = Session::default();
    for (i, turn) in person.turns.iter().enumerate() {
        tokio::time::sleep(ctx.wall(turn.think)).await;
        chat.push(ChatMessage::user(turn.prompt.as_str()));
        let (outcome, answer) = user_turn(&ctx, &who, turn, &chat).await;
        chat.push(ChatMessage::assistant(answer));
        let answered = !outcome.stopped && outcome.error.is_none();
        session.turns.push(outcome);
        if answered {
            background.spawn(tasks(
                ctx.clone(),
                who.clone(),
                turn.clone(),
                Task::after_answer(i == 0),
                chat.clone(),
            ));
        }
    }
    while let Some(done) = background.join_next().await {
        match done {
            Ok(tasks) => session.tasks.extend(tasks),
            // Nothing aborts these tasks: an error is a panic of the harness; pass it on.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    session
}

/// The background tasks after one answer, one after another.
async fn tasks(
    ctx: Arc<Context>,
    who: Forwarded,
    turn: TurnPlan,
    tasks: &'static [Task],
    chat: Vec<ChatMessage>,
) -> Vec<TaskOutcome> {
    let mut out = Vec::with_capacity(tasks.len());
    for &task in tasks {
        let key = format!("{}/{}", turn.marker, task.header_value());
        let started = Instant::now();
        let error = match ctx.route.pick(turn.model, &key) {
            Some(lease) => {
                let body = owui::task_body(turn.model, task, &chat);
                let request = ask(&ctx, &lease, &who, Some(task), &body);
                match tokio::time::timeout(ctx.timeout, request).await {
                    Ok(result) => result.err(),
                    Err(_) => Some(TIMEOUT.to_owned()),
                }
            }
            None => Some(format!("no URL serves {}", turn.model)),
        };
        out.push(TaskOutcome {
            task,
            took: ctx.life(started.elapsed()),
            error,
        });
    }
    out
}

/// A non-streamed request whose answer must be a chat message.
async fn ask(
    ctx: &Context,
    lease: &Lease,
    who: &Forwarded,
    task: Option<Task>,
    body: &Value,
) -> Result<(), String> {
    let response = post(ctx, lease, who, task, body).await?;
    let answer: Value = response.json().await.map_err(|e| format!("body: {e}"))?;
    match answer["message"]["content"].as_str() {
        Some(_) => Ok(()),
        None => Err(format!("no message in {answer}")),
    }
}

async fn post(
    ctx: &Context,
    lease: &Lease,
    who: &Forwarded,
    task: Option<Task>,
    body: &Value,
) -> Result<reqwest::Response, String> {
    let mut request = ctx.http.post(format!("{}/api/chat", lease.base)).json(body);
    for (name, value) in who.headers(task) {
        request = request.header(name, value);
    }
    let response = request.send().await.map_err(|e| format!("send: {e}"))?;
    if response.status().is_success() {
        Ok(response)
    } else {
        Err(format!("HTTP {}", response.status().as_u16()))
    }
}

/// The error of a request that outlived [`Context::timeout`]: its client gave up.
const TIMEOUT: &str = "timeout";

/// What a streamed answer delivered so far.
#[derive(Debug, Default)]
struct Reading {
    content: String,
    tokens: u32,
    first: Option<Duration>,
}

/// How a stream that did not fail ended.
enum Ended {
    Done,
    Stopped,
}

/// One streamed user turn; returns its outcome and the answer text the chat keeps.
async fn user_turn(
    ctx: &Context,
    who: &Forwarded,
    turn: &TurnPlan,
    chat: &[ChatMessage],
) -> (TurnOutcome, String) {
    let started = Instant::now();
    let mut reading = Reading::default();
    let ended = match ctx.route.pick(turn.model, &format!("{}/user", turn.marker)) {
        Some(lease) => {
            let body = owui::chat_body(turn.model, chat, true);
            let stream = stream(ctx, &lease, who, &body, turn, started, &mut reading);
            tokio::time::timeout(ctx.timeout, stream)
                .await
                .unwrap_or_else(|_| Err(TIMEOUT.to_owned()))
        }
        None => Err(format!("no URL serves {}", turn.model)),
    };
    let now = Instant::now();
    let elapsed = ctx.life(now - started);
    let left = matches!(ended, Ok(Ended::Stopped)) || ended.as_ref().is_err_and(|e| e == TIMEOUT);
    let outcome = TurnOutcome {
        marker: turn.marker.clone(),
        ttft: reading.first.map(|t| ctx.life(t)),
        total: matches!(ended, Ok(Ended::Done)).then_some(elapsed),
        received: reading.tokens,
        stopped: matches!(ended, Ok(Ended::Stopped)),
        error: ended.err(),
        left_at: left.then_some(now),
    };
    (outcome, reading.content)
}

/// Reads the NDJSON answer, one token a line, until `done`, an error, or Stop.
async fn stream(
    ctx: &Context,
    lease: &Lease,
    who: &Forwarded,
    body: &Value,
    turn: &TurnPlan,
    started: Instant,
    reading: &mut Reading,
) -> Result<Ended, String> {
    let response = post(ctx, lease, who, None, body).await?;
    let mut bytes = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    while let Some(chunk) = bytes.next().await {
        buffer.extend_from_slice(&chunk.map_err(|e| format!("stream: {e}"))?);
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: Value =
                serde_json::from_slice(&line).map_err(|e| format!("stream line: {e}"))?;
            if let Some(error) = value.get("error") {
                return Err(format!("stream error: {error}"));
            }
            let text = value["message"]["content"].as_str().unwrap_or_default();
            if !text.is_empty() {
                reading.first.get_or_insert_with(|| started.elapsed());
                reading.tokens += 1;
                reading.content.push_str(text);
                if turn
                    .stop_after
                    .is_some_and(|n| reading.tokens as usize >= n)
                {
                    // Dropping the response closes the connection: Open WebUI's Stop.
                    return Ok(Ended::Stopped);
                }
            }
            if value["done"].as_bool() == Some(true) {
                return Ok(Ended::Done);
            }
        }
    }
    Err("stream ended before done".to_owned())
}
