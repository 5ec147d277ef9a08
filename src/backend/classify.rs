//! The LLM domain classifier, asked by the router only when its rules are unsure: one
//! short generation on a backend that serves the classifier model.

use async_trait::async_trait;

use super::{BackendRequest, Registry};
use crate::chat::{ChatMessage, SamplingParams};
use crate::domain::ModelName;
use crate::routing::ClassifierBackend;

/// Classifies with whichever local backend serves the model.
#[derive(Debug, Clone)]
pub struct RegistryClassifier {
    pub registry: Registry,
}

#[async_trait]
impl ClassifierBackend for RegistryClassifier {
    async fn classify(
        &self,
        model: &ModelName,
        prompt: &str,
        domains: &[String],
    ) -> Result<String, String> {
        let handle = self
            .registry
            .handles()
            .iter()
            .find(|h| h.is_healthy() && h.serves(model))
            .ok_or_else(|| {
                format!("no healthy local backend serves the classifier model {model}")
            })?;
        let excerpt: String = prompt.chars().take(2000).collect();
        let instruction = format!(
            "Classify the user's message into exactly one of these domains: {}. \
             Answer with the domain name only, nothing else.",
            domains.join(", ")
        );
        let request = BackendRequest {
            model: model.clone(),
            messages: vec![ChatMessage::system(instruction), ChatMessage::user(excerpt)],
            params: SamplingParams {
                temperature: Some(0.0),
                max_tokens: Some(8),
                ..SamplingParams::default()
            },
            tools: Vec::new(),
        };
        let answer = handle
            .backend
            .answer_text(&request)
            .await
            .map_err(|e| e.to_string())?;
        Ok(answer.trim().to_ascii_lowercase())
    }
}
