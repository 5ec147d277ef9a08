//! Tests for query derivation: length cap, stripping, follow-up resolution, rewriter use.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use super::*;
use crate::web::rewrite::{RewriteError, rewrite_messages};

fn seed_history() -> Vec<ChatMessage> {
    vec![
        ChatMessage::user("今日の千葉県柏市の天気を教えて"),
        ChatMessage::assistant(
            "📡 ルーティング情報\n- ドメイン: general\n⏳ 処理中...\n柏市は晴れ時々曇、最高31℃です。\n\n---\n*domain: general / worker: web-worker*",
        ),
    ]
}

fn kyoto_history() -> Vec<ChatMessage> {
    vec![
        ChatMessage::user("Tell me about Kyoto."),
        ChatMessage::assistant("Kyoto was Japan's capital for over a thousand years."),
    ]
}

fn q(history: &[ChatMessage], prompt: &str) -> String {
    rules_query(history, prompt)
        .map(|q| q.text)
        .unwrap_or_default()
}

#[test]
fn the_seed_follow_up_becomes_a_standalone_query() {
    let got = rules_query(&seed_history(), "この市の特産物をおしえて").unwrap();
    assert!(
        got.text.contains("柏市") && got.text.contains("特産物"),
        "{got:?}"
    );
    assert!(
        !got.text.contains("この") && !got.text.contains("おしえて"),
        "{got:?}"
    );
    assert_eq!(got.text, "千葉県柏市 特産物");
    assert_eq!(got.resolved.as_deref(), Some("千葉県柏市"));
    assert_eq!(got.source, QuerySource::Rules);
}

#[test]
fn first_questions_lose_request_endings_and_particles() {
    assert_eq!(
        q(&[], "今日の千葉県柏市の天気を教えて"),
        "今日 千葉県柏市 天気"
    );
    assert_eq!(q(&[], "柏市の人口は？"), "柏市 人口");
    assert_eq!(
        q(&[], "量子コンピュータについて教えてください。"),
        "量子コンピュータ"
    );
    assert_eq!(
        q(&[], "Can you tell me the population of Kyoto?"),
        "the population of Kyoto"
    );
}

#[test]
fn english_follow_ups_name_the_earlier_entity() {
    let got = q(&kyoto_history(), "What about its population?");
    assert!(got.contains("Kyoto") && got.contains("population"), "{got}");
    let got = q(&kyoto_history(), "Is there a good ramen shop there?");
    assert!(got.contains("Kyoto"), "{got}");
}

#[test]
fn elliptical_follow_ups_get_the_entity_in_front() {
    assert_eq!(q(&seed_history(), "人口は？"), "千葉県柏市 人口");
    assert_eq!(
        q(&kyoto_history(), "And the weather tomorrow?"),
        "Kyoto the weather tomorrow"
    );
    assert_eq!(
        q(&seed_history(), "最新ニュース"),
        "最新ニュース",
        "not marked as a follow-up"
    );
}

#[test]
fn a_follow_up_without_history_keeps_its_content_words() {
    assert_eq!(q(&[], "この市の特産物をおしえて"), "市 特産物");
}

#[test]
fn the_seed_template_becomes_the_question_not_5000_characters() {
    let filler =
        "Analyze the chat history to determine the necessity of generating search queries. "
            .repeat(60);
    let template = format!(
        "### Task:\n{filler}\n### Output:\n{{\"queries\": []}}\n<chat_history>\nUSER: Ubuntuでpingコマンドが見つかりません。何をインストールすればいいですか？\n</chat_history>"
    );
    assert!(template.chars().count() > 5000);
    let got = q(&[], &template);
    assert!(got.contains("ping") && !got.contains("Analyze"), "{got}");
    assert!(got.chars().count() <= MAX_QUERY_CHARS);
}

#[test]
fn code_and_logs_never_reach_the_query() {
    let prompt = "How do I fix this nginx error?\n```\nserver { listen 80; }\n```\n2026-07-01 10:00:00 [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)\n";
    assert_eq!(q(&[], prompt), "How do I fix this nginx error");
}

#[test]
fn long_prompts_never_exceed_the_cap() {
    let long_en = "word ".repeat(400);
    assert!(q(&[], &long_en).chars().count() <= MAX_QUERY_CHARS);
    let long_ja = "柏市の歴史と文化と産業と観光".repeat(60);
    assert!(q(&[], &long_ja).chars().count() <= MAX_QUERY_CHARS);
    let with_question = format!(
        "{} What is the capital of Australia?",
        "Some context here. ".repeat(30)
    );
    assert_eq!(q(&[], &with_question), "What is the capital of Australia");
    assert_eq!(cap_chars("abc def", 5), "abc d");
    assert_eq!(
        cap_chars(&"ab ".repeat(100), 200).chars().count(),
        197,
        "cut at the last space"
    );
}

#[test]
fn nothing_left_means_no_query() {
    assert_eq!(rules_query(&[], "```\nfn main() {}\n```"), None);
    assert_eq!(rules_query(&[], "🚀🚀"), None);
}

#[test]
fn model_answers_are_cleaned_and_capped() {
    assert_eq!(
        sanitize_model_query("Query: \"柏市 特産物\"\nextra").as_deref(),
        Some("柏市 特産物")
    );
    assert_eq!(
        sanitize_model_query("「Kyoto population」").as_deref(),
        Some("Kyoto population")
    );
    assert_eq!(sanitize_model_query("   \n"), None);
    assert!(
        sanitize_model_query(&"x ".repeat(300))
            .unwrap()
            .chars()
            .count()
            <= MAX_QUERY_CHARS
    );
}

struct Fixed(Result<String, RewriteError>, AtomicUsize);

#[async_trait]
impl QueryRewriter for Fixed {
    async fn rewrite(
        &self,
        history: &[ChatMessage],
        _: &str,
        rules: Option<&str>,
    ) -> Result<String, RewriteError> {
        self.1.fetch_add(1, Ordering::SeqCst);
        assert_eq!(history.len(), 2);
        assert_eq!(rules, Some("千葉県柏市 特産物"));
        self.0.clone()
    }
}

struct Never;

#[async_trait]
impl QueryRewriter for Never {
    async fn rewrite(
        &self,
        _: &[ChatMessage],
        _: &str,
        _: Option<&str>,
    ) -> Result<String, RewriteError> {
        std::future::pending().await
    }
}

const PROMPT: &str = "この市の特産物をおしえて";

#[tokio::test]
async fn a_working_rewriter_wins() {
    let r = Fixed(Ok("柏市 名産品".into()), AtomicUsize::new(0));
    let got = derive_query(&seed_history(), PROMPT, Some(&r), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (got.text.as_str(), got.source),
        ("柏市 名産品", QuerySource::Model)
    );
    assert_eq!(r.1.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failing_or_empty_rewriter_falls_back_to_rules() {
    for answer in [Err(RewriteError("model down".into())), Ok("\n  \n".into())] {
        let r = Fixed(answer, AtomicUsize::new(0));
        let got = derive_query(&seed_history(), PROMPT, Some(&r), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            (got.text.as_str(), got.source),
            ("千葉県柏市 特産物", QuerySource::Rules)
        );
    }
}

#[tokio::test]
async fn a_rewriter_past_its_deadline_falls_back_to_rules() {
    let got = derive_query(
        &seed_history(),
        PROMPT,
        Some(&Never),
        Duration::from_millis(30),
    )
    .await
    .unwrap();
    assert_eq!(got.source, QuerySource::Rules);
    assert_eq!(got.text, "千葉県柏市 特産物");
}

#[test]
fn the_rewrite_prompt_carries_cleaned_history_and_the_draft() {
    let msgs = rewrite_messages(&seed_history(), PROMPT, Some("千葉県柏市 特産物"));
    assert_eq!(msgs.len(), 2);
    let user = &msgs[1].content;
    assert!(user.contains("user: 今日の千葉県柏市の天気を教えて"));
    assert!(user.contains("Latest message: この市の特産物をおしえて"));
    assert!(user.contains("Keyword draft: 千葉県柏市 特産物"));
    assert!(!user.contains("📡") && !user.contains("domain:"), "{user}");
}
