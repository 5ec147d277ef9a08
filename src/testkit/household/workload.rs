//! The people of the household benchmark and what each of them will do, drawn up front
//! from the seed: every row of a run replays the same [`Plan`], so the rows differ only by
//! where the requests go.
//!
//! Four kinds of people, cycled when there are more than four: a Japanese speaker on the
//! chat model who presses Stop once; a developer on the coder model who pastes long logs;
//! an English speaker on the chat model who switches to the small model now and then and
//! presses Stop once; a bilingual person who pastes long meeting notes. The pastes are
//! ~1,800 tokens each, so those two chats outgrow a 4,096-token window with the second.

use std::time::Duration;

use super::machines::{CHAT, CODER, SMALL};

/// One person's session: an Open WebUI chat of several turns.
#[derive(Debug, Clone, PartialEq)]
pub struct Person {
    /// 0, 1, …: also part of every prompt's marker.
    pub index: usize,
    pub name: String,
    pub user_id: String,
    /// `X-OpenWebUI-Chat-Id`: a UUID, drawn from the seed.
    pub chat_id: String,
    /// Life time from the row's start to the first turn.
    pub start: Duration,
    pub turns: Vec<TurnPlan>,
}

/// One user turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnPlan {
    pub model: &'static str,
    /// The message as typed, ending with [`TurnPlan::marker`] so that no two prompts of a
    /// run are the same and the machines' records can be matched to it.
    pub prompt: String,
    pub marker: String,
    /// Life time the person reads and types before sending this turn (zero for the first).
    pub think: Duration,
    /// Press Stop after this many tokens of the answer.
    pub stop_after: Option<usize>,
}

/// Everyone's sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub people: Vec<Person>,
}

impl Plan {
    /// The plan for `people` people, the same for the same seed.
    pub fn new(seed: u64, people: usize) -> Self {
        let people = (0..people)
            .map(|index| {
                let mut rng = Rng::new(seed ^ (index as u64).wrapping_mul(0x5851_F42D_4C95_7F2D));
                person(index, &mut rng)
            })
            .collect();
        Self { people }
    }

    pub fn user_turns(&self) -> usize {
        self.people.iter().map(|p| p.turns.len()).sum()
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Japanese, chat model, Stop once.
    Stopper,
    /// English, coder model, pastes logs.
    Developer,
    /// English, chat model with turns on the small model, Stop once.
    Switcher,
    /// Japanese and English, chat model, pastes meeting notes.
    Reader,
}

const KINDS: [Kind; 4] = [Kind::Stopper, Kind::Developer, Kind::Switcher, Kind::Reader];
const NAMES: [&str; 4] = ["Aiko", "Ben", "Chloe", "Daichi"];

fn person(index: usize, rng: &mut Rng) -> Person {
    let kind = KINDS[index % KINDS.len()];
    let round = index / KINDS.len();
    let name = match round {
        0 => NAMES[index % NAMES.len()].to_owned(),
        r => format!("{} {}", NAMES[index % NAMES.len()], r + 1),
    };
    let texts = match kind {
        Kind::Stopper => stopper_turns(rng),
        Kind::Developer => developer_turns(rng),
        Kind::Switcher => switcher_turns(rng),
        Kind::Reader => reader_turns(rng),
    };
    let stop_at = match kind {
        // Never the first turn, so the chat has its title and tags first.
        Kind::Stopper | Kind::Switcher => Some(1 + rng.below(texts.len() - 1)),
        Kind::Developer | Kind::Reader => None,
    };
    let turns = texts
        .into_iter()
        .enumerate()
        .map(|(i, (model, text))| {
            let marker = format!("[p{index}.{}]", i + 1);
            TurnPlan {
                model,
                prompt: format!("{text} {marker}"),
                marker,
                think: if i == 0 {
                    Duration::ZERO
                } else {
                    rng.seconds(5.0, 15.0)
                },
                stop_after: (stop_at == Some(i)).then(|| 15 + rng.below(45)),
            }
        })
        .collect();
    Person {
        index,
        name,
        user_id: format!("user-{}", index + 1),
        chat_id: rng.uuid(),
        start: rng.seconds(0.0, 5.0),
        turns,
    }
}

fn stopper_turns(rng: &mut Rng) -> Vec<(&'static str, String)> {
    const ASKS: [&str; 8] = [
        "肉じゃがを美味しく作るコツを教えてください。",
        "京都で紅葉を見るならどこがおすすめですか？",
        "英語の発音を練習する良い方法はありますか？",
        "猫が夜中に鳴く理由は何でしょうか？",
        "簡単にできる朝ごはんのレシピを三つ教えて。",
        "子供に分数を説明するにはどうすればいいですか？",
        "週末に家でできる運動を提案してください。",
        "梅干しの漬け方を手順で教えてください。",
    ];
    rng.pick(&ASKS, 5)
        .into_iter()
        .map(|t| (CHAT, t.to_owned()))
        .collect()
}

fn developer_turns(rng: &mut Rng) -> Vec<(&'static str, String)> {
    const ASKS: [&str; 6] = [
        "How do I read a file line by line in Rust without loading it all into memory?",
        "What is the difference between a Mutex and an RwLock, and when should I pick each?",
        "Write a shell one-liner that finds the ten largest files under a directory.",
        "Why would a systemd timer not fire after a reboot?",
        "How can I make this retry loop back off exponentially with jitter?",
        "Explain what `set -euo pipefail` does in a bash script.",
    ];
    let asks = rng.pick(&ASKS, 2);
    vec![
        (
            CODER,
            format!(
                "Our nightly backup job failed. Here is its log; what went wrong?\n\n```\n{}\n```",
                backup_log(rng, 1)
            ),
        ),
        (CODER, asks[0].to_owned()),
        (
            CODER,
            format!(
                "It failed again last night, a different log this time. Same cause?\n\n```\n{}\n```",
                backup_log(rng, 2)
            ),
        ),
        (CODER, asks[1].to_owned()),
    ]
}

fn switcher_turns(rng: &mut Rng) -> Vec<(&'static str, String)> {
    const ASKS: [&str; 8] = [
        "What's a good way to keep basil alive on a windowsill?",
        "Can you explain how compound interest works with a small example?",
        "Suggest a three-day itinerary for Kyoto in autumn.",
        "How do I get my cat to stop scratching the sofa?",
        "Write a short birthday poem for my grandmother, who loves gardening.",
        "What are the pros and cons of a heat pump for a small house?",
        "Summarise the plot of Pride and Prejudice in a paragraph.",
        "How long should I boil an egg for a runny yolk?",
    ];
    let asks = rng.pick(&ASKS, 5);
    // One later turn on the small model for sure, the others now and then.
    let small = 1 + rng.below(asks.len() - 1);
    asks.into_iter()
        .enumerate()
        .map(|(i, t)| {
            let model = if i == small || (i > 0 && rng.unit() < 0.25) {
                SMALL
            } else {
                CHAT
            };
            (model, t.to_owned())
        })
        .collect()
}

fn reader_turns(rng: &mut Rng) -> Vec<(&'static str, String)> {
    const ASKS: [&str; 6] = [
        "この中で期限が一番近いタスクは何ですか？",
        "Please list the action items in English, one per line.",
        "予算について決まったことだけを教えてください。",
        "Who is responsible for the most tasks?",
        "次回の会議までに準備すべきことは？",
        "Write a short email to the team that sums up the decisions.",
    ];
    let asks = rng.pick(&ASKS, 2);
    vec![
        (
            CHAT,
            format!(
                "この議事録を要約して、決まったことを箇条書きにしてください。\n\n{}",
                minutes(rng, 1)
            ),
        ),
        (CHAT, asks[0].to_owned()),
        (
            CHAT,
            format!(
                "こちらは翌週の議事録です。前回から変わった点は？\n\n{}",
                minutes(rng, 2)
            ),
        ),
        (CHAT, asks[1].to_owned()),
    ]
}

/// A backup job's log of about 1,800 tokens (~7,200 characters), failing at the end.
fn backup_log(rng: &mut Rng, night: u32) -> String {
    const SHARES: [&str; 5] = ["photos", "documents", "music", "mail", "projects"];
    let mut lines = Vec::new();
    let mut second = rng.below(600);
    while lines.iter().map(|l: &String| l.len() + 1).sum::<usize>() < 7_100 {
        second += 1 + rng.below(9);
        let share = SHARES[rng.below(SHARES.len())];
        let line = match rng.below(4) {
            0 => format!(
                "2026-11-{:02}T02:{:02}:{:02}Z WARN backup: {share}: file changed while reading, retrying",
                26 + night,
                second / 60 % 60,
                second % 60
            ),
            _ => format!(
                "2026-11-{:02}T02:{:02}:{:02}Z INFO backup: {share}: copied {} files ({} MiB)",
                26 + night,
                second / 60 % 60,
                second % 60,
                10 + rng.below(2_000),
                1 + rng.below(900)
            ),
        };
        lines.push(line);
    }
    lines.push(format!(
        "2026-11-{:02}T03:00:00Z ERROR backup: target /mnt/nas: no space left on device (os error 28)",
        26 + night
    ));
    lines.join("\n")
}

/// Meeting notes of about 1,800 tokens (~1,800 characters of Japanese).
fn minutes(rng: &mut Rng, week: u32) -> String {
    const LINES: [&str; 10] = [
        "町内会の夏祭りの準備について話し合った。",
        "会場の予約は田中さんが来週までに確認する。",
        "予算は昨年より一割増やすことで合意した。",
        "飲み物の仕入れ先を二社から選ぶ必要がある。",
        "雨天の場合は公民館を使う案が出された。",
        "チラシの印刷は佐藤さんが担当する。",
        "ボランティアの募集は掲示板と回覧板で行う。",
        "子供向けの遊びコーナーを広げる意見が多かった。",
        "ごみの分別の案内を多言語で用意することになった。",
        "次回は会計報告と当日の役割分担を決める。",
    ];
    let mut out = format!("第{week}回 準備委員会 議事録\n");
    while out.chars().count() < 1_800 {
        out.push('・');
        out.push_str(LINES[rng.below(LINES.len())]);
        out.push('\n');
    }
    out
}

/// splitmix64: small, seedable and the same everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// In `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize
    }

    fn seconds(&mut self, low: f64, high: f64) -> Duration {
        Duration::from_secs_f64(low + self.unit() * (high - low))
    }

    /// `n` distinct items of `items` in a seeded order.
    fn pick<'a>(&mut self, items: &[&'a str], n: usize) -> Vec<&'a str> {
        let mut pool = items.to_vec();
        (0..n.min(pool.len()))
            .map(|_| pool.swap_remove(self.below(pool.len())))
            .collect()
    }

    /// A version-4-shaped UUID from the seed.
    fn uuid(&mut self) -> String {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_makes_the_same_plan_and_another_seed_another() {
        assert_eq!(Plan::new(7, 6), Plan::new(7, 6));
        assert_ne!(Plan::new(7, 4), Plan::new(8, 4));
    }

    #[test]
    fn every_prompt_is_unique_and_ends_with_its_marker() {
        let plan = Plan::new(3, 9);
        let mut markers: Vec<&str> = plan
            .people
            .iter()
            .flat_map(|p| &p.turns)
            .inspect(|t| assert!(t.prompt.ends_with(&t.marker), "{}", t.prompt))
            .map(|t| t.marker.as_str())
            .collect();
        let all = markers.len();
        markers.sort_unstable();
        markers.dedup();
        assert_eq!(markers.len(), all);
        assert_eq!(all, plan.user_turns());
    }

    #[test]
    fn the_household_has_the_promised_mix() {
        let plan = Plan::new(1, 4);
        let turns = |i: usize| &plan.people[i].turns;
        let stops = |i: usize| turns(i).iter().filter(|t| t.stop_after.is_some()).count();
        assert_eq!((stops(0), stops(1), stops(2), stops(3)), (1, 0, 1, 0));
        assert!(turns(0)[0].stop_after.is_none() && turns(2)[0].stop_after.is_none());
        assert!(turns(1).iter().all(|t| t.model == CODER));
        assert!(turns(0).iter().chain(turns(3)).all(|t| t.model == CHAT));
        // The two long chats: two pastes of ~1,800 tokens each (chars / 4 for the log, one
        // per character for Japanese), so with the answers the history outgrows 4,096.
        let log: usize = turns(1).iter().map(|t| t.prompt.len() / 4).sum();
        let notes: usize = turns(3).iter().map(|t| t.prompt.chars().count()).sum();
        assert!(log > 3_600 && notes > 3_600, "{log} {notes}");
        assert!(plan.people.iter().all(|p| p.turns[0].think.is_zero()));
        assert!(
            plan.people
                .iter()
                .all(|p| uuid::Uuid::parse_str(&p.chat_id).is_ok())
        );
    }

    #[test]
    fn the_switcher_always_has_a_turn_on_the_small_model_and_starts_on_the_chat_one() {
        for seed in 0..20 {
            let turns = &Plan::new(seed, 4).people[2].turns;
            assert_eq!(turns[0].model, CHAT);
            assert!(turns.iter().any(|t| t.model == SMALL), "seed {seed}");
        }
    }

    #[test]
    fn picks_are_distinct_and_below_stays_in_range() {
        let mut rng = Rng::new(5);
        let picked = rng.pick(&["a", "b", "c", "d"], 4);
        let mut sorted = picked.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["a", "b", "c", "d"]);
        assert!((0..1_000).all(|_| rng.below(3) < 3));
    }
}
