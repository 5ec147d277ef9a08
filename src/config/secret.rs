//! Connection URLs that may carry a password (`[store] url`, `[queue] url`), and where they
//! come from: the file itself, an environment variable (`url_env`), a file (`url_file`),
//! with the password on its own (`password_env`, `password_file`) if wanted. Read while the
//! config loads, so `config check` names a missing variable or file by its key.
//!
//! A [`SecretUrl`] never shows its password: `Debug`, `Display` and `Serialize` print it
//! as `***`, and only the code that connects calls [`SecretUrl::expose`].

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize, Serializer};
use toml::Value;

/// A URL whose password is hidden wherever it is shown.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct SecretUrl(String);

impl SecretUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL as it is, password included: only for connecting.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        redact_url(&self.0)
    }
}

impl From<String> for SecretUrl {
    fn from(url: String) -> Self {
        Self(url)
    }
}

impl From<&str> for SecretUrl {
    fn from(url: &str) -> Self {
        Self(url.to_owned())
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SecretUrl").field(&self.redacted()).finish()
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Serialize for SecretUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

/// Query parameters that hold a password: libpq's and sqlx's `password`, redis-rs' `pass`.
const PASSWORD_PARAMS: [&str; 2] = ["password", "pass"];

/// A URL with any password (in its user info or a `password=` / `pass=` query parameter)
/// replaced by `***`; a text that is not a URL is not shown at all.
pub fn redact_url(url: &str) -> String {
    let Ok(mut u) = reqwest::Url::parse(url) else {
        return "<unparseable url>".to_owned();
    };
    if u.password().is_some() {
        // Only URLs without a host cannot take a password, and those cannot have one.
        let _ = u.set_password(Some("***"));
    }
    let secret_param = |k: &str| PASSWORD_PARAMS.iter().any(|p| k.eq_ignore_ascii_case(p));
    if u.query_pairs().any(|(k, _)| secret_param(&k)) {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if secret_param(&k) { "***".into() } else { v };
                (k.into_owned(), v.into_owned())
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

/// `text` (an error message that may quote a config line) with the password of every
/// `scheme://user:password@` in it replaced by `***`.
pub fn redact_in_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '/' | '`'))
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..=colon]);
                out.push_str("***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

/// The sections whose `url` may come from elsewhere, with the `type` each must have (or
/// leave out) for it: SQLite and the in-process queue take no URL.
const SECTIONS: [(&str, &str); 2] = [("store", "postgres"), ("queue", "redis")];

/// Replaces `url_env` / `url_file` / `password_env` / `password_file` in `[store]` and
/// `[queue]` with the `url` they make, reading `env` and the files named. Returns every
/// problem, each naming its key. A section whose URL cannot be made is left out, so that
/// nothing that only follows from it is reported as well.
pub(super) fn resolve_urls(root: &mut Value, env: &HashMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    let Value::Table(root) = root else {
        return problems;
    };
    for (section, kind) in SECTIONS {
        let Some(Value::Table(t)) = root.get_mut(section) else {
            continue;
        };
        let typed_otherwise = t
            .get("type")
            .is_some_and(|v| v.as_str().is_none_or(|s| s != kind));
        if typed_otherwise {
            // Left as they are: serde names them as keys this type does not take.
            continue;
        }
        let before = problems.len();
        match resolve_section(section, t, env, &mut problems) {
            Some(url) => {
                t.insert("url".to_owned(), Value::String(url));
            }
            None if problems.len() > before => {
                root.remove(section);
            }
            None => {}
        }
    }
    problems
}

/// The section's URL with its password in, when it has one and nothing is wrong.
fn resolve_section(
    section: &str,
    t: &mut toml::Table,
    env: &HashMap<String, String>,
    problems: &mut Vec<String>,
) -> Option<String> {
    let before = problems.len();
    let url = one_source(section, "url", t, env, problems);
    let password = one_source(section, "password", t, env, problems);
    if problems.len() > before {
        return None;
    }
    let Some((url, _)) = url else {
        if let Some((_, key)) = password {
            problems.push(format!(
                "{section}.{key}: there is no {section}.url, url_env or url_file to put the password in"
            ));
        }
        return None;
    };
    match password {
        None => Some(url),
        Some((password, _)) => with_password(&url, &password)
            .map_err(|why| problems.push(format!("{section}.url: {why}")))
            .ok(),
    }
}

/// The value of `name` from at most one of `name` (only for the URL itself),
/// `name_env` and `name_file`, which are taken out of the table; and the key it came from.
fn one_source(
    section: &str,
    name: &str,
    t: &mut toml::Table,
    env: &HashMap<String, String>,
    problems: &mut Vec<String>,
) -> Option<(String, String)> {
    let inline = if name == "url" {
        t.get(name).cloned()
    } else {
        None
    };
    let from_env = t.remove(&format!("{name}_env"));
    let from_file = t.remove(&format!("{name}_file"));
    let given = [
        inline.as_ref().map(|_| name.to_owned()),
        from_env.as_ref().map(|_| format!("{name}_env")),
        from_file.as_ref().map(|_| format!("{name}_file")),
    ];
    let given: Vec<String> = given.into_iter().flatten().collect();
    if given.len() > 1 {
        problems.push(format!(
            "{section}: {} are set; give only one of them",
            given
                .iter()
                .map(|k| format!("{section}.{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return None;
    }
    let text = |v: &Value, key: &str, problems: &mut Vec<String>| match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        _ => {
            problems.push(format!("{section}.{key}: must be a non-empty string"));
            None
        }
    };
    if let Some(v) = from_env {
        let key = format!("{name}_env");
        let var = text(&v, &key, problems)?;
        return match env.get(&var) {
            Some(value) if !value.trim().is_empty() => Some((value.trim().to_owned(), key)),
            Some(_) => {
                problems.push(format!(
                    "{section}.{key}: environment variable {var} is empty"
                ));
                None
            }
            None => {
                problems.push(format!(
                    "{section}.{key}: environment variable {var} is not set"
                ));
                None
            }
        };
    }
    if let Some(v) = from_file {
        let key = format!("{name}_file");
        let path = text(&v, &key, problems)?;
        return match std::fs::read_to_string(&path) {
            Ok(content) if !content.trim().is_empty() => Some((content.trim().to_owned(), key)),
            Ok(_) => {
                problems.push(format!("{section}.{key}: {path} is empty"));
                None
            }
            Err(e) => {
                problems.push(format!("{section}.{key}: cannot read {path}: {e}"));
                None
            }
        };
    }
    // The inline URL stays where it is; serde checks its type.
    inline.and_then(|v| Some((v.as_str()?.to_owned(), name.to_owned())))
}

/// `url` with its password set to `password` (percent-encoded as URLs need).
fn with_password(url: &str, password: &str) -> Result<String, String> {
    let mut u =
        reqwest::Url::parse(url).map_err(|_| format!("{} is not a URL", redact_url(url)))?;
    if u.password().is_some() {
        return Err(format!(
            "{} carries a password already; keep it in one place",
            redact_url(url)
        ));
    }
    u.set_password(Some(password))
        .map_err(|()| format!("{} has no host to give a password to", redact_url(url)))?;
    Ok(u.to_string())
}

#[cfg(test)]
#[path = "secret_tests.rs"]
mod tests;
