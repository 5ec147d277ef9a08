//! Routing into the RAG lane: a client that names `rag` or `rag:<collection>` (Open WebUI
//! shows one such model per collection) gets its turn answered from the documents, and so
//! does an `auto` prompt that a `[routing.rag]` rule sends to a collection ("what did my
//! notes say about the NAS backup?" → `rag:notes`).
//! The collection travels in the decision's model name, which the lane reads back with
//! [`RagModel::parse`]; the model that answers is the lane's (see `docs::lane`).
//!
//! The rules read the prose of the user's own prompt (never the history), like the web
//! rules: the first rule, in config order, with a keyword in it decides the collection;
//! any `negative` word suppresses it. The decision's reasons say which rule fired.

use super::config::RagRoutingConfig;
use super::text::{KeywordSet, prose};
use super::{Catalog, Decider, RouteDecision, RouteError, Target};
use crate::docs::{Collection, RagModel};
use crate::domain::{Domain, Lane, ModelName};
use crate::turn::{ModelRequest, Turn};

/// How many characters of prose the rules look at.
const SCAN_CHARS: usize = 2000;

/// The compiled `[routing.rag]` rules: every rule's keywords (one group per rule) and the
/// negative words (the last group) in one keyword set, scanned once per prompt.
#[derive(Debug, Clone)]
pub(crate) struct RagRules {
    targets: Vec<RagModel>,
    words: KeywordSet,
}

impl RagRules {
    /// The rules of `cfg`; a rule naming an invalid collection is left out (`config
    /// check` reports it).
    pub fn new(cfg: &RagRoutingConfig) -> Self {
        let mut targets = Vec::new();
        let mut groups: Vec<&[String]> = Vec::new();
        for rule in &cfg.rules {
            let target = match rule.collection.as_deref().map(Collection::parse) {
                None => RagModel::All,
                Some(Ok(c)) => RagModel::One(c),
                Some(Err(_)) => continue,
            };
            targets.push(target);
            groups.push(&rule.keywords);
        }
        groups.push(&cfg.negative);
        Self {
            targets,
            words: KeywordSet::grouped(&groups),
        }
    }

    /// The collection `prompt` is sent to, if a rule fires, and the reason line; `None`
    /// without any rule (no reason either: nothing was asked).
    pub fn detect(&self, prompt: &str) -> Option<(Option<RagModel>, String)> {
        if self.targets.is_empty() {
            return None;
        }
        let prose = prose(prompt, SCAN_CHARS);
        let first = self.words.first_per_group(&prose.text);
        let word = |g: usize| first.get(g).copied().flatten().map(|h| h.word);
        let Some((i, pos)) = (0..self.targets.len()).find_map(|i| word(i).map(|w| (i, w))) else {
            return Some((None, "rag: no rule matched".to_owned()));
        };
        let target = &self.targets[i];
        if let Some(neg) = word(self.targets.len()) {
            return Some((
                None,
                format!("rag: rule {} pos={pos:?} suppressed by neg={neg:?}", i + 1),
            ));
        }
        Some((
            Some(target.clone()),
            format!("rag: rule {} pos={pos:?} -> {target}", i + 1),
        ))
    }
}

/// The RAG model the turn names, if it names one; an error for `rag:<bad name>`.
pub(super) fn requested(turn: &Turn) -> Option<Result<RagModel, RouteError>> {
    let ModelRequest::Named { model, .. } = &turn.model else {
        return None;
    };
    let parsed = RagModel::parse(model.as_str())?;
    Some(parsed.map_err(|e| RouteError::UnknownModel {
        requested: format!("{model} ({e})"),
        available: vec![RagModel::ALL.to_owned()],
    }))
}

impl Decider {
    /// The collection a `[routing.rag]` rule sends an `auto` turn to, with the rule's
    /// reason added to `reasons`. A turn that names a model, asks for structured output
    /// or carries tools is never sent (the lane answers in prose with a sources list and
    /// calls no tools).
    pub(super) fn rag_by_rule(&self, turn: &Turn, reasons: &mut Vec<String>) -> Option<RagModel> {
        if !matches!(turn.model, ModelRequest::Auto) {
            return None;
        }
        let (target, reason) = self.rules.rag.detect(&turn.prompt)?;
        let skipped = if turn.params.format.is_some() {
            Some("structured output")
        } else if !turn.tools.is_empty() {
            Some("tools")
        } else {
            None
        };
        match (target, skipped) {
            (Some(_), Some(why)) => {
                reasons.push(format!("{reason} skipped, the client asked for {why}"));
                None
            }
            (target, _) => {
                reasons.push(reason);
                target
            }
        }
    }

    /// The decision for a turn that asked for a RAG model (`named`) or that a rule sent.
    pub(super) fn decide_rag(
        &self,
        rag: RagModel,
        catalog: &Catalog,
        mut reasons: Vec<String>,
        named: bool,
    ) -> Result<RouteDecision, RouteError> {
        if catalog.entries.is_empty() {
            return Err(RouteError::NoModels);
        }
        if named {
            reasons.push(format!("rag: client asked for {rag}"));
        }
        reasons.push("rag: answered from the documents (no web search, no memory)".to_owned());
        Ok(RouteDecision {
            domain: Domain::general(),
            model: ModelName::parse(&rag.to_string()).map_err(|_| RouteError::NoModels)?,
            named,
            internal_task: None,
            retrieved_context: false,
            target: Target::Lane(Lane::Rag),
            reasons,
        })
    }
}
