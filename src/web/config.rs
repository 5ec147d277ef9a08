//! `[web]` in the config: where SearXNG is, how long to wait for it, how many results the
//! summary uses, and which model writes the summary.

use serde::{Deserialize, Serialize};

use crate::domain::ModelName;

/// The most results a summary prompt may carry; more only dilutes a small model's context.
pub const MAX_RESULTS_LIMIT: usize = 20;

/// The `[web]` section. Every key is optional.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebConfig {
    /// When false, web jobs skip the search and answer from the local model with the
    /// disclaimer (the fallback path), so a web question still gets an answer.
    pub enabled: bool,
    /// Base URL of the SearXNG instance; `/search` is appended.
    pub searxng_url: String,
    /// Whole-request deadline for one search, connect to last byte.
    pub timeout_ms: u64,
    /// How many results (best score first) go into the summary prompt and the sources list.
    pub max_results: usize,
    /// SearXNG's `language` parameter (`auto`, `all`, `ja`, `en-US`, ...).
    pub language: String,
    /// The model that writes the summary; the routed model when absent.
    pub model: Option<String>,
    /// Deadline for the optional model query rewrite; the rule-based query is used after it.
    pub rewrite_timeout_ms: u64,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            searxng_url: "http://127.0.0.1:8888".to_owned(),
            timeout_ms: 5000,
            max_results: 5,
            language: "auto".to_owned(),
            model: None,
            rewrite_timeout_ms: 3000,
        }
    }
}

impl WebConfig {
    /// Every problem in the section, each prefixed with its key.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        match reqwest::Url::parse(&self.searxng_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => problems.push(format!(
                "web.searxng_url: {:?} is not an http(s) URL",
                crate::config::redact_url(&self.searxng_url)
            )),
        }
        if self.timeout_ms == 0 {
            problems.push("web.timeout_ms: must be at least 1".to_owned());
        }
        if self.rewrite_timeout_ms == 0 {
            problems.push("web.rewrite_timeout_ms: must be at least 1".to_owned());
        }
        if self.max_results == 0 || self.max_results > MAX_RESULTS_LIMIT {
            problems.push(format!(
                "web.max_results: {} is outside 1..={MAX_RESULTS_LIMIT}",
                self.max_results
            ));
        }
        let lang = self.language.trim();
        if lang.is_empty()
            || !lang
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        {
            problems.push(format!(
                "web.language: {:?} is not a language code like auto, all, ja or en-US",
                self.language
            ));
        }
        if let Some(m) = &self.model
            && let Err(e) = ModelName::parse(m)
        {
            problems.push(format!("web.model: {e}"));
        }
        problems
    }

    /// The summariser model as a domain type, when one is configured and valid.
    pub fn model_name(&self) -> Option<ModelName> {
        self.model.as_deref().and_then(|m| ModelName::parse(m).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_the_documented_values() {
        let c = WebConfig::default();
        assert!(c.validate().is_empty(), "{:?}", c.validate());
        assert!(c.enabled);
        assert_eq!(c.searxng_url, "http://127.0.0.1:8888");
        assert_eq!(c.timeout_ms, 5000);
        assert_eq!(c.max_results, 5);
        assert_eq!(c.language, "auto");
        assert_eq!(c.model, None);
    }

    #[test]
    fn validate_reports_every_problem_at_once() {
        let c = WebConfig {
            enabled: true,
            searxng_url: "ftp://x".into(),
            timeout_ms: 0,
            max_results: 0,
            language: "ja jp".into(),
            model: Some("bad model".into()),
            rewrite_timeout_ms: 0,
        };
        let p = c.validate();
        assert_eq!(p.len(), 6, "{p:?}");
        for key in [
            "web.searxng_url",
            "web.timeout_ms",
            "web.rewrite_timeout_ms",
            "web.max_results",
            "web.language",
            "web.model",
        ] {
            assert!(
                p.iter().any(|s| s.starts_with(key)),
                "{key} missing in {p:?}"
            );
        }
    }

    #[test]
    fn a_partial_section_keeps_the_other_defaults() {
        let c: WebConfig =
            toml::from_str("searxng_url = \"http://search.lan:8080\"\nmax_results = 3").unwrap();
        assert_eq!(c.searxng_url, "http://search.lan:8080");
        assert_eq!(c.max_results, 3);
        assert_eq!(c.timeout_ms, 5000);
        assert_eq!(c.model_name(), None);
    }

    #[test]
    fn the_section_loads_from_the_config_file_and_is_validated_with_it() {
        let cfg = crate::config::load_str(
            "[web]\nsearxng_url = \"http://search.lan:8080\"\nmodel = \"qwen2.5:3b\"",
            Vec::<(String, String)>::new(),
        )
        .unwrap();
        assert_eq!(cfg.web.searxng_url, "http://search.lan:8080");
        assert_eq!(
            cfg.web.model_name().map(|m| m.to_string()).as_deref(),
            Some("qwen2.5:3b")
        );
        let err = crate::config::load_str("[web]\nmax_results = 0", Vec::<(String, String)>::new())
            .unwrap_err();
        assert!(
            err.problems()
                .iter()
                .any(|p| p.starts_with("web.max_results")),
            "{err}"
        );
    }
}
