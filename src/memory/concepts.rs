//! A household thesaurus: the things people tell a home assistant about and ask about
//! later in other words ("my boy" for "my son", "スマホ" for "iPhone", "Wi-Fiの機械" for
//! "ルーター"). Each concept has English words and Japanese forms; a text mentions the
//! concepts whose forms it holds. Recall uses them three ways:
//!
//! - as lexical terms (a question about "my vehicle" matches a fact about "my Subaru");
//! - as subjects: a fact about exactly one single-valued concept (one car, one router,
//!   one home at a time) is keyed by it, so that a newer fact supersedes the older;
//! - as a conflict: a question about a pet or a family member that a memory does not
//!   mention ("my dog's name" against "my cat's name") does not get that memory.
//!
//! Rules only, microseconds: English words match whole (after the lexical stemmer),
//! Japanese forms match as substrings of the NFKC text.

use unicode_normalization::UnicodeNormalization;

/// What kind of thing a concept is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Pets and people of the household (and their kinds: a pet, a child): a question
    /// about one is not answered by a memory about another.
    Who,
    /// Things one has one of at a time (a car, a router, where one lives).
    One,
    /// Topics one can have several of (hobbies, allergies, tastes, dates).
    Many,
}

/// One concept of the thesaurus.
#[derive(Debug)]
pub struct Concept {
    pub name: &'static str,
    pub family: Family,
    /// English words (lowercase; matched whole, also in the plural) and phrases (with a
    /// space: matched in the lowercased text).
    en: &'static [&'static str],
    /// Japanese (and brand) forms, matched as substrings of the NFKC, lowercased text.
    ja: &'static [&'static str],
    /// A broader concept every mention of this one also mentions (`son` → `child`).
    broader: Option<&'static str>,
}

const fn c(
    name: &'static str,
    family: Family,
    en: &'static [&'static str],
    ja: &'static [&'static str],
) -> Concept {
    Concept {
        name,
        family,
        en,
        ja,
        broader: None,
    }
}

const fn under(mut concept: Concept, broader: &'static str) -> Concept {
    concept.broader = Some(broader);
    concept
}

use Family::{Many, One, Who};

/// The thesaurus.
pub static CONCEPTS: &[Concept] = &[
    // Pets.
    under(
        c(
            "dog",
            Who,
            &[
                "dog",
                "puppy",
                "pup",
                "doggo",
                "beagle",
                "poodle",
                "labrador",
                "retriever",
                "corgi",
                "shiba",
                "dachshund",
                "terrier",
                "husky",
                "chihuahua",
                "collie",
            ],
            &["犬", "いぬ", "わんこ", "ワンちゃん", "柴犬", "子犬"],
        ),
        "pet",
    ),
    under(
        c(
            "cat",
            Who,
            &["cat", "kitten", "kitty", "tabby"],
            &["猫", "ねこ", "ネコ", "子猫", "にゃんこ"],
        ),
        "pet",
    ),
    under(
        c(
            "bird",
            Who,
            &["bird", "parrot", "budgie", "parakeet", "cockatiel"],
            &["鳥", "インコ", "オウム", "文鳥", "小鳥"],
        ),
        "pet",
    ),
    under(c("hamster", Who, &["hamster"], &["ハムスター"]), "pet"),
    under(
        c(
            "rabbit",
            Who,
            &["rabbit", "bunny"],
            &["うさぎ", "ウサギ", "兎"],
        ),
        "pet",
    ),
    under(
        c("guinea pig", Who, &["guinea pig"], &["モルモット"]),
        "pet",
    ),
    under(
        c(
            "fish",
            Who,
            &["goldfish", "aquarium"],
            &["金魚", "熱帯魚", "メダカ"],
        ),
        "pet",
    ),
    under(
        c(
            "reptile",
            Who,
            &["turtle", "tortoise", "lizard", "gecko", "snake"],
            &["カメ", "亀", "トカゲ", "ヘビ"],
        ),
        "pet",
    ),
    c("pet", Who, &["pet", "pets"], &["ペット"]),
    // The household's people.
    under(
        c(
            "wife",
            Who,
            &["wife"],
            &["妻", "嫁", "奥さん", "家内", "奥様"],
        ),
        "spouse",
    ),
    under(
        c("husband", Who, &["husband"], &["夫", "旦那", "主人"]),
        "spouse",
    ),
    c(
        "spouse",
        Who,
        &["spouse", "partner"],
        &["配偶者", "パートナー"],
    ),
    under(
        c("son", Who, &["son", "boy"], &["息子", "長男", "次男"]),
        "child",
    ),
    under(
        c(
            "daughter",
            Who,
            &["daughter", "girl"],
            &["娘", "長女", "次女"],
        ),
        "child",
    ),
    c(
        "child",
        Who,
        &["kid", "kids", "child", "children"],
        &["子供", "子ども", "こども"],
    ),
    c(
        "mother",
        Who,
        &["mother", "mom", "mum", "mama"],
        &["母", "お袋", "ママ"],
    ),
    c(
        "father",
        Who,
        &["father", "dad", "papa"],
        &["父", "親父", "パパ"],
    ),
    under(c("brother", Who, &["brother"], &["兄", "弟"]), "sibling"),
    under(c("sister", Who, &["sister"], &["姉", "妹"]), "sibling"),
    c(
        "sibling",
        Who,
        &["sibling", "siblings"],
        &["兄弟", "姉妹", "きょうだい"],
    ),
    c(
        "grandparent",
        Who,
        &[
            "gran",
            "nan",
            "nana",
            "grandad",
            "granddad",
            "grandma",
            "grandmother",
            "grandpa",
            "grandfather",
            "granny",
        ],
        &["祖母", "祖父", "おばあちゃん", "おじいちゃん"],
    ),
    c(
        "roommate",
        Who,
        &[
            "roommate",
            "roommates",
            "flatmate",
            "flatmates",
            "housemate",
        ],
        &["ルームメイト", "同居人", "シェアハウス"],
    ),
    // Machines: one of each at a time.
    c(
        "router",
        One,
        &[
            "router",
            "wifi",
            "wi fi",
            "mesh",
            "access point",
            "deco",
            "nighthawk",
            "eero",
            "orbi",
            "unifi",
            "asus rt",
        ],
        &[
            "ルーター",
            "wi-fi",
            "wifi",
            "無線lan",
            "aterm",
            "バッファロー",
            "メッシュ",
        ],
    ),
    c(
        "nas",
        One,
        &[
            "nas",
            "synology",
            "qnap",
            "truenas",
            "unraid",
            "network storage",
        ],
        &["nas", "ストレージ", "synology", "qnap"],
    ),
    c(
        "gpu",
        One,
        &[
            "gpu",
            "graphics card",
            "graphic card",
            "rtx",
            "gtx",
            "radeon",
            "geforce",
            "video card",
            "intel arc",
        ],
        &[
            "gpu",
            "グラボ",
            "グラフィックボード",
            "グラフィックカード",
            "ビデオカード",
            "rtx",
            "gtx",
            "radeon",
        ],
    ),
    c(
        "cpu",
        One,
        &[
            "cpu",
            "processor",
            "ryzen",
            "core i5",
            "core i7",
            "core i9",
            "threadripper",
            "xeon",
        ],
        &["cpu", "プロセッサ", "ryzen", "core i"],
    ),
    c(
        "phone",
        One,
        &[
            "phone",
            "smartphone",
            "iphone",
            "pixel",
            "galaxy",
            "android phone",
            "mobile",
            "cellphone",
        ],
        &[
            "スマホ",
            "携帯",
            "iphone",
            "pixel",
            "galaxy",
            "機種変",
            "アンドロイド",
        ],
    ),
    c(
        "laptop",
        One,
        &[
            "laptop",
            "macbook",
            "notebook",
            "thinkpad",
            "chromebook",
            "surface",
        ],
        &[
            "ノートpc",
            "ノートパソコン",
            "macbook",
            "ラップトップ",
            "thinkpad",
        ],
    ),
    c(
        "desktop",
        One,
        &["desktop", "gaming pc", "rig", "tower"],
        &["デスクトップ", "自作pc", "ゲーミングpc"],
    ),
    c(
        "server",
        One,
        &[
            "home server",
            "homelab",
            "home lab",
            "proxmox",
            "unraid server",
            "mini pc",
        ],
        &["サーバー", "自宅鯖", "ホームサーバー", "proxmox"],
    ),
    c(
        "printer",
        One,
        &["printer"],
        &["プリンター", "プリンタ", "複合機"],
    ),
    c(
        "keyboard",
        One,
        &["keyboard", "hhkb", "realforce", "keychron"],
        &["キーボード", "hhkb", "realforce"],
    ),
    c(
        "monitor",
        One,
        &["monitor", "display", "screen"],
        &["モニター", "ディスプレイ", "画面"],
    ),
    c(
        "editor",
        One,
        &[
            "editor",
            "ide",
            "vs code",
            "vscode",
            "vim",
            "neovim",
            "emacs",
            "zed",
            "sublime",
            "jetbrains",
            "intellij",
        ],
        &[
            "エディタ",
            "エディター",
            "vs code",
            "vscode",
            "vim",
            "emacs",
        ],
    ),
    c(
        "os",
        One,
        &[
            "operating system",
            "os",
            "ubuntu",
            "debian",
            "fedora",
            "arch linux",
            "nixos",
            "windows 11",
            "windows 10",
            "macos",
        ],
        &[
            "os", "ubuntu", "debian", "windows", "linux", "nixos", "macos",
        ],
    ),
    c(
        "isp",
        One,
        &["isp", "internet provider", "broadband", "fiber", "fibre"],
        &["プロバイダ", "回線", "光回線"],
    ),
    // Vehicles.
    c(
        "car",
        One,
        &[
            "car",
            "vehicle",
            "drive",
            "drives",
            "driving",
            "suv",
            "truck",
            "pickup",
            "sedan",
            "minivan",
            "hatchback",
            "tesla",
            "prius",
            "subaru",
            "outback",
            "civic",
            "corolla",
            "f 150",
            "ev",
        ],
        &[
            "車",
            "愛車",
            "乗って",
            "乗り換え",
            "クルマ",
            "プリウス",
            "フィット",
            "軽自動車",
            "suv",
        ],
    ),
    c(
        "bike",
        One,
        &["bicycle", "bike", "ebike", "e bike"],
        &["自転車", "ロードバイク", "クロスバイク", "チャリ"],
    ),
    // Places.
    c(
        "home",
        One,
        &[
            "live",
            "lives",
            "lived",
            "living in",
            "moved",
            "moving",
            "based in",
            "relocated",
            "live in",
        ],
        &[
            "住んで",
            "住まい",
            "住む",
            "引っ越",
            "在住",
            "暮らして",
            "自宅",
            "最寄り",
        ],
    ),
    c(
        "workplace",
        One,
        &["office", "workplace", "commute"],
        &["職場", "勤務先", "会社", "オフィス", "通勤"],
    ),
    c(
        "hometown",
        One,
        &[
            "hometown",
            "grew up",
            "born in",
            "originally from",
            "i'm from",
            "i am from",
        ],
        &["出身", "地元", "実家", "生まれ", "故郷", "育ち"],
    ),
    // Work.
    c(
        "job",
        One,
        &[
            "teaching",
            "line of work",
            "job",
            "profession",
            "for a living",
            "for work",
            "career",
            "occupation",
            "work as",
            "working as",
            "nurse",
            "teacher",
            "engineer",
            "developer",
            "accountant",
            "designer",
            "lawyer",
        ],
        &[
            "仕事",
            "職業",
            "勤め",
            "働いて",
            "働き",
            "勤務",
            "看護師",
            "教師",
            "エンジニア",
            "保育士",
            "会社員",
            "公務員",
            "職種",
        ],
    ),
    // Health and food.
    c(
        "allergy",
        Many,
        &[
            "allergy",
            "allergic",
            "allergies",
            "intolerant",
            "intolerance",
            "can't eat",
            "cannot eat",
            "hay fever",
        ],
        &[
            "アレルギー",
            "食べられない",
            "花粉症",
            "不耐症",
            "苦手な食べ物",
        ],
    ),
    c(
        "diet",
        Many,
        &["vegetarian", "vegan", "meat", "gluten", "keto", "diet"],
        &["ベジタリアン", "菜食", "肉", "ダイエット", "グルテン"],
    ),
    c(
        "food",
        Many,
        &["food", "dish", "meal", "cuisine", "eat"],
        &["食べ物", "料理", "好物", "ごはん"],
    ),
    under(
        c(
            "coffee",
            Many,
            &["coffee", "espresso", "latte", "cappuccino", "flat white"],
            &["コーヒー", "カフェラテ", "エスプレッソ"],
        ),
        "drink",
    ),
    under(
        c(
            "tea",
            Many,
            &["tea", "matcha", "chai"],
            &["紅茶", "お茶", "緑茶", "抹茶", "ほうじ茶"],
        ),
        "drink",
    ),
    under(
        c(
            "alcohol",
            Many,
            &["beer", "wine", "sake", "whisky", "whiskey"],
            &["ビール", "ワイン", "日本酒", "ウイスキー", "お酒"],
        ),
        "drink",
    ),
    c(
        "drink",
        Many,
        &["drink", "drinks", "beverage"],
        &["飲み物", "ドリンク"],
    ),
    c(
        "name",
        Many,
        &["name", "named", "called"],
        &["名前", "という名", "って名"],
    ),
    c(
        "blood type",
        One,
        &["blood type", "blood group"],
        &["血液型"],
    ),
    c(
        "health",
        Many,
        &[
            "medical",
            "diabetic",
            "diabetes",
            "asthma",
            "doctor",
            "clinic",
            "hospital",
            "medication",
            "medicine",
        ],
        &["病院", "医", "薬", "持病", "通院", "内科"],
    ),
    // Dates.
    c(
        "birthday",
        Many,
        &["birthday", "born on", "bday"],
        &["誕生日", "生年月日"],
    ),
    c(
        "anniversary",
        Many,
        &["anniversary", "wedding", "married"],
        &["記念日", "結婚"],
    ),
    c(
        "trip",
        Many,
        &[
            "trip",
            "travel",
            "flight",
            "flying",
            "vacation",
            "holiday",
            "leave for",
        ],
        &["旅行", "出発", "フライト", "休暇", "帰省"],
    ),
    c(
        "exam",
        Many,
        &["exam", "test", "certification", "certificate"],
        &["試験", "資格", "検定"],
    ),
    // Tastes and pastimes.
    c(
        "music",
        Many,
        &[
            "music",
            "jazz",
            "rock",
            "classical",
            "band",
            "song",
            "songs",
            "album",
        ],
        &["音楽", "ジャズ", "ロック", "クラシック", "バンド", "曲"],
    ),
    c(
        "theme",
        Many,
        &[
            "dark mode",
            "light mode",
            "dark theme",
            "light theme",
            "theme",
        ],
        &["ダークモード", "ライトモード", "配色", "テーマ"],
    ),
    c(
        "hobby",
        Many,
        &[
            "hobby",
            "hobbies",
            "into",
            "obsessed",
            "pastime",
            "bouldering",
            "climbing",
            "running",
            "baking",
            "gardening",
            "fishing",
            "camping",
            "hiking",
            "photography",
            "knitting",
        ],
        &[
            "趣味",
            "ハマって",
            "はまって",
            "凝って",
            "ボルダリング",
            "釣り",
            "キャンプ",
            "登山",
            "写真",
            "パン作り",
            "ランニング",
        ],
    ),
    c(
        "sport",
        Many,
        &[
            "sport", "sports", "soccer", "football", "tennis", "golf", "baseball", "swim",
            "swimming", "gym",
        ],
        &[
            "スポーツ",
            "サッカー",
            "テニス",
            "ゴルフ",
            "野球",
            "水泳",
            "ジム",
        ],
    ),
    c(
        "language",
        Many,
        &[
            "language",
            "programming language",
            "rust",
            "python",
            "typescript",
            "javascript",
            "golang",
        ],
        &["言語", "プログラミング"],
    ),
];

/// Japanese compounds in which a form does not mean its concept: 大丈夫 holds no husband,
/// 電車 no car, 祖母 no mother (it is a grandparent).
const MASKS: &[&str] = &[
    "大丈夫",
    "丈夫",
    "工夫",
    "電車",
    "自転車",
    "風車",
    "歯車",
    "祖母",
    "叔母",
    "伯母",
    "保母",
    "祖父",
    "叔父",
    "伯父",
    "筋肉",
    "皮肉",
    "曲がる",
    "曲がり",
    "曲線",
    "医療費",
];

/// One pattern of the automaton: a concept's form, or a mask.
struct Pattern {
    /// The concept, or `None` for a mask.
    concept: Option<usize>,
    /// ASCII patterns match whole words (a plural `s`, `es` or `'s` may follow).
    word: bool,
}

struct Matcher {
    ac: aho_corasick::AhoCorasick,
    patterns: Vec<Pattern>,
}

static MATCHER: std::sync::LazyLock<Option<Matcher>> = std::sync::LazyLock::new(|| {
    let mut texts: Vec<String> = Vec::new();
    let mut patterns = Vec::new();
    for (i, concept) in CONCEPTS.iter().enumerate() {
        for form in concept.en.iter().chain(concept.ja) {
            let form: String = form
                .nfkc()
                .flat_map(char::to_lowercase)
                .map(|c| if matches!(c, '-' | '_' | '/') { ' ' } else { c })
                .collect();
            patterns.push(Pattern {
                concept: Some(i),
                word: form.is_ascii(),
            });
            texts.push(form);
        }
    }
    for mask in MASKS {
        patterns.push(Pattern {
            concept: None,
            word: false,
        });
        texts.push((*mask).to_owned());
    }
    let ac = aho_corasick::AhoCorasickBuilder::new()
        .match_kind(aho_corasick::MatchKind::Standard)
        .build(&texts)
        .ok()?;
    Some(Matcher { ac, patterns })
});

/// The concepts `text` mentions, as indexes into [`CONCEPTS`], sorted, with the broader
/// concepts of those it names.
pub fn mentioned(text: &str) -> Vec<usize> {
    let Some(matcher) = MATCHER.as_ref() else {
        return Vec::new();
    };
    // Lowercased NFKC, with hyphens and underscores as spaces ("Wi-Fi" → "wi fi"), so
    // that phrases match across punctuation.
    let lower: String = text
        .nfkc()
        .flat_map(char::to_lowercase)
        .map(|c| if matches!(c, '-' | '_' | '/') { ' ' } else { c })
        .collect();
    let bytes = lower.as_bytes();
    let word_byte = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    let mut masks: Vec<(usize, usize)> = Vec::new();
    let mut found: Vec<(usize, usize, usize)> = Vec::new();
    for m in matcher.ac.find_overlapping_iter(&lower) {
        let Some(pattern) = matcher.patterns.get(m.pattern().as_usize()) else {
            continue;
        };
        let Some(concept) = pattern.concept else {
            masks.push((m.start(), m.end()));
            continue;
        };
        if pattern.word {
            let before = m.start().checked_sub(1).and_then(|i| bytes.get(i));
            let rest = &lower[m.end()..];
            let end = ["'s", "es", "s", ""]
                .iter()
                .find(|suffix| rest.starts_with(**suffix))
                .map_or(m.end(), |suffix| m.end() + suffix.len());
            let after_plain = bytes.get(m.end());
            let after_suffixed = bytes.get(end);
            if word_byte(before) || (word_byte(after_plain) && word_byte(after_suffixed)) {
                continue;
            }
        }
        found.push((m.start(), m.end(), concept));
    }
    let mut out = Vec::new();
    for (start, end, concept) in found {
        let masked = masks
            .iter()
            .any(|&(ms, me)| ms <= start && end <= me && (ms, me) != (start, end));
        if masked {
            continue;
        }
        out.push(concept);
        if let Some(broader) = CONCEPTS[concept].broader
            && let Some(b) = CONCEPTS.iter().position(|c| c.name == broader)
        {
            out.push(b);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The concepts of `text` that say who or which pet it is about.
pub fn who(mentioned: &[usize]) -> impl Iterator<Item = usize> + '_ {
    mentioned
        .iter()
        .copied()
        .filter(|&i| CONCEPTS[i].family == Family::Who)
}

/// A set of concepts as bits (the thesaurus has fewer than 128 concepts; a test holds it
/// to that).
pub type Mask = u128;

/// The bit of one concept.
fn bit(i: usize) -> Mask {
    1u128
        .checked_shl(u32::try_from(i).unwrap_or(u32::MAX))
        .unwrap_or(0)
}

/// The concepts as a [`Mask`].
pub fn mask(concepts: &[usize]) -> Mask {
    concepts.iter().fold(0, |m, &i| m | bit(i))
}

/// The masks a recall's checks need, made once.
struct Masks {
    /// Pets and people (and their kinds).
    who: Mask,
    /// Pets and their kind.
    pets: Mask,
}

static FAMILY_MASKS: std::sync::LazyLock<Masks> = std::sync::LazyLock::new(|| {
    let of = |f: &dyn Fn(&Concept) -> bool| {
        CONCEPTS
            .iter()
            .enumerate()
            .filter(|(_, c)| f(c))
            .fold(0, |m, (i, _)| m | bit(i))
    };
    Masks {
        who: of(&|c| c.family == Family::Who),
        pets: of(&|c| c.name == "pet" || c.broader == Some("pet")),
    }
});

/// What a question's concepts allow of a memory, made once per recall so that checking
/// each of many memories is a few bit operations.
#[derive(Debug, Clone, Default)]
pub struct Fit {
    /// Who the question names (pets and people).
    who: Mask,
    /// The people it names: a memory must name each.
    people: Mask,
    /// The topics it names (things, tastes, names).
    topics: Mask,
    /// For each concept it names that has a broader one: its bit and its siblings' (a
    /// memory naming a sibling and not the concept is about another kind of thing).
    siblings: Vec<(Mask, Mask)>,
}

impl Fit {
    pub fn new(query: &[usize]) -> Self {
        let masks = &*FAMILY_MASKS;
        let q = mask(query);
        let siblings = query
            .iter()
            .filter_map(|&i| {
                let broader = CONCEPTS[i].broader?;
                let others = CONCEPTS
                    .iter()
                    .enumerate()
                    .filter(|(j, c)| *j != i && c.broader == Some(broader))
                    .fold(0, |m, (j, _)| m | bit(j));
                Some((bit(i), others))
            })
            .collect();
        Self {
            who: q & masks.who,
            people: q & masks.who & !masks.pets,
            topics: q & !masks.who,
            siblings,
        }
    }

    /// Whether a memory with concepts `m` may answer the question: every person the
    /// question names is one the memory names too (a memory that names nobody is about
    /// the speaker), the memory names no other kind of the same thing instead (a cat
    /// against a dog, coffee against tea), nor only others than it names (a daughter
    /// against a hamster). A pet of a kind the thesaurus does not know is no conflict.
    pub fn compatible(&self, m: Mask) -> bool {
        let named_others = self.who != 0 && m & FAMILY_MASKS.who != 0 && self.who & m == 0;
        !named_others
            && self.people & !m == 0
            && self
                .siblings
                .iter()
                .all(|&(own, others)| m & own != 0 || m & others == 0)
    }

    /// Whether a memory with concepts `m` is about another topic than the question:
    /// both name topics (things, tastes, names, not people), and none in common ("my
    /// laptop's memory" against "my desktop's GPU", "my wife's job" against "my wife's
    /// name").
    pub fn off_topic(&self, m: Mask) -> bool {
        let theirs = m & !FAMILY_MASKS.who;
        self.topics != 0 && theirs != 0 && self.topics & theirs == 0
    }
}

/// [`Fit::compatible`] of two concept lists.
pub fn compatible(query: &[usize], memory: &[usize]) -> bool {
    Fit::new(query).compatible(mask(memory))
}

/// [`Fit::off_topic`] of two concept lists.
pub fn off_topic(query: &[usize], memory: &[usize]) -> bool {
    Fit::new(query).off_topic(mask(memory))
}

/// The subject of a fact by its concepts: the single-valued things it is about (a car;
/// a home server and its OS), at most two, qualified by whose they are when it names one
/// person ("wife car"); `None` when it names none or more.
pub fn subject(mentioned: &[usize]) -> Option<String> {
    let ones: Vec<&str> = mentioned
        .iter()
        .filter(|&&i| CONCEPTS[i].family == Family::One)
        .map(|&i| CONCEPTS[i].name)
        .collect();
    if ones.is_empty() || ones.len() > 2 {
        return None;
    }
    // The people named: the specific ones ("wife", not also "spouse"), no pets.
    let mut people = who(mentioned).filter(|&i| {
        let concept = &CONCEPTS[i];
        concept.broader != Some("pet") && !CONCEPTS.iter().any(|c| c.broader == Some(concept.name))
    });
    let things = ones.join(" ");
    match (people.next(), people.next()) {
        (None, _) => Some(things),
        (Some(p), None) => Some(format!("{} {things}", CONCEPTS[p].name)),
        _ => None,
    }
}

/// The concepts a subject made by [`subject`] names ("wife car" → wife, car).
pub fn in_subject(subject: &str) -> Vec<usize> {
    let words: Vec<&str> = subject.split(' ').collect();
    CONCEPTS
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c.name == subject
                || words.contains(&c.name)
                || (c.name.contains(' ') && subject.contains(c.name))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The concept's name (for tests and `memory list`).
pub fn name(i: usize) -> &'static str {
    CONCEPTS[i].name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<&'static str> {
        mentioned(text).into_iter().map(name).collect()
    }

    #[test]
    fn every_concept_has_a_bit() {
        assert!(
            CONCEPTS.len() < 128,
            "{} concepts do not fit a Mask",
            CONCEPTS.len()
        );
        let names: std::collections::HashSet<&str> = CONCEPTS.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), CONCEPTS.len(), "concept names are unique");
        for c in CONCEPTS {
            assert!(c.broader.is_none_or(|b| names.contains(b)), "{}", c.name);
        }
    }

    #[test]
    fn paraphrases_meet_in_a_concept() {
        assert!(names("What's my boy's name again?").contains(&"son"));
        assert!(names("My son Leo started school").contains(&"son"));
        assert!(names("いまうちで使ってるWi-Fiの機械は？").contains(&"router"));
        assert!(names("結局ルーターをTP-LinkのDecoに買い替えました").contains(&"router"));
        assert!(names("What kind of vehicle do I drive?").contains(&"car"));
        assert!(names("私のスマホはPixel 8です").contains(&"phone"));
        assert!(names("Our beagle Baxter barks").contains(&"dog"));
        assert!(names("Our beagle Baxter barks").contains(&"pet"), "broader");
        assert!(!names("I like cosplay").contains(&"os"), "whole words only");
        assert!(
            !names("大丈夫です").contains(&"husband"),
            "masked compounds"
        );
        assert!(!names("電車で通っています").contains(&"car"));
        assert!(names("祖母の誕生日").contains(&"grandparent"));
        assert!(!names("祖母の誕生日").contains(&"mother"));
    }

    #[test]
    fn a_question_about_another_pet_or_person_is_not_compatible() {
        let dog = mentioned("うちの犬の名前って何だっけ？");
        let cat = mentioned("私の猫の名前はミケです");
        assert!(!compatible(&dog, &cat));
        assert!(compatible(&cat, &cat));
        let wife = mentioned("妻の誕生日っていつだった？");
        assert!(!compatible(&wife, &mentioned("私の誕生日は3月14日です")));
        assert!(compatible(
            &mentioned("What's my kid's name?"),
            &mentioned("My daughter is Emma")
        ));
        assert!(compatible(
            &mentioned("When is my birthday?"),
            &mentioned("My birthday is March 14")
        ));
        assert!(!compatible(
            &mentioned("What kind of tea do I like?"),
            &mentioned("I take my coffee black")
        ));
        assert!(!compatible(
            &mentioned("うちのハムスターの名前は？"),
            &mentioned("うさぎを飼い始めました")
        ));
        assert!(compatible(
            &mentioned("What do I like to drink?"),
            &mentioned("I take my coffee black")
        ));
    }

    #[test]
    fn a_memory_on_another_topic_is_off_topic() {
        let laptop = mentioned("ノートパソコンのメモリって何GB積んでたっけ？");
        assert!(off_topic(
            &laptop,
            &mentioned("デスクトップにRTX 4070を積んでる")
        ));
        assert!(!off_topic(&laptop, &mentioned("ノートはMacBook Airです")));
        assert!(
            !off_topic(&laptop, &mentioned("肩こりがひどいです")),
            "no topic: no verdict"
        );
        assert!(off_topic(
            &mentioned("What does my wife do for work?"),
            &mentioned("My wife's name is Priya")
        ));
    }

    #[test]
    fn single_valued_subjects() {
        let subject_of = |t: &str| subject(&mentioned(t));
        assert_eq!(
            subject_of("I drive a 2012 Subaru Outback").as_deref(),
            Some("car")
        );
        assert_eq!(
            subject_of("家族が増えたので、フィットを手放してスバルのフォレスターに乗り換えました")
                .as_deref(),
            Some("car")
        );
        assert_eq!(
            subject_of("My wife drives a Prius").as_deref(),
            Some("wife car")
        );
        assert_eq!(
            subject_of("My rig has a Ryzen 9 and an RTX 4080"),
            None,
            "several things"
        );
        assert_eq!(
            subject_of("My home server is on Ubuntu 20.04").as_deref(),
            Some("server os")
        );
        assert_eq!(
            subject_of("Wiped the home server and reinstalled it with NixOS").as_deref(),
            Some("server os")
        );
        assert_eq!(subject_of("I love jazz"), None, "tastes add up");
    }
}
