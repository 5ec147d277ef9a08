//! Where each request of a row goes: the client's own choice among the machines' URLs
//! (the three baselines, no proxy), or Coordinator's one URL.
//!
//! - **random**: what Open WebUI does with several Ollama URLs: a random one among those
//!   whose `/api/tags` lists the model, drawn per request. Here the draw is a hash of the
//!   seed and the request's key, so a row replays the same draws whatever the timing.
//! - **round-robin**: per model, the next URL among those that have it.
//! - **least-busy**: the URL with the fewest requests of this harness in flight among
//!   those that have the model, the first in list order on a tie (LiteLLM's `least-busy`,
//!   Olla's least-connections).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A row of the benchmark. On the command line (`bench-household --rows`), its name in
/// kebab case: `least-busy`, `coordinator-warm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RowKind {
    Random,
    RoundRobin,
    LeastBusy,
    Coordinator,
    /// Coordinator after a day of use: its store (what it learned of the machines, the
    /// day's tasks and memory) from the same plan run once before with another seed, on
    /// machines started fresh again.
    CoordinatorWarm,
}

impl RowKind {
    pub const ALL: [Self; 5] = [
        Self::Random,
        Self::RoundRobin,
        Self::LeastBusy,
        Self::Coordinator,
        Self::CoordinatorWarm,
    ];
}

impl fmt::Display for RowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Random => "random",
            Self::RoundRobin => "round-robin",
            Self::LeastBusy => "least-busy",
            Self::Coordinator => "coordinator",
            Self::CoordinatorWarm => "coordinator (warm)",
        })
    }
}

/// A machine as the client knows it: its URL and the models its `/api/tags` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub base: String,
    pub models: Vec<String>,
}

/// How a baseline client picks a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Random { seed: u64 },
    RoundRobin,
    LeastBusy,
}

/// The URLs a row sends to and how it picks one.
#[derive(Debug)]
pub enum Route {
    Direct(Chooser),
    /// Everything to Coordinator's base URL.
    Coordinator(String),
}

/// A request on its way: where it goes; counted in flight until dropped.
#[derive(Debug)]
pub struct Lease {
    pub base: String,
    in_flight: Option<Arc<AtomicUsize>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(n) = &self.in_flight {
            n.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Route {
    /// Where the request `key` (unique in the row) for `model` goes; `None` when no URL
    /// has the model.
    pub fn pick(&self, model: &str, key: &str) -> Option<Lease> {
        match self {
            Self::Direct(chooser) => chooser.pick(model, key),
            Self::Coordinator(base) => Some(Lease {
                base: base.clone(),
                in_flight: None,
            }),
        }
    }
}

/// The baselines' choice among the machines' URLs.
#[derive(Debug)]
pub struct Chooser {
    policy: Policy,
    urls: Vec<Url>,
    in_flight: Vec<Arc<AtomicUsize>>,
    next: Mutex<HashMap<String, usize>>,
}

impl Chooser {
    pub fn new(policy: Policy, urls: Vec<Url>) -> Self {
        Self {
            policy,
            in_flight: urls.iter().map(|_| Arc::default()).collect(),
            urls,
            next: Mutex::default(),
        }
    }

    pub fn pick(&self, model: &str, key: &str) -> Option<Lease> {
        let candidates: Vec<usize> = (0..self.urls.len())
            .filter(|&i| self.urls[i].models.iter().any(|m| m == model))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let chosen = match self.policy {
            Policy::Random { seed } => candidates[draw(seed, key) % candidates.len()],
            Policy::RoundRobin => {
                let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
                let turn = next.entry(model.to_owned()).or_default();
                let chosen = candidates[*turn % candidates.len()];
                *turn += 1;
                chosen
            }
            Policy::LeastBusy => *candidates
                .iter()
                .min_by_key(|&&i| self.in_flight[i].load(Ordering::Relaxed))
                .unwrap_or(&candidates[0]),
        };
        let in_flight = self.in_flight[chosen].clone();
        in_flight.fetch_add(1, Ordering::Relaxed);
        Some(Lease {
            base: self.urls[chosen].base.clone(),
            in_flight: Some(in_flight),
        })
    }
}

/// FNV-1a of the seed and the key: the same draw for the same request in every run.
fn draw(seed: u64, key: &str) -> usize {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for byte in seed.to_le_bytes().iter().chain(key.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
    }
    // The low bits of FNV mix poorly; fold the high half in.
    (hash ^ (hash >> 32)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_named_on_the_command_line_by_its_arg() {
        #[derive(Debug, clap::Parser)]
        struct Args {
            #[arg(long, value_delimiter = ',')]
            rows: Vec<RowKind>,
        }
        let names = "random,round-robin,least-busy,coordinator,coordinator-warm";
        let args = <Args as clap::Parser>::try_parse_from(["bench", "--rows", names]).unwrap();
        assert_eq!(args.rows, RowKind::ALL);
        let err = <Args as clap::Parser>::try_parse_from(["bench", "--rows", "warm"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("coordinator-warm"), "{err}");
    }

    fn urls() -> Vec<Url> {
        let url = |base: &str, models: &[&str]| Url {
            base: base.to_owned(),
            models: models.iter().map(|m| (*m).to_owned()).collect(),
        };
        vec![
            url("moon", &["chat", "coder"]),
            url("ai-core", &["chat"]),
            url("laptop", &["chat"]),
        ]
    }

    fn bases(chooser: &Chooser, model: &str, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                chooser
                    .pick(model, &format!("k{i}"))
                    .map(|l| l.base.clone())
            })
            .map(|b| b.unwrap_or_default())
            .collect()
    }

    #[test]
    fn round_robin_cycles_per_model_over_the_urls_that_have_it() {
        let chooser = Chooser::new(Policy::RoundRobin, urls());
        assert_eq!(
            bases(&chooser, "chat", 4),
            ["moon", "ai-core", "laptop", "moon"]
        );
        assert_eq!(bases(&chooser, "coder", 2), ["moon", "moon"]);
        // The coder's turns did not move the chat model's cycle.
        assert_eq!(bases(&chooser, "chat", 1), ["ai-core"]);
        assert!(chooser.pick("other", "k").is_none());
    }

    #[test]
    fn least_busy_takes_the_url_with_fewest_in_flight_and_the_first_on_a_tie() {
        let chooser = Chooser::new(Policy::LeastBusy, urls());
        let first = chooser.pick("chat", "a").map(|l| l.base.clone());
        let held = chooser.pick("chat", "b");
        assert_eq!(first.as_deref(), Some("moon"));
        // `first` was dropped at once, so moon is free again and wins the tie...
        assert_eq!(held.as_ref().map(|l| l.base.as_str()), Some("moon"));
        // ...and while `held` is in flight the next goes elsewhere.
        let second = chooser.pick("chat", "c");
        assert_eq!(second.as_ref().map(|l| l.base.as_str()), Some("ai-core"));
        let third = chooser.pick("chat", "d");
        assert_eq!(third.as_ref().map(|l| l.base.as_str()), Some("laptop"));
        drop(second);
        assert_eq!(bases(&chooser, "chat", 1), ["ai-core"]);
        // The coder has one URL, busy or not.
        assert_eq!(bases(&chooser, "coder", 1), ["moon"]);
    }

    #[test]
    fn random_draws_depend_on_the_seed_and_key_only_and_reach_every_url() {
        let a = Chooser::new(Policy::Random { seed: 1 }, urls());
        let b = Chooser::new(Policy::Random { seed: 1 }, urls());
        let c = Chooser::new(Policy::Random { seed: 2 }, urls());
        let drawn = bases(&a, "chat", 60);
        assert_eq!(drawn, bases(&b, "chat", 60));
        assert_ne!(drawn, bases(&c, "chat", 60));
        for url in ["moon", "ai-core", "laptop"] {
            let n = drawn.iter().filter(|b| *b == url).count();
            assert!(n >= 10, "{url}: {n} of 60");
        }
        assert!(bases(&a, "coder", 20).iter().all(|b| b == "moon"));
    }

    #[test]
    fn coordinator_rows_send_everything_to_one_url() {
        let route = Route::Coordinator("http://c".to_owned());
        let lease = route.pick("anything", "k");
        assert_eq!(lease.map(|l| l.base.clone()).as_deref(), Some("http://c"));
    }
}
