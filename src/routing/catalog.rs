//! A snapshot of what the workers serve right now, for the router.

use serde::Serialize;

use super::RouteError;
use crate::domain::{ModelName, WorkerName};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogEntry {
    pub worker: WorkerName,
    pub model: ModelName,
    pub healthy: bool,
    /// Whether the model accepts `tools`; `None` when the backend does not say.
    pub tools: Option<bool>,
    /// Whether the model is resident on the worker now (loaded, no load to wait for).
    #[serde(default)]
    pub resident: bool,
}

/// Which worker serves which model. Built from the backend registry (embedded) or the
/// worker heartbeats (cluster).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Catalog {
    pub entries: Vec<CatalogEntry>,
}

impl Catalog {
    pub fn new(entries: Vec<CatalogEntry>) -> Self {
        Self { entries }
    }

    /// A healthy worker that has `model` resident now, if any.
    pub fn resident_on(&self, model: &ModelName) -> Option<&WorkerName> {
        self.entries
            .iter()
            .find(|e| e.healthy && e.resident && &e.model == model)
            .map(|e| &e.worker)
    }

    /// True when some worker serves `model`.
    pub fn serves(&self, model: &ModelName) -> bool {
        self.entries.iter().any(|e| &e.model == model)
    }

    /// Distinct model names, in catalog order.
    pub fn model_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for e in &self.entries {
            if !names.iter().any(|n| n == e.model.as_str()) {
                names.push(e.model.to_string());
            }
        }
        names
    }

    /// The first model of a healthy worker, else the first model at all.
    pub fn first_model(&self) -> Option<ModelName> {
        self.entries
            .iter()
            .find(|e| e.healthy)
            .or(self.entries.first())
            .map(|e| e.model.clone())
    }

    /// Whether `model` accepts `tools`: `Some(true)` if any worker says so, `Some(false)`
    /// if the workers that say anything all say no, `None` when none says.
    pub fn tools_support(&self, model: &ModelName) -> Option<bool> {
        let mut support = None;
        for e in self.entries.iter().filter(|e| &e.model == model) {
            match e.tools {
                Some(true) => return Some(true),
                Some(false) => support = Some(false),
                None => {}
            }
        }
        support
    }

    /// Models that say they accept `tools`, healthy workers' models first.
    pub fn tool_models(&self) -> Vec<ModelName> {
        let mut out: Vec<ModelName> = Vec::new();
        for healthy in [true, false] {
            for e in &self.entries {
                if e.healthy == healthy && e.tools == Some(true) && !out.contains(&e.model) {
                    out.push(e.model.clone());
                }
            }
        }
        out
    }

    /// Workers that serve `model`.
    pub fn workers_for(&self, model: &ModelName) -> Vec<&CatalogEntry> {
        self.entries.iter().filter(|e| &e.model == model).collect()
    }

    /// Checks a named request: the model exists, and on the pinned worker if one is named.
    pub fn check_named(
        &self,
        model: &ModelName,
        worker: Option<&WorkerName>,
    ) -> Result<(), RouteError> {
        let serving = self.workers_for(model);
        if serving.is_empty() {
            return Err(RouteError::UnknownModel {
                requested: match worker {
                    Some(w) => format!("{model}@{w}"),
                    None => model.to_string(),
                },
                available: self.model_names(),
            });
        }
        if let Some(w) = worker
            && !serving.iter().any(|e| &e.worker == w)
        {
            return Err(RouteError::NotOnWorker {
                model: model.to_string(),
                worker: w.to_string(),
                serving: serving.iter().map(|e| e.worker.to_string()).collect(),
            });
        }
        Ok(())
    }
}
