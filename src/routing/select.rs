//! Model selection: the client's named model, or the domain's / default / first model for
//! `auto`, then the tools check (a turn with tools never reaches a model that says it
//! cannot take them; such a backend would answer a raw HTTP 400).

use crate::domain::{ModelName, WorkerName};
use crate::turn::{ModelRequest, Turn};

use super::{Catalog, Decider, RouteError};

impl Decider {
    /// The model, pinned worker and whether the client named it.
    pub(super) fn choose_model(
        &self,
        turn: &Turn,
        catalog: &Catalog,
        domain: &str,
        reasons: &mut Vec<String>,
    ) -> Result<(ModelName, Option<WorkerName>, bool), RouteError> {
        let has_tools = !turn.tools.is_empty();
        match &turn.model {
            ModelRequest::Named { model, worker } => {
                catalog.check_named(model, worker.as_ref())?;
                reasons.push(format!(
                    "named: client asked for {model} (domain {domain} recorded)"
                ));
                if has_tools && catalog.tools_support(model) == Some(false) {
                    return Err(RouteError::ToolsUnsupported {
                        model: model.to_string(),
                        tool_capable: names(&catalog.tool_models()),
                    });
                }
                Ok((model.clone(), worker.clone(), true))
            }
            ModelRequest::Auto => {
                let model = self.auto_model(domain, catalog, reasons)?;
                let model = if has_tools {
                    self.tool_model(model, domain, catalog, reasons)?
                } else {
                    model
                };
                Ok((model, None, false))
            }
        }
    }

    /// The domain's model if served, else the default model, else the first model.
    fn auto_model(
        &self,
        domain: &str,
        catalog: &Catalog,
        reasons: &mut Vec<String>,
    ) -> Result<ModelName, RouteError> {
        if let Some(m) = self.domain_model(domain) {
            if catalog.serves(&m) {
                reasons.push(format!("auto: domain {domain} -> {m}"));
                return Ok(m);
            }
            reasons.push(format!(
                "auto: domain {domain} model {m} is not served; using the default"
            ));
        }
        match self.default_model() {
            Some(m) if catalog.serves(&m) => {
                reasons.push(format!("auto: default model {m}"));
                Ok(m)
            }
            Some(m) => Err(RouteError::UnknownModel {
                requested: m.to_string(),
                available: catalog.model_names(),
            }),
            None => {
                let m = catalog.first_model().ok_or(RouteError::NoModels)?;
                reasons.push(format!("auto: first available model {m}"));
                Ok(m)
            }
        }
    }

    /// `chosen` if it may take tools, else a model that says it does: the domain's model,
    /// the default model, then any.
    fn tool_model(
        &self,
        chosen: ModelName,
        domain: &str,
        catalog: &Catalog,
        reasons: &mut Vec<String>,
    ) -> Result<ModelName, RouteError> {
        if catalog.tools_support(&chosen) != Some(false) {
            return Ok(chosen);
        }
        let capable = catalog.tool_models();
        let preferred = [self.domain_model(domain), self.default_model()];
        let pick = preferred
            .into_iter()
            .flatten()
            .find(|m| capable.contains(m))
            .or_else(|| capable.first().cloned());
        match pick {
            Some(m) => {
                reasons.push(format!(
                    "tools: {chosen} does not support tools; using {m}, which does"
                ));
                Ok(m)
            }
            None => Err(RouteError::NoToolModel {
                model: chosen.to_string(),
                available: catalog.model_names(),
            }),
        }
    }

    /// The model for an internal task that needs one: `[internal_tasks] model` if served,
    /// else what the request asked for (named, or the default route).
    pub(super) fn internal_model(
        &self,
        turn: &Turn,
        catalog: &Catalog,
        reasons: &mut Vec<String>,
    ) -> Result<ModelName, RouteError> {
        if let Some(m) = self
            .internal
            .model
            .as_deref()
            .and_then(|m| ModelName::parse(m).ok())
        {
            if catalog.serves(&m) {
                reasons.push(format!(
                    "internal: utility lane with internal_tasks.model {m}"
                ));
                return Ok(m);
            }
            reasons.push(format!("internal: internal_tasks.model {m} is not served"));
        }
        let m = match &turn.model {
            // Open WebUI sends its background tasks to the selected model, `rag:<name>` too.
            ModelRequest::Named { model, .. }
                if crate::docs::RagModel::parse(model.as_str()).is_some() =>
            {
                self.auto_model(super::domain::GENERAL, catalog, reasons)?
            }
            ModelRequest::Named { model, .. } => {
                catalog.check_named(model, None)?;
                model.clone()
            }
            ModelRequest::Auto => self.auto_model(super::domain::GENERAL, catalog, reasons)?,
        };
        reasons.push(format!("internal: utility lane with {m}"));
        Ok(m)
    }

    fn domain_model(&self, domain: &str) -> Option<ModelName> {
        self.config
            .domains
            .get(domain)
            .and_then(|d| d.model.as_deref())
            .and_then(|m| ModelName::parse(m).ok())
    }

    fn default_model(&self) -> Option<ModelName> {
        self.config
            .default_model
            .as_deref()
            .and_then(|m| ModelName::parse(m).ok())
    }
}

fn names(models: &[ModelName]) -> Vec<String> {
    models.iter().map(ToString::to_string).collect()
}
