//! Routing into the RAG lane: a client that names `rag` or `rag:<collection>` (Open WebUI
//! shows one such model per collection) gets its turn answered from the documents.
//! The collection travels in the decision's model name, which the lane reads back with
//! [`RagModel::parse`]; the model that answers is the lane's (see `docs::lane`).

use super::{Catalog, Decider, RouteDecision, RouteError, Target};
use crate::docs::RagModel;
use crate::domain::{Domain, Lane, ModelName};
use crate::turn::{ModelRequest, Turn};

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
    /// The decision for a turn that asked for a RAG model.
    pub(super) fn decide_rag(
        &self,
        rag: RagModel,
        catalog: &Catalog,
        mut reasons: Vec<String>,
    ) -> Result<RouteDecision, RouteError> {
        if catalog.entries.is_empty() {
            return Err(RouteError::NoModels);
        }
        reasons.push(format!(
            "rag: client asked for {rag}; answered from the documents (no web search, no memory)"
        ));
        Ok(RouteDecision {
            domain: Domain::general(),
            model: ModelName::parse(&rag.to_string()).map_err(|_| RouteError::NoModels)?,
            named: true,
            internal_task: None,
            retrieved_context: false,
            target: Target::Lane(Lane::Rag),
            reasons,
        })
    }
}
