//! The SearXNG client: one `GET /search?format=json` per web job, results ranked by score.
//!
//! Sits between query derivation and prompt composition in the web lane. Every way a
//! search can fail is its own [`SearchError`] variant, so the fallback reason tells the
//! operator what to fix (a 403 means the JSON format is not enabled, not "no results").

use std::time::Duration;

use serde::Deserialize;

use super::config::WebConfig;

/// One search hit, as the summary prompt and the sources list use it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SearchResult {
    pub url: String,
    pub title: String,
    pub content: String,
    /// SearXNG's `publishedDate` (ISO text), when the engine gave one.
    pub published: Option<String>,
    pub engine: Option<String>,
    pub score: f64,
}

/// Why a search produced nothing usable. The text is for the log; the task's fallback
/// reason, which clients read, is [`SearchError::public_reason`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    #[error("searxng: cannot connect to {url}: {detail}")]
    Connect { url: String, detail: String },
    #[error("searxng: no answer within {after_ms} ms from {url}")]
    Timeout { url: String, after_ms: u64 },
    #[error(
        "searxng: HTTP 403: enable the json format in SearXNG's settings.yml (search.formats: add `- json`)"
    )]
    JsonFormatDisabled,
    #[error("searxng: HTTP {status}: {body}")]
    Http { status: u16, body: String },
    #[error("searxng: malformed JSON: {detail}")]
    Malformed { detail: String },
    #[error("searxng: 0 results for query {query:?}{}", unresponsive_note(.unresponsive))]
    NoResults {
        query: String,
        /// `engine: error` pairs SearXNG reported as unresponsive.
        unresponsive: Vec<String>,
    },
    #[error("searxng: request failed: {detail}")]
    Request { detail: String },
}

impl SearchError {
    /// The reason without SearXNG's address or transport detail, for the task's row.
    pub fn public_reason(&self) -> String {
        match self {
            Self::Connect { .. } => "searxng: cannot connect".to_owned(),
            Self::Timeout { after_ms, .. } => format!("searxng: no answer within {after_ms} ms"),
            Self::Http { status, .. } => format!("searxng: HTTP {status}"),
            Self::Malformed { .. } => "searxng: malformed JSON".to_owned(),
            Self::Request { .. } => "searxng: request failed".to_owned(),
            // What these say is the user's own query and SearXNG's advice.
            Self::JsonFormatDisabled | Self::NoResults { .. } => self.to_string(),
        }
    }
}

fn unresponsive_note(engines: &[String]) -> String {
    if engines.is_empty() {
        String::new()
    } else {
        format!(" (unresponsive engines: {})", engines.join(", "))
    }
}

/// The parts of SearXNG's JSON answer we read (`webutils.get_json_response`).
#[derive(Debug, Deserialize)]
struct RawResponse {
    results: Vec<RawResult>,
    #[serde(default)]
    unresponsive_engines: Vec<Vec<serde_json::Value>>,
}

#[derive(Debug, Deserialize)]
struct RawResult {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default, rename = "publishedDate")]
    published_date: Option<String>,
    #[serde(default)]
    engine: Option<String>,
    #[serde(default)]
    score: Option<f64>,
}

/// A client for one SearXNG instance. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SearxngClient {
    http: reqwest::Client,
    search_url: reqwest::Url,
    timeout: Duration,
    language: String,
    max_results: usize,
}

impl SearxngClient {
    pub fn new(cfg: &WebConfig) -> Result<Self, SearchError> {
        let mut base = reqwest::Url::parse(&cfg.searxng_url).map_err(|e| SearchError::Request {
            detail: format!("web.searxng_url {:?}: {e}", cfg.searxng_url),
        })?;
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let search_url = base.join("search").map_err(|e| SearchError::Request {
            detail: e.to_string(),
        })?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("coordinator/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SearchError::Request {
                detail: e.to_string(),
            })?;
        Ok(Self {
            http,
            search_url,
            timeout: Duration::from_millis(cfg.timeout_ms.max(1)),
            language: cfg.language.trim().to_owned(),
            max_results: cfg.max_results.max(1),
        })
    }

    /// The `/search` endpoint this client calls.
    pub fn search_url(&self) -> &reqwest::Url {
        &self.search_url
    }

    /// Searches and returns the best results (score descending, duplicates removed), at
    /// most `max_results`, never an empty list: zero results are [`SearchError::NoResults`].
    pub async fn search(&self, query: &str) -> Result<Vec<SearchResult>, SearchError> {
        let url = self.search_url.to_string();
        let response = self
            .http
            .get(self.search_url.clone())
            .query(&[
                ("q", query),
                ("format", "json"),
                ("language", self.language.as_str()),
                ("safesearch", "1"),
                ("pageno", "1"),
            ])
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| self.transport_error(&url, &e))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&url, &e))?;
        if status == reqwest::StatusCode::FORBIDDEN {
            return Err(SearchError::JsonFormatDisabled);
        }
        if !status.is_success() {
            return Err(SearchError::Http {
                status: status.as_u16(),
                body: snippet(&String::from_utf8_lossy(&body), 200),
            });
        }
        let raw: RawResponse =
            serde_json::from_slice(&body).map_err(|e| SearchError::Malformed {
                detail: e.to_string(),
            })?;
        let results = rank(raw.results, self.max_results);
        if results.is_empty() {
            return Err(SearchError::NoResults {
                query: query.to_owned(),
                unresponsive: raw
                    .unresponsive_engines
                    .iter()
                    .map(|pair| {
                        pair.iter()
                            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                            .collect::<Vec<_>>()
                            .join(": ")
                    })
                    .collect(),
            });
        }
        Ok(results)
    }

    fn transport_error(&self, url: &str, e: &reqwest::Error) -> SearchError {
        if e.is_timeout() {
            SearchError::Timeout {
                url: url.to_owned(),
                after_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            }
        } else if e.is_connect() {
            SearchError::Connect {
                url: url.to_owned(),
                detail: root_cause(e),
            }
        } else {
            SearchError::Request {
                detail: root_cause(e),
            }
        }
    }
}

/// Keeps results with a URL, best score first (stable for ties), one per URL.
fn rank(raw: Vec<RawResult>, max: usize) -> Vec<SearchResult> {
    let mut results: Vec<SearchResult> = raw
        .into_iter()
        .filter_map(|r| {
            let url = r.url.filter(|u| !u.trim().is_empty())?;
            Some(SearchResult {
                title: r.title.unwrap_or_default(),
                content: r.content.unwrap_or_default(),
                published: r.published_date.filter(|d| !d.trim().is_empty()),
                engine: r.engine,
                score: r.score.filter(|s| s.is_finite()).unwrap_or(0.0),
                url,
            })
        })
        .collect();
    results.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut seen = std::collections::HashSet::new();
    results.retain(|r| seen.insert(r.url.clone()));
    results.truncate(max);
    results
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// The first `max` characters of `text`, on one line.
fn snippet(text: &str, max: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testkit::fake_searxng::{FakeMode, FakeResult, FakeSearxng};

    fn client(fake: &FakeSearxng, timeout_ms: u64, max_results: usize) -> SearxngClient {
        SearxngClient::new(&WebConfig {
            searxng_url: fake.url(),
            timeout_ms,
            max_results,
            ..WebConfig::default()
        })
        .unwrap()
    }

    fn hits() -> Vec<FakeResult> {
        vec![
            FakeResult::new("https://a.example/low", "Low", "low score").score(0.5),
            FakeResult::new("https://b.example/high", "High", "high score")
                .score(3.0)
                .published("2026-07-01T00:00:00"),
            FakeResult::new("https://c.example/mid", "Mid", "middle").score(1.5),
            FakeResult::new("https://b.example/high", "Dup", "duplicate url").score(2.0),
        ]
    }

    #[tokio::test]
    async fn results_are_ranked_by_score_deduplicated_and_capped() {
        let fake = FakeSearxng::start().await.unwrap();
        fake.set_mode(FakeMode::Results(hits()));
        let got = client(&fake, 2000, 2).search("柏市 特産物").await.unwrap();
        let urls: Vec<&str> = got.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls, ["https://b.example/high", "https://c.example/mid"]);
        assert_eq!(got[0].title, "High");
        assert_eq!(got[0].published.as_deref(), Some("2026-07-01T00:00:00"));
        let seen = fake.requests();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].q, "柏市 特産物");
        assert_eq!(seen[0].param("format"), Some("json"));
        assert_eq!(seen[0].param("language"), Some("auto"));
        assert_eq!(seen[0].param("safesearch"), Some("1"));
        assert_eq!(seen[0].param("pageno"), Some("1"));
    }

    #[tokio::test]
    async fn zero_results_is_its_own_error_naming_the_query() {
        let fake = FakeSearxng::start().await.unwrap();
        fake.set_mode(FakeMode::Zero);
        let err = client(&fake, 2000, 5)
            .search("柏市 特産物")
            .await
            .unwrap_err();
        assert!(matches!(err, SearchError::NoResults { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "searxng: 0 results for query \"柏市 特産物\""
        );
    }

    #[tokio::test]
    async fn zero_results_name_unresponsive_engines() {
        let fake = FakeSearxng::start().await.unwrap();
        fake.set_mode(FakeMode::ZeroEngineDown);
        let err = client(&fake, 2000, 5).search("q").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "searxng: 0 results for query \"q\" (unresponsive engines: brave: timeout)"
        );
    }

    #[tokio::test]
    async fn http_403_says_how_to_enable_json() {
        let fake = FakeSearxng::start().await.unwrap();
        fake.set_mode(FakeMode::Forbidden);
        let err = client(&fake, 2000, 5).search("x").await.unwrap_err();
        assert_eq!(err, SearchError::JsonFormatDisabled);
        let text = err.to_string();
        assert!(
            text.contains("settings.yml") && text.contains("json"),
            "{text}"
        );
        assert!(!text.contains("0 results"));
    }

    #[tokio::test]
    async fn http_500_is_an_http_error() {
        let fake = FakeSearxng::start().await.unwrap();
        fake.set_mode(FakeMode::ServerError);
        let err = client(&fake, 2000, 5).search("x").await.unwrap_err();
        assert!(
            matches!(err, SearchError::Http { status: 500, .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn malformed_json_is_reported_as_such() {
        let fake = FakeSearxng::start().await.unwrap();
        fake.set_mode(FakeMode::Malformed);
        let err = client(&fake, 2000, 5).search("x").await.unwrap_err();
        assert!(matches!(err, SearchError::Malformed { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn a_slow_instance_times_out() {
        let fake = FakeSearxng::start().await.unwrap();
        fake.set_mode(FakeMode::Slow(Duration::from_secs(5)));
        let err = client(&fake, 150, 5).search("x").await.unwrap_err();
        assert!(
            matches!(err, SearchError::Timeout { after_ms: 150, .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_stopped_instance_is_a_connect_error_and_modes_switch_at_runtime() {
        let mut fake = FakeSearxng::start().await.unwrap();
        let c = client(&fake, 2000, 5);
        fake.set_mode(FakeMode::Results(hits()));
        assert!(c.search("first").await.is_ok());
        fake.set_mode(FakeMode::Zero);
        assert!(c.search("second").await.is_err());
        assert_eq!(fake.queries(), ["first", "second"]);
        fake.stop().await;
        let err = c.search("third").await.unwrap_err();
        assert!(matches!(err, SearchError::Connect { .. }), "{err:?}");
    }

    #[test]
    fn base_urls_with_paths_keep_them() {
        let c = SearxngClient::new(&WebConfig {
            searxng_url: "http://h:8080/searxng".into(),
            ..WebConfig::default()
        })
        .unwrap();
        assert_eq!(c.search_url().as_str(), "http://h:8080/searxng/search");
    }
}
