//! Secrets in URLs: where they come from, and that they never show.

use std::io::Write;

use super::*;
use crate::config::{Config, QueueConfig, StoreConfig, load_str};

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn problems(text: &str, vars: &[(&str, &str)]) -> String {
    load_str(text, env(vars)).unwrap_err().problems().join("\n")
}

fn store_url(c: &Config) -> &str {
    match &c.store {
        StoreConfig::Postgres { url, .. } => url.expose(),
        StoreConfig::Sqlite { .. } => panic!("not postgres: {c:?}"),
    }
}

fn queue_url(c: &Config) -> &str {
    match &c.queue {
        QueueConfig::Redis { url, .. } => url.expose(),
        QueueConfig::InProcess => panic!("not redis: {c:?}"),
    }
}

fn secret_file(content: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(content.as_bytes()).unwrap();
    f
}

#[test]
fn passwords_are_hidden_in_user_info_and_query() {
    assert_eq!(
        redact_url("postgres://u:secret@h/db"),
        "postgres://u:***@h/db"
    );
    assert_eq!(
        redact_url("redis://:secret@h:6379/0"),
        "redis://:***@h:6379/0"
    );
    assert_eq!(
        redact_url("postgres://h/db?user=u&password=secret&sslmode=require"),
        "postgres://h/db?user=u&password=***&sslmode=require"
    );
    assert_eq!(
        redact_url("redis+unix:///run/redis.sock?pass=secret"),
        "redis+unix:///run/redis.sock?pass=***"
    );
    assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    assert_eq!(redact_url("not a url secret"), "<unparseable url>");
}

#[test]
fn a_secret_url_shows_only_its_redacted_form() {
    let url = SecretUrl::new("postgres://u:secret@h/db");
    assert_eq!(url.expose(), "postgres://u:secret@h/db");
    for shown in [
        format!("{url}"),
        format!("{url:?}"),
        format!("{url:#?}"),
        serde_json::to_string(&url).unwrap(),
    ] {
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("u:***@h"), "{shown}");
    }
}

#[test]
fn passwords_in_quoted_lines_are_hidden() {
    assert_eq!(
        redact_in_text("at `url = \"postgres://u:s3cr:et@h:5432/db` and redis://:pw@r"),
        "at `url = \"postgres://u:***@h:5432/db` and redis://:***@r"
    );
    assert_eq!(
        redact_in_text("http://h:80/x no secret"),
        "http://h:80/x no secret"
    );
    let err = problems("[store]\nurl = \"postgres://u:hunter2@h/db\nx", &[]);
    assert!(err.contains("TOML syntax"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn the_url_comes_from_a_variable_or_a_file() {
    let c = load_str(
        "[store]\nurl_env = \"PG_URL\"\nschema = \"s\"\n[queue]\nurl_env = \"RD_URL\"\n",
        env(&[
            ("PG_URL", "postgres://u:pw@h/db"),
            ("RD_URL", "redis://:pw@r"),
        ]),
    )
    .unwrap();
    assert_eq!(store_url(&c), "postgres://u:pw@h/db");
    assert_eq!(queue_url(&c), "redis://:pw@r");

    let f = secret_file("postgres://u:pw@h/db\n");
    let text = format!("[store]\nurl_file = {:?}\n", f.path().display().to_string());
    let c = load_str(&text, env(&[])).unwrap();
    assert_eq!(store_url(&c), "postgres://u:pw@h/db");
}

#[test]
fn the_password_alone_goes_into_the_url_encoded() {
    let c = load_str(
        "[store]\nurl = \"postgres://coord@h/db\"\npassword_env = \"PG_PW\"\n",
        env(&[("PG_PW", "p@ss:w/rd")]),
    )
    .unwrap();
    assert_eq!(store_url(&c), "postgres://coord:p%40ss%3Aw%2Frd@h/db");

    let f = secret_file("s3cret\n");
    let text = format!(
        "[queue]\nurl = \"redis://r:6379\"\npassword_file = {:?}\n",
        f.path().display().to_string()
    );
    let c = load_str(&text, env(&[])).unwrap();
    assert_eq!(queue_url(&c), "redis://:s3cret@r:6379");
}

#[test]
fn the_environment_can_name_the_variable_too() {
    let c = load_str(
        "",
        env(&[
            ("COORDINATOR_STORE__URL_ENV", "PG_URL"),
            ("PG_URL", "postgres://h/db"),
        ]),
    )
    .unwrap();
    assert_eq!(store_url(&c), "postgres://h/db");
}

#[test]
fn every_problem_names_its_key() {
    let err = problems(
        "[store]\nurl_env = \"NOPE\"\n[queue]\nurl_file = \"/nonexistent/redis-url\"\n",
        &[],
    );
    assert!(
        err.contains("store.url_env: environment variable NOPE is not set"),
        "{err}"
    );
    assert!(
        err.contains("queue.url_file: cannot read /nonexistent/redis-url"),
        "{err}"
    );
    // Nothing that only follows from a missing URL is reported.
    assert_eq!(err.lines().count(), 2, "{err}");

    let err = problems(
        "[store]\nurl = \"postgres://h/db\"\nurl_env = \"PG_URL\"\n",
        &[("PG_URL", "x")],
    );
    assert!(err.contains("store.url, store.url_env are set"), "{err}");

    let err = problems(
        "[store]\nurl = \"postgres://u:old@h/db\"\npassword_env = \"PG_PW\"\n",
        &[("PG_PW", "new")],
    );
    assert!(
        err.contains("store.url:") && err.contains("already"),
        "{err}"
    );
    assert!(!err.contains("old"), "{err}");

    let err = problems(
        "[queue]\ntype = \"redis\"\npassword_env = \"X\"\n",
        &[("X", "y")],
    );
    assert!(err.contains("queue.password_env"), "{err}");

    let err = problems("[store]\nurl_env = \"PG_URL\"\n", &[("PG_URL", "  ")]);
    assert!(
        err.contains("store.url_env: environment variable PG_URL is empty"),
        "{err}"
    );

    let err = problems("[store]\nurl_env = 3\n", &[]);
    assert!(
        err.contains("store.url_env: must be a non-empty string"),
        "{err}"
    );
}

#[test]
fn a_type_without_urls_names_them_as_unknown_keys() {
    let err = problems(
        "[store]\ntype = \"sqlite\"\nurl_env = \"PG_URL\"\n",
        &[("PG_URL", "postgres://h/db")],
    );
    assert!(err.contains("store: unknown field `url_env`"), "{err}");
}

#[test]
fn neither_debug_nor_the_summary_shows_a_password() {
    let c = load_str(
        "[store]\nurl_env = \"PG_URL\"\n[queue]\nurl = \"redis://r\"\npassword_env = \"RD_PW\"\n\
         [[backends]]\nname = \"moon\"\nkind = \"ollama\"\nurl = \"http://u:bk-secret@h:11434\"\n",
        env(&[
            ("PG_URL", "postgres://u:pg-secret@h/db?password=pg-secret"),
            ("RD_PW", "rd-secret"),
        ]),
    )
    .unwrap();
    for shown in [format!("{c:?}"), format!("{c:#?}"), c.summary()] {
        for secret in ["pg-secret", "rd-secret"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }
    assert!(!c.summary().contains("bk-secret"), "{}", c.summary());
    assert!(
        c.summary().contains("postgres:postgres://u:***@h/db"),
        "{}",
        c.summary()
    );
}
