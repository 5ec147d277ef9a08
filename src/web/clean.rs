//! Reducing a prompt to the user's own words before it becomes a search query: Open WebUI
//! `### Task:` templates are unwrapped, and code fences, pasted logs, quotes, markdown,
//! emoji and Coordinator's routing header/footer are removed.
//!
//! The seed's failure was a 5,000-character template sent to SearXNG verbatim; everything
//! here exists so that only the question itself reaches the query rules.

/// The user's own words in `text`, on one line.
pub fn clean_text(text: &str) -> String {
    let unwrapped = unwrap_template(text);
    let undecorated = strip_decorations(&unwrapped);
    let mut kept = Vec::new();
    let mut error_line = None;
    let mut in_fence = false;
    for line in undecorated.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || trimmed.is_empty() || trimmed.starts_with('>') || is_indented_code(line) {
            continue;
        }
        if is_log_line(trimmed) {
            if looks_like_error(trimmed) {
                error_line = Some(trimmed.to_owned());
            }
            continue;
        }
        kept.push(strip_markdown(trimmed));
    }
    let joined = collapse(&kept.join(" "));
    if joined.is_empty() {
        // Only a pasted error was left: its message is the best query there is.
        return error_line
            .map(|l| collapse(&strip_markdown(&l)))
            .unwrap_or_default();
    }
    joined
}

/// The user's part of an Open WebUI template, or the text itself when it is none.
fn unwrap_template(text: &str) -> String {
    let trimmed = text.trim_start();
    let is_task = trimmed.starts_with("### Task:") || text.contains("\n### Task:");
    let is_tool_call = trimmed.starts_with("Query:") || trimmed.starts_with("History:");
    if !is_task && !is_tool_call {
        return text.to_owned();
    }
    if let Some(inner) = between(text, "<user_query>", "</user_query>") {
        return inner.to_owned();
    }
    if let Some(history) = between(text, "<chat_history>", "</chat_history>") {
        return last_user_line(history);
    }
    if let Some(i) = text.rfind("</context>") {
        let after = &text[i + "</context>".len()..];
        if !after.trim().is_empty() {
            return after.to_owned();
        }
    }
    if let Some(i) = text.rfind("Query:") {
        return text[i + "Query:".len()..].to_owned();
    }
    String::new()
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.rfind(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(&text[start..end])
}

/// The last `USER:` message of a rendered `{{MESSAGES}}` block (it may span lines).
fn last_user_line(history: &str) -> String {
    let mut current: Option<String> = None;
    let mut last_user = String::new();
    for line in history.lines() {
        if let Some(rest) = line.strip_prefix("USER:") {
            if let Some(done) = current.take() {
                last_user = done;
            }
            current = Some(rest.trim().to_owned());
        } else if line.starts_with("ASSISTANT:") {
            if let Some(done) = current.take() {
                last_user = done;
            }
        } else if let Some(c) = current.as_mut() {
            c.push('\n');
            c.push_str(line);
        }
    }
    current.unwrap_or(last_user)
}

/// Markers of the routing header Coordinator (and the seed's pipe) put on answers.
const DECORATION_PREFIXES: [&str; 11] = [
    "📡",
    "⏳",
    "🌙",
    "✅",
    "⚠️",
    "❌",
    "- ドメイン:",
    "- モデル:",
    "- Worker:",
    "- キュー:",
    "*domain:",
];

/// Removes the routing header, the "⏳ 処理中..." line and the `--- *domain:` footer.
pub fn strip_decorations(text: &str) -> String {
    let text = crate::turn::decoration::strip(text);
    let mut body: &str = text;
    for footer in ["\n---\n*domain:", "---\n*domain:"] {
        if let Some(i) = body.find(footer) {
            body = &body[..i];
            break;
        }
    }
    if let Some(i) = body.rfind("⏳ 処理中...") {
        body = &body[i + "⏳ 処理中...".len()..];
    }
    body.lines()
        .filter(|l| {
            let t = l.trim_start();
            !DECORATION_PREFIXES.iter().any(|p| t.starts_with(p))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_indented_code(line: &str) -> bool {
    line.starts_with('\t') || line.starts_with("    ")
}

const LOG_PREFIXES: [&str; 24] = [
    "[INFO",
    "[WARN",
    "[ERROR",
    "[DEBUG",
    "[TRACE",
    "[FATAL",
    "INFO ",
    "INFO:",
    "WARN ",
    "WARN:",
    "WARNING:",
    "ERROR ",
    "ERROR:",
    "DEBUG",
    "TRACE ",
    "FATAL",
    "CRITICAL",
    "Traceback (",
    "File \"",
    "Caused by:",
    "Exception in thread",
    "$ ",
    ">>> ",
    "PS C:\\",
];

/// A line that looks pasted from a terminal or a log file.
fn is_log_line(line: &str) -> bool {
    if LOG_PREFIXES.iter().any(|p| line.starts_with(p)) || starts_with_timestamp(line) {
        return true;
    }
    if line.starts_with("at ") && line.contains('(') && line.contains(')') {
        return true;
    }
    if line.contains("panicked at") || line.contains("RUST_BACKTRACE") {
        return true;
    }
    let total = line.chars().count();
    let symbolic = line
        .chars()
        .filter(|c| c.is_ascii_digit() || c.is_ascii_punctuation())
        .count();
    total >= 20 && symbolic * 2 > total
}

/// `2026-05-01 ...`, `[2026-05-01T...`, `12:34:56 ...`, `May  1 12:34:56 ...`.
fn starts_with_timestamp(line: &str) -> bool {
    let s = line.trim_start_matches('[');
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    let date = digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7) && b.get(7) == Some(&b'-');
    let time = digits(0..2) && b.get(2) == Some(&b':') && digits(3..5) && b.get(5) == Some(&b':');
    let months = [
        "Jan ", "Feb ", "Mar ", "Apr ", "May ", "Jun ", "Jul ", "Aug ", "Sep ", "Oct ", "Nov ",
        "Dec ",
    ];
    let syslog = months.iter().any(|m| s.starts_with(m))
        && s.get(4..).is_some_and(|rest| {
            let rest = rest.trim_start();
            rest.find(' ').is_some_and(|i| {
                rest[..i].chars().all(|c| c.is_ascii_digit())
                    && rest[i + 1..].get(2..3) == Some(":")
            })
        });
    date || time || syslog
}

fn looks_like_error(line: &str) -> bool {
    let l = line.to_lowercase();
    ["error", "not found", "failed", "exception", "denied"]
        .iter()
        .any(|k| l.contains(k))
}

/// Markdown and emoji out, the words in: headings, list markers, emphasis, link targets, URLs.
fn strip_markdown(line: &str) -> String {
    let line = line.trim_start_matches('#').trim_start();
    let line = ["- ", "* ", "+ "]
        .iter()
        .find_map(|m| line.strip_prefix(m))
        .unwrap_or(line);
    let line = link_text(strip_list_number(line));
    let mut out = String::with_capacity(line.len());
    for word in line.split_whitespace() {
        if !word.contains("://") {
            out.push_str(word);
            out.push(' ');
        }
    }
    out.chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace() || KEPT_PUNCTUATION.contains(*c))
        .collect()
}

const KEPT_PUNCTUATION: &str = "?？!！。、，,.・'’\"-:&+#%/()（）「」『』";

fn strip_list_number(line: &str) -> &str {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    match line.get(digits..) {
        Some(rest) if digits > 0 && (rest.starts_with(". ") || rest.starts_with(") ")) => {
            &rest[2..]
        }
        _ => line,
    }
}

/// Every `[text](target)` → `text`.
fn link_text(line: &str) -> String {
    let mut out = line.to_owned();
    while let Some(mid) = out.find("](") {
        let Some(open) = out[..mid].rfind('[') else {
            break;
        };
        let close = out[mid..].find(')').map_or(out.len(), |i| mid + i + 1);
        out = format!("{}{}{}", &out[..open], &out[open + 1..mid], &out[close..]);
    }
    out
}

/// Whitespace collapsed to single spaces, trimmed.
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_questions_pass_through() {
        assert_eq!(
            clean_text("今日の千葉県柏市の天気を教えて"),
            "今日の千葉県柏市の天気を教えて"
        );
        assert_eq!(
            clean_text("  What is the\n population of Kyoto? "),
            "What is the population of Kyoto?"
        );
    }

    #[test]
    fn code_fences_logs_and_quotes_are_removed() {
        let prompt = "Why does this fail?\n```rust\nfn main() { panic!(\"boom\") }\n```\n\
            2026-05-01 12:00:01 ERROR worker: connection refused\n\
            [INFO] starting\n> quoted mail text\n    indented code\nthread 'main' panicked at src/main.rs:1:5";
        assert_eq!(clean_text(prompt), "Why does this fail?");
    }

    #[test]
    fn only_a_pasted_error_is_kept_as_the_query() {
        let got = clean_text("ERROR: ping: command not found");
        assert!(
            got.contains("ping") && got.contains("command not found"),
            "{got}"
        );
    }

    #[test]
    fn query_generation_templates_yield_the_last_user_message() {
        let template = "### Task:\nAnalyze the chat history to determine the necessity of generating search queries, in the given language. By default, **prioritize generating 1-3 broad and relevant search queries**\n### Output:\nStrictly return in JSON format: {\"queries\": [\"query1\"]}\nToday's date: 2026-07-01\n### Chat History:\n<chat_history>\nUSER: 今日の千葉県柏市の天気を教えて\nASSISTANT: 晴れ時々曇りです。\nUSER: Ubuntuでpingコマンドが見つかりません。\n</chat_history>";
        assert_eq!(
            clean_text(template),
            "Ubuntuでpingコマンドが見つかりません。"
        );
    }

    #[test]
    fn rag_templates_yield_the_user_query() {
        let t = "### Task:\nRespond to the user query using the provided context.\n<context>\n<source id=\"1\">ignore</source>\n</context>\n<user_query>\n柏市の人口は？\n</user_query>";
        assert_eq!(clean_text(t), "柏市の人口は？");
        let t2 = "### Task:\nRespond using the context.\n<context>\nstuff\n</context>\n\nWhat is new in Rust?";
        assert_eq!(clean_text(t2), "What is new in Rust?");
        assert_eq!(
            clean_text("### Task:\nGenerate a title. ### Output: JSON"),
            ""
        );
    }

    #[test]
    fn routing_header_and_footer_are_removed() {
        let answer = "📡 ルーティング情報\n- ドメイン: general\n- モデル: web_search\n⏳ 処理中...\n柏市は晴れです。\n\n---\n*domain: general / worker: moon*";
        assert_eq!(clean_text(answer), "柏市は晴れです。");
    }

    #[test]
    fn markdown_links_urls_and_emoji_are_reduced_to_words() {
        assert_eq!(
            clean_text(
                "## 🚀 **Rust** news: see [the blog](https://blog.rust-lang.org) or https://x.example/a"
            ),
            "Rust news: see the blog or"
        );
    }
}
