//! Property tests of config loading: any text and any TOML tree is loaded or refused
//! without a panic, and every problem names the key (or variable) it is about.

use proptest::prelude::*;
use toml::Value;

use super::load_str;

/// Each problem starts with what it is about: a key path (`timeouts.route_s:`,
/// `backends[0].url:`), `unknown key `…``, an environment variable, or the TOML syntax.
/// Returns the first segment of the key it names, when it names one.
fn subject(problem: &str) -> Option<String> {
    if problem.starts_with("TOML syntax: ") || problem.starts_with("environment variable ") {
        return None;
    }
    let path = match problem.strip_prefix("unknown key `") {
        Some(rest) => rest.split('`').next().unwrap_or(""),
        None => problem.split(':').next().unwrap_or(""),
    };
    let valid = !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '[' | ']'));
    assert!(valid, "the problem names no key: {problem:?}");
    Some(path.split(['.', '[']).next().unwrap_or_default().to_owned())
}

const SECTIONS: &[(&str, &[&str])] = &[
    (
        "server",
        &["listen", "api_keys", "routing_info", "shutdown_grace_s"],
    ),
    (
        "store",
        &["type", "path", "url", "schema", "url_env", "password_file"],
    ),
    (
        "queue",
        &[
            "type",
            "url",
            "prefix",
            "lease_s",
            "url_file",
            "password_env",
        ],
    ),
    ("history", &["enabled", "max_turns", "max_chars"]),
    ("internal_tasks", &["mode", "model", "max_tokens"]),
    (
        "timeouts",
        &[
            "route_s",
            "connect_ms",
            "stream_idle_s",
            "answer_s",
            "discovery_interval_s",
            "look_interval_s",
            "queued_head_ms",
            "keep_alive_s",
        ],
    ),
    (
        "routing",
        &["default_model", "domains", "web", "classifier"],
    ),
    (
        "web",
        &[
            "enabled",
            "searxng_url",
            "timeout_ms",
            "max_results",
            "model",
        ],
    ),
    (
        "memory",
        &["enabled", "scope", "top_k", "min_score", "embedding_model"],
    ),
    ("scheduler", &["aging_s"]),
    ("nonsense", &["a", "b"]),
];

const BACKEND_KEYS: &[&str] = &[
    "name",
    "kind",
    "url",
    "models",
    "api_key_env",
    "parallel",
    "context_length",
    "model_context_length",
    "max_num_ctx",
    "extra",
];

/// Strings a real config might hold, and some it should not.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("127.0.0.1:0".to_owned()),
        Just("postgres://u:pw@h/db".to_owned()),
        Just("redis://h".to_owned()),
        Just("http://127.0.0.1:11434".to_owned()),
        Just("ollama".to_owned()),
        Just("openai".to_owned()),
        Just("sqlite".to_owned()),
        Just("redis".to_owned()),
        Just("model".to_owned()),
        Just("qwen2.5:7b".to_owned()),
        Just("auto".to_owned()),
        "\\PC{0,24}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Integer),
        (0i64..100).prop_map(Value::Integer),
        any::<bool>().prop_map(Value::Boolean),
        (-1e6f64..1e6).prop_map(Value::Float),
        text().prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Table(m.into_iter().collect())),
        ]
    })
}

fn section(keys: &'static [&'static str]) -> impl Strategy<Value = toml::Table> {
    prop::collection::vec((prop::sample::select(keys), value()), 0..5)
        .prop_map(|pairs| pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A config tree with known sections and keys, random values, and some unknown names.
fn tree() -> impl Strategy<Value = toml::Table> {
    let sections = prop::collection::vec(
        prop::sample::select(SECTIONS).prop_flat_map(|(name, keys)| (Just(name), section(keys))),
        0..5,
    );
    let backends = prop::collection::vec(section(BACKEND_KEYS), 0..3);
    (sections, backends).prop_map(|(sections, backends)| {
        let mut root: toml::Table = sections
            .into_iter()
            .map(|(name, t)| (name.to_owned(), Value::Table(t)))
            .collect();
        if !backends.is_empty() {
            let list = backends.into_iter().map(Value::Table).collect();
            root.insert("backends".to_owned(), Value::Array(list));
        }
        root
    })
}

/// A valid config with every section, to break one key of.
const VALID: &str = r#"
[server]
listen = "127.0.0.1:8000"
shutdown_grace_s = 5
[store]
type = "postgres"
url = "postgres://u:pw@h/db"
schema = "s"
[queue]
type = "redis"
url = "redis://h"
lease_s = 30
[[backends]]
name = "moon"
kind = "ollama"
url = "http://127.0.0.1:11434"
models = ["qwen2.5:7b"]
parallel = 2
context_length = 32768
max_num_ctx = 16384
model_context_length = { "qwen2.5:7b" = 8192 }
[history]
enabled = true
max_turns = 4
[internal_tasks]
mode = "rules"
max_tokens = 128
[timeouts]
route_s = 60
connect_ms = 100
[web]
enabled = true
timeout_ms = 500
[memory]
top_k = 3
[scheduler]
aging_s = 30
"#;

/// Keys of [`VALID`] that take a number, a bool, a string or a list of strings.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Number,
    Flag,
    Text,
    Texts,
}

const LEAVES: &[(&str, &str, Kind)] = &[
    ("server", "listen", Kind::Text),
    ("server", "shutdown_grace_s", Kind::Number),
    ("store", "url", Kind::Text),
    ("store", "schema", Kind::Text),
    ("queue", "url", Kind::Text),
    ("queue", "lease_s", Kind::Number),
    ("backends[0]", "name", Kind::Text),
    ("backends[0]", "kind", Kind::Text),
    ("backends[0]", "models", Kind::Texts),
    ("backends[0]", "parallel", Kind::Number),
    ("backends[0]", "context_length", Kind::Number),
    ("backends[0]", "max_num_ctx", Kind::Number),
    ("history", "enabled", Kind::Flag),
    ("history", "max_turns", Kind::Number),
    ("internal_tasks", "mode", Kind::Text),
    ("internal_tasks", "max_tokens", Kind::Number),
    ("timeouts", "route_s", Kind::Number),
    ("timeouts", "connect_ms", Kind::Number),
    ("timeouts", "look_interval_s", Kind::Number),
    ("timeouts", "queued_head_ms", Kind::Number),
    ("timeouts", "keep_alive_s", Kind::Number),
    ("web", "enabled", Kind::Flag),
    ("web", "timeout_ms", Kind::Number),
    ("memory", "top_k", Kind::Number),
    ("scheduler", "aging_s", Kind::Number),
];

/// A value of another kind than `kind`.
fn wrong(kind: Kind) -> BoxedStrategy<Value> {
    let number = prop_oneof![any::<i64>(), Just(-1i64)].prop_map(Value::Integer);
    let flag = any::<bool>().prop_map(Value::Boolean);
    let text = "\\PC{0,12}".prop_map(Value::String);
    let table = Just(Value::Table(toml::Table::new()));
    match kind {
        Kind::Number => prop_oneof![flag, text, table].boxed(),
        Kind::Flag => prop_oneof![number, text, table].boxed(),
        Kind::Text | Kind::Texts => prop_oneof![number, flag, table].boxed(),
    }
}

fn leaf_and_wrong_value() -> impl Strategy<Value = (&'static str, &'static str, Value)> {
    prop::sample::select(LEAVES)
        .prop_flat_map(|(table, key, kind)| (Just(table), Just(key), wrong(kind)))
}

fn set(root: &mut toml::Table, table: &str, key: &str, v: Value) {
    let t = match table.strip_suffix("[0]") {
        Some(name) => root
            .get_mut(name)
            .and_then(Value::as_array_mut)
            .and_then(|a| a.first_mut()),
        None => root.get_mut(table),
    };
    let t = t.and_then(Value::as_table_mut).expect("a table of VALID");
    t.insert(key.to_owned(), v);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn any_text_is_loaded_or_refused_with_named_problems(text in "\\PC{0,200}") {
        if let Err(e) = load_str(&text, Vec::new()) {
            let problems = e.problems();
            prop_assert!(!problems.is_empty());
            for p in &problems {
                subject(p);
            }
        }
    }

    #[test]
    fn any_bytes_as_text_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = load_str(&text, Vec::new());
    }

    #[test]
    fn any_environment_override_is_applied_or_refused_naming_the_variable(
        path in prop::collection::vec(prop_oneof![
            Just("SERVER".to_owned()), Just("LISTEN".to_owned()), Just("TIMEOUTS".to_owned()),
            Just("ROUTE_S".to_owned()), Just("BACKENDS".to_owned()), Just("0".to_owned()),
            Just("1".to_owned()), Just("URL".to_owned()), Just(String::new()), "[A-Z0-9_]{1,6}",
        ], 1..5),
        raw in prop_oneof![text(), Just("[1, 2]".to_owned()), Just("{ a = 1 }".to_owned()), Just("60".to_owned())],
    ) {
        let key = format!("COORDINATOR_{}", path.join("__"));
        let env = vec![(key.clone(), raw), ("COORDINATOR_X__Y".to_owned(), "1".to_owned())];
        if let Err(e) = load_str("", env) {
            for p in e.problems() {
                if p.starts_with("environment variable ") {
                    prop_assert!(p.contains("COORDINATOR_"), "{p}");
                } else {
                    subject(&p);
                }
            }
        }
    }
}

proptest! {
    // About 1 ms a case in a debug build (a whole config is parsed and validated).
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn any_tree_is_loaded_or_refused_with_problems_about_its_own_keys(root in tree()) {
        let Ok(text) = toml::to_string(&root) else {
            return Ok(());
        };
        if let Err(e) = load_str(&text, Vec::new()) {
            for p in e.problems() {
                let top = subject(&p);
                prop_assert!(
                    top.as_deref().is_none_or(|t| root.contains_key(t)),
                    "{p:?} is about a section the config does not have:\n{text}"
                );
            }
        }
    }

    #[test]
    fn a_value_of_the_wrong_kind_is_refused_naming_its_key((table, key, v) in leaf_and_wrong_value()) {
        let mut root: toml::Table = toml::from_str(VALID).unwrap();
        set(&mut root, table, key, v);
        let text = toml::to_string(&root).unwrap();
        let problems = load_str(&text, Vec::new()).unwrap_err().problems();
        let path = format!("{table}.{key}");
        // A tagged section (store, queue) reports the section: its keys are read as one.
        let named = problems
            .iter()
            .any(|p| p.contains(&path) || (matches!(table, "store" | "queue") && p.starts_with(&format!("{table}:"))));
        prop_assert!(named, "{path} not named in {problems:?}");
        prop_assert!(!problems.join("\n").contains(":pw@"), "a password shows: {problems:?}");
    }
}
