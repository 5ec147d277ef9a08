//! `bench-client`: a small streaming load client for `scripts/bench.sh`, measuring what
//! `oha` cannot: the time to first token (TTFT) of OpenAI-style SSE answers.
//!
//! It keeps `--concurrency` streaming `POST`s in flight (keep-alive, `TCP_NODELAY`) for
//! `--duration-s` seconds and prints one JSON object: requests, errors, requests/s, and
//! p50/p99 of TTFT and of the whole answer, in milliseconds. TTFT is the time from
//! sending the request to the first SSE event whose delta has non-empty `content` (the
//! role-only first event does not count). A request counts as an error unless its status
//! is 2xx and its body ends with `data: [DONE]`.
//!
//! `bench-client --url http://127.0.0.1:8000/v1/chat/completions --body body.json -c 16`

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;
use futures::StreamExt;

#[derive(Debug, Parser)]
#[command(
    name = "bench-client",
    about = "Measures time to first token of streamed chat completions"
)]
struct Args {
    /// The chat completions URL.
    #[arg(long)]
    url: String,
    /// A file holding the JSON request body (it should ask for `"stream": true`).
    #[arg(long)]
    body: PathBuf,
    /// Requests in flight at once.
    #[arg(long, short = 'c', default_value_t = 1)]
    concurrency: usize,
    /// How long to keep sending, in seconds.
    #[arg(long, default_value_t = 5.0)]
    duration_s: f64,
}

/// One finished request: time to first token and to the end, or an error.
type Sample = Result<(Duration, Duration), ()>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let body = Bytes::from(
        std::fs::read(&args.body)
            .with_context(|| format!("cannot read {}", args.body.display()))?,
    );
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(args.concurrency)
        .build()?;
    let url: Arc<str> = args.url.into();
    let concurrency = args.concurrency.max(1);
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.duration_s);
    let loops: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.clone(), body.clone());
            tokio::spawn(async move {
                let mut samples = Vec::new();
                while Instant::now() < deadline {
                    samples.push(one(&client, &url, body.clone()).await);
                }
                samples
            })
        })
        .collect();
    let mut samples: Vec<Sample> = Vec::new();
    for l in loops {
        samples.extend(l.await?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let errors = samples.iter().filter(|s| s.is_err()).count();
    let mut ttft: Vec<Duration> = samples.iter().flatten().map(|(t, _)| *t).collect();
    let mut total: Vec<Duration> = samples.iter().flatten().map(|(_, t)| *t).collect();
    ttft.sort_unstable();
    total.sort_unstable();
    let report = serde_json::json!({
        "concurrency": concurrency,
        "requests": samples.len(),
        "errors": errors,
        "rps": (samples.len() - errors) as f64 / elapsed,
        "ttft_p50_ms": percentile_ms(&ttft, 0.50),
        "ttft_p99_ms": percentile_ms(&ttft, 0.99),
        "total_p50_ms": percentile_ms(&total, 0.50),
        "total_p99_ms": percentile_ms(&total, 0.99),
    });
    println!("{report}");
    Ok(())
}

/// One streamed request, read to its end.
async fn one(client: &reqwest::Client, url: &str, body: Bytes) -> Sample {
    let start = Instant::now();
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|_| ())?;
    if !resp.status().is_success() {
        return Err(());
    }
    let mut stream = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    let mut ttft = None;
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(|_| ())?;
        // Search only the new bytes (plus a margin for a marker split across pieces).
        let from = buf.len().saturating_sub(MARKER.len() + 1);
        buf.extend_from_slice(&piece);
        if ttft.is_none() && has_token(&buf[from..]) {
            ttft = Some(start.elapsed());
        }
    }
    let total = start.elapsed();
    if !buf.ends_with(b"data: [DONE]\n\n") {
        return Err(());
    }
    Ok((ttft.unwrap_or(total), total))
}

const MARKER: &[u8] = b"\"content\":\"";

/// Whether `bytes` hold a `"content":"` followed by at least one character.
fn has_token(bytes: &[u8]) -> bool {
    bytes
        .windows(MARKER.len() + 1)
        .any(|w| w.starts_with(MARKER) && w[MARKER.len()] != b'"')
}

/// Nearest-rank percentile in milliseconds; 0 for no samples.
fn percentile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_chunk_is_not_a_token() {
        assert!(!has_token(
            br#"data: {"delta":{"role":"assistant","content":""}}"#
        ));
        assert!(has_token(br#"data: {"delta":{"content":"Hi"}}"#));
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&d, 0.50), 50.0);
        assert_eq!(percentile_ms(&d, 0.99), 99.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
    }
}
