//! Turning text into unit vectors for memory: the built-in hashed character n-gram
//! embedder, and a backend embedding model with the built-in one as its fallback.
//!
//! Every vector carries the id of the embedder that made it; vectors of different
//! embedders are never compared (each has its own index).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use unicode_normalization::UnicodeNormalization;

use crate::backend::Backend;
use crate::domain::ModelName;

/// Dimensions of the built-in embedder: small enough that a brute-force scan of 100,000
/// items stays within a few milliseconds, large enough for short chat turns.
pub const BUILTIN_DIM: usize = 256;

/// How long recall and the producer wait for a backend embedding before falling back.
const BACKEND_EMBED_TIMEOUT: Duration = Duration::from_secs(5);

/// After a backend embedding that did not come in time, how long the built-in embedder is
/// used without asking the backend again. A machine that is asleep or hung would otherwise
/// cost every turn's recall the whole timeout; one that fails at once is asked every time.
const SILENT_BACKEND_RESTS: Duration = Duration::from_secs(30);

/// Weight of n-grams made only of hiragana (mostly particles and endings: の, です, ました).
const KANA_ONLY_WEIGHT: f32 = 0.2;
/// Weight of n-grams that mix hiragana with kanji or katakana (猫の, 名前は).
const MIXED_WEIGHT: f32 = 0.5;

/// English words that say nothing about the topic.
pub(crate) const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "am", "i", "me", "my", "you",
    "your", "we", "our", "it", "its", "of", "to", "in", "on", "at", "for", "and", "or", "do",
    "does", "did", "what", "which", "who", "how", "that", "this", "these", "those", "with", "as",
    "by", "from", "about", "can", "could", "would", "should", "will", "please", "tell", "again",
    "so", "there", "their", "they", "he", "she", "his", "her", "have", "has", "had", "s", "t", "m",
    "d", "ll", "re", "ve", "did", "mention", "said", "say", "remember",
];

/// Vectors and the id of the embedder that made them.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    pub embedder: String,
    pub vectors: Vec<Vec<f32>>,
}

/// The built-in embedder: NFKC + lowercase, then character 1-3-grams (words for ASCII
/// text) hashed with signed FNV-1a into [`BUILTIN_DIM`] dimensions, L2-normalised.
/// Needs no model and works for Japanese, which has no spaces between words.
#[derive(Debug, Clone, Copy, Default)]
pub struct HashEmbedder;

impl HashEmbedder {
    pub const ID: &'static str = "builtin-ngram-v1-256";

    pub fn id(&self) -> &'static str {
        Self::ID
    }

    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; BUILTIN_DIM];
        let normal = normalize(text);
        for segment in normal.split(' ').filter(|s| !s.is_empty()) {
            if segment.is_ascii() {
                add_ascii_word(&mut v, segment);
            } else {
                add_char_grams(&mut v, segment);
            }
        }
        normalize_l2(&mut v);
        v
    }
}

/// NFKC, lowercase, and every run of non-alphanumeric characters as one space.
pub fn normalize(text: &str) -> String {
    if text.is_ascii() {
        // NFKC leaves ASCII as it is: the same result without the Unicode tables.
        normalize_ascii(text)
    } else {
        normalize_unicode(text)
    }
}

/// [`normalize`] for any text.
fn normalize_unicode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for c in text.nfkc().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    out.trim_end().to_owned()
}

/// [`normalize`] for ASCII text.
fn normalize_ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(char::from(b.to_ascii_lowercase()));
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

fn add_ascii_word(v: &mut [f32], word: &str) {
    if STOP_WORDS.contains(&word) {
        return;
    }
    add(v, &['w' as u32], stem(word).chars(), 1.0);
    // Character trigrams of the word padded with a space on each side catch inflections
    // (cat / cats).
    let bytes = word.as_bytes();
    let padded = |i: usize| match i.checked_sub(1).and_then(|i| bytes.get(i)) {
        Some(b) => char::from(*b),
        None => ' ',
    };
    for i in 0..bytes.len() {
        add(
            v,
            &[3],
            [padded(i), padded(i + 1), padded(i + 2)].into_iter(),
            0.5,
        );
    }
}

/// A light English stemmer: plural and verb endings off (cats → cat, allergies → allerg).
pub(crate) fn stem(word: &str) -> &str {
    for suffix in ["ies", "ing", "ed", "ic", "y", "s"] {
        if let Some(base) = word.strip_suffix(suffix)
            && base.len() >= 3
            && !base.ends_with('s')
        {
            return base;
        }
    }
    word
}

fn add_char_grams(v: &mut [f32], segment: &str) {
    let chars: Vec<char> = segment.chars().collect();
    for n in 1..=3 {
        for gram in chars.windows(n) {
            let kana = gram
                .iter()
                .filter(|c| ('\u{3041}'..='\u{309F}').contains(*c))
                .count();
            if n == 1 && (kana == 1 || gram[0].is_ascii()) {
                continue;
            }
            let weight = match kana {
                0 => 1.0,
                k if k == n => KANA_ONLY_WEIGHT,
                _ => MIXED_WEIGHT,
            };
            add(v, &[n as u32], gram.iter().copied(), weight);
        }
    }
}

/// Signed feature hashing: the hash picks the dimension, its top bit the sign.
fn add(v: &mut [f32], salt: &[u32], chars: impl Iterator<Item = char>, weight: f32) {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in salt.iter().copied().chain(chars.map(u32::from)) {
        for b in x.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let len = v.len() as u64;
    if let Some(slot) = usize::try_from(h % len).ok().and_then(|i| v.get_mut(i)) {
        *slot += if h >> 63 == 1 { weight } else { -weight };
    }
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize_l2(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// An embedding model on a backend, falling back to the built-in embedder when the
/// backend fails (logged once per outage).
#[derive(Debug, Clone)]
pub struct BackendEmbedder {
    backend: Backend,
    model: ModelName,
    id: String,
    failing: Arc<AtomicBool>,
    timeout: Duration,
    /// Until when the backend is not asked (it did not answer in time, or one call is
    /// finding out whether it answers again); `None` while it is asked every time.
    resting_until: Arc<Mutex<Option<Instant>>>,
}

impl BackendEmbedder {
    pub fn new(backend: Backend, model: ModelName) -> Self {
        let id = format!("model:{model}");
        Self {
            backend,
            model,
            id,
            failing: Arc::new(AtomicBool::new(false)),
            timeout: BACKEND_EMBED_TIMEOUT,
            resting_until: Arc::new(Mutex::new(None)),
        }
    }

    /// The backend's vectors; `Ok(None)` when it is resting and was not asked.
    async fn try_embed(&self, texts: &[String]) -> Result<Option<Vec<Vec<f32>>>, String> {
        if !self.may_ask() {
            return Ok(None);
        }
        let call = self.backend.embed(&self.model, texts);
        let answer = tokio::time::timeout(self.timeout, call).await;
        let silent = answer.is_err();
        *self.resting() = silent.then(|| Instant::now() + SILENT_BACKEND_RESTS);
        match answer {
            Ok(Ok(mut vectors)) => {
                vectors.iter_mut().for_each(|v| normalize_l2(v));
                Ok(Some(vectors))
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "no answer within {} ms; not asked again for {} s",
                self.timeout.as_millis(),
                SILENT_BACKEND_RESTS.as_secs()
            )),
        }
    }

    /// Whether to ask the backend now: not while it rests. The first call after a rest
    /// asks; the calls meanwhile leave it alone for as long as that one may wait.
    fn may_ask(&self) -> bool {
        let mut resting = self.resting();
        let now = Instant::now();
        match *resting {
            Some(until) if now < until => false,
            Some(_) => {
                *resting = Some(now + self.timeout);
                true
            }
            None => true,
        }
    }

    fn resting(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.resting_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The active embedder.
#[derive(Debug, Clone)]
pub enum Embedder {
    Builtin(HashEmbedder),
    Backend(Box<BackendEmbedder>),
}

impl Default for Embedder {
    fn default() -> Self {
        Self::Builtin(HashEmbedder)
    }
}

impl Embedder {
    /// The embedder `[memory]` asks for: `embedding_model` on `embedding_backend` (or the
    /// first of `backends`), else the built-in one.
    pub fn from_config(config: &super::MemoryConfig, backends: &[Backend]) -> Self {
        let Some(model) = config
            .embedding_model
            .as_deref()
            .and_then(|m| ModelName::parse(m).ok())
        else {
            return Self::default();
        };
        let backend = match &config.embedding_backend {
            Some(name) => backends.iter().find(|b| b.name().as_str() == name),
            None => backends.first(),
        };
        match backend {
            Some(b) => Self::Backend(Box::new(BackendEmbedder::new(b.clone(), model))),
            None => {
                tracing::warn!(model = %model, "no backend for memory.embedding_model; using the built-in embedder");
                Self::default()
            }
        }
    }

    /// The id of the embedder that is tried first.
    pub fn preferred_id(&self) -> &str {
        match self {
            Self::Builtin(b) => b.id(),
            Self::Backend(b) => &b.id,
        }
    }

    /// Embeds `texts`; a failing backend falls back to the built-in embedder, and the
    /// answer says which one made the vectors.
    pub async fn embed(&self, texts: &[String]) -> Embedded {
        if let Self::Backend(b) = self {
            match b.try_embed(texts).await {
                Ok(None) => {}
                Ok(Some(vectors)) => {
                    if b.failing.swap(false, Ordering::Relaxed) {
                        tracing::info!(backend = %b.backend.name(), model = %b.model, "embedding backend answers again");
                    }
                    return Embedded {
                        embedder: b.id.clone(),
                        vectors,
                    };
                }
                Err(e) => {
                    if !b.failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(backend = %b.backend.name(), model = %b.model, error = %e, "embedding backend failed; using the built-in embedder until it answers");
                    }
                }
            }
        }
        Embedded {
            embedder: HashEmbedder::ID.to_owned(),
            vectors: texts.iter().map(|t| HashEmbedder.embed(t)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::index::dot;
    use crate::testkit::fake_llm::{Failure, FakeLlm};

    fn sim(a: &str, b: &str) -> f32 {
        dot(&HashEmbedder.embed(a), &HashEmbedder.embed(b))
    }

    #[test]
    fn japanese_neighbours_are_closer_than_unrelated_text() {
        let cat = "私の猫の名前はミケです";
        let question = "猫の名前は何でしたっけ";
        let close = sim(cat, question);
        for unrelated in [
            "今日は雨が降っています",
            "明日の会議は何時からですか",
            "私の趣味は読書です",
        ] {
            let far = sim(unrelated, question);
            assert!(close > far + 0.15, "{close} vs {far} for {unrelated}");
        }
        assert!(
            sim("What is my cat called?", "My cat is named Tom")
                > sim("What is my cat called?", "The weather in Paris")
        );
    }

    #[test]
    fn vectors_are_deterministic_unit_length_and_normalised() {
        let v = HashEmbedder.embed("Ｒｕｓｔの本　を読む！！");
        assert_eq!(v.len(), BUILTIN_DIM);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-4);
        assert_eq!(v, HashEmbedder.embed("rustの本 を読む"));
        assert_eq!(
            normalize("Ｈｅｌｌｏ,   ＷＯＲＬＤ！ ｶﾀｶﾅ"),
            "hello world カタカナ"
        );
        assert!(HashEmbedder.embed("!!! ...").iter().all(|x| *x == 0.0));
    }

    /// The ASCII paths give exactly what the general ones give: vectors already stored
    /// stay comparable.
    #[test]
    fn the_ascii_paths_match_the_general_ones() {
        fn general_trigrams(word: &str) -> Vec<f32> {
            let mut v = vec![0f32; BUILTIN_DIM];
            let chars: Vec<char> = format!(" {word} ").chars().collect();
            for gram in chars.windows(3) {
                add(&mut v, &[3], gram.iter().copied(), 0.5);
            }
            v
        }
        let every_byte: String = (0u8..128).map(char::from).collect();
        let samples = [
            "",
            " ",
            "a",
            "Hello, World!",
            "  leading and trailing  ",
            "tabs\tand\nnewlines\r\n",
            "MiXeD 123 numbers-and_underscores",
            "!!! ...",
            "x!",
            every_byte.as_str(),
        ];
        for text in samples {
            assert_eq!(normalize_ascii(text), normalize_unicode(text), "{text:?}");
            assert_eq!(normalize(text), normalize_unicode(text), "{text:?}");
            for word in normalize(text).split(' ').filter(|w| !w.is_empty()) {
                let mut v = vec![0f32; BUILTIN_DIM];
                add_ascii_word(&mut v, word);
                let mut expected = vec![0f32; BUILTIN_DIM];
                if !STOP_WORDS.contains(&word) {
                    add(&mut expected, &['w' as u32], stem(word).chars(), 1.0);
                    expected
                        .iter_mut()
                        .zip(general_trigrams(word))
                        .for_each(|(e, t)| *e += t);
                }
                assert_eq!(v, expected, "{word:?}");
            }
        }
    }

    #[tokio::test]
    async fn backend_vectors_are_used_and_a_failing_backend_falls_back() {
        let server = FakeLlm::builder()
            .model("nomic-embed-text")
            .spawn()
            .await
            .unwrap();
        let name = crate::domain::WorkerName::parse("moon").unwrap();
        let client =
            crate::backend::ollama::OllamaClient::new(server.ollama_settings(name).unwrap())
                .unwrap();
        let config = super::super::MemoryConfig {
            embedding_model: Some("nomic-embed-text".into()),
            ..Default::default()
        };
        let embedder = Embedder::from_config(&config, &[Backend::Ollama(client)]);
        assert_eq!(embedder.preferred_id(), "model:nomic-embed-text");
        let texts = vec!["私の猫".to_owned(), "the cat".to_owned()];
        let got = embedder.embed(&texts).await;
        assert_eq!(got.embedder, "model:nomic-embed-text");
        assert_eq!(got.vectors.len(), 2);
        assert_ne!(
            got.vectors[0].len(),
            BUILTIN_DIM,
            "the fake's own dimension"
        );
        assert!((dot(&got.vectors[0], &got.vectors[0]) - 1.0).abs() < 1e-4);

        server.update_knobs(|k| {
            k.fail_next = 2;
            k.failure = Failure::Status(500);
        });
        for _ in 0..2 {
            let got = embedder.embed(&texts).await;
            assert_eq!(got.embedder, HashEmbedder::ID);
            assert_eq!(got.vectors[1], HashEmbedder.embed("the cat"));
        }
        assert_eq!(
            embedder.embed(&texts).await.embedder,
            "model:nomic-embed-text"
        );
    }

    /// A machine that does not answer (asleep, hung) costs one turn the wait, not every
    /// turn: while it rests the built-in embedder answers without asking it, after the
    /// rest one call asks again, and a backend that fails at once is asked every time.
    #[tokio::test]
    async fn a_silent_backend_is_left_alone_for_a_while() {
        let server = FakeLlm::builder()
            .model("nomic-embed-text")
            .spawn()
            .await
            .unwrap();
        server.update_knobs(|k| k.latency = Duration::from_secs(60));
        let name = crate::domain::WorkerName::parse("moon").unwrap();
        let client =
            crate::backend::ollama::OllamaClient::new(server.ollama_settings(name).unwrap())
                .unwrap();
        let mut backend = BackendEmbedder::new(
            Backend::Ollama(client),
            ModelName::parse("nomic-embed-text").unwrap(),
        );
        backend.timeout = Duration::from_millis(200);
        let embedder = Embedder::Backend(Box::new(backend.clone()));
        let texts = vec!["the cat".to_owned()];
        let asked = || server.requests_to("/api/embed").len();

        assert_eq!(embedder.embed(&texts).await.embedder, HashEmbedder::ID);
        assert_eq!(asked(), 1);
        // Resting: answered by the built-in embedder, the backend not asked, even once it
        // would answer again.
        server.update_knobs(|k| k.latency = Duration::ZERO);
        for _ in 0..3 {
            let got = embedder.embed(&texts).await;
            assert_eq!(got.embedder, HashEmbedder::ID);
            assert_eq!(got.vectors[0], HashEmbedder.embed("the cat"));
        }
        assert_eq!(asked(), 1);
        let until = backend.resting().expect("resting");
        let rest = until - Instant::now();
        assert!(
            rest > SILENT_BACKEND_RESTS - Duration::from_secs(5) && rest <= SILENT_BACKEND_RESTS,
            "{rest:?}"
        );

        // The rest is over: the next call asks, and the backend answers again.
        *backend.resting() = Some(Instant::now());
        assert_eq!(
            embedder.embed(&texts).await.embedder,
            "model:nomic-embed-text"
        );
        assert_eq!(asked(), 2);
        assert_eq!(*backend.resting(), None);

        // A failure that comes at once costs little: the next call asks again.
        server.update_knobs(|k| {
            k.fail_next = 1;
            k.failure = Failure::Status(500);
        });
        assert_eq!(embedder.embed(&texts).await.embedder, HashEmbedder::ID);
        assert_eq!(
            embedder.embed(&texts).await.embedder,
            "model:nomic-embed-text"
        );
        assert_eq!(asked(), 4);
    }

    #[test]
    fn without_a_model_or_backend_the_builtin_embedder_is_used() {
        let mut config = super::super::MemoryConfig::default();
        assert_eq!(
            Embedder::from_config(&config, &[]).preferred_id(),
            HashEmbedder::ID
        );
        config.embedding_model = Some("nomic-embed-text".into());
        assert_eq!(
            Embedder::from_config(&config, &[]).preferred_id(),
            HashEmbedder::ID
        );
    }
}
