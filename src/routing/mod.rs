//! Routing: turns a [`Turn`] into a [`RouteDecision`] (domain, model, lane, web search,
//! internal task, rule answer) with the reasons that produced it.
//!
//! The router sits between turn extraction and the store in the request flow. It reads
//! only the user's original prompt and the request's shape, never the history. Order:
//! 1. Open WebUI background tasks ([`internal`]) are recognised first; they never reach
//!    web search, the classifier or memory, and in rules mode get their answer at once.
//! 2. Documents ([`rag`]): a client that names `rag`/`rag:<collection>`, or an `auto`
//!    prompt a `[routing.rag]` rule sends to a collection, goes to the RAG lane.
//! 3. The domain: rules ([`domain`]), and the optional LLM classifier ([`classifier`]) only
//!    when the rules are unsure, within its deadline.
//! 4. Web search ([`web`]) on the prose of the prompt, positives suppressed by negatives.
//! 5. The model: named by the client, or the domain's / default model; a turn with tools
//!    goes to a model that accepts them.
//!
//! Every decision is logged at INFO with its reasons. [`eval`] measures the rules against
//! a labelled JSONL set.

mod catalog;
mod classifier;
mod config;
mod domain;
pub mod eval;
mod internal;
mod rag;
mod rules_reply;
mod select;
mod text;
mod web;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use catalog::{Catalog, CatalogEntry};
pub use classifier::ClassifierBackend;
pub use config::{
    ClassifierConfig, DEFAULT_WEB_NEGATIVE, DEFAULT_WEB_POSITIVE, DEFAULT_WEB_WEAK_POSITIVE,
    DomainConfig, RagRoutingConfig, RagRuleConfig, RoutingConfig, WebConfig,
};

use crate::config::{InternalTasksConfig, InternalTasksMode};
use crate::domain::{Domain, InternalTask, Lane, ModelName, WorkerName};
use crate::memory;
use crate::turn::Turn;
use classifier::{Classified, Classifier};
use domain::{Confidence, DomainRules};
use internal::TurnKind;
use web::WebRules;

/// The model name a rule-answered internal task reports: no model ran.
pub const RULES_MODEL: &str = "rules";

/// Where a turn goes and why.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteDecision {
    pub domain: Domain,
    /// The model that answers (`rules` for an internal task answered by rules).
    pub model: ModelName,
    /// True when the client named a concrete model.
    pub named: bool,
    pub internal_task: Option<InternalTask>,
    /// The turn carries documents Open WebUI retrieved (its RAG template).
    pub retrieved_context: bool,
    pub target: Target,
    /// Which rules fired, in order.
    pub reasons: Vec<String>,
}

/// What answers a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// An internal task answered by rules: the exact text to return, no model needed. The
    /// task is recorded under the utility lane, where a model would have answered it.
    Rules { reply: String },
    /// The lane whose workers answer it.
    Lane(Lane),
}

/// The lane rule-answered tasks are recorded under.
static RULES_LANE: Lane = Lane::Utility;

impl RouteDecision {
    /// The lane the task is queued on (or, for a rules answer, recorded under).
    pub fn lane(&self) -> &Lane {
        match &self.target {
            Target::Lane(lane) => lane,
            Target::Rules { .. } => &RULES_LANE,
        }
    }

    /// The worker a `model@worker` request pinned, if any.
    pub fn pinned_worker(&self) -> Option<&WorkerName> {
        match self.lane() {
            Lane::Llm { pinned_worker, .. } => pinned_worker.as_ref(),
            _ => None,
        }
    }

    /// True when the prompt asks for fresh information from the web.
    pub fn web_search(&self) -> bool {
        *self.lane() == Lane::Web
    }

    /// An internal task's answer by rules, if it got one.
    pub fn rules_reply(&self) -> Option<&str> {
        match &self.target {
            Target::Rules { reply } => Some(reply),
            Target::Lane(_) => None,
        }
    }

    /// Whether the turn may read memory (see [`memory::policy::may_recall`]).
    pub fn may_recall(&self) -> bool {
        memory::policy::may_recall(&self.memory_facts(true))
    }

    /// What memory needs to know of the turn; `remember` is what its request allowed.
    pub fn memory_facts(&self, remember: bool) -> memory::policy::Facts<'_> {
        memory::policy::Facts {
            lane: self.lane(),
            internal_task: self.internal_task.is_some(),
            web_search: self.web_search(),
            retrieved_context: self.retrieved_context,
            remember,
        }
    }
}

/// The preview endpoint's view of a decision (the shape `/route/preview` has always had).
impl Serialize for RouteDecision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Preview<'a> {
            domain: &'a Domain,
            model: &'a ModelName,
            worker: Option<&'a WorkerName>,
            queue: &'a Lane,
            named: bool,
            auto_web_search: bool,
            internal_task: Option<InternalTask>,
            rules_answer: Option<&'a str>,
            /// Whether the turn may read memory.
            memory: bool,
            reasons: &'a [String],
        }
        Preview {
            domain: &self.domain,
            model: &self.model,
            worker: self.pinned_worker(),
            queue: self.lane(),
            named: self.named,
            auto_web_search: self.web_search(),
            internal_task: self.internal_task,
            rules_answer: self.rules_reply(),
            memory: self.may_recall(),
            reasons: &self.reasons,
        }
        .serialize(s)
    }
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
    /// A named model that says it cannot take `tools`, for a turn that carries tools.
    #[error(
        "model {model:?} does not support tools, but the request carries tool definitions; \
         choose a tool-capable model ({}) or send the request without tools",
        if tool_capable.is_empty() { "none is available".to_owned() } else { tool_capable.join(", ") }
    )]
    ToolsUnsupported {
        model: String,
        tool_capable: Vec<String>,
    },
    /// An `auto` turn with tools, and no available model accepts them.
    #[error(
        "the request carries tool definitions, but no available model supports tools \
         (chosen: {model:?}; available: {}); send it without tools or add a tool-capable model",
        available.join(", ")
    )]
    NoToolModel {
        model: String,
        available: Vec<String>,
    },
}

/// The routing brain. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Decider {
    config: Arc<RoutingConfig>,
    internal: InternalTasksConfig,
    rules: Arc<Rules>,
    classifier: Option<Arc<Classifier>>,
}

#[derive(Debug)]
struct Rules {
    web: WebRules,
    domains: DomainRules,
    rag: rag::RagRules,
}

impl Decider {
    /// A router without an LLM classifier: rules only.
    pub fn new(config: RoutingConfig, internal: InternalTasksConfig) -> Self {
        let rules = Rules {
            web: WebRules::new(&config.web),
            domains: DomainRules::new(&config.domains),
            rag: rag::RagRules::new(&config.rag),
        };
        Self {
            config: Arc::new(config),
            internal,
            rules: Arc::new(rules),
            classifier: None,
        }
    }

    /// A router that asks `backend` when the rules are unsure, if
    /// `[routing.classifier] model` is set (otherwise the same as [`Decider::new`]).
    pub fn with_classifier(
        config: RoutingConfig,
        internal: InternalTasksConfig,
        backend: Arc<dyn ClassifierBackend>,
    ) -> Self {
        let c = &config.classifier;
        let classifier = c
            .model
            .as_deref()
            .and_then(|m| ModelName::parse(m).ok())
            .map(|model| {
                Arc::new(Classifier::new(
                    backend,
                    model,
                    Duration::from_millis(c.deadline_ms.max(1)),
                    c.cache_size,
                ))
            });
        Self {
            classifier,
            ..Self::new(config, internal)
        }
    }

    pub fn config(&self) -> &RoutingConfig {
        &self.config
    }

    /// Decides where a turn goes. `catalog` is what the workers serve right now.
    pub async fn decide(
        &self,
        turn: &Turn,
        catalog: &Catalog,
    ) -> Result<RouteDecision, RouteError> {
        let kind = internal::detect(turn);
        let asked_rag = match &kind {
            TurnKind::Internal { .. } => None,
            _ => rag::requested(turn),
        };
        let decision = match (kind, asked_rag) {
            (TurnKind::Rag { reason, .. } | TurnKind::User { note: Some(reason) }, Some(rag)) => {
                rag.and_then(|rag| self.decide_rag(rag, catalog, vec![reason], true))
            }
            (TurnKind::User { note: None }, Some(rag)) => {
                rag.and_then(|rag| self.decide_rag(rag, catalog, Vec::new(), true))
            }
            (TurnKind::Internal { task, reason }, _) => {
                self.decide_internal(turn, catalog, task, reason)
            }
            (TurnKind::Rag { question, reason }, None) => {
                self.decide_user(turn, catalog, &question, vec![reason], true)
                    .await
            }
            (TurnKind::User { note }, None) => {
                let mut reasons = note.into_iter().collect();
                match self.rag_by_rule(turn, &mut reasons) {
                    Some(rag) => self.decide_rag(rag, catalog, reasons, false),
                    None => {
                        self.decide_user(turn, catalog, &turn.prompt, reasons, false)
                            .await
                    }
                }
            }
        };
        // The service logs each submitted turn's decision with its task id (at info); this
        // line also covers previews.
        match &decision {
            Ok(d) => tracing::debug!(
                domain = %d.domain,
                model = %d.model,
                queue = %d.lane(),
                web_search = d.web_search(),
                internal_task = d.internal_task.map(InternalTask::as_str),
                named = d.named,
                rules_answer = d.rules_reply().is_some(),
                reasons = %d.reasons.join("; "),
                "route decided"
            ),
            Err(e) => tracing::info!(error = %e, "route refused"),
        }
        decision
    }

    async fn decide_user(
        &self,
        turn: &Turn,
        catalog: &Catalog,
        text: &str,
        mut reasons: Vec<String>,
        rag: bool,
    ) -> Result<RouteDecision, RouteError> {
        let domain = self.domain(text, &mut reasons).await;
        let web_search = if rag {
            reasons.push("web_search: skipped, the turn already carries retrieved context".into());
            false
        } else if turn.params.format.is_some() {
            // A cited answer (a disclaimer, a sources list) is not the JSON asked for.
            reasons.push("web_search: skipped, the client asked for structured output".into());
            false
        } else {
            let v = self.rules.web.detect(&turn.prompt, domain == domain::CODE);
            reasons.push(v.reason);
            v.web
        };
        let (model, worker, named) = self.choose_model(turn, catalog, &domain, &mut reasons)?;
        let lane = match (worker, web_search) {
            (_, true) => Lane::Web,
            (Some(w), false) => Lane::llm_pinned(&model, &w),
            (None, false) => Lane::llm(&model),
        };
        Ok(RouteDecision {
            domain: as_domain(domain, &mut reasons),
            model,
            named,
            internal_task: None,
            retrieved_context: rag,
            target: Target::Lane(lane),
            reasons,
        })
    }

    /// The rule domain, refined by the classifier when the rules are unsure.
    async fn domain(&self, text: &str, reasons: &mut Vec<String>) -> String {
        let verdict = self.rules.domains.classify(text);
        reasons.push(verdict.reason);
        let Some(classifier) = self.classifier.as_ref() else {
            return verdict.domain;
        };
        if verdict.confidence == Confidence::Sure {
            return verdict.domain;
        }
        match classifier.classify(text, self.rules.domains.names()).await {
            Classified::Domain { domain, cached } => {
                reasons.push(format!(
                    "classifier: {} says {domain}{}",
                    classifier.model(),
                    if cached { " (cached)" } else { "" }
                ));
                domain
            }
            Classified::Failed(why) => {
                reasons.push(format!(
                    "classifier: {why}; keeping rule domain {}",
                    verdict.domain
                ));
                verdict.domain
            }
        }
    }

    fn decide_internal(
        &self,
        turn: &Turn,
        catalog: &Catalog,
        task: InternalTask,
        reason: String,
    ) -> Result<RouteDecision, RouteError> {
        let mut reasons = vec![
            reason,
            "internal: no web search, no classifier, no memory".to_owned(),
        ];
        let named = !matches!(turn.model, crate::turn::ModelRequest::Auto);
        if self.internal.mode == InternalTasksMode::Resident
            && let Some((model, worker)) = self.resident_for_internal(turn, catalog)
        {
            reasons.push(format!(
                "internal: {model} is resident on {worker}: answered there, nothing loaded"
            ));
            return Ok(RouteDecision {
                domain: Domain::general(),
                target: Target::Lane(Lane::llm_pinned(&model, &worker)),
                model,
                named,
                internal_task: Some(task),
                retrieved_context: false,
                reasons,
            });
        }
        if self.internal.mode != InternalTasksMode::Model
            && let Some(reply) = rules_reply::rules_reply(task, turn)
        {
            if self.internal.mode == InternalTasksMode::Resident {
                reasons.push("internal: no model for it is resident".to_owned());
            }
            reasons.push("internal: answered by rules (no model)".to_owned());
            return Ok(RouteDecision {
                domain: Domain::general(),
                model: ModelName::parse(RULES_MODEL).map_err(|_| RouteError::NoModels)?,
                named,
                internal_task: Some(task),
                retrieved_context: false,
                target: Target::Rules { reply },
                reasons,
            });
        }
        let model = self.internal_model(turn, catalog, &mut reasons)?;
        Ok(RouteDecision {
            domain: Domain::general(),
            model,
            named,
            internal_task: Some(task),
            retrieved_context: false,
            target: Target::Lane(Lane::Utility),
            reasons,
        })
    }
}

impl Decider {
    /// For `[internal_tasks] mode = "resident"`: the model the task was sent to, else
    /// `[internal_tasks] model`, with a healthy worker where it is resident now.
    fn resident_for_internal(
        &self,
        turn: &Turn,
        catalog: &Catalog,
    ) -> Option<(ModelName, crate::domain::WorkerName)> {
        let named = match &turn.model {
            crate::turn::ModelRequest::Named { model, .. } => Some(model.clone()),
            crate::turn::ModelRequest::Auto => None,
        };
        let configured = self
            .internal
            .model
            .as_deref()
            .and_then(|m| ModelName::parse(m).ok());
        named
            .into_iter()
            .chain(configured)
            .find_map(|m| catalog.resident_on(&m).cloned().map(|w| (m, w)))
    }
}

/// The decided domain's name as a [`Domain`]; a configured name that is not one is
/// recorded as `general`, and the reasons say so.
fn as_domain(name: String, reasons: &mut Vec<String>) -> Domain {
    Domain::parse(&name).unwrap_or_else(|e| {
        reasons.push(format!("domain: {e}; recorded as {}", Domain::GENERAL));
        Domain::general()
    })
}
