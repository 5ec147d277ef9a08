//! The words of the seeded household: prompts and answers of the sizes people and models
//! write (a line to a few paragraphs of prompt, a paragraph to a page of answer), on the
//! topics a home asks about, in English and Japanese, with now and then a statement about
//! the person ("My router is a …") that memory turns into a fact.

/// The household workload's seeded generator (SplitMix64), with the draws a store's rows
/// need: the same seed gives the same store.
#[derive(Debug, Clone)]
pub struct Rng(crate::testkit::household::workload::Rng);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(crate::testkit::household::workload::Rng::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `0.0..1.0`.
    pub fn unit(&mut self) -> f64 {
        self.0.unit()
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// A length around `median` with a long tail (log-normal-like), within `min..=max`.
    pub fn length(&mut self, median: f64, min: usize, max: usize) -> usize {
        // The sum of three uniforms, centred: close enough to a normal for sizes.
        let z = (self.unit() + self.unit() + self.unit() - 1.5) * 2.0;
        let n = median * (0.8 * z).exp();
        (n as usize).clamp(min, max)
    }
}

const TOPICS: &[&str] = &[
    "the home network",
    "the kids' homework",
    "dinner tonight",
    "the garden",
    "a Rust build error",
    "the family budget",
    "our trip to Kyoto",
    "the NAS backups",
    "a Python script",
    "the car's service",
    "a birthday present",
    "the heating bill",
    "Docker on the mini PC",
    "a history essay",
    "the cat's diet",
    "learning Japanese",
];

const ASKS: &[&str] = &[
    "Can you explain",
    "What is the best way to handle",
    "Help me plan",
    "Why does this keep happening with",
    "Give me three ideas for",
    "Summarise what you know about",
    "Write a short checklist for",
    "How should I think about",
    "Compare the options for",
    "Fix the problem with",
];

const WORDS: &[&str] = &[
    "because",
    "router",
    "schedule",
    "weekend",
    "cheaper",
    "recipe",
    "firmware",
    "deadline",
    "container",
    "temperature",
    "insurance",
    "chapter",
    "compile",
    "volume",
    "season",
    "ticket",
    "battery",
    "password",
    "station",
    "harvest",
    "receipt",
    "lifetime",
    "window",
    "library",
    "portion",
    "latency",
    "cabinet",
    "question",
    "message",
    "problem",
    "answer",
    "morning",
    "evening",
    "quickly",
    "carefully",
    "probably",
    "usually",
    "together",
    "instead",
    "already",
    "before",
    "after",
    "between",
    "without",
    "several",
    "important",
    "simple",
    "another",
];

const JA_ASKS: &[&str] = &[
    "について教えてください。",
    "の良い方法はありますか？",
    "を計画するのを手伝って。",
    "がうまくいきません。原因は何でしょう？",
    "を三つの案にまとめてください。",
];

const JA_TOPICS: &[&str] = &[
    "家のネットワーク",
    "子供の宿題",
    "今夜の夕食",
    "庭の手入れ",
    "京都旅行",
    "バックアップの設定",
    "猫の食事",
    "車の点検",
];

const JA_SENTENCES: &[&str] = &[
    "まず現在の状況を確認しましょう。",
    "設定を一つずつ見直すのが確実です。",
    "週末にまとめて作業すると効率的です。",
    "費用と手間のバランスを考えてください。",
    "公式の手順に従うのが安全です。",
    "うまくいかない場合はログを確認してください。",
];

/// Statements that memory's rules take as facts about the person, with the subject's
/// variants: a later one on the same subject supersedes the earlier.
const FACTS: &[(&str, &[&str])] = &[
    (
        "My router is a",
        &[
            "Netgear Nighthawk",
            "TP-Link Archer",
            "Fritz!Box 7590",
            "Asus RT-AX88U",
        ],
    ),
    (
        "I live in",
        &["Osaka", "Kyoto", "Sapporo", "Fukuoka", "Yokohama"],
    ),
    ("My cat is called", &["Mochi", "Tama", "Kuro", "Sora"]),
    (
        "I work as a",
        &["nurse", "teacher", "software engineer", "carpenter"],
    ),
    (
        "My favourite editor is",
        &["VS Code", "Vim", "Emacs", "Helix"],
    ),
    ("I am allergic to", &["peanuts", "shellfish", "pollen"]),
];

/// One prompt: its text, and whether it is in Japanese.
pub fn prompt(rng: &mut Rng) -> (String, bool) {
    if rng.below(5) == 0 {
        let mut p = format!("{}{}", rng.pick(JA_TOPICS), rng.pick(JA_ASKS));
        let extra = rng.length(60.0, 0, 600);
        while p.chars().count() < extra {
            p.push_str(rng.pick(JA_SENTENCES));
        }
        return (p, true);
    }
    let mut p = String::new();
    if rng.below(12) == 0 {
        let (lead, values) = rng.pick(FACTS);
        p.push_str(&format!("{lead} {}. ", rng.pick(values)));
    }
    p.push_str(&format!("{} {}?", rng.pick(ASKS), rng.pick(TOPICS)));
    let target = rng.length(160.0, 20, 2_500);
    if p.len() < target {
        p.push(' ');
        sentences(rng, &mut p, target);
    }
    (p, false)
}

/// One answer, in the prompt's language: a paragraph to a page.
pub fn answer(rng: &mut Rng, japanese: bool) -> String {
    let mut a = String::new();
    if japanese {
        let target = rng.length(400.0, 40, 3_000);
        while a.chars().count() < target {
            a.push_str(rng.pick(JA_SENTENCES));
            if rng.below(6) == 0 {
                a.push_str("\n\n");
            }
        }
        return a;
    }
    let target = rng.length(1_200.0, 80, 8_000);
    sentences(rng, &mut a, target);
    a
}

/// A title the way Open WebUI asks a model for one, answered in a line.
pub fn title(rng: &mut Rng) -> (String, String) {
    let topic = rng.pick(TOPICS);
    (
        format!(
            "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Chat History:\n<chat_history>\nUSER: {} {topic}?\n</chat_history>",
            rng.pick(ASKS)
        ),
        format!("{{\"title\": \"📝 About {topic}\"}}"),
    )
}

/// Appends sentences of common words to `out` until it is `target` bytes long.
fn sentences(rng: &mut Rng, out: &mut String, target: usize) {
    while out.len() < target {
        let n = 6 + rng.below(12);
        for i in 0..n {
            let w = rng.pick(WORDS);
            if i == 0 {
                let mut c = w.chars();
                if let Some(first) = c.next() {
                    out.extend(first.to_uppercase());
                    out.push_str(c.as_str());
                }
            } else {
                out.push(' ');
                out.push_str(w);
            }
        }
        out.push_str(if rng.below(8) == 0 { ".\n\n" } else { ". " });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_text_and_sizes_vary() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let first: Vec<_> = (0..50).map(|_| prompt(&mut a)).collect();
        let again: Vec<_> = (0..50).map(|_| prompt(&mut b)).collect();
        assert_eq!(first, again);
        let answers: Vec<usize> = (0..200).map(|_| answer(&mut a, false).len()).collect();
        let (min, max) = (answers.iter().min(), answers.iter().max());
        assert!(min < Some(&600) && max > Some(&2_000), "{min:?} {max:?}");
    }

    #[test]
    fn some_prompts_state_facts_that_memory_takes() {
        let mut rng = Rng::new(1);
        let facts: usize = (0..400)
            .map(|_| crate::memory::facts::extract(&prompt(&mut rng).0).len())
            .sum();
        assert!(facts > 5, "{facts} facts in 400 prompts");
    }
}
