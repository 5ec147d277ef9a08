//! What every [`DocStore`] must do; each store's tests call [`documents`].

use std::collections::BTreeMap;

use chrono::Utc;

use super::{DocStore, NewChunk, NewDocument};
use crate::docs::Collection;
use crate::docs::terms::{query_terms, terms};

fn chunk(heading: &str, text: &str) -> NewChunk {
    NewChunk {
        heading: heading.to_owned(),
        text: text.to_owned(),
        embedder: "test".to_owned(),
        vector: vec![0.5, -0.25, 1.0],
        terms: terms(&format!("{heading} {text}")),
    }
}

fn doc(collection: &str, path: &str, chunks: Vec<NewChunk>) -> NewDocument {
    NewDocument {
        collection: Collection::parse(collection).unwrap(),
        path: path.to_owned(),
        display: path.trim_start_matches('/').to_owned(),
        title: "T".to_owned(),
        metadata: BTreeMap::from([("tags".to_owned(), "a, b".to_owned())]),
        hash: format!("h-{path}-{}", chunks.len()),
        chunks,
        ingested_at: Utc::now(),
    }
}

pub async fn documents(s: &dyn DocStore) {
    let notes = Collection::parse("notes").unwrap();
    let manuals = Collection::parse("manuals").unwrap();
    let g0 = s.generation().await.unwrap();
    s.put(&doc(
        "notes",
        "/n/backup.md",
        vec![
            chunk("Backup › NAS", "毎晩二時にNASのバックアップが走ります"),
            chunk("Backup › Cloud", "the cloud copy runs weekly on sunday"),
        ],
    ))
    .await
    .unwrap();
    s.put(&doc(
        "manuals",
        "/m/router.md",
        vec![chunk("Router", "reset the router with the pin")],
    ))
    .await
    .unwrap();
    let g1 = s.generation().await.unwrap();
    assert!(g1 > g0);

    assert_eq!(
        s.collections().await.unwrap(),
        [manuals.clone(), notes.clone()]
    );
    let listed = s.documents(None).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].collection, manuals);
    assert_eq!(listed[1].chunks, 2);
    assert_eq!(listed[1].metadata["tags"], "a, b");
    assert_eq!(s.documents(Some(&notes)).await.unwrap().len(), 1);

    // Japanese by its bigrams, English by its words; best match first; collections apart.
    let hits = s
        .text_search(Some(&notes), &query_terms("バックアップ"), 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    let found = s.chunks(&hits).await.unwrap();
    assert_eq!(found[0].heading, "Backup › NAS");
    assert_eq!(found[0].display, "n/backup.md");
    let hits = s
        .text_search(None, &query_terms("weekly cloud router"), 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
    let first = s.chunks(&hits[..1]).await.unwrap();
    assert_eq!(first[0].heading, "Backup › Cloud", "two terms beat one");
    assert!(
        s.text_search(Some(&manuals), &query_terms("weekly"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(s.text_search(None, &[], 10).await.unwrap().is_empty());

    let vectors = s.vectors("test").await.unwrap();
    assert_eq!(vectors.len(), 3);
    assert_eq!(vectors[0].vector, vec![0.5, -0.25, 1.0]);
    assert!(s.vectors("other").await.unwrap().is_empty());

    // Replacing a document drops its old chunks from both indexes.
    let old: Vec<i64> = vectors
        .iter()
        .filter(|v| v.collection == notes)
        .map(|v| v.id)
        .collect();
    s.put(&doc(
        "notes",
        "/n/backup.md",
        vec![chunk("Backup", "now at three")],
    ))
    .await
    .unwrap();
    assert!(s.chunks(&old).await.unwrap().is_empty());
    assert!(
        s.text_search(None, &query_terms("バックアップ"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.text_search(None, &query_terms("three"), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(s.documents(Some(&notes)).await.unwrap()[0].chunks, 1);
    assert!(s.generation().await.unwrap() > g1);

    // Forgetting: one file, then a whole collection; nothing found afterwards.
    assert_eq!(s.forget(&notes, Some("/n/missing.md")).await.unwrap(), 0);
    assert_eq!(s.forget(&notes, Some("/n/backup.md")).await.unwrap(), 1);
    assert!(
        s.text_search(None, &query_terms("three"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    s.put(&doc("manuals", "/m/nas.md", vec![chunk("NAS", "disks")]))
        .await
        .unwrap();
    assert_eq!(s.forget(&manuals, None).await.unwrap(), 2);
    assert!(s.documents(None).await.unwrap().is_empty());
    assert!(s.collections().await.unwrap().is_empty());
    assert!(s.vectors("test").await.unwrap().is_empty());
}
