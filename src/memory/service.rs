//! [`Memory`]: the handle the rest of Coordinator uses. It owns the store, the embedder
//! and the in-memory indexes, one per person and embedder, and applies the scope rules on
//! recall. A recall only ever looks into the asking person's own indexes: another
//! person's memory is not filtered out, it is never searched.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use chrono::{DateTime, Utc};

use serde::Serialize;
use uuid::Uuid;

use super::embed::{Embedder, HashEmbedder};
use super::extract::ModelExtractor;
use super::index::{Index, Query, Scored};
use super::load::{add_items, count};
use super::store::{ItemKind, MemoryItem, MemoryStore};
use super::{MemoryConfig, MemoryError, OpenWebUiMemory, Scope};
use crate::backend::Backend;
use crate::chat::ChatMessage;
use crate::config::Config;
use crate::domain::{Person, ThreadId};
use crate::lang::{Lang, detect_language};

/// How many exchange and answer items one task has at most (see `producer::condense`).
pub(super) const MAX_ITEMS_PER_TASK: usize = 4;
/// How many of a thread's latest exchanges a follow-up is resolved against.
const FOLLOWUP_EXCHANGES: usize = 4;
/// How far before the newest item it has a [`Memory::refresh`] reads again: items are
/// stamped with the clock of the machine that made them and written after their
/// embedding, so a later write can carry an earlier time. A full [`Memory::reload`]
/// catches anything older.
pub const REFRESH_OVERLAP: chrono::Duration = chrono::Duration::minutes(5);

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One recalled memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryHit {
    #[serde(flatten)]
    pub item: MemoryItem,
    pub score: f32,
    /// Whether it came from the thread the recall was for.
    pub same_thread: bool,
}

/// Cheap to clone: a handle on shared state.
#[derive(Clone)]
pub struct Memory {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) config: MemoryConfig,
    pub(super) store: Arc<dyn MemoryStore>,
    pub(super) embedder: Embedder,
    /// `[memory] extract_model`, when set.
    extractor: Option<ModelExtractor>,
    indexes: RwLock<Indexes>,
    /// Whose items have been read from the store (see `load`).
    pub(super) loads: Mutex<super::load::Loads>,
    /// Which of their threads are held whole (see `load`). Taken before `indexes` when
    /// both are, never after.
    pub(super) threads: Mutex<super::load::ThreadLoads>,
    /// Where the next refresh reads from: the newest item time held, or the opening.
    pub(super) newest: Mutex<DateTime<Utc>>,
    /// Held from "is this already remembered?" to the index holding what was written, so
    /// that turns finishing at once cannot each store the same exchange or fact.
    pub(super) writing: tokio::sync::Mutex<()>,
}

impl Memory {
    /// Opens memory on `store`, reading nothing yet (each person's items are read on
    /// their first turn, see `load`); facts come from the rules.
    pub async fn open(
        config: MemoryConfig,
        store: Arc<dyn MemoryStore>,
        embedder: Embedder,
    ) -> Result<Self, MemoryError> {
        Self::open_with(config, store, embedder, None).await
    }

    /// [`open`](Self::open), with a model that extracts facts.
    pub async fn open_with(
        config: MemoryConfig,
        store: Arc<dyn MemoryStore>,
        embedder: Embedder,
        extractor: Option<ModelExtractor>,
    ) -> Result<Self, MemoryError> {
        tracing::info!(embedder = embedder.preferred_id(), scope = ?config.scope, enabled = config.enabled, "memory opened; each person's is read on their first turn");
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                store,
                embedder,
                extractor,
                indexes: RwLock::new(HashMap::new()),
                loads: Mutex::new(HashMap::new()),
                threads: Mutex::new(super::load::ThreadLoads::default()),
                newest: Mutex::new(Utc::now()),
                writing: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// Opens memory in the database `[store]` names, with the embedder `[memory]` names
    /// (an embedding model on one of `backends`, else the built-in one).
    pub async fn from_config(config: &Config, backends: &[Backend]) -> Result<Self, MemoryError> {
        let store = super::store::open(&config.store).await?;
        let embedder = Embedder::from_config(&config.memory, backends);
        let extractor = ModelExtractor::from_config(&config.memory, backends);
        Self::open_with(config.memory.clone(), store, embedder, extractor).await
    }

    pub fn config(&self) -> &MemoryConfig {
        &self.inner.config
    }

    /// Whether `person`'s `thread` already remembers exactly `text` (under any embedder).
    pub(crate) fn knows(&self, person: &Person, thread: &str, text: &str) -> bool {
        self.indexes()
            .get(person)
            .is_some_and(|own| own.values().any(|i| i.has_text(thread, text)))
    }

    /// Whether `person` already holds a current fact saying what `text` says (under any
    /// embedder).
    pub(crate) fn knows_fact(&self, person: &Person, text: &str) -> bool {
        self.indexes().get(person).is_some_and(|own| {
            own.values()
                .any(|i| i.same_fact(text).is_some_and(|(_, current)| current))
        })
    }

    /// The subject of `person`'s current fact that `text` names (see
    /// [`Index::subject_named`]), under any embedder.
    pub(crate) fn subject_named(&self, person: &Person, text: &str) -> Option<String> {
        let terms = super::lexical::terms(text);
        self.indexes()
            .get(person)?
            .values()
            .find_map(|i| i.subject_named(&terms))
    }

    /// The facts `prompt` states: by `[memory] extract_model` when it answers in time,
    /// else by the rules of [`super::facts`].
    pub(crate) async fn facts_of(&self, prompt: &str) -> Vec<super::facts::Fact> {
        if let Some(extractor) = &self.inner.extractor {
            match extractor.extract(prompt).await {
                Ok(facts) => return facts,
                Err(e) => tracing::debug!(error = %e, "facts from the rules"),
            }
        }
        super::facts::extract(prompt)
    }

    /// The fact extractor, when `[memory] extract_model` is set.
    pub fn extractor(&self) -> Option<&ModelExtractor> {
        self.inner.extractor.as_ref()
    }

    /// Items the in-memory indexes know (held, or counted only), over all people and
    /// embedders.
    pub fn len(&self) -> usize {
        count(&self.indexes(), Index::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items held whole (searchable) in the in-memory indexes, over all people and
    /// embedders: current facts and the items of the threads being talked in (see `load`).
    pub fn held(&self) -> usize {
        count(&self.indexes(), Index::held)
    }

    /// How many items each person holds in the store, read or not (the dashboard's).
    pub async fn stored_by_person(&self) -> Result<Vec<(Person, usize)>, crate::store::StoreError> {
        let people = self.inner.store.people().await?;
        Ok(people
            .into_iter()
            .map(|(p, n)| (p, usize::try_from(n).unwrap_or(usize::MAX)))
            .collect())
    }

    /// Items in the in-memory indexes per person (over their embedders), by person: only
    /// the people whose memory has been read.
    pub fn len_by_person(&self) -> Vec<(Person, usize)> {
        let indexes = self.indexes();
        let mut out: Vec<(Person, usize)> = indexes
            .iter()
            .map(|(person, by_embedder)| {
                (person.clone(), by_embedder.values().map(Index::len).sum())
            })
            .collect();
        out.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        out
    }

    /// `person`'s memories most relevant to `prompt` under `[memory] scope`, best first,
    /// at most `top_k`, one per task. Empty when memory is disabled.
    pub async fn recall(
        &self,
        prompt: &str,
        person: &Person,
        thread_id: &ThreadId,
    ) -> Vec<MemoryHit> {
        self.recall_up_to(prompt, person, thread_id, self.inner.config.top_k)
            .await
    }

    /// [`recall`](Self::recall) of up to `limit` memories rather than `[memory] top_k`.
    pub async fn recall_up_to(
        &self,
        prompt: &str,
        person: &Person,
        thread_id: &ThreadId,
        limit: usize,
    ) -> Vec<MemoryHit> {
        let config = &self.inner.config;
        if !config.enabled || super::facts::small_talk(prompt) {
            return Vec::new();
        }
        if let Err(e) = self.load_thread(person, thread_id.as_str()).await {
            tracing::warn!(error = %e, person = %person.as_str(), "memory could not be read; this turn recalls nothing");
            return Vec::new();
        }
        let query = {
            let indexes = self.indexes();
            let own = indexes.get(person);
            own.and_then(|own| {
                own.get(self.inner.embedder.preferred_id())
                    .or_else(|| own.get(HashEmbedder::ID))
            })
            .and_then(|index| standalone_query(index, prompt, thread_id.as_str()))
            .unwrap_or_else(|| prompt.to_owned())
        };
        let analysis = super::lexical::analyze(&query);
        let embedded = self.inner.embedder.embed(&[query]).await;
        let Some(vector) = embedded.vectors.first() else {
            return Vec::new();
        };
        let indexes = self.indexes();
        let Some(index) = indexes
            .get(person)
            .and_then(|own| own.get(&embedded.embedder))
        else {
            return Vec::new();
        };
        let query = Query::hybrid(vector, &analysis, config.lexical_weight);
        select(index, &query, thread_id.as_str(), config, limit)
            .into_iter()
            .filter_map(|(s, same_thread)| hit(index, s, same_thread))
            .collect()
    }

    /// The memory context for the worker's prompt, in the prompt's language, capped at
    /// `[memory] max_context_chars`; `None` when there is nothing to say.
    pub fn context_block(&self, hits: &[MemoryHit], lang: Lang) -> Option<String> {
        super::context::context_block(hits, lang, self.inner.config.max_context_chars, Utc::now())
    }

    /// [`recall`](Self::recall) and [`context_block`](Self::context_block) in one: the
    /// memory context for a prompt, in its language, or `None`. `system` is the request's
    /// system prompt: what Open WebUI's own memory put there is not said again (or, with
    /// `[memory] openwebui_memory = "defer"`, such a turn gets no context from here).
    pub async fn context_for(
        &self,
        prompt: &str,
        person: &Person,
        thread_id: &ThreadId,
        system: &[String],
    ) -> Option<String> {
        let hits = self
            .context_hits(prompt, person, thread_id, system, self.inner.config.top_k)
            .await;
        self.context_block(&hits, detect_language(prompt))
    }

    /// The items [`context_for`](Self::context_for) would say (up to `limit` of them, best
    /// first), with their scores, for a caller that may leave some out (the service: what
    /// the history already shows, and more when the model's window is short).
    pub async fn context_hits(
        &self,
        prompt: &str,
        person: &Person,
        thread_id: &ThreadId,
        system: &[String],
        limit: usize,
    ) -> Vec<MemoryHit> {
        let carried = super::openwebui::carried(system);
        if carried.is_some() && self.inner.config.openwebui_memory == OpenWebUiMemory::Defer {
            return Vec::new();
        }
        let mut hits = self.recall_up_to(prompt, person, thread_id, limit).await;
        if let Some(theirs) = &carried {
            hits.retain(|h| !super::openwebui::already_said(theirs, &h.item.text));
        }
        hits
    }

    /// Stored items, newest first, of one person (`None`: everyone's, for an admin), of
    /// one thread or all.
    pub async fn list(
        &self,
        person: Option<&Person>,
        thread_id: Option<&ThreadId>,
        limit: u32,
    ) -> Result<Vec<MemoryItem>, MemoryError> {
        let mut items = self
            .inner
            .store
            .list(person, thread_id.map(ThreadId::as_str), limit)
            .await?;
        let people: HashSet<&Person> = items.iter().map(|i| &i.person).collect();
        for person in people {
            self.load_person(person).await?;
        }
        let indexes = self.indexes();
        for item in &mut items {
            item.vector = Vec::new();
            item.superseded_by = indexes
                .get(&item.person)
                .and_then(|own| own.get(&item.embedder))
                .and_then(|index| index.superseding(item));
        }
        Ok(items)
    }

    /// The items most similar to `query` with no threshold (for people looking), of one
    /// person (`None`: everyone's, for an admin), of one thread or all, best first. Of all
    /// threads, the items the index only counts are read from the store and scored as
    /// they come, not held.
    pub async fn search(
        &self,
        query: &str,
        person: Option<&Person>,
        thread_id: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let people = match person {
            Some(p) => vec![p.clone()],
            None => self
                .inner
                .store
                .people()
                .await?
                .into_iter()
                .map(|(p, _)| p)
                .collect(),
        };
        for p in &people {
            match thread_id {
                Some(t) => self.load_thread(p, t.as_str()).await?,
                None => self.load_person(p).await?,
            }
        }
        let analysis = super::lexical::analyze(query);
        let embedded = self.inner.embedder.embed(&[query.to_owned()]).await;
        let Some(vector) = embedded.vectors.first() else {
            return Ok(Vec::new());
        };
        let q = &Query::hybrid(vector, &analysis, self.inner.config.lexical_weight);
        let mut hits: Vec<MemoryHit> = {
            let indexes = self.indexes();
            indexes
                .iter()
                .filter(|(owner, _)| person.is_none_or(|p| p == *owner))
                .filter_map(|(_, own)| own.get(&embedded.embedder))
                .flat_map(|index| {
                    let found = match thread_id {
                        Some(t) => index.search_thread(q, limit, t.as_str()),
                        None => index.search(q, limit),
                    };
                    found
                        .into_iter()
                        .filter_map(|s| hit(index, s, thread_id.is_some()))
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        if thread_id.is_none() {
            for p in &people {
                let mut each = |items: Vec<MemoryItem>| {
                    let indexes = self.indexes();
                    let Some(index) = indexes.get(p).and_then(|own| own.get(&embedded.embedder))
                    else {
                        return;
                    };
                    for mut item in items {
                        if item.embedder != embedded.embedder || index.holds(&item.id) {
                            continue;
                        }
                        if let Some(score) = index.score_item(q, &item) {
                            item.vector = Vec::new();
                            item.superseded_by = index.superseding(&item);
                            hits.push(MemoryHit {
                                item,
                                score,
                                same_thread: false,
                            });
                        }
                    }
                    best_first(&mut hits, limit);
                };
                self.inner.store.load_person(p, &mut each).await?;
            }
        }
        best_first(&mut hits, limit);
        Ok(hits)
    }

    /// Forgets one item of `person` (`None`: anyone's, for an admin), and keeps a backfill
    /// from bringing its task back. Returns whether there was such an item.
    pub async fn forget(&self, id: Uuid, person: Option<&Person>) -> Result<bool, MemoryError> {
        let gone = self.inner.store.delete(id, person).await?;
        let removed = {
            let mut indexes = self.indexes_mut();
            indexes
                .iter_mut()
                .filter(|(owner, _)| person.is_none_or(|p| p == *owner))
                .any(|(_, own)| {
                    own.values_mut()
                        .any(|index| unindex(index, id, gone.as_ref()))
                })
        };
        self.promote_older(gone.iter()).await?;
        Ok(gone.is_some() || removed)
    }

    /// After current facts were forgotten (among `gone`): each subject left without one
    /// gets its newest older fact back from the store, held and current again.
    async fn promote_older(
        &self,
        gone: impl Iterator<Item = &MemoryItem>,
    ) -> Result<(), MemoryError> {
        let mut subjects: Vec<(&Person, &str, &str)> = gone
            .filter(|i| i.kind == ItemKind::Fact)
            .filter_map(|i| Some((&i.person, i.subject.as_deref()?, i.embedder.as_str())))
            .collect();
        subjects.sort_unstable();
        subjects.dedup();
        for (person, subject, embedder) in subjects {
            let without = self
                .indexes()
                .get(person)
                .and_then(|own| own.get(embedder))
                .is_some_and(|index| !index.has_current(subject));
            if !without {
                continue;
            }
            let older = self
                .inner
                .store
                .newest_fact(person, subject, embedder)
                .await?;
            if let Some(older) = older {
                let held = self.held_threads();
                add_items(&mut self.indexes_mut(), [older], &held);
            }
        }
        Ok(())
    }

    /// Forgets everything of a thread of `person` (`None`: anyone's, for an admin).
    /// Returns how many items went.
    pub async fn forget_thread(
        &self,
        person: Option<&Person>,
        thread_id: &ThreadId,
    ) -> Result<usize, MemoryError> {
        let gone = self
            .inner
            .store
            .delete_thread(person, thread_id.as_str())
            .await?;
        {
            let mut indexes = self.indexes_mut();
            for item in &gone {
                for index in indexes.values_mut().flat_map(HashMap::values_mut) {
                    unindex(index, item.id, Some(item));
                }
            }
        }
        self.promote_older(gone.iter()).await?;
        Ok(gone.len())
    }

    /// Writes items to the store, then adds those actually written to the index.
    pub(super) async fn store_items(&self, items: Vec<MemoryItem>) -> Result<usize, MemoryError> {
        let written: HashSet<Uuid> = self.inner.store.insert(&items).await?.into_iter().collect();
        let written_items = items.into_iter().filter(|i| written.contains(&i.id));
        let held = self.held_threads();
        add_items(&mut self.indexes_mut(), written_items, &held);
        Ok(written.len())
    }

    fn indexes(&self) -> RwLockReadGuard<'_, Indexes> {
        // A poisoned lock only means a panic elsewhere while holding plain data.
        self.inner
            .indexes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn indexes_mut(&self) -> RwLockWriteGuard<'_, Indexes> {
        self.inner
            .indexes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Each person's indexes, one per embedder id.
pub(super) type Indexes = HashMap<Person, HashMap<String, Index>>;

/// Keeps the best `limit` of `hits`, best first.
fn best_first(hits: &mut Vec<MemoryHit>, limit: usize) {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    hits.truncate(limit);
}

/// Takes the item with `id` out of `index`: held, or counted (then `gone`, the store's
/// copy, says which terms it counted). Returns whether it was there.
fn unindex(index: &mut Index, id: Uuid, gone: Option<&MemoryItem>) -> bool {
    index.remove(&id) || gone.is_some_and(|item| index.uncount(item))
}

fn hit(index: &Index, s: Scored, same_thread: bool) -> Option<MemoryHit> {
    let item = index.item(s.slot)?;
    Some(MemoryHit {
        item,
        score: s.score,
        same_thread,
    })
}

/// A follow-up ("この市の特産物をおしえて", "what should I pack for it?") made standalone
/// with the latest entity the thread's memory names, by the same rules the web lane uses
/// for its search queries; `None` when the prompt refers to nothing it can resolve.
pub fn standalone_query(index: &Index, prompt: &str, thread: &str) -> Option<String> {
    let history = || {
        index
            .recent_in_thread(thread, FOLLOWUP_EXCHANGES)
            .iter()
            .rev()
            .flat_map(|item| {
                let (user, answer) = item.text.split_once('\n').unwrap_or((&item.text, ""));
                [ChatMessage::user(user), ChatMessage::assistant(answer)]
            })
            .collect()
    };
    crate::web::followup::resolve_with(prompt, history).map(|(query, _)| query)
}

/// The scope rules, on one index: which slots a recall returns, best first, each with
/// whether it is from `thread`. One item per task; at most `limit`. From other threads
/// only facts are recalled, and only those no newer fact supersedes: an exchange is
/// context for its own thread.
///
/// - `thread`: items of the thread scoring at least `min_score`;
/// - `global`: items of the thread and facts of any thread scoring at least `min_score`;
/// - `auto`: items of the thread scoring at least `min_score`, plus facts of other
///   threads scoring at least `cross_thread_min_score` (a strong match), by score.
pub fn select(
    index: &Index,
    query: &Query<'_>,
    thread: &str,
    config: &MemoryConfig,
    limit: usize,
) -> Vec<(Scored, bool)> {
    // Room for several items of one task before de-duplication.
    let k = limit.saturating_mul(MAX_ITEMS_PER_TASK + super::facts::MAX_FACTS);
    let candidates: Vec<(Scored, bool)> = match config.scope {
        Scope::Thread => index
            .search_thread(query, k, thread)
            .into_iter()
            .filter(|s| s.score >= config.min_score)
            .map(|s| (s, true))
            .collect(),
        Scope::Global | Scope::Auto => {
            let cross = match config.scope {
                Scope::Global => config.min_score,
                _ => config.cross_thread_min_score,
            };
            let (mine, others) = index.search_split(query, k, thread);
            let mut all: Vec<(Scored, bool)> = mine
                .into_iter()
                .filter(|s| s.score >= config.min_score)
                .map(|s| (s, true))
                .chain(
                    others
                        .into_iter()
                        .filter(|s| s.score >= cross)
                        .map(|s| (s, false)),
                )
                .collect();
            // By score; on a tie the thread's own memory first.
            all.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
            all
        }
    };
    let mut tasks = HashSet::new();
    candidates
        .into_iter()
        .filter(|(s, _)| index.superseded_by(s.slot).is_none())
        .filter(|(s, _)| index.entry(s.slot).is_some_and(|e| tasks.insert(e.task_id)))
        .take(limit)
        .collect()
}
