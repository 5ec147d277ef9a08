//! The Japanese rules: what makes a sentence a question, a request or small talk, and
//! the subject of a statement by its wording.

use unicode_normalization::UnicodeNormalization;

/// Openings that carry nothing ("ちなみに", "実は").
const JA_FILLERS: &[&str] = &[
    "ちなみに",
    "ところで",
    "実は",
    "あと",
    "えっと",
    "そういえば",
    "因みに",
    "なお",
    "ただ",
];

/// Request or question endings after which a fact may stand ("…です、覚えておいてね").
const JA_REQUEST_TAILS: &[&str] = &[
    "って覚えておいて",
    "と覚えておいて",
    "ことを覚えておいて",
    "覚えておいて",
    "覚えといて",
    "覚えてて",
    "覚えておいてね",
    "覚えておいてください",
    "よろしく",
];

/// Words that make a sentence a request wherever they stand.
const JA_REQUESTS: &[&str] = &[
    "ください",
    "下さい",
    "ちょうだい",
    "お願い",
    "てほしい",
    "て欲しい",
    "しましょう",
    "しよう",
];

/// Te-forms that ask for something when they end the sentence or come before a softener
/// ("教えて", "調べてね", "書いてくれる"), but state a fact in "書いています".
const JA_ASKING_TE: &[&str] = &[
    "教えて",
    "覚えて",
    "手伝って",
    "調べて",
    "書いて",
    "作って",
    "考えて",
    "見せて",
    "探して",
    "比べて",
    "まとめて",
    "説明して",
    "訳して",
    "直して",
    "選んで",
];

/// Interrogatives: a sentence holding one asks something.
const JA_INTERROGATIVES: &[&str] = &[
    "何",
    "なに",
    "誰",
    "だれ",
    "いつ",
    "どこ",
    "どれ",
    "どの",
    "どう",
    "どんな",
    "なぜ",
    "どうして",
    "いくら",
    "いくつ",
    "どちら",
    "どっち",
];

/// Sentences that are reactions, not statements.
pub(super) const JA_SMALL_TALK: &[&str] = &[
    "ありがとう",
    "こんにちは",
    "こんばんは",
    "おはよう",
    "すみません",
    "なるほど",
    "了解",
    "わかりました",
    "分かりました",
    "助かりました",
    "助かる",
    "いいですね",
    "すごい",
    "さようなら",
    "おやすみ",
];

/// `implied`: the clause was cut before a conjunction ("…なんだけど、"), which says it has
/// a predicate even when what is left is a noun phrase ("うちのプリンター、ブラザーの…").
pub(super) fn ja_statement(sentence: &str, implied: bool) -> Option<String> {
    let mut s = sentence.trim_end_matches(['。', '！', '!', '．', '.', '…', '〜', '~', 'w', '笑']);
    s = s.trim();
    if s.ends_with(['？', '?']) {
        return None;
    }
    for filler in JA_FILLERS {
        if let Some(rest) = s.strip_prefix(filler) {
            s = rest.trim_start_matches(['、', ',', ' ']);
        }
    }
    // "…です、覚えておいてね": the fact before the request.
    for tail in JA_REQUEST_TAILS {
        for ending in ["ね", "な", "ください", ""] {
            let whole = format!("{tail}{ending}");
            if let Some(head) = s.strip_suffix(whole.as_str()) {
                s = head.trim_end_matches(['、', ',', ' ', 'っ', 'と']);
            }
        }
    }
    // "いつも" (always) and "何か" (something) are not questions.
    let asks = |w: &&str| {
        s.match_indices(*w)
            .any(|(at, _)| !matches!(s[at + w.len()..].chars().next(), Some('も' | 'か')))
    };
    let asking_te = |w: &&str| {
        s.match_indices(*w).any(|(at, _)| {
            let after = &s[at + w.len()..];
            after.is_empty()
                || ["ね", "よ", "くれ", "もらえ", "いただけ", "頂け", "、", ","]
                    .iter()
                    .any(|soft| after.starts_with(soft))
        })
    };
    if s.is_empty()
        || JA_SMALL_TALK.iter().any(|w| s.starts_with(w))
        || JA_REQUESTS.iter().any(|w| s.contains(w))
        || JA_ASKING_TE.iter().any(asking_te)
        || JA_INTERROGATIVES.iter().any(asks)
    {
        return None;
    }
    // A fragment ending in a topic ("週末の映画のおすすめは") asks; one ending in "て" or
    // "てね" asks for something.
    if s.ends_with(['は', 'て']) || s.ends_with("って") || s.ends_with("てね") {
        return None;
    }
    // Question endings without a question mark ("会議は何時からですか", "…だっけ").
    let question_tail = [
        "か",
        "かな",
        "かね",
        "っけ",
        "のかな",
        "でしょうか",
        "だろうか",
    ];
    if question_tail.iter().any(|t| s.ends_with(t)) {
        return None;
    }
    // Talking about the listener, not oneself.
    if s.contains("あなた") || s.contains("君は") {
        return None;
    }
    // A statement has a predicate or a topic: ends like one, or says "Xは/が…".
    let predicate = [
        "です",
        "ます",
        "だ",
        "でした",
        "ました",
        "ている",
        "てる",
        "ません",
        "ない",
        "た",
        "る",
        "い",
        "ん",
        "よ",
        "ね",
    ];
    let topical = s.contains('は') || s.contains('が');
    if !(implied || topical || predicate.iter().any(|p| s.ends_with(p))) {
        return None;
    }
    Some(s.to_owned())
}

/// Single-valued things a household has one of at a time (Japanese topic words).
const JA_SINGLE: &[&str] = &[
    "名前",
    "誕生日",
    "記念日",
    "型番",
    "住所",
    "出身",
    "職業",
    "仕事",
    "勤務先",
    "会社",
    "車",
    "愛車",
    "ルーター",
    "NAS",
    "nas",
    "GPU",
    "gpu",
    "グラボ",
    "グラフィックボード",
    "デスクトップ",
    "ノートパソコン",
    "ノートPC",
    "ラップトップ",
    "パソコン",
    "PC",
    "サーバー",
    "スマホ",
    "OS",
    "エディタ",
    "回線",
    "プロバイダ",
    "血液型",
    "最寄り駅",
];

pub(super) fn ja_subject(fact: &str) -> Option<String> {
    let s: String = fact.nfkc().collect();
    let strip_owner = |t: &str| -> String {
        let mut t = t.trim();
        for owner in [
            "私の",
            "わたしの",
            "僕の",
            "ぼくの",
            "俺の",
            "おれの",
            "うちの",
            "我が家の",
            "わが家の",
            "自分の",
            "家の",
        ] {
            t = t.strip_prefix(owner).unwrap_or(t);
        }
        t.trim().to_owned()
    };
    // "XをYに買い替えました": X changed.
    for verb in [
        "に買い替え",
        "に替え",
        "に換え",
        "に変え",
        "に乗り換え",
        "にアップグレード",
        "に交換",
    ] {
        if let Some(at) = s.find(verb)
            && let Some(obj) = s[..at].rfind('を')
        {
            let topic = strip_owner(&s[..obj]);
            return single(&topic).then_some(topic);
        }
    }
    // "XはY…": the topic before the first は (a short noun phrase).
    let at = s.find('は')?;
    let topic = strip_owner(&s[..at]);
    let chars = topic.chars().count();
    (chars > 0 && chars <= 12 && single(&topic)).then_some(topic)
}

fn single(topic: &str) -> bool {
    JA_SINGLE.iter().any(|w| topic.ends_with(w)) || topic.contains("好きな")
}
