//! The Ollama client (placeholder until the wire-protocol work lands).

use super::{BackendError, BackendRequest, ChunkStream, ClientSettings, ModelInfo};
use crate::domain::ModelName;

#[derive(Debug, Clone)]
pub struct OllamaClient {
    settings: ClientSettings,
    http: reqwest::Client,
}

impl OllamaClient {
    pub fn new(settings: ClientSettings) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .tcp_nodelay(true)
            .build()?;
        Ok(Self { settings, http })
    }

    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, BackendError> {
        let _ = &self.http;
        Err(self.unimplemented())
    }

    pub async fn loaded_models(&self) -> Result<Vec<ModelName>, BackendError> {
        Ok(Vec::new())
    }

    pub async fn chat(&self, _req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        Err(self.unimplemented())
    }

    fn unimplemented(&self) -> BackendError {
        BackendError::Protocol {
            backend: self.settings.name.to_string(),
            message: "client not implemented yet".into(),
        }
    }
}
