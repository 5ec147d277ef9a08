//! Memory items held in the process only: for the memory eval, which replays each case's
//! exchanges through the real producer and recall, and for tests. Same semantics as the
//! database stores, without the `tasks` table (forgetting cannot mark a task).

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Batches, MemoryItem, MemoryStore, in_batches, limit};
use crate::domain::{Person, TaskId};
use crate::store::StoreError;

#[derive(Debug, Default)]
pub struct InMemoryStore {
    items: Mutex<Vec<MemoryItem>>,
}

impl InMemoryStore {
    fn items(&self) -> std::sync::MutexGuard<'_, Vec<MemoryItem>> {
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl MemoryStore for InMemoryStore {
    async fn insert(&self, items: &[MemoryItem]) -> Result<Vec<Uuid>, StoreError> {
        let mut held = self.items();
        let mut written = Vec::new();
        for item in items {
            let taken = held.iter().any(|h| {
                h.task_id == item.task_id && h.embedder == item.embedder && h.seq == item.seq
            });
            if !taken {
                held.push(item.clone());
                written.push(item.id);
            }
        }
        Ok(written)
    }

    async fn load(&self, since: Option<DateTime<Utc>>) -> Result<Vec<MemoryItem>, StoreError> {
        let mut items: Vec<MemoryItem> = self
            .items()
            .iter()
            .filter(|i| since.is_none_or(|s| i.created_at >= s))
            .cloned()
            .collect();
        items.sort_by_key(|i| (i.created_at, i.id));
        Ok(items)
    }

    async fn load_person(&self, person: &Person, each: &mut Batches<'_>) -> Result<(), StoreError> {
        let mut items = self.load(None).await?;
        items.retain(|i| i.person == *person);
        in_batches(futures::stream::iter(items.into_iter().map(Ok)), each).await
    }

    async fn load_thread(
        &self,
        person: &Person,
        thread_id: &str,
        each: &mut Batches<'_>,
    ) -> Result<(), StoreError> {
        let mut items = self.load(None).await?;
        items.retain(|i| i.person == *person && i.thread_id == thread_id);
        in_batches(futures::stream::iter(items.into_iter().map(Ok)), each).await
    }

    async fn newest_fact(
        &self,
        person: &Person,
        subject: &str,
        embedder: &str,
    ) -> Result<Option<MemoryItem>, StoreError> {
        Ok(self
            .items()
            .iter()
            .filter(|i| {
                i.person == *person
                    && i.kind == super::ItemKind::Fact
                    && i.subject.as_deref() == Some(subject)
                    && i.embedder == embedder
            })
            .max_by_key(|i| (i.created_at, i.id))
            .cloned())
    }

    async fn people(&self) -> Result<Vec<(Person, u64)>, StoreError> {
        let mut people = std::collections::BTreeMap::<Person, u64>::new();
        for item in self.items().iter() {
            *people.entry(item.person.clone()).or_default() += 1;
        }
        Ok(people.into_iter().collect())
    }

    async fn list(
        &self,
        person: Option<&Person>,
        thread_id: Option<&str>,
        max: u32,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let mut items = self.load(None).await?;
        items.retain(|i| {
            person.is_none_or(|p| *p == i.person) && thread_id.is_none_or(|t| t == i.thread_id)
        });
        items.reverse();
        items.truncate(usize::try_from(limit(max)).unwrap_or(usize::MAX));
        Ok(items)
    }

    async fn task_seqs(&self, task_id: TaskId, embedder: &str) -> Result<Vec<u32>, StoreError> {
        let mut seqs: Vec<u32> = self
            .items()
            .iter()
            .filter(|i| i.task_id == task_id && i.embedder == embedder)
            .map(|i| i.seq)
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    async fn delete(
        &self,
        id: Uuid,
        person: Option<&Person>,
    ) -> Result<Option<MemoryItem>, StoreError> {
        let mut held = self.items();
        let at = held
            .iter()
            .position(|i| i.id == id && person.is_none_or(|p| *p == i.person));
        Ok(at.map(|at| held.remove(at)))
    }

    async fn delete_thread(
        &self,
        person: Option<&Person>,
        thread_id: &str,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let mut held = self.items();
        let (gone, kept): (Vec<MemoryItem>, Vec<MemoryItem>) = held
            .drain(..)
            .partition(|i| i.thread_id == thread_id && person.is_none_or(|p| *p == i.person));
        *held = kept;
        Ok(gone)
    }
}
