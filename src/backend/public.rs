//! What a client is told when a backend fails: the machine and the kind of failure, in the
//! language of the user's prompt, and nothing of the inside (no URL, port, address or
//! transport error). The worker logs the whole [`BackendError`] once, with the task id;
//! the task's row, its events and the front doors' error bodies carry only this text.

use super::BackendError;
use crate::lang::Lang;

/// The most of a backend's own message a client sees.
const MAX_BACKEND_WORDS: usize = 200;

impl BackendError {
    /// The failure as a client may see it, in `lang`.
    pub fn public_message(&self, lang: Lang) -> String {
        let ja = lang == Lang::Ja;
        match self {
            Self::Connect { backend, .. } => {
                if ja {
                    format!("{backend} に接続できませんでした")
                } else {
                    format!("{backend} could not be reached")
                }
            }
            Self::Timeout { backend, after_ms } => {
                let after = duration(*after_ms, lang);
                if ja {
                    format!("{backend} が {after}以内に応答しませんでした")
                } else {
                    format!("{backend} did not answer within {after}")
                }
            }
            Self::Busy {
                backend, status, ..
            } => {
                if ja {
                    format!("{backend} は混雑しています（HTTP {status}）")
                } else {
                    format!("{backend} is busy (it answered {status})")
                }
            }
            Self::Rejected {
                backend,
                status,
                message,
            } => {
                let head = if ja {
                    format!("{backend} がリクエストを受け付けませんでした（HTTP {status}）")
                } else {
                    format!("{backend} refused the request (it answered {status})")
                };
                with_words(head, message)
            }
            Self::Server {
                backend, status, ..
            } => {
                if ja {
                    format!("{backend} がエラー {status} を返しました")
                } else {
                    format!("{backend} answered {status}")
                }
            }
            Self::Protocol { backend, .. } => {
                if ja {
                    format!("{backend} から読み取れない応答が返りました")
                } else {
                    format!("{backend} sent an answer that could not be read")
                }
            }
            Self::Stalled { backend, after_s } => {
                if ja {
                    format!("{backend} の回答が {after_s} 秒間止まりました")
                } else {
                    format!("{backend} stopped answering for {after_s} s")
                }
            }
            Self::MidStream { backend, message } => {
                let head = if ja {
                    format!("{backend} が回答中にエラーを報告しました")
                } else {
                    format!("{backend} reported an error while answering")
                };
                with_words(head, message)
            }
        }
    }
}

/// `head`, then what the backend said about the request when something of it is left
/// once scrubbed: a refusal's reason (a model without tools, a prompt too long) helps the
/// user, where a server error's text would only show its inside.
fn with_words(head: String, message: &str) -> String {
    let words = scrub(message);
    if words.is_empty() {
        head
    } else {
        format!("{head}: {words}")
    }
}

/// A backend's own message without what names the inside: URLs, `host:port`, IP
/// addresses and file paths become `…`; cut to [`MAX_BACKEND_WORDS`] characters.
pub(crate) fn scrub(message: &str) -> String {
    let message = without_os_errors(message);
    let mut out: Vec<&str> = Vec::new();
    for word in message.split_whitespace() {
        if names_the_inside(word) {
            if out.last() != Some(&"…") {
                out.push("…");
            }
        } else {
            out.push(word);
        }
    }
    let text = out.join(" ");
    match text.char_indices().nth(MAX_BACKEND_WORDS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// `message` without the `(os error 111)` that Rust's I/O errors append.
fn without_os_errors(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find("(os error ") {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        rest = tail.find(')').map_or("", |j| &tail[j + 1..]);
    }
    out.push_str(rest);
    out
}

fn names_the_inside(word: &str) -> bool {
    let bare = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '/' && c != '[');
    if bare.contains("://") || bare.starts_with('/') || bare.starts_with('[') {
        return true;
    }
    // `host:port`, `10.0.0.2`, `10.0.0.2:11434`: a colon before digits, or four numbers.
    let port = bare.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && port.len() >= 2 && port.bytes().all(|b| b.is_ascii_digit())
    });
    let ipv4 = bare
        .split('.')
        .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .count()
        == 4;
    port || ipv4
}

/// `2 s`, `1.5 s`, `800 ms` (`2 秒`, `800 ミリ秒`).
fn duration(ms: u64, lang: Lang) -> String {
    let (s_unit, ms_unit) = match lang {
        Lang::Ja => (" 秒", " ミリ秒"),
        Lang::En => (" s", " ms"),
    };
    if ms < 1000 {
        format!("{ms}{ms_unit}")
    } else if ms % 1000 == 0 {
        format!("{}{s_unit}", ms / 1000)
    } else {
        format!("{:.1}{s_unit}", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(message: &str) -> Vec<BackendError> {
        let backend = "ai-core".to_owned();
        let message = message.to_owned();
        vec![
            BackendError::Connect {
                backend: backend.clone(),
                url: "http://127.0.0.1:45123/api/chat".into(),
                detail:
                    "error sending request: tcp connect error: Connection refused (os error 111)"
                        .into(),
            },
            BackendError::Timeout {
                backend: backend.clone(),
                after_ms: 2500,
            },
            BackendError::Busy {
                backend: backend.clone(),
                status: 503,
                message: message.clone(),
            },
            BackendError::Rejected {
                backend: backend.clone(),
                status: 400,
                message: message.clone(),
            },
            BackendError::Server {
                backend: backend.clone(),
                status: 500,
                message: message.clone(),
            },
            BackendError::Protocol {
                backend: backend.clone(),
                message: format!("connection to http://10.0.0.2:11434/api/chat failed: {message}"),
            },
            BackendError::Stalled {
                backend: backend.clone(),
                after_s: 120,
            },
            BackendError::MidStream { backend, message },
        ]
    }

    #[test]
    fn every_kind_names_the_machine_and_nothing_inside() {
        let inside = "dial tcp 10.0.0.2:11434: connect: Connection refused at http://gpu.lan:8080/v1 (/var/lib/ollama)";
        for lang in [Lang::En, Lang::Ja] {
            for e in all(inside) {
                let shown = e.public_message(lang);
                assert!(shown.starts_with("ai-core"), "{shown}");
                for secret in [
                    "http", "11434", "8080", "10.0.0.2", "gpu.lan", "/var/lib", "os error",
                ] {
                    assert!(!shown.contains(secret), "{secret} in {shown}");
                }
            }
        }
    }

    #[test]
    fn the_words_of_the_brief() {
        let e = &all("")[0];
        assert_eq!(e.public_message(Lang::En), "ai-core could not be reached");
        assert_eq!(e.public_message(Lang::Ja), "ai-core に接続できませんでした");
        let e = &all("boom")[4];
        assert_eq!(e.public_message(Lang::En), "ai-core answered 500");
        assert_eq!(
            e.public_message(Lang::Ja),
            "ai-core がエラー 500 を返しました"
        );
        assert_eq!(
            all("")[1].public_message(Lang::En),
            "ai-core did not answer within 2.5 s"
        );
        assert_eq!(
            all("")[1].public_message(Lang::Ja),
            "ai-core が 2.5 秒以内に応答しませんでした"
        );
    }

    #[test]
    fn a_refusal_keeps_its_reason() {
        let e = &all("registry.ollama.ai/library/qwen3:8b does not support tools")[3];
        assert_eq!(
            e.public_message(Lang::En),
            "ai-core refused the request (it answered 400): registry.ollama.ai/library/qwen3:8b does not support tools"
        );
        assert_eq!(
            scrub("failed at http://h:1/x, see 127.0.0.1:8080 and [::1]:80"),
            "failed at … see … and …"
        );
        assert_eq!(
            scrub("connect: Connection refused (os error 111) again"),
            "connect: Connection refused again"
        );
        assert_eq!(
            scrub(&"a".repeat(300)).chars().count(),
            MAX_BACKEND_WORDS + 1
        );
    }
}
