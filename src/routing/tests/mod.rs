//! Decider tests: whole decisions (internal tasks, web, domain, named, tools, classifier),
//! rule answers, property tests and the shipped eval with its thresholds.

mod decider;
mod eval_set;
mod internal;
mod internal_props;
mod props;
mod rag_rules;
mod rules_reply;

use std::collections::BTreeMap;

use crate::chat::{ChatMessage, ResponseMode};
use crate::config::{HistoryConfig, InternalTasksConfig};
use crate::domain::{ModelName, WorkerName};
use crate::turn::{ClientContext, Turn, TurnInput, build_turn};

use super::{Catalog, CatalogEntry, Decider, DomainConfig, RoutingConfig};

/// A chat turn as Open WebUI's UI sends it: streamed, one user message.
pub fn user_turn(prompt: &str) -> Turn {
    request(vec![ChatMessage::user(prompt)], true, None, None, "auto")
}

/// A background task as Open WebUI sends it: not streamed, one user message.
pub fn task_turn(prompt: &str, header: Option<&str>, max_tokens: Option<u32>) -> Turn {
    request(
        vec![ChatMessage::user(prompt)],
        false,
        header,
        max_tokens,
        "auto",
    )
}

pub fn request(
    messages: Vec<ChatMessage>,
    stream: bool,
    header: Option<&str>,
    max_tokens: Option<u32>,
    model: &str,
) -> Turn {
    let mut input = TurnInput {
        messages,
        model: Some(model.to_owned()),
        response: ResponseMode::from_stream(stream),
        client: ClientContext {
            task_header: header.map(str::to_owned),
            ..ClientContext::default()
        },
        ..TurnInput::default()
    };
    input.params.max_tokens = max_tokens;
    build_turn(input, &HistoryConfig::default()).unwrap()
}

pub fn catalog(entries: &[(&str, &str, Option<bool>)]) -> Catalog {
    Catalog::new(
        entries
            .iter()
            .map(|(model, worker, tools)| CatalogEntry {
                worker: WorkerName::parse(worker).unwrap(),
                model: ModelName::parse(model).unwrap(),
                healthy: true,
                tools: *tools,
                resident: false,
            })
            .collect(),
    )
}

/// `code` → coder, default → chat.
pub fn config() -> RoutingConfig {
    let mut domains = BTreeMap::new();
    domains.insert(
        "code".to_owned(),
        DomainConfig {
            model: Some("coder".into()),
            keywords: vec![],
        },
    );
    RoutingConfig {
        default_model: Some("chat".into()),
        domains,
        ..RoutingConfig::default()
    }
}

pub fn decider() -> Decider {
    Decider::new(config(), InternalTasksConfig::default())
}

pub fn two_models() -> Catalog {
    catalog(&[("chat", "moon", None), ("coder", "gpu", None)])
}
