//! Facts in the person's own words: from a remembered prompt, the statements the person
//! made about themselves, their household, their machines and their preferences, each a
//! memory item of its own. Questions, requests, thanks and small talk are not facts.
//!
//! Rules only (microseconds, no model): the prompt is split into sentences (and English
//! sentences into first-person clauses), each sentence is classified, and a fact about a
//! single-valued subject ("my router", "猫の名前", where I live) gets a subject key, so that
//! a later fact on the same subject supersedes it in recall (see `index`). With
//! `[memory] extract_model` a model may do the same job (`extract`), with these rules as
//! its fallback.

use unicode_normalization::UnicodeNormalization;

use crate::lang::{Lang, detect_language};

/// The longest sentence kept as a fact, in characters: longer ones are narratives, not
/// statements.
pub(crate) const MAX_FACT_CHARS: usize = 240;
/// How many facts one prompt gives at most.
pub const MAX_FACTS: usize = 8;

/// One statement the person made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// The statement as the person wrote it (whitespace flattened, trailing request cut).
    pub text: String,
    /// What it is about, when that can hold one value at a time (`home`, `router`,
    /// `猫の名前`): a later fact with the same subject supersedes this one.
    pub subject: Option<String>,
}

/// The facts a prompt states, in order, at most [`MAX_FACTS`]. Statements of one prompt
/// about the same subject are one fact ("エディタはずっとVS Code派です。Vimは挫折しました"),
/// and so is a Japanese statement that names nothing of its own with the one before it
/// ("HHKBを買いました。打鍵感が最高です").
pub fn extract(prompt: &str) -> Vec<Fact> {
    let mut out: Vec<Fact> = Vec::new();
    for sentence in sentences(prompt) {
        let lang = detect_language(sentence);
        for clause in clauses(sentence, lang) {
            let Some(text) = statement(&clause, lang) else {
                continue;
            };
            if out.iter().any(|f| f.text == text) {
                continue;
            }
            let subject = subject(&text, lang);
            let continues = out.last().is_some_and(|last| {
                (subject.is_some() && last.subject == subject)
                    || (lang == Lang::Ja
                        && subject.is_none()
                        && super::concepts::mentioned(&text).is_empty())
            });
            if let Some(last) = out.last_mut().filter(|l| {
                continues && l.text.chars().count() + text.chars().count() < MAX_FACT_CHARS
            }) {
                last.text.push_str(match lang {
                    Lang::Ja => "。",
                    Lang::En => ". ",
                });
                last.text.push_str(&text);
                continue;
            }
            out.push(Fact { text, subject });
            if out.len() == MAX_FACTS {
                return out;
            }
        }
    }
    out
}

/// Words that say a fact replaces an earlier one ("I ditched the Nighthawk", "dynabookを
/// VAIOに買い替えた"): such a fact without a subject of its own takes the subject of the
/// earlier fact it names.
const CHANGES: &[&str] = &[
    "replaced",
    "switched",
    "swapped",
    "traded",
    "ditched",
    "upgraded",
    "left",
    "quit",
    "moved",
    "sold",
    "got rid of",
    "no longer",
    "retired",
    "changed",
    "gave up",
    "instead",
    "買い替え",
    "乗り換え",
    "替え",
    "換え",
    "変え",
    "辞め",
    "やめ",
    "引っ越",
    "機種変",
    "手放",
    "換装",
    "移っ",
    "転職",
];

/// Whether a fact says it replaces an earlier one.
pub fn is_change(text: &str) -> bool {
    let lower = text.to_lowercase();
    CHANGES.iter().any(|c| {
        if c.is_ascii() {
            lower.match_indices(c).any(|(at, _)| {
                let before = lower[..at].chars().next_back();
                let after = lower[at + c.len()..].chars().next();
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            })
        } else {
            lower.contains(c)
        }
    })
}

/// Words of reactions and greetings: a prompt made only of them asks for no memory.
const SMALL_TALK_WORDS: &[&str] = &[
    "lol", "haha", "hahaha", "nice", "ok", "okay", "thanks", "thank", "you", "thx", "ty", "great",
    "cool", "awesome", "hi", "hello", "hey", "bye", "good", "morning", "night", "evening",
    "cheers", "wow", "yes", "no", "yep", "nope", "sure", "got", "it", "perfect", "lmao", "omg",
    "welp", "oh", "ah", "hmm", "sounds", "that", "helped", "a", "lot", "so", "much", "very",
    "again", "see", "ya", "later", "np",
];

/// Whether a prompt is only a reaction or a greeting ("lol nice", "ありがとう、助かりました"):
/// such a turn gets no memory.
pub fn small_talk(prompt: &str) -> bool {
    let normal = super::embed::normalize(prompt);
    if normal.is_empty() {
        return true;
    }
    if normal.is_ascii() {
        return normal.split(' ').all(|w| SMALL_TALK_WORDS.contains(&w));
    }
    let mut rest = normal.replace(' ', "");
    for word in JA_SMALL_TALK.iter().chain(&[
        "ございます",
        "です",
        "ね",
        "よ",
        "本当に",
        "とても",
        "どうも",
        "ほんと",
    ]) {
        rest = rest.replace(word, "");
    }
    rest.chars().all(|c| ('\u{3041}'..='\u{309F}').contains(&c))
}

/// The text that decides whether two facts are the same: NFKC, lowercase, letters and
/// digits only.
pub fn fact_key(text: &str) -> String {
    text.nfkc()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// Sentences with their end marks: split after `。！？!?`, a newline, or a `.` that ends a
/// word (followed by whitespace or the end).
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            if rest.is_empty() {
                return None;
            }
            let mut end = rest.len();
            let mut chars = rest.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                let next = chars.peek().map(|&(_, n)| n);
                let ends = match c {
                    '。' | '！' | '？' | '!' | '?' | '\n' => true,
                    '.' => next.is_none_or(char::is_whitespace),
                    _ => false,
                };
                if ends {
                    // Keep runs of end marks ("?!", "。。") with the sentence.
                    let mut cut = i + c.len_utf8();
                    while let Some(&(j, n)) = chars.peek() {
                        if matches!(n, '。' | '！' | '？' | '!' | '?' | '.') {
                            cut = j + n.len_utf8();
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    end = cut;
                    break;
                }
            }
            let (sentence, tail) = rest.split_at(end);
            rest = tail;
            let sentence = sentence.trim();
            if !sentence.is_empty() {
                return Some(sentence);
            }
        }
    })
}

/// Japanese conjunctions after which a sentence's next clause starts ("札幌に住んでるんだ
/// けど、雪かきを楽にする方法ある？"): the clause before may be a fact while the sentence
/// asks.
const JA_CONJUNCTIONS: &[&str] = &[
    "なんですけど",
    "なんだけど",
    "なんですが",
    "んですけど",
    "んだけど",
    "んですが",
    "けれども",
    "けれど",
    "けど",
    "のですが",
    "ですが",
    "ますが",
    "だが",
    "なので",
    "ので",
];

/// Explanatory endings left when a conjunction is cut off ("住んでるんだ", "生まれなんです").
const JA_EXPLANATORY: &[&str] = &["なんです", "なんだ", "んです", "んだ", "のです", "なの"];

/// Words that start a new English clause after a comma ("…, any tips?", "…, I can't
/// stand it").
const EN_CLAUSE_STARTS: &[&str] = &[
    "i", "i'm", "i've", "i'd", "my", "we", "we're", "our", "any", "anything", "what", "how", "can",
    "could", "would", "should", "do", "does", "is", "are", "so", "but", "please", "thanks",
    "remind", "tell", "which", "where", "when", "why",
];

/// Clause starts that begin a clause after a comma only as a question.
const EN_AUXILIARIES: &[&str] = &["can", "could", "would", "should", "do", "does", "is", "are"];

/// The clauses of a sentence that may each state a fact: Japanese sentences split after a
/// conjunction (which is cut off, with any explanatory ending before it), English ones
/// before a new clause ("I live in Osaka and my wife works in Kobe", "…, any tips?").
fn clauses(sentence: &str, lang: Lang) -> Vec<Clause<'_>> {
    let mut out = Vec::new();
    match lang {
        Lang::Ja => {
            let mut start = 0;
            for (at, _) in sentence.match_indices('、') {
                let head = &sentence[start..at];
                if let Some(conj) = JA_CONJUNCTIONS.iter().find(|c| head.ends_with(*c)) {
                    let mut clause = &head[..head.len() - conj.len()];
                    if let Some(e) = JA_EXPLANATORY.iter().find(|e| clause.ends_with(*e)) {
                        clause = &clause[..clause.len() - e.len()];
                    }
                    out.push(Clause {
                        text: clause.trim(),
                        before_conjunction: true,
                    });
                    start = at + '、'.len_utf8();
                }
            }
            out.push(Clause {
                text: sentence[start..].trim(),
                before_conjunction: false,
            });
        }
        Lang::En => {
            let lower = sentence.to_ascii_lowercase();
            let mut cuts = vec![0];
            for sep in [
                " and i ",
                " and my ",
                " and we ",
                " and our ",
                ", but i ",
                "; ",
            ] {
                let mut from = 0;
                while let Some(at) = lower[from..].find(sep) {
                    let at = from + at;
                    // Cut after the conjunction, so the clause starts at its pronoun.
                    let skip = sep
                        .trim_end()
                        .rfind(' ')
                        .map_or(sep.len(), |space| space + 1);
                    cuts.push(if sep == "; " { at + 2 } else { at + skip });
                    from = at + sep.len();
                }
            }
            for (at, _) in lower.match_indices(", ") {
                let next = lower[at + 2..]
                    .split(|c: char| !(c.is_alphanumeric() || c == '\''))
                    .next()
                    .unwrap_or("");
                // Not after an opening name or phrase ("Maisie, my youngest, is nine").
                let since = cuts.iter().copied().filter(|&c| c <= at).max().unwrap_or(0);
                let before = lower[since..at].split_whitespace().count();
                // An auxiliary starts a clause only as a question ("…, can you help?").
                let asks = lower[at + 2 + next.len()..]
                    .split_whitespace()
                    .next()
                    .is_some_and(|w| {
                        ["you", "i", "we", "it", "there", "that", "this"].contains(&w)
                    });
                let starts =
                    EN_CLAUSE_STARTS.contains(&next) && (!EN_AUXILIARIES.contains(&next) || asks);
                if starts && before >= 3 {
                    cuts.push(at + 2);
                }
            }
            cuts.sort_unstable();
            cuts.dedup();
            for (n, &start) in cuts.iter().enumerate() {
                let end = cuts.get(n + 1).map_or(sentence.len(), |&e| e);
                let mut clause = sentence[start..end].trim();
                for tail in [" and", ", but", ";", ","] {
                    clause = clause.strip_suffix(tail).unwrap_or(clause).trim_end();
                }
                out.push(Clause {
                    text: clause,
                    before_conjunction: false,
                });
            }
        }
    }
    out.retain(|c| !c.text.is_empty());
    out
}

/// A clause of a sentence, and whether it was cut before a Japanese conjunction.
struct Clause<'a> {
    text: &'a str,
    before_conjunction: bool,
}

/// The fact a clause states, or `None` for a question, a request, thanks or small talk.
fn statement(clause: &Clause<'_>, lang: Lang) -> Option<String> {
    let flat = clause.text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = match lang {
        Lang::Ja => ja_statement(&flat, clause.before_conjunction)?,
        Lang::En => en_statement(&flat)?,
    };
    let chars = text.chars().count();
    (4..=MAX_FACT_CHARS).contains(&chars).then_some(text)
}

// --- Japanese -------------------------------------------------------------------------

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
const JA_SMALL_TALK: &[&str] = &[
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
fn ja_statement(sentence: &str, implied: bool) -> Option<String> {
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

fn ja_subject(fact: &str) -> Option<String> {
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

// --- English --------------------------------------------------------------------------

const EN_FILLERS: &[&str] = &[
    "btw",
    "by the way",
    "fyi",
    "oh",
    "also",
    "so",
    "well",
    "ok",
    "okay",
    "anyway",
    "actually",
    "just so you know",
    "for the record",
    "for context",
    "quick note",
    "note that",
    "remember that",
    "remember this",
    "please remember that",
    "please remember",
    "remember",
    "keep in mind that",
    "don't forget that",
];

/// Openings that make a clause a question.
const EN_QUESTION_STARTS: &[&str] = &[
    "what", "where", "when", "who", "whom", "whose", "why", "how", "which", "do", "does", "did",
    "is", "are", "was", "were", "can", "could", "would", "should", "will", "shall", "have", "has",
    "any", "am",
];

/// Openings that make a clause a request (or a thought, not a fact).
const EN_REQUEST_STARTS: &[&str] = &[
    "please",
    "tell",
    "remind",
    "help",
    "write",
    "explain",
    "give",
    "show",
    "make",
    "list",
    "find",
    "suggest",
    "recommend",
    "let's",
    "let me",
    "translate",
    "summarize",
    "summarise",
    "create",
    "check",
    "compare",
    "describe",
    "i want you",
    "i'd like you",
    "i need you",
    "i need help",
    "i'd like to know",
    "i want to know",
    "i wonder",
    "i was wondering",
    "i think",
    "i guess",
    "i hope",
    "i'm not sure",
    "i am not sure",
    "i don't know",
    "i'm looking for",
    "i am looking for",
    "i'm trying to",
    "i am trying to",
    "thanks",
    "thank you",
    "hello",
    "hi",
    "hey",
    "great",
    "cool",
    "nice",
    "got it",
    "sounds good",
];

const EN_FIRST_PERSON: &[&str] = &[
    "i", "i'm", "i've", "i'd", "i'll", "im", "my", "me", "mine", "we", "we're", "we've", "our",
    "us", "myself",
];

fn en_statement(clause: &str) -> Option<String> {
    let mut s = clause.trim();
    if s.ends_with('?') {
        return None;
    }
    s = s.trim_end_matches(['.', '!', ' ']);
    let lower = |s: &str| s.to_ascii_lowercase().replace('’', "'");
    // Fillers and "remember that" before the fact.
    loop {
        let l = lower(s);
        let Some(filler) = EN_FILLERS.iter().find(|f| {
            l.starts_with(*f)
                && l[f.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| matches!(c, ' ' | ',' | ':' | '-'))
        }) else {
            break;
        };
        s = s[filler.len()..].trim_start_matches([' ', ',', ':', '-']);
    }
    let l = lower(s);
    let words: Vec<&str> = l
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let first = *words.first()?;
    if EN_QUESTION_STARTS.contains(&first)
        || EN_REQUEST_STARTS.iter().any(|r| {
            l.starts_with(r)
                && l[r.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric())
        })
        || first == "you"
    {
        return None;
    }
    // About the person: in the first person, or about their household (a pet, a family
    // member, one of their machines: "Mum's birthday is 2 February").
    let household = || {
        super::concepts::mentioned(s)
            .iter()
            .any(|&c| super::concepts::CONCEPTS[c].family != super::concepts::Family::Many)
    };
    // A change ("Finally sold the Mazda") is the speaker's without saying so.
    if !words.iter().any(|w| EN_FIRST_PERSON.contains(w)) && !household() && !is_change(s) {
        return None;
    }
    // A clause needs a verb-ish word beyond the pronoun ("my cat, Mike" is not enough).
    if words.len() < 3 {
        return None;
    }
    Some(s.to_owned())
}

/// Single-valued things (English nouns after "my"/"our").
const EN_SINGLE: &[&str] = &[
    "name",
    "birthday",
    "anniversary",
    "address",
    "hometown",
    "job",
    "employer",
    "car",
    "router",
    "nas",
    "gpu",
    "graphics card",
    "desktop",
    "laptop",
    "computer",
    "pc",
    "server",
    "phone",
    "editor",
    "os",
    "distro",
    "isp",
    "internet",
    "monitor",
    "keyboard",
    "blood type",
    "timezone",
    "time zone",
    "email",
    "favorite",
    "favourite",
];

fn en_subject(fact: &str) -> Option<String> {
    let l = fact.to_ascii_lowercase().replace('’', "'");
    // "replaced my router with …", "upgraded my GPU to …", "switched my editor to …".
    for verb in [
        "replaced my ",
        "upgraded my ",
        "swapped my ",
        "changed my ",
        "switched my ",
    ] {
        if let Some(at) = l.find(verb) {
            let rest = &l[at + verb.len()..];
            let noun = rest
                .split([' ', ','])
                .take_while(|w| !matches!(*w, "with" | "to" | "for" | "from" | "out"))
                .collect::<Vec<_>>()
                .join(" ");
            return en_single(&noun);
        }
    }
    // "my cat's name is …", "my cat is called …", "my favorite food is …".
    let owner = ["my ", "our "]
        .iter()
        .filter_map(|o| l.find(o).map(|at| at + o.len()))
        .min()?;
    let rest = &l[owner..];
    let mut noun = String::new();
    for (verb, suffix) in [
        ("'s name is", " name"),
        (" is called", " name"),
        (" is named", " name"),
        ("'s called", " name"),
        (" name is", " name"),
        (" is", ""),
        (" are", ""),
        (" was", ""),
    ] {
        if let Some(at) = rest.find(verb) {
            let base = rest[..at].trim().trim_end_matches("'s");
            noun = format!("{base}{suffix}");
            break;
        }
    }
    if noun.split_whitespace().count() > 4 {
        return None;
    }
    en_single(&noun)
}

fn en_single(noun: &str) -> Option<String> {
    let noun = noun.trim();
    let words: Vec<&str> = noun.split_whitespace().collect();
    let single = EN_SINGLE
        .iter()
        .any(|s| noun.ends_with(s) || words.first().is_some_and(|w| w == s));
    (single && !noun.is_empty()).then(|| noun.to_owned())
}

/// [`subject`] in the language of `fact`.
pub fn subject_of(fact: &str) -> Option<String> {
    subject(fact, detect_language(fact))
}

/// A fact's subject: the single-valued household concept it is about (the same in both
/// languages: `router` for "my router" and "うちのルーター"), else what its wording
/// names ("cat name", "猫の名前").
fn subject(fact: &str, lang: Lang) -> Option<String> {
    super::concepts::subject(&super::concepts::mentioned(fact)).or_else(|| match lang {
        Lang::Ja => ja_subject(fact),
        Lang::En => en_subject(fact),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(prompt: &str) -> Vec<String> {
        extract(prompt).into_iter().map(|f| f.text).collect()
    }

    fn subject_of(prompt: &str) -> Option<String> {
        extract(prompt).into_iter().next().and_then(|f| f.subject)
    }

    #[test]
    fn statements_of_one_subject_are_one_fact() {
        assert_eq!(
            texts("エディタはずっとVS Code派です。Vimは挫折しました笑"),
            ["エディタはずっとVS Code派です。Vimは挫折しました"]
        );
        assert_eq!(
            texts("最近HHKBのType-Sを買いました！打鍵感が最高です。"),
            ["最近HHKBのType-Sを買いました。打鍵感が最高です"]
        );
        assert_eq!(
            texts("I drive a Subaru Outback. My wife has a Prius."),
            ["I drive a Subaru Outback", "My wife has a Prius"]
        );
    }

    #[test]
    fn a_fact_before_a_question_in_one_sentence_is_kept() {
        assert_eq!(
            texts("札幌の北区に住んでるんだけど、冬の雪かきが本当につらい…何か楽にする方法ある？"),
            ["札幌の北区に住んでる"]
        );
        assert_eq!(
            texts(
                "私は東京生まれなんですが、今は名古屋の会社で働いています。名古屋でおすすめのモーニングのお店ってありますか？"
            ),
            ["私は東京生まれ", "今は名古屋の会社で働いています"]
        );
        assert_eq!(
            texts("I've got a Pixel 7 Pro and the battery drains really fast lately, any tips?"),
            ["I've got a Pixel 7 Pro and the battery drains really fast lately"]
        );
        assert_eq!(
            texts("Mum's birthday is 2 February. Remind me to call her."),
            ["Mum's birthday is 2 February"]
        );
        assert_eq!(
            texts("実家は長野の松本なんです。"),
            ["実家は長野の松本なんです"]
        );
        assert_eq!(
            texts(
                "うちのプリンター、ブラザーのMFC-J905Nなんだけど、最近紙詰まりするんだよね。何が原因だろう？"
            ),
            ["うちのプリンター、ブラザーのMFC-J905N。最近紙詰まりするんだよね"]
        );
        assert_eq!(
            texts("Maisie, my youngest, is nine and loves horses. Are riding lessons a good idea?"),
            ["Maisie, my youngest, is nine and loves horses"]
        );
    }

    #[test]
    fn the_seeds_cat_is_a_fact_and_the_request_is_not() {
        assert_eq!(
            texts("私の猫の名前はミケです。覚えておいてね。"),
            ["私の猫の名前はミケです"]
        );
        assert_eq!(
            texts("私の猫の名前はミケです、覚えておいてね"),
            ["私の猫の名前はミケです"]
        );
        assert!(texts("私の猫の名前は何でしたっけ？").is_empty());
        assert!(texts("私の猫の名前は何でしたっけ").is_empty());
        assert!(texts("猫の餌は何がいいですか").is_empty());
        assert!(texts("カレーのレシピを教えて").is_empty());
        assert!(texts("この文章を英語に訳してくれる").is_empty());
        assert_eq!(
            texts("仕事でRustを使ってサーバーを書いています"),
            ["仕事でRustを使ってサーバーを書いています"]
        );
        assert!(texts("ありがとう、助かりました！").is_empty());
        assert!(texts("明日の会議は何時からですか").is_empty());
    }

    #[test]
    fn japanese_statements_without_a_pronoun_are_facts() {
        assert_eq!(texts("出身は北海道の旭川です"), ["出身は北海道の旭川です"]);
        assert_eq!(
            texts("車は青いプリウスに乗っています"),
            ["車は青いプリウスに乗っています"]
        );
        assert_eq!(
            texts("ちなみに、うちのNASはSynologyのDS920+です。バックアップの方法を教えて。"),
            ["うちのNASはSynologyのDS920+です"]
        );
    }

    #[test]
    fn english_statements_questions_and_requests() {
        assert_eq!(texts("My cat's name is Mike."), ["My cat's name is Mike"]);
        assert_eq!(
            texts("I have a Synology DS920+ at home. How do I back it up to the cloud?"),
            ["I have a Synology DS920+ at home"]
        );
        assert_eq!(
            texts("btw, remember that I'm allergic to peanuts"),
            ["I'm allergic to peanuts"]
        );
        assert_eq!(
            texts("I live in Osaka and my wife works in Kobe."),
            ["I live in Osaka", "my wife works in Kobe"]
        );
        assert!(texts("What's my cat's name again?").is_empty());
        assert!(texts("Can you recommend a GPU for my desktop").is_empty());
        assert!(texts("Tell me about my sourdough recipe").is_empty());
        assert!(texts("Thanks, that helped a lot!").is_empty());
        assert!(
            texts("The weather is nice today.").is_empty(),
            "not about the person"
        );
        assert!(texts("I think so").is_empty());
    }

    #[test]
    fn subjects_key_single_valued_things() {
        assert_eq!(subject_of("I live in Kashiwa"), Some("home".into()));
        assert_eq!(
            subject_of("I moved to Osaka last month"),
            Some("home".into())
        );
        assert_eq!(subject_of("My cat's name is Mike"), Some("cat name".into()));
        assert_eq!(subject_of("My cat is called Tama"), Some("cat name".into()));
        assert_eq!(
            subject_of("My router is a NEC Aterm"),
            Some("router".into())
        );
        assert_eq!(
            subject_of("I replaced my router with a TP-Link Deco"),
            Some("router".into())
        );
        assert_eq!(
            subject_of("My favorite food is sushi"),
            Some("favorite food".into())
        );
        assert_eq!(
            subject_of("I'm allergic to peanuts"),
            None,
            "allergies add up"
        );
        assert_eq!(subject_of("My wife is a teacher"), Some("wife job".into()));
        assert_eq!(
            subject_of("My wife is Japanese"),
            None,
            "a person is many things"
        );
        assert_eq!(
            subject_of("私の猫の名前はミケです"),
            Some("猫の名前".into())
        );
        assert_eq!(subject_of("柏市に住んでいます"), Some("home".into()));
        assert_eq!(subject_of("先月大阪に引っ越しました"), Some("home".into()));
        assert_eq!(
            subject_of("うちのルーターはNECのAtermです"),
            Some("router".into())
        );
        assert_eq!(
            subject_of("ルーターをTP-LinkのDecoに買い替えました"),
            Some("router".into())
        );
        assert_eq!(subject_of("私はそばアレルギーがあります"), None);
    }

    #[test]
    fn small_talk_asks_for_no_memory() {
        assert!(small_talk("lol nice"));
        assert!(small_talk("Thanks, that helped a lot!"));
        assert!(small_talk("ありがとう、助かりました！"));
        assert!(small_talk("おはようございます"));
        assert!(!small_talk("what is my cat called?"));
        assert!(!small_talk("ありがとう、猫の名前は？"));
    }

    #[test]
    fn facts_are_keyed_without_punctuation_or_case() {
        assert_eq!(
            fact_key("My cat's name is Mike."),
            fact_key("my cats name is mike")
        );
        assert_eq!(
            fact_key("私の猫の名前はミケです。"),
            fact_key("私の猫の名前はミケです")
        );
    }

    #[test]
    fn a_long_message_gives_at_most_max_facts() {
        let prompt = (0..20)
            .map(|i| format!("My item {i} is here."))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(extract(&prompt).len(), MAX_FACTS);
    }
}
