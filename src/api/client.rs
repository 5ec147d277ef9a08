//! What every front door (OpenAI, Ollama, `/route`) reads from an HTTP request besides its
//! body: Open WebUI's headers, who the client is, and whether it lets the turn be
//! remembered, gathered into one [`ClientContext`] for the turn input.

use axum::http::HeaderMap;

use crate::turn::ClientContext;

/// A header's value, when it is present, readable and not blank.
pub fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .filter(|v| !v.trim().is_empty())
}

/// Who the client is, for the fallback thread id: the user header, else the API key's hash.
pub fn client_identity(headers: &HeaderMap) -> Option<String> {
    header(headers, "x-openwebui-user-id").or_else(|| {
        header(headers, "authorization").map(|a| {
            use sha2::{Digest, Sha256};
            let d = Sha256::digest(a.as_bytes());
            d[..8].iter().map(|b| format!("{b:02x}")).collect()
        })
    })
}

/// Whether the request lets its turn be remembered: not when it says
/// `X-Coordinator-Remember: false` (or `0`, `no`, `off`).
fn allows_memory(headers: &HeaderMap) -> bool {
    !header(headers, "x-coordinator-remember").is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "false" | "0" | "no" | "off"
        )
    })
}

/// The client's identity, its Open WebUI headers and its say on memory.
pub fn client_context(headers: &HeaderMap) -> ClientContext {
    ClientContext {
        chat_id_header: header(headers, "x-openwebui-chat-id"),
        task_header: header(headers, "x-openwebui-task"),
        client_identity: client_identity(headers),
        remember: allows_memory(headers),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_remember_header_opts_out_with_any_no_word() {
        for no in ["false", "0", "no", "off", " OFF "] {
            let c = client_context(&headers(&[("x-coordinator-remember", no)]));
            assert!(!c.remember, "{no:?}");
        }
        for yes in ["true", "1", "yes", "", "maybe"] {
            let c = client_context(&headers(&[("x-coordinator-remember", yes)]));
            assert!(c.remember, "{yes:?}");
        }
        assert!(client_context(&HeaderMap::new()).remember);
    }

    #[test]
    fn blank_headers_are_absent_and_the_user_header_comes_before_the_key() {
        let c = client_context(&headers(&[
            ("x-openwebui-chat-id", "  "),
            ("x-openwebui-task", "title_generation"),
            ("x-openwebui-user-id", "u-1"),
            ("authorization", "Bearer k"),
        ]));
        assert_eq!(c.chat_id_header, None);
        assert_eq!(c.task_header.as_deref(), Some("title_generation"));
        assert_eq!(c.client_identity.as_deref(), Some("u-1"));
        let by_key = client_context(&headers(&[("authorization", "Bearer k")]));
        assert_eq!(by_key.client_identity.map(|k| k.len()), Some(16));
    }
}
