//! What a backend can give one model's context: [`WorkerStatus`]'s window per model, the
//! `num_ctx` a request gets there and whether that reloads the model (placement can ask),
//! and the windows a backend's config gives. The rules are [`crate::context`]'s.

use super::BackendRequest;
use super::registry::WorkerStatus;
use crate::context::{self, ModelWindow, Window};
use crate::domain::ModelName;

impl WorkerStatus {
    /// What this machine can give `model`.
    pub fn window(&self, model: &ModelName) -> Window {
        Window {
            context_length: self.model_window(model).and_then(|w| w.context_length),
            max_num_ctx: self.max_num_ctx,
        }
    }

    fn model_window(&self, model: &ModelName) -> Option<&ModelWindow> {
        self.windows.iter().find(|w| &w.model == model)
    }

    /// The `num_ctx` an Ollama backend gets for `request` here (see
    /// [`context::choose_num_ctx`]); `None` for other kinds, or when nothing bounds it.
    pub fn num_ctx_for(&self, request: &BackendRequest) -> Option<u32> {
        num_ctx_given(
            self.kind,
            self.window(&request.model),
            self.resident_num_ctx(&request.model),
            self.model_window(&request.model).is_some_and(|w| w.wide),
            request,
        )
    }

    /// The window `model` is resident with here, if it is.
    fn resident_num_ctx(&self, model: &ModelName) -> Option<u32> {
        self.model_window(model)
            .and_then(|w| w.loaded_num_ctx)
            .filter(|_| self.loaded.contains(model))
    }

    /// Whether running `request` here would reload its model: it is resident, but with a
    /// window other than the one the request gets (a load's time, and its prompt cache).
    /// For placement (`cluster::best_of`), which can add a load's time for it.
    pub fn would_reload(&self, request: &BackendRequest) -> bool {
        match (
            self.resident_num_ctx(&request.model),
            self.num_ctx_for(request),
        ) {
            (Some(now), Some(sent)) => now != sent,
            _ => false,
        }
    }
}

/// The `num_ctx` an Ollama backend of `kind` gets for `request` where the model's window is
/// `window`, it is resident with `resident` (if at all) and has been loaded wide before or
/// not (`wide`); `None` for other kinds, or when nothing bounds it.
pub fn num_ctx_given(
    kind: crate::config::BackendKind,
    window: Window,
    resident: Option<u32>,
    wide: bool,
    request: &BackendRequest,
) -> Option<u32> {
    if kind != crate::config::BackendKind::Ollama {
        return None;
    }
    let limit = window.limit()?;
    let need =
        request.estimated_prompt_tokens() + context::answer_reserve(request.params.max_tokens);
    Some(context::choose_num_ctx(
        need,
        request.params.num_ctx,
        resident,
        limit,
        wide,
    ))
}

/// The windows a backend's config gives.
#[derive(Debug, Clone, Default)]
pub struct ConfiguredWindows {
    /// Every model's window (`context_length`).
    pub all: Option<u32>,
    /// Per model (`model_context_length`), over `all`.
    pub per_model: std::collections::BTreeMap<String, u32>,
    /// The cap (`max_num_ctx`, or Ollama's default).
    pub cap: Option<u32>,
}

impl ConfiguredWindows {
    pub fn from_config(b: &crate::config::BackendConfig) -> Self {
        Self {
            all: b.context_length,
            per_model: b.model_context_length.clone(),
            cap: b.window_cap(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ChatMessage;
    use crate::config::BackendKind;

    fn moon(loaded_num_ctx: Option<u32>) -> WorkerStatus {
        let m = ModelName::parse("m").unwrap();
        WorkerStatus {
            loaded: loaded_num_ctx.map(|_| m.clone()).into_iter().collect(),
            max_num_ctx: Some(16_384),
            windows: vec![ModelWindow {
                model: m,
                context_length: Some(32_768),
                loaded_num_ctx,
                wide: false,
            }],
            ..crate::testkit::samples::idle_worker("moon", &["m"])
        }
    }

    fn request(tokens: usize) -> BackendRequest {
        BackendRequest {
            model: ModelName::parse("m").unwrap(),
            messages: vec![ChatMessage::user("abcd".repeat(tokens))],
            params: Default::default(),
            tools: vec![],
        }
    }

    #[test]
    fn a_request_the_resident_window_holds_keeps_it_and_does_not_reload() {
        let s = moon(Some(8192));
        assert_eq!(s.num_ctx_for(&request(100)), Some(8192));
        assert!(!s.would_reload(&request(100)));
        // One that outgrows it is sent the whole window: one reload.
        assert_eq!(s.num_ctx_for(&request(9000)), Some(16_384));
        assert!(s.would_reload(&request(9000)));
        // Capped by max_num_ctx.
        assert_eq!(s.num_ctx_for(&request(40_000)), Some(16_384));
    }

    #[test]
    fn a_model_not_resident_never_counts_as_a_reload() {
        let s = moon(None);
        assert_eq!(s.num_ctx_for(&request(100)), Some(4096));
        assert!(!s.would_reload(&request(9000)));
        let openai = WorkerStatus {
            kind: BackendKind::Openai,
            ..moon(Some(8192))
        };
        assert_eq!(
            openai.num_ctx_for(&request(100)),
            None,
            "no num_ctx to send"
        );
        assert!(!openai.would_reload(&request(100)));
        assert_eq!(
            openai.window(&ModelName::parse("m").unwrap()).limit(),
            Some(16_384)
        );
    }
}
