use std::sync::Arc;

use super::*;
use crate::docs::retrieve::Retriever;
use crate::docs::store::sqlite::SqliteDocStore;

async fn store(dir: &Path) -> Arc<dyn DocStore> {
    let tasks = crate::store::sqlite::SqliteStore::open(&dir.join("t.db"))
        .await
        .unwrap();
    Arc::new(SqliteDocStore::new(tasks.pool().clone()))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const NAS: &str = "---\ntitle: Backup\n---\n# Backup\n\n## NAS\n\n### Schedule\n\nThe NAS backup runs every night at 02:00 to the external disk.\n\n## Cloud\n\nPhotos are copied to the cloud weekly.\n";
const JA: &str = "# 猫\n\n## ごはん\n\n猫のごはんは朝七時と夜七時に一回ずつあげる。\n\n## 病院\n\n動物病院の予約は毎年四月にワクチン接種のため取る。\n";

async fn ingest(s: &dyn DocStore, roots: &[PathBuf], sync: bool) -> IngestReport {
    let notes = Collection::parse("notes").unwrap();
    let mut calls = Vec::new();
    let report = ingest_paths(
        s,
        &DocsConfig::default(),
        &notes,
        roots,
        sync,
        &mut |d, t| calls.push((d, t)),
    )
    .await
    .unwrap();
    if let Some(last) = calls.last() {
        assert_eq!(last.0, last.1, "progress reaches the total");
    }
    report
}

#[tokio::test]
async fn ingest_is_idempotent_replaces_changes_and_syncs_removals() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path()).await;
    let root = dir.path().join("notes");
    write(&root.join("backup.md"), NAS);
    write(&root.join("pets/cat.md"), JA);
    write(&root.join("todo.txt"), "buy disks\n\ncall the ISP");
    write(&root.join("image.png"), "not text");
    write(&root.join(".git/config.md"), "# hidden");
    std::fs::write(root.join("latin1.txt"), [0xff, 0xfe, 0x41]).unwrap();
    let roots = vec![root.clone()];

    let first = ingest(s.as_ref(), &roots, false).await;
    assert_eq!((first.added, first.replaced, first.unchanged), (3, 0, 0));
    assert_eq!(first.skipped.len(), 1, "{:?}", first.skipped);
    assert!(first.chunks >= 5);
    let docs = s.documents(None).await.unwrap();
    let displays: Vec<&str> = docs.iter().map(|d| d.display.as_str()).collect();
    assert!(displays.contains(&"notes/pets/cat.md"), "{displays:?}");
    let cat = docs
        .iter()
        .find(|d| d.display == "notes/pets/cat.md")
        .unwrap();
    assert_eq!(cat.title, "猫");

    let again = ingest(s.as_ref(), &roots, false).await;
    assert_eq!(
        (again.added, again.replaced, again.unchanged, again.chunks),
        (0, 0, 3, 0)
    );

    write(&root.join("backup.md"), &NAS.replace("02:00", "03:00"));
    std::fs::remove_file(root.join("todo.txt")).unwrap();
    let kept = ingest(s.as_ref(), &roots, false).await;
    assert_eq!((kept.replaced, kept.unchanged, kept.removed), (1, 1, 0));
    assert_eq!(
        s.documents(None).await.unwrap().len(),
        3,
        "without --sync nothing is dropped"
    );
    let synced = ingest(s.as_ref(), &roots, true).await;
    assert_eq!((synced.unchanged, synced.removed), (2, 1));
    assert_eq!(s.documents(None).await.unwrap().len(), 2);

    // `sync` stays under the roots it was given.
    let other = dir.path().join("other.md");
    write(&other, "# Other\n\ntext");
    ingest(s.as_ref(), std::slice::from_ref(&other), false).await;
    let only_pets = ingest(s.as_ref(), &[root.join("pets")], true).await;
    assert_eq!(only_pets.removed, 0);
    assert_eq!(s.documents(None).await.unwrap().len(), 3);
}

#[tokio::test]
async fn bad_paths_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path()).await;
    let good = dir.path().join("a.md");
    write(&good, "# A\n\ntext");
    let png = dir.path().join("b.png");
    write(&png, "x");
    let notes = Collection::parse("notes").unwrap();
    for bad in [png, dir.path().join("missing.md")] {
        let err = ingest_paths(
            s.as_ref(),
            &DocsConfig::default(),
            &notes,
            &[good.clone(), bad],
            false,
            &mut |_, _| {},
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                err,
                DocsError::UnsupportedKind { .. } | DocsError::Missing { .. }
            ),
            "{err}"
        );
    }
    assert!(s.documents(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn hybrid_search_finds_the_right_heading_in_both_languages() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path()).await;
    let root = dir.path().join("notes");
    write(&root.join("backup.md"), NAS);
    write(&root.join("cat.md"), JA);
    ingest(s.as_ref(), &[root], false).await;
    let r = Retriever::new(s.clone());
    let min = DocsConfig::default().min_score;
    let hits = r
        .search(None, "when does the NAS backup run?", 3, min)
        .await
        .unwrap();
    assert_eq!(
        hits[0].chunk.heading, "Backup › NAS › Schedule",
        "{hits:#?}"
    );
    assert!(hits[0].text_rank.is_some() && hits[0].vector_rank.is_some());
    let hits = r
        .search(None, "動物病院の予約はいつ?", 3, min)
        .await
        .unwrap();
    assert_eq!(hits[0].chunk.heading, "猫 › 病院", "{hits:#?}");
    assert_eq!(hits[0].chunk.display, "notes/cat.md");
    // A collection that holds nothing finds nothing; an unrelated question neither.
    let empty = Collection::parse("manuals").unwrap();
    assert!(
        r.search(Some(&empty), "NAS backup", 3, min)
            .await
            .unwrap()
            .is_empty()
    );
    let none = r
        .search(None, "quantum chromodynamics lecture", 3, min)
        .await
        .unwrap();
    assert!(none.is_empty(), "{none:#?}");
    // A question that shares one word and many letters with a chunk is not answered by
    // it: the similarity alone would take it (the eval's "quantum chromodynamics lecture
    // notes" against README's documents section).
    let notes = Collection::parse("notes").unwrap();
    let source = upload_source(
        "notes.md",
        "# Notes\n\n## Lecture notes\n\nMy lecture notes about chromatic scales are kept in the notes folder.\n".to_owned(),
    )
    .unwrap();
    ingest_upload(s.as_ref(), &DocsConfig::default(), &notes, &source)
        .await
        .unwrap();
    let one_word = r
        .search(None, "quantum electrodynamics seminar notes", 3, min)
        .await
        .unwrap();
    assert!(one_word.is_empty(), "{one_word:#?}");
    let all_words = r
        .search(None, "where are my lecture notes kept", 3, min)
        .await
        .unwrap();
    assert_eq!(all_words[0].chunk.display, "notes.md", "{all_words:#?}");
    // A change in the store is seen by the next search (the vectors are reloaded).
    s.forget(&notes, None).await.unwrap();
    assert!(
        r.search(None, "NAS backup", 3, min)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn an_upload_is_keyed_by_its_name_and_idempotent_like_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path()).await;
    let notes = Collection::parse("notes").unwrap();
    let config = DocsConfig::default();
    let source = upload_source("pets/cat.md", JA.to_owned()).unwrap();
    assert_eq!(
        (source.path.as_str(), source.kind),
        ("upload:pets/cat.md", Kind::Markdown)
    );
    let first = ingest_upload(s.as_ref(), &config, &notes, &source)
        .await
        .unwrap();
    assert_eq!(first.outcome, Outcome::Added);
    assert!(first.chunks >= 2);
    let again = ingest_upload(s.as_ref(), &config, &notes, &source)
        .await
        .unwrap();
    assert_eq!((again.outcome, again.chunks), (Outcome::Unchanged, 0));
    let changed = upload_source("pets/cat.md", JA.replace("七時", "八時")).unwrap();
    let replaced = ingest_upload(s.as_ref(), &config, &notes, &changed)
        .await
        .unwrap();
    assert_eq!(replaced.outcome, Outcome::Replaced);
    let docs = s.documents(None).await.unwrap();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].display, "pets/cat.md");

    for (name, content) in [
        ("", "x"),
        (" a.md", "x"),
        ("a.pdf", "x"),
        ("a\n.md", "x"),
        ("a.md", " \n"),
    ] {
        assert!(upload_source(name, content.to_owned()).is_err(), "{name:?}");
    }
    assert!(
        upload_source(
            &format!("{}.md", "x".repeat(MAX_UPLOAD_NAME_CHARS)),
            "x".into()
        )
        .is_err()
    );
}

#[test]
fn a_document_is_named_by_its_key_or_its_uploaded_name() {
    let listed = ["/home/me/notes/a.md", "upload:a.md", "upload:b.md"];
    let find = |given| resolve_key(listed, given);
    assert_eq!(
        find("/home/me/notes/a.md").as_deref(),
        Some("/home/me/notes/a.md")
    );
    assert_eq!(find("upload:a.md").as_deref(), Some("upload:a.md"));
    assert_eq!(find("b.md").as_deref(), Some("upload:b.md"));
    assert_eq!(find("c.md"), None);
}
