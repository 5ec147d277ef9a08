//! HTTP plumbing shared by the backend clients: one pooled `reqwest` client per backend,
//! request sending with timeouts, HTTP-status → [`BackendError`] mapping, and a streaming
//! driver that splits a response body into lines and hands them to a protocol decoder
//! (Ollama NDJSON or OpenAI SSE) while watching for silence.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use reqwest::Url;
use serde::de::DeserializeOwned;

use super::{BackendError, ChunkStream, ClientSettings};
use crate::chat::Chunk;

/// How long a finished stream waits for the body's end, so the connection can be reused.
const DRAIN_LIMIT: Duration = Duration::from_millis(100);
/// A line longer than this (no newline in sight) means the peer is not speaking our protocol.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// How much of an unparseable error body ends up in an error message.
const MAX_ERROR_TEXT: usize = 300;

/// Builds the one pooled HTTP client a backend uses.
pub(super) fn http_client(settings: &ClientSettings) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .tcp_nodelay(true)
        .user_agent(concat!("coordinator/", env!("CARGO_PKG_VERSION")))
        .build()?)
}

/// Joins a relative endpoint path onto the backend's base URL (which ends with `/`).
pub(super) fn endpoint(settings: &ClientSettings, path: &str) -> anyhow::Result<Url> {
    Ok(settings.base_url.join(path)?)
}

/// Adds the bearer token when the backend has one.
pub(super) fn authorize(
    settings: &ClientSettings,
    req: reqwest::RequestBuilder,
) -> reqwest::RequestBuilder {
    match &settings.api_key {
        Some(key) => req.bearer_auth(key),
        None => req,
    }
}

/// Sends a request and waits (at most `idle_timeout`) for the response head. Non-2xx
/// answers become the matching [`BackendError`].
pub(super) async fn send(
    settings: &ClientSettings,
    url: &Url,
    req: reqwest::RequestBuilder,
) -> Result<reqwest::Response, BackendError> {
    send_within(settings, url, req, settings.idle_timeout).await
}

/// [`send`] for a whole answer (`stream: false`): the server says nothing until it has
/// generated all of it, so the head may take up to `answer_timeout`.
pub(super) async fn send_whole(
    settings: &ClientSettings,
    url: &Url,
    req: reqwest::RequestBuilder,
) -> Result<reqwest::Response, BackendError> {
    let limit = settings.answer_timeout.max(settings.idle_timeout);
    send_within(settings, url, req, limit).await
}

async fn send_within(
    settings: &ClientSettings,
    url: &Url,
    req: reqwest::RequestBuilder,
    limit: Duration,
) -> Result<reqwest::Response, BackendError> {
    let idle = settings.idle_timeout;
    let resp = match tokio::time::timeout(limit, req.send()).await {
        Err(_) => return Err(timeout_after(settings, limit)),
        Ok(Err(e)) => return Err(send_error(settings, url, &e)),
        Ok(Ok(resp)) => resp,
    };
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status().as_u16();
    let body = match tokio::time::timeout(idle, resp.bytes()).await {
        Ok(Ok(body)) => body,
        _ => Bytes::new(),
    };
    Err(status_error(
        settings.name.as_str(),
        status,
        error_message(&body),
    ))
}

/// Sends a small request and reads its whole JSON answer, all within `idle_timeout`.
pub(super) async fn fetch_json<T: DeserializeOwned>(
    settings: &ClientSettings,
    url: &Url,
    req: reqwest::RequestBuilder,
) -> Result<T, BackendError> {
    fetch_json_within(settings, url, req, settings.idle_timeout, |_| ())
        .await
        .map(|(answer, ())| answer)
}

/// [`fetch_json`] for a small answer about the machine (its models, what it holds loaded,
/// a model's details): within [`ClientSettings::look_timeout`].
pub(super) async fn look_json<T: DeserializeOwned>(
    settings: &ClientSettings,
    url: &Url,
    req: reqwest::RequestBuilder,
) -> Result<T, BackendError> {
    look_json_with(settings, url, req, |_| ())
        .await
        .map(|(answer, ())| answer)
}

/// [`look_json`], with what `head` takes from the answer's head (a header) beside it.
pub(super) async fn look_json_with<T: DeserializeOwned, H>(
    settings: &ClientSettings,
    url: &Url,
    req: reqwest::RequestBuilder,
    head: impl FnOnce(&reqwest::Response) -> H,
) -> Result<(T, H), BackendError> {
    let limit = settings.look_timeout.min(settings.idle_timeout);
    fetch_json_within(settings, url, req, limit, head).await
}

/// A JSON answer, whole within `limit`, with what `head` takes from its head.
async fn fetch_json_within<T: DeserializeOwned, H>(
    settings: &ClientSettings,
    url: &Url,
    req: reqwest::RequestBuilder,
    limit: Duration,
    head: impl FnOnce(&reqwest::Response) -> H,
) -> Result<(T, H), BackendError> {
    let call = async {
        let resp = send_within(settings, url, req, limit).await?;
        let taken = head(&resp);
        let body = resp
            .bytes()
            .await
            .map_err(|e| protocol(settings, format!("reading {url}: {}", error_chain(&e))))?;
        serde_json::from_slice::<T>(&body)
            .map(|answer| (answer, taken))
            .map_err(|e| protocol(settings, format!("unexpected answer from {url}: {e}")))
    };
    tokio::time::timeout(limit, call)
        .await
        .unwrap_or_else(|_| Err(timeout_after(settings, limit)))
}

/// An embedding answer must hold one vector per input, all of one non-zero length.
pub(super) fn check_embedding_count(
    settings: &ClientSettings,
    inputs: usize,
    vectors: Vec<Vec<f32>>,
) -> Result<Vec<Vec<f32>>, BackendError> {
    let dim = vectors.first().map_or(0, Vec::len);
    if vectors.len() != inputs || (inputs > 0 && dim == 0) || vectors.iter().any(|v| v.len() != dim)
    {
        return Err(protocol(
            settings,
            format!(
                "asked for {inputs} embeddings, got {} (dimensions {dim})",
                vectors.len()
            ),
        ));
    }
    Ok(vectors)
}

fn timeout(settings: &ClientSettings) -> BackendError {
    timeout_after(settings, settings.idle_timeout)
}

fn timeout_after(settings: &ClientSettings, after: Duration) -> BackendError {
    BackendError::Timeout {
        backend: settings.name.to_string(),
        after_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
    }
}

fn protocol(settings: &ClientSettings, message: String) -> BackendError {
    BackendError::Protocol {
        backend: settings.name.to_string(),
        message,
    }
}

/// Maps a failure to get any response at all.
fn send_error(settings: &ClientSettings, url: &Url, e: &reqwest::Error) -> BackendError {
    // Checked first: an expired connect timeout is also a connect error (host unreachable).
    if e.is_connect() {
        return BackendError::Connect {
            backend: settings.name.to_string(),
            url: url.to_string(),
            detail: error_chain(e),
        };
    }
    if e.is_timeout() {
        return timeout(settings);
    }
    protocol(
        settings,
        format!(
            "connection to {url} failed before a response: {}",
            error_chain(e)
        ),
    )
}

/// The error and its sources, joined: reqwest's own message alone hides the cause.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Maps an HTTP error status to the error kind the router acts on.
pub(super) fn status_error(backend: &str, status: u16, message: String) -> BackendError {
    let backend = backend.to_owned();
    match status {
        429 | 503 => BackendError::Busy {
            backend,
            status,
            message,
        },
        400..=499 => BackendError::Rejected {
            backend,
            status,
            message,
        },
        500..=599 => BackendError::Server {
            backend,
            status,
            message,
        },
        _ => BackendError::Protocol {
            backend,
            message: format!("unexpected HTTP {status}: {message}"),
        },
    }
}

/// The human message in an error body: Ollama `{"error":"..."}`, OpenAI
/// `{"error":{"message":...}}`, a bare `{"message":...}`, the same as an SSE `data:` line,
/// or else the (shortened) text.
pub(super) fn error_message(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        if let Some(message) = json_error_message(&value) {
            return message;
        }
    }
    let sse_message = String::from_utf8_lossy(body).lines().find_map(|line| {
        let data = line.strip_prefix("data:")?;
        json_error_message(&serde_json::from_str(data.trim()).ok()?)
    });
    if let Some(message) = sse_message {
        return message;
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "no error message".to_owned();
    }
    let mut end = text.len().min(MAX_ERROR_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// The message of a JSON error object in either API's shape, if it is one.
pub(super) fn json_error_message(value: &serde_json::Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    match error {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(map) => match map.get("message") {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
            None if value.get("error").is_some() => Some(error.to_string()),
            None => None,
        },
        _ => None,
    }
}

/// What a decoder reports about a line it cannot accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum WireError {
    /// The backend reported an error inside the stream.
    MidStream(String),
    /// The bytes do not follow the protocol.
    Protocol(String),
}

/// A streaming protocol decoder fed one complete line at a time.
pub(super) trait Decoder: Send + 'static {
    /// Handles one line (without its line terminator).
    fn line(&mut self, line: &str, out: &mut VecDeque<Chunk>) -> Result<(), WireError>;
    /// The body ended; emit what is left or complain that the answer is incomplete.
    fn end(&mut self, out: &mut VecDeque<Chunk>) -> Result<(), WireError>;
    /// Whether the final chunk has been emitted; later bytes are ignored.
    fn finished(&self) -> bool;
}

/// Splits bytes into lines across network chunk boundaries. Lines are only cut at `\n`,
/// which never occurs inside a multi-byte UTF-8 sequence, so split characters are safe.
#[derive(Debug, Default)]
pub(super) struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    /// Feeds bytes, calling `on_line` for every completed line (`\r\n` or `\n`), as bytes:
    /// [`line_text`] reads one as text, so a caller may skip a line without reading it.
    pub(super) fn push(
        &mut self,
        mut data: &[u8],
        mut on_line: impl FnMut(&[u8]) -> Result<(), WireError>,
    ) -> Result<(), WireError> {
        while let Some(pos) = data.iter().position(|&b| b == b'\n') {
            let (head, rest) = (&data[..pos], &data[pos + 1..]);
            data = rest;
            if self.partial.is_empty() {
                on_line(head)?;
            } else {
                self.partial.extend_from_slice(head);
                let result = on_line(&self.partial);
                self.partial.clear();
                result?;
            }
        }
        if self.partial.len() + data.len() > MAX_LINE_BYTES {
            return Err(WireError::Protocol(format!(
                "a line is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        self.partial.extend_from_slice(data);
        Ok(())
    }

    /// Hands over a last line that had no terminator.
    pub(super) fn finish(
        &mut self,
        on_line: impl FnOnce(&[u8]) -> Result<(), WireError>,
    ) -> Result<(), WireError> {
        if self.partial.is_empty() {
            return Ok(());
        }
        let line = std::mem::take(&mut self.partial);
        on_line(&line)
    }
}

/// A line as text, without its `\r`; not UTF-8 is a protocol error.
pub(super) fn line_text(bytes: &[u8]) -> Result<&str, WireError> {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| WireError::Protocol(format!("invalid UTF-8: {e}")))
}

/// Runs a decoder over a response body. The first chunk is awaited here, so a backend that
/// fails or stays silent before answering is reported by the caller's `chat`.
pub(super) async fn decode_stream<D: Decoder>(
    settings: &ClientSettings,
    resp: reqwest::Response,
    decoder: D,
) -> Result<ChunkStream, BackendError> {
    decode_body(settings, resp.bytes_stream().boxed(), decoder).await
}

/// [`decode_stream`] over any body: the bytes as they arrive, in pieces of any size.
pub(super) async fn decode_body<D: Decoder>(
    settings: &ClientSettings,
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    decoder: D,
) -> Result<ChunkStream, BackendError> {
    let driver = Driver {
        backend: settings.name.to_string(),
        idle: settings.idle_timeout,
        body,
        lines: LineSplitter::default(),
        decoder,
        pending: VecDeque::new(),
        pending_error: None,
        yielded_any: false,
        over: false,
    };
    let mut stream = futures::stream::unfold(driver, |mut d| async move {
        let item = d.next().await?;
        Some((item, d))
    })
    .boxed();
    match stream.next().await {
        Some(Ok(first)) => Ok(futures::stream::iter([Ok(first)]).chain(stream).boxed()),
        Some(Err(e)) => Err(e),
        None => Err(protocol(settings, "the stream ended without data".into())),
    }
}

struct Driver<D> {
    backend: String,
    idle: Duration,
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    lines: LineSplitter,
    decoder: D,
    pending: VecDeque<Chunk>,
    pending_error: Option<BackendError>,
    yielded_any: bool,
    over: bool,
}

impl<D: Decoder> Driver<D> {
    async fn next(&mut self) -> Option<Result<Chunk, BackendError>> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                self.yielded_any = true;
                return Some(Ok(chunk));
            }
            if let Some(e) = self.pending_error.take() {
                self.over = true;
                return Some(Err(e));
            }
            if self.over {
                return None;
            }
            if self.decoder.finished() {
                self.over = true;
                self.drain().await;
                return None;
            }
            match tokio::time::timeout(self.idle, self.body.next()).await {
                Err(_) => {
                    self.over = true;
                    return Some(Err(self.silence()));
                }
                Ok(None) => {
                    self.over = true;
                    let (decoder, pending) = (&mut self.decoder, &mut self.pending);
                    let result = self
                        .lines
                        .finish(|raw| decoder.line(line_text(raw)?, pending))
                        .and_then(|()| decoder.end(pending));
                    self.fail_on(result);
                }
                Ok(Some(Err(e))) => {
                    self.over = true;
                    let message = format!("the stream broke off: {}", error_chain(&e));
                    self.pending_error = Some(BackendError::Protocol {
                        backend: self.backend.clone(),
                        message,
                    });
                }
                Ok(Some(Ok(bytes))) => {
                    let (decoder, pending) = (&mut self.decoder, &mut self.pending);
                    // Lines after the final chunk are ignored unread, so whether they come
                    // in the same network read or a later one (never read) is the same.
                    let result = self.lines.push(&bytes, |raw| {
                        if decoder.finished() {
                            return Ok(());
                        }
                        decoder.line(line_text(raw)?, pending)
                    });
                    self.fail_on(result);
                }
            }
        }
    }

    fn fail_on(&mut self, result: Result<(), WireError>) {
        let Err(e) = result else { return };
        let backend = self.backend.clone();
        self.pending_error = Some(match e {
            WireError::MidStream(message) => BackendError::MidStream { backend, message },
            WireError::Protocol(message) => BackendError::Protocol { backend, message },
        });
    }

    /// Silence before the first chunk is a timeout; later silence is a stall.
    fn silence(&self) -> BackendError {
        let backend = self.backend.clone();
        if self.yielded_any {
            BackendError::Stalled {
                backend,
                after_s: self.idle.as_secs(),
            }
        } else {
            BackendError::Timeout {
                backend,
                after_ms: u64::try_from(self.idle.as_millis()).unwrap_or(u64::MAX),
            }
        }
    }

    /// Reads what follows the final chunk (normally just the body's end) so the pooled
    /// connection can be reused; gives up quietly on errors or after [`DRAIN_LIMIT`], so a
    /// server that keeps the stream open cannot hold the caller.
    async fn drain(&mut self) {
        let body = &mut self.body;
        let _ = tokio::time::timeout(DRAIN_LIMIT.min(self.idle), async {
            while let Some(Ok(_)) = body.next().await {}
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&[u8]]) -> Result<Vec<String>, WireError> {
        let mut splitter = LineSplitter::default();
        let mut lines = Vec::new();
        for chunk in chunks {
            splitter.push(chunk, |l| {
                lines.push(line_text(l)?.to_owned());
                Ok(())
            })?;
        }
        splitter.finish(|l| {
            lines.push(line_text(l)?.to_owned());
            Ok(())
        })?;
        Ok(lines)
    }

    #[test]
    fn lines_survive_any_split_including_inside_utf8() {
        let text = "héllo wörld\r\n{\"a\":\"日本\"}\n\nlast".as_bytes();
        for cut in 0..=text.len() {
            let lines = split_all(&[&text[..cut], &text[cut..]]).unwrap();
            assert_eq!(
                lines,
                vec!["héllo wörld", "{\"a\":\"日本\"}", "", "last"],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn invalid_utf8_is_a_protocol_error() {
        let err = split_all(&[b"\xff\xfe\n"]).unwrap_err();
        assert!(matches!(err, WireError::Protocol(_)));
    }

    #[test]
    fn error_messages_from_both_apis() {
        assert_eq!(
            error_message(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_message(br#"{"error":{"message":"bad tools","type":"invalid_request_error"}}"#),
            "bad tools"
        );
        assert_eq!(error_message(br#"{"message":"plain"}"#), "plain");
        assert_eq!(error_message(b"Bad Gateway"), "Bad Gateway");
        assert_eq!(
            error_message(b"data: {\"error\":{\"message\":\"in sse\"}}\n\n"),
            "in sse"
        );
        assert_eq!(error_message(b""), "no error message");
    }

    #[test]
    fn statuses_map_to_error_kinds() {
        assert!(matches!(
            status_error("b", 503, "x".into()),
            BackendError::Busy { .. }
        ));
        assert!(matches!(
            status_error("b", 429, "x".into()),
            BackendError::Busy { .. }
        ));
        assert!(matches!(
            status_error("b", 400, "x".into()),
            BackendError::Rejected { .. }
        ));
        assert!(matches!(
            status_error("b", 404, "x".into()),
            BackendError::Rejected { .. }
        ));
        assert!(matches!(
            status_error("b", 500, "x".into()),
            BackendError::Server { .. }
        ));
        assert!(matches!(
            status_error("b", 302, "x".into()),
            BackendError::Protocol { .. }
        ));
    }
}
