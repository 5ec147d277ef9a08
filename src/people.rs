//! The household's people: who a request comes from, read off its API key.
//!
//! Every task, memory item and event stream belongs to a [`Person`]. A key of
//! `[[server.keys]]` names its person; a key of the flat `[server] api_keys` list is a person
//! of its own (`key-` and a stable hash of the key); the key a trusted front end uses (Open
//! WebUI's connection) vouches for the user its `X-OpenWebUI-User-Id` header names
//! (`<key name>/<user id>`). With no keys at all everything belongs to one person,
//! [`Person::DEFAULT`], who sees everything, as before there were people.
//!
//! Keys are held as SHA-256 digests, so a lookup neither keeps the keys in the table nor
//! takes longer for a guess that shares a longer prefix with a real key.

use std::collections::HashMap;
use std::path::Path;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

use crate::config::{KeyConfig, KeyRole, ServerConfig};
use crate::domain::{Person, hex};

/// The shortest key `config check` and `serve` accept.
pub const MIN_KEY_CHARS: usize = 16;

/// The header a trusted front end names its user in (Open WebUI with
/// `ENABLE_FORWARD_USER_INFO_HEADERS=true`).
pub const USER_ID_HEADER: &str = "x-openwebui-user-id";

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub person: Person,
    /// Sees and manages every person's tasks and memories.
    pub admin: bool,
}

impl Caller {
    /// The caller of a Coordinator without keys: the one person, who sees everything.
    pub fn household() -> Self {
        Self {
            person: Person::default(),
            admin: true,
        }
    }

    /// Whether the caller may see what `owner` owns.
    pub fn may_see(&self, owner: &Person) -> bool {
        self.admin || self.person == *owner
    }

    /// The person whose things a listing is limited to: the caller's own, or `None`
    /// (everyone's) for an admin.
    pub fn scope(&self) -> Option<&Person> {
        (!self.admin).then_some(&self.person)
    }
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing API key: send Authorization: Bearer <key> (or x-api-key: <key>)")]
    Missing,
    #[error("invalid API key")]
    Invalid,
    #[error("X-OpenWebUI-User-Id: {0}")]
    BadUser(String),
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    person: Person,
    admin: bool,
    trusted_frontend: bool,
}

/// The configured keys, by digest.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    by_digest: HashMap<[u8; 32], Entry>,
}

impl Keys {
    /// Reads every key (from the config, the environment or a file) and checks them all:
    /// every problem is reported, not just the first.
    pub fn from_config(server: &ServerConfig) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let mut keys = Self::default();
        let mut names = HashMap::new();
        for (i, key) in server.api_keys.iter().enumerate() {
            let at = format!("server.api_keys[{i}]");
            let key = key.trim();
            if let Some(problem) = too_short(key) {
                problems.push(format!("{at}: {problem}"));
                continue;
            }
            let digest = digest(key);
            let name = format!("key-{}", hex(&digest[..4]));
            let entry = Entry {
                person: Person::parse(&name).unwrap_or_default(),
                name,
                admin: false,
                trusted_frontend: false,
            };
            if keys.by_digest.insert(digest, entry).is_some() {
                problems.push(format!("{at}: the same key is listed twice"));
            }
        }
        for (i, config) in server.keys.iter().enumerate() {
            let at = format!("server.keys[{i}]");
            match entry(config, &at) {
                Ok((key, entry)) => {
                    if let Some(first) = names.insert(entry.name.clone(), i) {
                        problems.push(format!(
                            "{at}.name: {:?} is also the name of server.keys[{first}]",
                            entry.name
                        ));
                    }
                    if keys.by_digest.insert(digest(&key), entry).is_some() {
                        problems.push(format!("{at}: its key is also another entry's key"));
                    }
                }
                Err(mut found) => problems.append(&mut found),
            }
        }
        if problems.is_empty() {
            Ok(keys)
        } else {
            Err(problems)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// Who sent a request with these headers. Without configured keys, the household's
    /// one person; with them, the person of the presented key (`Authorization: Bearer`,
    /// the scheme in any case, or Anthropic's `x-api-key`), or the user a trusted front
    /// end's key vouches for.
    pub fn identify(&self, headers: &HeaderMap) -> Result<Caller, AuthError> {
        if self.is_empty() {
            return Ok(Caller::household());
        }
        let presented = bearer(headers)
            .or_else(|| api_key_header(headers))
            .ok_or(AuthError::Missing)?;
        let entry = self
            .by_digest
            .get(&digest(presented))
            .ok_or(AuthError::Invalid)?;
        let user = headers
            .get(USER_ID_HEADER)
            .map(|v| v.to_str().map(str::trim))
            .filter(|v| v.as_ref().is_ok_and(|v| !v.is_empty()));
        match user {
            Some(user) if entry.trusted_frontend => {
                let user =
                    user.map_err(|_| AuthError::BadUser("it is not visible ASCII".to_owned()))?;
                let person = Person::parse(&format!("{}/{user}", entry.name))
                    .map_err(|e| AuthError::BadUser(e.reason))?;
                Ok(Caller {
                    person,
                    admin: false,
                })
            }
            _ => Ok(Caller {
                person: entry.person.clone(),
                admin: entry.admin,
            }),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The key of an `x-api-key: <key>` header, as Anthropic's clients send it.
pub fn api_key_header(headers: &HeaderMap) -> Option<&str> {
    let key = headers.get("x-api-key")?.to_str().ok()?.trim();
    (!key.is_empty()).then_some(key)
}

/// One `[[server.keys]]` entry, read and checked: its key and its table entry.
fn entry(config: &KeyConfig, at: &str) -> Result<(String, Entry), Vec<String>> {
    let mut problems = Vec::new();
    let person = match Person::parse(&config.name) {
        Ok(_) if config.name.contains('/') => {
            problems.push(format!(
                "{at}.name: {:?} may not contain '/' (it separates a front end's users)",
                config.name
            ));
            None
        }
        Ok(p) => Some(p),
        Err(e) => {
            problems.push(format!("{at}.name: {e}"));
            None
        }
    };
    let key = match (&config.key, &config.key_env, &config.key_file) {
        (Some(key), None, None) => Some(key.trim().to_owned()),
        (None, Some(var), None) => match std::env::var(var) {
            Ok(key) => Some(key.trim().to_owned()),
            Err(_) => {
                problems.push(format!(
                    "{at}.key_env: the environment variable {var} is not set"
                ));
                None
            }
        },
        (None, None, Some(path)) => match read_key_file(path) {
            Ok(key) => Some(key),
            Err(problem) => {
                problems.push(format!("{at}.key_file: {problem}"));
                None
            }
        },
        _ => {
            problems.push(format!(
                "{at}: set exactly one of key, key_env (an environment variable) or key_file"
            ));
            None
        }
    };
    if let Some(problem) = key.as_deref().and_then(too_short) {
        problems.push(format!("{at}: {problem}"));
    }
    match (person, key) {
        (Some(person), Some(key)) if problems.is_empty() => Ok((
            key,
            Entry {
                name: config.name.trim().to_owned(),
                person,
                admin: config.role == KeyRole::Admin,
                trusted_frontend: config.trusted_frontend,
            },
        )),
        _ => Err(problems),
    }
}

fn read_key_file(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn too_short(key: &str) -> Option<String> {
    let chars = key.chars().count();
    (chars < MIN_KEY_CHARS).then(|| {
        format!(
            "a key must be at least {MIN_KEY_CHARS} characters long (this one has {chars}); \
             `openssl rand -hex 24` makes a good one"
        )
    })
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    const ALICE: &str = "alice-key-0123456789";
    const BOB: &str = "bob-key-0123456789ab";
    const WEBUI: &str = "webui-key-0123456789";
    const FLAT: &str = "flat-key-0123456789a";

    fn key(name: &str, key: &str) -> KeyConfig {
        KeyConfig {
            name: name.to_owned(),
            key: Some(key.to_owned()),
            ..Default::default()
        }
    }

    fn household() -> Keys {
        let server = ServerConfig {
            api_keys: vec![FLAT.to_owned()],
            keys: vec![
                KeyConfig {
                    role: KeyRole::Admin,
                    ..key("alice", ALICE)
                },
                key("bob", BOB),
                KeyConfig {
                    trusted_frontend: true,
                    ..key("webui", WEBUI)
                },
            ],
            ..Default::default()
        };
        Keys::from_config(&server).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn person(p: &str) -> Person {
        Person::parse(p).unwrap()
    }

    #[test]
    fn no_keys_is_one_household_person_who_sees_everything() {
        let caller = Keys::default().identify(&HeaderMap::new()).unwrap();
        assert_eq!(caller, Caller::household());
        assert_eq!(caller.person.as_str(), Person::DEFAULT);
        assert!(caller.may_see(&person("anyone")));
        assert_eq!(caller.scope(), None);
    }

    #[test]
    fn each_key_is_its_person_and_the_scheme_is_case_insensitive() {
        let keys = household();
        for scheme in ["Bearer", "bearer", "BEARER"] {
            let c = keys
                .identify(&headers(&[("authorization", &format!("{scheme} {BOB}"))]))
                .unwrap();
            assert_eq!(c.person, person("bob"));
            assert!(!c.admin);
            assert_eq!(c.scope(), Some(&person("bob")));
            assert!(!c.may_see(&person("alice")));
        }
        let alice = keys
            .identify(&headers(&[("authorization", &format!("Bearer {ALICE}"))]))
            .unwrap();
        assert!(alice.admin && alice.may_see(&person("bob")));
        let flat = keys
            .identify(&headers(&[("authorization", &format!("Bearer  {FLAT} "))]))
            .unwrap();
        assert!(flat.person.starts_with("key-") && flat.person.len() == 12);
        assert!(!flat.admin);
    }

    #[test]
    fn an_x_api_key_header_is_a_key_too() {
        let keys = household();
        let c = keys.identify(&headers(&[("x-api-key", BOB)])).unwrap();
        assert_eq!(c.person, person("bob"));
        assert_eq!(
            keys.identify(&headers(&[("x-api-key", "nope")])),
            Err(AuthError::Invalid)
        );
        assert_eq!(
            keys.identify(&headers(&[("x-api-key", " ")])),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn only_a_trusted_front_end_can_name_its_user() {
        let keys = household();
        let by_webui = |user: &str| {
            keys.identify(&headers(&[
                ("authorization", &format!("Bearer {WEBUI}")),
                (USER_ID_HEADER, user),
            ]))
        };
        assert_eq!(by_webui("u1").unwrap().person, person("webui/u1"));
        assert_eq!(by_webui("u2").unwrap().person, person("webui/u2"));
        assert!(!by_webui("u1").unwrap().admin);
        assert_eq!(by_webui(" ").unwrap().person, person("webui"));
        assert!(matches!(by_webui("a b"), Err(AuthError::BadUser(_))));
        // Bob's key cannot pretend to be someone else.
        let bob = keys
            .identify(&headers(&[
                ("authorization", &format!("Bearer {BOB}")),
                (USER_ID_HEADER, "u1"),
            ]))
            .unwrap();
        assert_eq!(bob.person, person("bob"));
    }

    #[test]
    fn missing_and_wrong_keys_are_refused() {
        let keys = household();
        assert_eq!(keys.identify(&HeaderMap::new()), Err(AuthError::Missing));
        for bad in [
            "Bearer",
            "Bearer ",
            "Basic abc",
            ALICE,
            "Token alice-key-0123456789",
        ] {
            assert_eq!(
                keys.identify(&headers(&[("authorization", bad)])),
                Err(AuthError::Missing),
                "{bad:?}"
            );
        }
        assert_eq!(
            keys.identify(&headers(&[("authorization", "Bearer alice-key-012345678")])),
            Err(AuthError::Invalid)
        );
    }

    #[test]
    fn keys_come_from_the_environment_or_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bob.key");
        std::fs::write(&file, format!("{BOB}\n")).unwrap();
        let server = ServerConfig {
            keys: vec![
                KeyConfig {
                    name: "bob".into(),
                    key_file: Some(file),
                    ..Default::default()
                },
                KeyConfig {
                    name: "carol".into(),
                    // Set by every test process (cargo sets it), never a real key.
                    key_env: Some("CARGO_PKG_DESCRIPTION".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let keys = Keys::from_config(&server).unwrap();
        let bob = keys
            .identify(&headers(&[("authorization", &format!("Bearer {BOB}"))]))
            .unwrap();
        assert_eq!(bob.person, person("bob"));
        let carol_key = env!("CARGO_PKG_DESCRIPTION");
        let carol = keys
            .identify(&headers(&[(
                "authorization",
                &format!("Bearer {carol_key}"),
            )]))
            .unwrap();
        assert_eq!(carol.person, person("carol"));
    }

    #[test]
    fn every_bad_entry_is_reported_at_once() {
        let server = ServerConfig {
            api_keys: vec!["ab".into(), FLAT.into(), FLAT.into()],
            keys: vec![
                key("bob", "short"),
                key("bob", BOB),
                key("a/b", ALICE),
                KeyConfig {
                    name: "dave".into(),
                    ..Default::default()
                },
                KeyConfig {
                    name: "erin".into(),
                    key: Some(ALICE.into()),
                    key_env: Some("X".into()),
                    ..Default::default()
                },
                KeyConfig {
                    name: "fay".into(),
                    key_env: Some("COORDINATOR_TEST_SURELY_UNSET_VARIABLE".into()),
                    ..Default::default()
                },
                KeyConfig {
                    name: "gus".into(),
                    key_file: Some("/nonexistent/gus.key".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let problems = Keys::from_config(&server).unwrap_err();
        let expect = [
            "server.api_keys[0]: a key must be at least 16 characters long (this one has 2)",
            "server.api_keys[2]: the same key is listed twice",
            "server.keys[0]: a key must be at least 16",
            "server.keys[2].name: \"a/b\" may not contain '/'",
            "server.keys[3]: set exactly one of key, key_env",
            "server.keys[4]: set exactly one of key, key_env",
            "server.keys[5].key_env: the environment variable COORDINATOR_TEST_SURELY_UNSET_VARIABLE is not set",
            "server.keys[6].key_file: cannot read /nonexistent/gus.key",
        ];
        for e in expect {
            assert!(
                problems.iter().any(|p| p.starts_with(e)),
                "{e}\n{problems:#?}"
            );
        }
        assert_eq!(problems.len(), expect.len(), "{problems:#?}");
        // A name used twice, once both entries are otherwise fine.
        let twice = ServerConfig {
            keys: vec![key("bob", BOB), key("bob", ALICE)],
            ..Default::default()
        };
        let problems = Keys::from_config(&twice).unwrap_err();
        assert_eq!(
            problems,
            ["server.keys[1].name: \"bob\" is also the name of server.keys[0]"]
        );
        // The key's text is never in a problem, nor in the config's `Debug`.
        let debug = format!("{:?}", key("bob", BOB));
        assert!(!debug.contains(BOB), "{debug}");
        let server = ServerConfig {
            api_keys: vec![FLAT.into()],
            keys: vec![key("bob", BOB)],
            ..Default::default()
        };
        let debug = format!("{server:?}");
        assert!(!debug.contains(FLAT) && !debug.contains(BOB), "{debug}");
    }
}
