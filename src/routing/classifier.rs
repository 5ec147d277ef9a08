//! The optional LLM domain classifier, asked only when the rules are unsure.
//!
//! It has its own single slot (a semaphore of 1), a hard deadline that covers waiting for
//! the slot and the call, and a cache by prompt hash. On a timeout, an error or an answer
//! that names no known domain the router keeps the rule result, so a slow classifier can
//! never push routing past its deadline (the seed's 2.7 s → 19.3 s incident). Internal
//! tasks never reach it. The application implements [`ClassifierBackend`] with its backends.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::domain::ModelName;

use super::text::clip_chars;

/// How many characters of the prompt the classifier sees.
const MAX_CLASSIFIER_PROMPT_CHARS: usize = 2000;

/// Asks a model which of `domains` a prompt belongs to. The answer is free text that
/// should contain one domain name; the router normalises it.
#[async_trait]
pub trait ClassifierBackend: Send + Sync {
    async fn classify(
        &self,
        model: &ModelName,
        prompt: &str,
        domains: &[String],
    ) -> Result<String, String>;
}

/// What the classifier said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Classified {
    /// A known domain; `cached` when no model was asked.
    Domain { domain: String, cached: bool },
    /// Timeout, backend error or an unusable answer: keep the rule result.
    Failed(String),
}

/// The classifier with its slot, deadline and cache.
pub(crate) struct Classifier {
    backend: Arc<dyn ClassifierBackend>,
    model: ModelName,
    deadline: Duration,
    slot: Semaphore,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("model", &self.model)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Classifier {
    pub fn new(
        backend: Arc<dyn ClassifierBackend>,
        model: ModelName,
        deadline: Duration,
        cache_size: usize,
    ) -> Self {
        Self {
            backend,
            model,
            deadline,
            slot: Semaphore::new(1),
            cache: Mutex::new(Cache::new(cache_size)),
        }
    }

    pub fn model(&self) -> &ModelName {
        &self.model
    }

    /// Classifies `prompt` into one of `domains` within the deadline.
    pub async fn classify(&self, prompt: &str, domains: &[String]) -> Classified {
        let prompt = clip_chars(prompt, MAX_CLASSIFIER_PROMPT_CHARS);
        let key: [u8; 32] = Sha256::digest(prompt.as_bytes()).into();
        if let Some(domain) = self.cache_get(&key) {
            return Classified::Domain {
                domain,
                cached: true,
            };
        }
        let call = async {
            let _permit = self
                .slot
                .acquire()
                .await
                .map_err(|_| "classifier slot closed".to_owned())?;
            self.backend.classify(&self.model, prompt, domains).await
        };
        let answer = match tokio::time::timeout(self.deadline, call).await {
            Err(_) => {
                return Classified::Failed(format!(
                    "deadline of {} ms passed",
                    self.deadline.as_millis()
                ));
            }
            Ok(Err(e)) => return Classified::Failed(format!("backend error: {e}")),
            Ok(Ok(answer)) => answer,
        };
        match normalise(&answer, domains) {
            Some(domain) => {
                self.cache_put(key, domain.clone());
                Classified::Domain {
                    domain,
                    cached: false,
                }
            }
            None => Classified::Failed(format!(
                "answer {:?} names no known domain",
                clip_chars(answer.trim(), 60)
            )),
        }
    }

    fn cache_get(&self, key: &[u8; 32]) -> Option<String> {
        self.cache.lock().ok()?.map.get(key).cloned()
    }

    fn cache_put(&self, key: [u8; 32], domain: String) {
        if let Ok(mut c) = self.cache.lock() {
            c.put(key, domain);
        }
    }
}

/// A bounded map, oldest entry out first.
struct Cache {
    cap: usize,
    map: HashMap<[u8; 32], String>,
    order: VecDeque<[u8; 32]>,
}

impl Cache {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn put(&mut self, key: [u8; 32], value: String) {
        if self.cap == 0 {
            return;
        }
        if self.map.insert(key, value).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

/// The domain an answer names: an exact name, else the earliest name found as a word.
pub(crate) fn normalise(answer: &str, domains: &[String]) -> Option<String> {
    let a = answer
        .trim()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    if let Some(d) = domains.iter().find(|d| d.to_lowercase() == a) {
        return Some(d.clone());
    }
    domains
        .iter()
        .filter_map(|d| {
            let dl = d.to_lowercase();
            a.match_indices(&dl)
                .find(|(i, _)| {
                    let before = a[..*i].chars().next_back();
                    let after = a[i + dl.len()..].chars().next();
                    before.is_none_or(|c| !c.is_alphanumeric())
                        && after.is_none_or(|c| !c.is_alphanumeric())
                })
                .map(|(i, _)| (i, d))
        })
        .min_by_key(|(i, _)| *i)
        .map(|(_, d)| d.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fake backend: waits `delay` (on tokio's clock), then answers or fails.
    struct Fake {
        delay: Duration,
        answer: Result<String, String>,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl ClassifierBackend for Fake {
        async fn classify(&self, _: &ModelName, _: &str, _: &[String]) -> Result<String, String> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            self.answer.clone()
        }
    }

    fn classifier(delay_ms: u64, answer: Result<&str, &str>) -> (Arc<Fake>, Classifier) {
        let fake = Arc::new(Fake {
            delay: Duration::from_millis(delay_ms),
            answer: answer.map(str::to_owned).map_err(str::to_owned),
            calls: AtomicUsize::new(0),
        });
        let model = ModelName::parse("tiny").unwrap();
        let c = Classifier::new(fake.clone(), model, Duration::from_millis(1500), 8);
        (fake, c)
    }

    fn domains() -> Vec<String> {
        vec!["code".into(), "general".into(), "math".into()]
    }

    #[tokio::test(start_paused = true)]
    async fn good_answers_are_normalised_and_cached() {
        let (fake, c) = classifier(200, Ok(" Domain: Math. "));
        let first = c.classify("integrate x^2", &domains()).await;
        assert_eq!(
            first,
            Classified::Domain {
                domain: "math".into(),
                cached: false
            }
        );
        let second = c.classify("integrate x^2", &domains()).await;
        assert_eq!(
            second,
            Classified::Domain {
                domain: "math".into(),
                cached: true
            }
        );
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_classifier_is_cut_at_the_deadline() {
        let (_, c) = classifier(20_000, Ok("code"));
        let start = tokio::time::Instant::now();
        let got = c.classify("python?", &domains()).await;
        assert!(
            matches!(got, Classified::Failed(ref r) if r.contains("deadline")),
            "{got:?}"
        );
        assert_eq!(start.elapsed(), Duration::from_millis(1500));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_the_busy_slot_counts_against_the_deadline() {
        let (fake, c) = classifier(1000, Ok("code"));
        let start = tokio::time::Instant::now();
        let d = domains();
        let (a, b) = tokio::join!(c.classify("one", &d), c.classify("two", &d));
        assert!(matches!(a, Classified::Domain { .. }), "{a:?}");
        assert!(matches!(b, Classified::Failed(_)), "{b:?}");
        // The second got the slot at 1000 ms and was cut at 1500 ms, not at 2000 ms.
        assert_eq!(start.elapsed(), Duration::from_millis(1500));
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_and_unknown_answers_fall_back() {
        let (_, c) = classifier(10, Err("connection refused"));
        let got = c.classify("x", &domains()).await;
        assert!(matches!(got, Classified::Failed(ref r) if r.contains("refused")));
        let (_, c) = classifier(10, Ok("cooking"));
        assert!(matches!(
            c.classify("x", &domains()).await,
            Classified::Failed(_)
        ));
    }

    #[test]
    fn normalise_needs_a_whole_word() {
        let d = domains();
        assert_eq!(normalise("CODE", &d).as_deref(), Some("code"));
        assert_eq!(
            normalise("I think general, not code", &d).as_deref(),
            Some("general")
        );
        assert_eq!(normalise("barcode", &d), None);
    }
}
