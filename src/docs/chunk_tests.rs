use proptest::prelude::*;

use super::*;

const SMALL: ChunkConfig = ChunkConfig {
    max_chars: 200,
    overlap_chars: 60,
};

const README: &str = r#"# Coordinator

One endpoint for the household's LLMs.

## Install

Build it with cargo:

```sh
cargo build --release

# the binary is in target/release
ls target/release/coordinator
```

## Configuration

| key | default | meaning |
|-----|---------|---------|
| store.path | coordinator.db | the SQLite file |
| queue.type | in-process | embedded or redis |

- `coordinator serve` starts the server
  and every configured worker.
- `coordinator worker` joins a cluster:

  ```toml
  [queue]
  type = "redis"
  ```

### Backends
Ollama and OpenAI-compatible servers.
"#;

#[test]
fn headings_give_every_chunk_its_path() {
    let doc = chunk_markdown(README, &SMALL);
    assert_eq!(doc.title, "Coordinator");
    let paths: Vec<String> = doc.chunks.iter().map(Chunk::heading_path).collect();
    assert_eq!(paths[0], "Coordinator");
    assert!(
        paths.contains(&"Coordinator › Install".to_owned()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"Coordinator › Configuration › Backends".to_owned()),
        "{paths:?}"
    );
    let backends = doc.chunks.last().unwrap();
    assert_eq!(backends.text, "Ollama and OpenAI-compatible servers.");
}

#[test]
fn code_blocks_tables_and_list_items_stay_whole() {
    let doc = chunk_markdown(README, &SMALL);
    let code = "```sh\ncargo build --release\n\n# the binary is in target/release\nls target/release/coordinator\n```";
    assert!(doc.chunks.iter().any(|c| c.text.contains(code)), "{doc:#?}");
    // The `#` inside the fence is not a heading.
    assert!(
        doc.chunks
            .iter()
            .all(|c| !c.heading.iter().any(|h| h.contains("binary")))
    );
    let table_rows = ["| store.path |", "| queue.type |"];
    let with_table: Vec<_> = doc
        .chunks
        .iter()
        .filter(|c| c.text.contains("|-----|"))
        .collect();
    assert_eq!(with_table.len(), 1);
    assert!(table_rows.iter().all(|r| with_table[0].text.contains(r)));
    let item = "- `coordinator worker` joins a cluster:\n\n  ```toml\n  [queue]\n  type = \"redis\"\n  ```";
    assert!(doc.chunks.iter().any(|c| c.text.contains(item)), "{doc:#?}");
}

#[test]
fn front_matter_is_metadata_not_text() {
    let note = "---\ntitle: \"NAS backup\"\ntags: [backup, nas]\nauthors:\n  - ken\n  - yui\n---\n# Schedule\n\nEvery night at 02:00.\n";
    let doc = chunk_markdown(note, &SMALL);
    assert_eq!(doc.title, "NAS backup");
    assert_eq!(doc.metadata["tags"], "backup, nas");
    assert_eq!(doc.metadata["authors"], "ken, yui");
    assert_eq!(doc.chunks.len(), 1);
    assert_eq!(doc.chunks[0].text, "Every night at 02:00.");
    assert_eq!(doc.chunks[0].heading, vec!["Schedule"]);
    // An unclosed front matter is text.
    let open = chunk_markdown("---\ntitle: x\n\nbody", &SMALL);
    assert!(open.metadata.is_empty());
    assert!(open.chunks.iter().any(|c| c.text.contains("body")));
}

#[test]
fn japanese_paragraphs_are_cut_at_sentence_ends() {
    let sentence = "毎晩二時にNASのバックアップが外付けディスクへ走ります。";
    let long = sentence.repeat(12);
    let doc = chunk_markdown(&format!("# バックアップ\n## NAS\n\n{long}\n"), &SMALL);
    assert!(doc.chunks.len() > 1);
    for c in &doc.chunks {
        assert_eq!(c.heading_path(), "バックアップ › NAS");
        assert!(c.text.chars().count() <= SMALL.max_chars);
        assert!(c.text.ends_with('。'), "{}", c.text);
    }
}

#[test]
fn a_long_code_block_is_one_oversized_chunk() {
    let body: String = (0..100).map(|i| format!("let x{i} = {i};\n")).collect();
    let src = format!("# Code\n\nBefore.\n\n```rust\n{body}```\n\nAfter.\n");
    let doc = chunk_markdown(&src, &SMALL);
    let fenced: Vec<_> = doc
        .chunks
        .iter()
        .filter(|c| c.text.contains("let x0 "))
        .collect();
    assert_eq!(fenced.len(), 1);
    assert!(fenced[0].text.contains("let x99 = 99;"));
    assert!(doc.chunks.iter().any(|c| c.text.contains("After.")));
}

#[test]
fn overlap_repeats_the_last_short_block() {
    let paras: Vec<String> = (0..6)
        .map(|i| format!("Paragraph {i} {}", "word ".repeat(12)))
        .collect();
    let config = ChunkConfig {
        max_chars: 200,
        overlap_chars: 80,
    };
    let doc = chunk_markdown(&format!("# T\n\n{}", paras.join("\n\n")), &config);
    assert!(doc.chunks.len() >= 3);
    for pair in doc.chunks.windows(2) {
        let last = pair[0].text.rsplit("\n\n").next().unwrap();
        assert!(pair[1].text.starts_with(last), "{pair:#?}");
    }
}

#[test]
fn plain_text_is_chunked_by_paragraph() {
    let doc = chunk_plain("first paragraph\n\nsecond one\n", &SMALL);
    assert_eq!(doc.chunks.len(), 1);
    assert_eq!(doc.chunks[0].text, "first paragraph\n\nsecond one");
    assert!(doc.chunks[0].heading.is_empty());
}

#[test]
fn setext_headings_and_closing_hashes() {
    let doc = chunk_markdown("Title\n=====\n\ntext\n\n## Sub ##\n\nmore\n", &SMALL);
    assert_eq!(doc.title, "Title");
    assert_eq!(doc.chunks[1].heading, vec!["Title", "Sub"]);
}

/// One generated block and what it must look like in the chunks.
#[derive(Debug, Clone)]
enum Gen {
    Heading(usize, String),
    Paragraph(String),
    Code(String),
    Table(Vec<String>),
    List(Vec<String>),
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{2,9}", "(猫|犬|東京|設定|バックアップ|毎晩|ディスク)",]
}

fn words(n: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(word(), n).prop_map(|w| w.join(" "))
}

fn block() -> impl Strategy<Value = Gen> {
    prop_oneof![
        (1usize..4, words(1..4)).prop_map(|(l, t)| Gen::Heading(l, t)),
        words(3..80).prop_map(|t| Gen::Paragraph(format!("{t}."))),
        prop::collection::vec(words(0..8), 1..30).prop_map(|lines| {
            // Lines that look like headings, lists and blank lines inside the fence.
            let body: Vec<String> = lines
                .iter()
                .enumerate()
                .map(|(i, l)| match i % 4 {
                    0 => format!("# {l}"),
                    1 => format!("- {l}"),
                    2 => String::new(),
                    _ => l.clone(),
                })
                .collect();
            Gen::Code(format!("```text\n{}\n```", body.join("\n")))
        }),
        prop::collection::vec(words(1..5), 1..12)
            .prop_map(|rows| Gen::Table(rows.iter().map(|r| format!("| {r} | x |")).collect())),
        prop::collection::vec(words(1..30), 1..6)
            .prop_map(|items| Gen::List(items.iter().map(|i| format!("- {i}")).collect())),
    ]
}

fn render(blocks: &[Gen]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            Gen::Heading(l, t) => out.push_str(&format!("{} {t}\n\n", "#".repeat(*l))),
            Gen::Paragraph(t) | Gen::Code(t) => out.push_str(&format!("{t}\n\n")),
            Gen::Table(rows) => {
                out.push_str(&format!("| h | v |\n|---|---|\n{}\n\n", rows.join("\n")));
            }
            Gen::List(items) => out.push_str(&format!("{}\n\n", items.join("\n"))),
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn whole_blocks_are_never_split_and_nothing_is_lost(
        blocks in prop::collection::vec(block(), 1..25),
        max in 100usize..600,
    ) {
        let config = ChunkConfig { max_chars: max, overlap_chars: max / 4 };
        let doc = chunk_markdown(&render(&blocks), &config);
        let mut path: Vec<(usize, String)> = Vec::new();
        for b in &blocks {
            let within = |needle: &str| doc.chunks.iter().any(|c| c.text.contains(needle));
            match b {
                Gen::Heading(l, t) => {
                    path.retain(|(x, _)| x < l);
                    path.push((*l, t.clone()));
                }
                Gen::Code(t) => prop_assert!(within(t), "code split: {t}"),
                Gen::Table(rows) => {
                    let table = format!("| h | v |\n|---|---|\n{}", rows.join("\n"));
                    prop_assert!(within(&table), "table split");
                }
                Gen::List(items) => {
                    for item in items {
                        prop_assert!(within(item), "item split: {item}");
                    }
                }
                Gen::Paragraph(t) => {
                    let heading: Vec<String> = path.iter().map(|(_, t)| t.clone()).collect();
                    for w in t.trim_end_matches('.').split(' ') {
                        prop_assert!(
                            doc.chunks.iter().any(|c| c.heading == heading && c.text.contains(w)),
                            "word {w} lost under {heading:?}"
                        );
                    }
                }
            }
        }
        for c in &doc.chunks {
            prop_assert!(!c.text.trim().is_empty());
            let n = c.text.chars().count();
            // Only a chunk holding a whole block may pass the limit.
            prop_assert!(n <= max || c.text.contains("```") || c.text.contains("| ") || c.text.starts_with("- ")
                || c.text.contains("\n- "), "chunk of {n} > {max}: {}", c.text);
        }
    }
}
