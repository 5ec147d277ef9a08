//! Routing: turns a [`Turn`] into a [`RouteDecision`] (domain, model, lane, web search,
//! internal task) with the reasons that produced it.
//!
//! The router sits between turn extraction and the store in the request flow. It reads
//! only the user's original prompt and the request's shape, never the history.

mod catalog;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use catalog::{Catalog, CatalogEntry};

use crate::config::{InternalTasksConfig, InternalTasksMode};
use crate::domain::{InternalTask, Lane, ModelName, WorkerName};
use crate::turn::{ModelRequest, Turn};

/// `[routing]` in the config.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RoutingConfig {
    /// The model for `auto` requests when no domain names one; the first discovered model
    /// when absent.
    pub default_model: Option<String>,
    /// `[routing.domains.<name>] model = "..."`.
    pub domains: BTreeMap<String, DomainConfig>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainConfig {
    pub model: Option<String>,
}

impl RoutingConfig {
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(m) = &self.default_model
            && let Err(e) = ModelName::parse(m)
        {
            problems.push(format!("routing.default_model: {e}"));
        }
        for (name, d) in &self.domains {
            if let Some(m) = &d.model
                && let Err(e) = ModelName::parse(m)
            {
                problems.push(format!("routing.domains.{name}.model: {e}"));
            }
        }
        problems
    }
}

/// Where a turn goes and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteDecision {
    pub domain: String,
    pub model: ModelName,
    /// The worker a `model@worker` request pinned, if any.
    pub worker: Option<WorkerName>,
    pub lane: Lane,
    /// True when the client named a concrete model.
    pub named: bool,
    pub web_search: bool,
    pub internal_task: Option<InternalTask>,
    /// An internal task answered by rules: the exact text to return, no model needed.
    pub rules_answer: Option<String>,
    /// Which rules fired, in order.
    pub reasons: Vec<String>,
}

/// A turn cannot be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("model {requested:?} is not served by any worker; available: {}", available.join(", "))]
    UnknownModel {
        requested: String,
        available: Vec<String>,
    },
    #[error("worker {worker:?} does not serve model {model:?}; workers serving it: {}", serving.join(", "))]
    NotOnWorker {
        model: String,
        worker: String,
        serving: Vec<String>,
    },
    #[error("no model is available: no backend is reachable or none reports a model")]
    NoModels,
}

/// The routing brain. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Router {
    config: RoutingConfig,
    internal: InternalTasksConfig,
}

impl Router {
    pub fn new(config: RoutingConfig, internal: InternalTasksConfig) -> Self {
        Self { config, internal }
    }

    /// Decides where a turn goes. `catalog` is what the workers serve right now.
    pub async fn decide(
        &self,
        turn: &Turn,
        catalog: &Catalog,
    ) -> Result<RouteDecision, RouteError> {
        let mut reasons = Vec::new();
        let internal_task = turn
            .signals
            .task_header
            .as_deref()
            .and_then(InternalTask::from_header);
        if let Some(kind) = internal_task {
            reasons.push(format!("internal: header X-OpenWebUI-Task={kind}"));
        }
        let domain = "general".to_owned();
        let (model, worker, named) = match &turn.model {
            ModelRequest::Named { model, worker } => {
                catalog.check_named(model, worker.as_ref())?;
                reasons.push(format!("named: client asked for {model}"));
                (model.clone(), worker.clone(), true)
            }
            ModelRequest::Auto => {
                let model = self.auto_model(&domain, catalog)?;
                reasons.push(format!("auto: domain {domain} -> {model}"));
                (model, None, false)
            }
        };
        let lane = match (&worker, internal_task) {
            (Some(w), _) => Lane::llm_pinned(&model, w),
            (None, Some(_)) if self.internal.mode == InternalTasksMode::Model => Lane::utility(),
            (None, _) => Lane::llm(&model),
        };
        Ok(RouteDecision {
            domain,
            model,
            worker,
            lane,
            named,
            web_search: false,
            internal_task,
            rules_answer: None,
            reasons,
        })
    }

    fn auto_model(&self, domain: &str, catalog: &Catalog) -> Result<ModelName, RouteError> {
        let configured = self
            .config
            .domains
            .get(domain)
            .and_then(|d| d.model.as_deref())
            .or(self.config.default_model.as_deref())
            .and_then(|m| ModelName::parse(m).ok());
        match configured {
            Some(m) if catalog.serves(&m) => Ok(m),
            Some(m) => Err(RouteError::UnknownModel {
                requested: m.to_string(),
                available: catalog.model_names(),
            }),
            None => catalog.first_model().ok_or(RouteError::NoModels),
        }
    }
}
