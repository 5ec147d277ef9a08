//! Tests for the routing decoration: exact round trips (proptest) and the seed's cases.

use proptest::prelude::*;

use super::*;

fn info() -> RouteInfo {
    RouteInfo {
        domain: "code".into(),
        model: "qwen2.5-coder:7b".into(),
        worker: "moon".into(),
        queue: "tasks:llm:qwen2.5-coder:7b".into(),
        wait: String::new(),
    }
}

const MODES: [RoutingInfo; 3] = [
    RoutingInfo::Off,
    RoutingInfo::Footer,
    RoutingInfo::HeaderFooter,
];

#[test]
fn header_and_footer_have_the_seed_style() {
    let d = Decoration::new(&info(), RoutingInfo::HeaderFooter);
    assert_eq!(
        d.header(),
        "📡 ルーティング情報\n- ドメイン: code\n- モデル: qwen2.5-coder:7b\n- Worker: moon\n- キュー: tasks:llm:qwen2.5-coder:7b\n\n"
    );
    assert_eq!(
        d.footer(),
        "\n\n---\n*domain: code / model: qwen2.5-coder:7b / worker: moon*"
    );
    let f = Decoration::new(&info(), RoutingInfo::Footer);
    assert_eq!(f.header(), "");
    assert_eq!(
        f.footer(),
        "\n\n---\n*domain: code / model: qwen2.5-coder:7b / worker: moon / queue: tasks:llm:qwen2.5-coder:7b*"
    );
    assert!(Decoration::new(&info(), RoutingInfo::Off).is_empty());
}

#[test]
fn sanitise_removes_delimiters() {
    assert_eq!(sanitise("a\nb"), "a b");
    assert_eq!(sanitise("*x*"), "x");
    assert_eq!(sanitise("a / b"), "a/b");
    assert_eq!(sanitise(" hf.co/user/m  :q4 "), "hf.co/user/m :q4");
    assert_eq!(sanitise("  \n"), "-");
    assert_eq!(sanitise("a /  / b"), "a//b");
}

#[test]
fn near_misses_are_left_alone() {
    for text in [
        "answer\n\n---\n*domain: a / model: b*",
        "answer\n\n---\n*domain: a / model: b / worker: c / queue: d / x: e*",
        "answer\n\n---\n*domain: a / model: b / worker: c",
        "answer\n\n---\n*domain: a / model: b\n / worker: c*",
        "answer\n\n---\n*domain: a / modelx: b / worker: c*",
        "answer\n\n---\n*domain: a / model: b / worker: c*\n",
        "📡 ルーティング情報\n- ドメイン: a\n- モデル: b\n- Worker: c\n- キュー: d\n\nno footer",
    ] {
        assert_eq!(strip(text), text, "{text:?}");
    }
}

#[test]
fn a_wait_is_the_headers_last_line_and_is_stripped_with_it() {
    let info = RouteInfo {
        wait: "moon: loading qwen2.5:14b, about 12 s".into(),
        ..info()
    };
    let d = Decoration::new(&info, RoutingInfo::HeaderFooter);
    assert_eq!(
        d.header(),
        "📡 ルーティング情報\n- ドメイン: code\n- モデル: qwen2.5-coder:7b\n- Worker: moon\n- キュー: tasks:llm:qwen2.5-coder:7b\n- ⏳ moon: loading qwen2.5:14b, about 12 s\n\n"
    );
    let answer = d.apply("- ⏳ text of the answer itself\n\nmore");
    assert_eq!(strip(&answer), "- ⏳ text of the answer itself\n\nmore");
    // A stream cut short leaves the header alone; history drops it too.
    assert_eq!(
        clean_for_history(&format!("{}partial", d.header())),
        "partial"
    );
    // Without a header there is nowhere to say it.
    assert_eq!(Decoration::new(&info, RoutingInfo::Footer).header(), "");
}

#[test]
fn slash_values_round_trip() {
    for v in ["/", "//", "/models/x.gguf", "a/", " / "] {
        let info = RouteInfo {
            domain: v.into(),
            model: v.into(),
            worker: v.into(),
            queue: v.into(),
            wait: v.into(),
        };
        for mode in MODES {
            assert_eq!(strip(&decorate("x", &info, mode)), "x", "{v:?} {mode:?}");
        }
    }
}

#[test]
fn a_header_like_answer_in_footer_mode_keeps_its_text() {
    let x = Decoration::new(&info(), RoutingInfo::HeaderFooter)
        .header()
        .to_owned()
        + "body";
    let d = decorate(&x, &info(), RoutingInfo::Footer);
    assert_eq!(strip(&d), x);
}

/// The seed's legacy pipe output: header, progress line, answer, footer.
const LEGACY: &str = "📡 ルーティング情報\n- ドメイン: general\n- モデル: web_search\n- Worker: web-worker\n\n⏳ 処理中...\n柏市は晴れ時々曇、最高31℃の予報です。\n\n---\n*domain: general / model: web_search / worker: web-worker*";

#[test]
fn legacy_pipe_decorations_are_removed() {
    assert_eq!(
        strip_legacy(LEGACY),
        "柏市は晴れ時々曇、最高31℃の予報です。"
    );
    assert_eq!(
        clean_for_history(LEGACY),
        "柏市は晴れ時々曇、最高31℃の予報です。"
    );
    // Footer without the blank line, and leftover status lines.
    let t = "🌙 起動待ち\n✅ 完了\n本文です\n---\n*domain: code / worker: moon*";
    assert_eq!(strip_legacy(t), "本文です");
    // The last progress marker wins.
    let t = "⏳ 処理中...\n⏳ 処理中...\n答え";
    assert_eq!(strip_legacy(t), "答え");
}

#[test]
fn history_cleaning_leaves_plain_answers_alone() {
    let plain = "✅ はい、できます。\n- 手順1\n- 手順2";
    assert_eq!(clean_for_history(plain), plain);
}

#[test]
fn history_cleaning_removes_a_header_from_a_cut_stream() {
    let d = Decoration::new(&info(), RoutingInfo::HeaderFooter);
    let cut = format!("{}途中まで", d.header());
    assert_eq!(clean_for_history(&cut), "途中まで");
    assert_eq!(clean_for_history(&d.apply("全文")), "全文");
}

/// Text built from pieces that look like our delimiters, plus arbitrary strings.
fn tricky_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        any::<String>(),
        Just(FOOTER_MARKER.to_owned()),
        Just(HEADER_TITLE.to_owned()),
        Just("- ドメイン: x\n".to_owned()),
        Just(" / model: m".to_owned()),
        Just(" / worker: w".to_owned()),
        Just(" / queue: q".to_owned()),
        Just("*".to_owned()),
        Just("/".to_owned()),
        Just(" / ".to_owned()),
        Just(": ".to_owned()),
        Just("\n".to_owned()),
        Just("⏳ 処理中...".to_owned()),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

fn any_info() -> impl Strategy<Value = RouteInfo> {
    let value = prop_oneof![any::<String>(), tricky_text()];
    (
        value.clone(),
        value.clone(),
        value.clone(),
        value.clone(),
        value,
    )
        .prop_map(|(domain, model, worker, queue, wait)| RouteInfo {
            domain,
            model,
            worker,
            queue,
            wait,
        })
}

fn any_mode() -> impl Strategy<Value = RoutingInfo> {
    prop::sample::select(MODES.to_vec())
}

/// The modes that add something; with `off` the output is the input, so text that itself
/// ends with one of our footers cannot be told apart from a decorated answer.
fn decorating_mode() -> impl Strategy<Value = RoutingInfo> {
    prop::sample::select(vec![RoutingInfo::Footer, RoutingInfo::HeaderFooter])
}

proptest! {
    #[test]
    fn strip_inverts_decorate(x in prop_oneof![any::<String>(), tricky_text()], info in any_info(), mode in decorating_mode()) {
        let decorated = decorate(&x, &info, mode);
        prop_assert_eq!(strip(&decorated), x.as_str());
    }

    #[test]
    fn strip_inverts_off_for_text_without_our_footer(x in prop_oneof![any::<String>(), tricky_text()], info in any_info()) {
        prop_assume!(split_footer(&x).is_none());
        let decorated = decorate(&x, &info, RoutingInfo::Off);
        prop_assert_eq!(strip(&decorated), x.as_str());
    }

    #[test]
    fn strip_removes_only_one_layer(
        y in tricky_text(), inner in any_info(), inner_mode in any_mode(),
        outer in any_info(), mode in decorating_mode(),
    ) {
        let x = decorate(&y, &inner, inner_mode);
        let decorated = decorate(&x, &outer, mode);
        prop_assert_eq!(strip(&decorated), x.as_str());
    }

    #[test]
    fn undecorated_text_is_unchanged(x in prop_oneof![any::<String>(), tricky_text()]) {
        // Every footer of ours ends with '*'; text that does not is never touched.
        let x = if x.ends_with('*') { format!("{x}.") } else { x };
        prop_assert_eq!(strip(&x), x.as_str());
    }

    #[test]
    fn sanitised_values_hold_no_delimiters(v in prop_oneof![any::<String>(), tricky_text()]) {
        let s = sanitise(&v);
        prop_assert!(!s.is_empty());
        prop_assert!(!s.contains('\n') && !s.contains('*') && !s.contains(SEPARATOR));
    }

    #[test]
    fn history_cleaning_never_panics(x in prop_oneof![any::<String>(), tricky_text()], info in any_info(), mode in any_mode()) {
        let cleaned = clean_for_history(&decorate(&x, &info, mode));
        prop_assert!(cleaned.len() <= x.len());
    }
}
