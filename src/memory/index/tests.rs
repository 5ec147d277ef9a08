//! The index's unit tests.

use super::*;
use crate::domain::TaskId;

fn unit(dim: usize, hot: &[(usize, f32)]) -> Vec<f32> {
    let mut v = vec![0f32; dim];
    for (i, x) in hot {
        v[*i] = *x;
    }
    crate::memory::embed::normalize_l2(&mut v);
    v
}

fn item(thread: &str, vector: Vec<f32>) -> MemoryItem {
    MemoryItem {
        id: Uuid::now_v7(),
        person: crate::domain::Person::default(),
        thread_id: thread.into(),
        task_id: TaskId::new(),
        seq: 0,
        kind: ItemKind::Fact,
        text: format!("in {thread}"),
        subject: None,
        superseded_by: None,
        embedder: "test".into(),
        vector,
        created_at: chrono::Utc::now(),
    }
}

/// A vector held in bytes scores within `|q|₁ × scale / 2` of the exact cosine (each
/// dimension is off by at most half a step), which is under 0.002 for vectors with their
/// weight spread over many dimensions and under 0.006 for those with a few (a short
/// text's); a zero vector scores 0.
#[test]
fn quantized_vectors_keep_the_cosine_within_two_thousandths() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    for dim in [16, 256, 384, 1024] {
        for hot in [3, dim / 8, dim] {
            let mut a = vec![0f32; dim];
            let mut b = vec![0f32; dim];
            for i in 0..hot {
                a[(i * 7) % dim] = next();
                b[(i * 5) % dim] = next();
            }
            // Related vectors too, whose cosine is far from 0.
            let c: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + 0.3 * y).collect();
            for (x, y) in [(&a, &b), (&a, &c), (&c, &c)] {
                let (mut x, mut y) = (x.clone(), y.clone());
                crate::memory::embed::normalize_l2(&mut x);
                crate::memory::embed::normalize_l2(&mut y);
                let mut codes = Vec::new();
                let scale = search::quantize(&y, &mut codes);
                assert_eq!(codes.len(), dim);
                let held = Quantized {
                    codes: &codes,
                    scale,
                }
                .dot(&x);
                let exact = dot(&x, &y);
                let bound = x.iter().map(|v| v.abs()).sum::<f32>() * scale / 2.0;
                assert!(
                    (held - exact).abs() <= bound + 1e-6,
                    "{dim} {hot}: {held} vs {exact}"
                );
                let typical = if hot >= dim / 8 { 2e-3 } else { 6e-3 };
                assert!(
                    (held - exact).abs() < typical,
                    "{dim} {hot}: {held} vs {exact}"
                );
            }
        }
    }
    let mut codes = Vec::new();
    let zero = vec![0f32; 8];
    let scale = search::quantize(&zero, &mut codes);
    assert_eq!((scale, codes), (0.0, vec![0i8; 8]));
}

/// Ten items whose similarity to the query `e0` falls with their number.
fn ranked(dim: usize) -> (Index, Vec<Uuid>) {
    let mut index = Index::new(dim);
    let mut ids = Vec::new();
    for i in 0..10 {
        let thread = if i % 2 == 0 { "even" } else { "odd" };
        let it = item(thread, unit(dim, &[(0, 10.0 - i as f32), (1 + i, 3.0)]));
        ids.push(it.id);
        assert!(index.insert(it));
    }
    (index, ids)
}

fn ids(index: &Index, found: &[Scored]) -> Vec<Uuid> {
    found
        .iter()
        .map(|s| index.entry(s.slot).unwrap().id)
        .collect()
}

#[test]
fn top_k_is_best_first_and_threads_filter() {
    let dim = 19; // not a multiple of 8: the tail of the dot product counts too
    let (index, all) = ranked(dim);
    let q = unit(dim, &[(0, 1.0)]);
    let top = index.search(&Query::vector(&q), 3);
    assert_eq!(ids(&index, &top), all[..3].to_vec());
    assert!(top[0].score > top[1].score && top[1].score > top[2].score);
    assert_eq!(index.search(&Query::vector(&q), 50).len(), 10);
    assert!(index.search(&Query::vector(&q), 0).is_empty());

    let odd = index.search_thread(&Query::vector(&q), 2, "odd");
    assert_eq!(ids(&index, &odd), vec![all[1], all[3]]);
    assert!(
        index
            .search_thread(&Query::vector(&q), 2, "nobody")
            .is_empty()
    );
    let (mine, others) = index.search_split(&Query::vector(&q), 2, "even");
    assert_eq!(ids(&index, &mine), vec![all[0], all[2]]);
    assert_eq!(ids(&index, &others), vec![all[1], all[3]]);
    assert!(
        index
            .search(&Query::vector(&unit(4, &[(0, 1.0)])), 3)
            .is_empty(),
        "wrong dimension"
    );
}

#[test]
fn remove_keeps_the_other_vectors_in_place() {
    let dim = 16;
    let (mut index, all) = ranked(dim);
    let q = unit(dim, &[(0, 1.0)]);
    assert!(index.remove(&all[0]));
    assert!(!index.remove(&all[0]));
    assert!(index.remove(&all[9]));
    assert_eq!(index.len(), 8);
    assert!(!index.contains(&all[0]));
    let top = index.search(&Query::vector(&q), 8);
    assert_eq!(ids(&index, &top), all[1..9].to_vec());
    // Scores after the move equal a fresh computation from the item's own vector.
    for s in &top {
        let slot_id = index.entry(s.slot).unwrap().id;
        let i = all.iter().position(|x| *x == slot_id).unwrap();
        let own = unit(dim, &[(0, 10.0 - i as f32), (1 + i, 3.0)]);
        let mut codes = Vec::new();
        let scale = search::quantize(&own, &mut codes);
        let expected = Quantized {
            codes: &codes,
            scale,
        }
        .dot(&q);
        assert_eq!(s.score, expected);
        assert!((s.score - dot(&q, &own)).abs() < 6e-3);
    }
    assert!(
        !index.insert(item("x", vec![1.0; 3])),
        "wrong dimension is refused"
    );
}

/// Facts and other items live in two arenas; whatever is removed, every item left is
/// found by its own vector, in its own slot.
#[test]
fn removals_keep_both_arenas_right() {
    let dim = 16;
    let mut index = Index::new(dim);
    let mut live = Vec::new();
    for i in 0..40usize {
        let mut it = item(
            if i % 3 == 0 { "a" } else { "b" },
            unit(dim, &[(i % dim, 1.0), ((i * 7 + 3) % dim, 0.5 + i as f32)]),
        );
        it.kind = if i % 2 == 0 {
            ItemKind::Fact
        } else {
            ItemKind::Exchange
        };
        it.text = format!("item {i}");
        live.push((it.id, it.vector.clone()));
        assert!(index.insert(it));
    }
    let mut state = 7u64;
    while live.len() > 5 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let (id, _) = live.swap_remove((state >> 33) as usize % live.len());
        assert!(index.remove(&id));
        for (id, vector) in &live {
            let top = index.search(&Query::vector(vector), 1);
            let found = index.entry(top[0].slot).unwrap();
            // Its own vector, held in bytes (see `quantized_vectors_keep_the_cosine…`).
            assert!((top[0].score - 1.0).abs() < 6e-3, "{top:?}");
            assert_eq!(found.id, *id);
        }
    }
    assert_eq!(index.len(), 5);
}

#[test]
fn dot_matches_the_naive_sum() {
    let a: Vec<f32> = (0..37).map(|i| (i as f32).sin()).collect();
    let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).cos()).collect();
    let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    assert!((dot(&a, &b) - naive).abs() < 1e-4);
}

/// A fact of another thread with `text`, `vector` and no subject.
fn fact(thread: &str, text: &str, vector: Vec<f32>) -> MemoryItem {
    let mut it = item(thread, vector);
    it.text = text.to_owned();
    it
}

/// Among thousands of facts, a recall scores those that share a term with the question
/// and finds the one it asks about; a fact that shares nothing is not scored, however
/// close its vector.
#[test]
fn only_facts_sharing_a_term_or_concept_are_scored() {
    let dim = 16;
    let mut index = Index::new(dim);
    for i in 0..3000 {
        let v = unit(dim, &[(i % dim, 1.0), ((i * 5 + 1) % dim, 0.3)]);
        assert!(index.insert(fact("old", &format!("widget sample {i}"), v)));
    }
    let q = unit(dim, &[(0, 1.0), (1, 1.0)]);
    let router = fact(
        "old",
        "My router is a Netgear Nighthawk",
        unit(dim, &[(2, 1.0)]),
    );
    let lookalike = fact("old", "zzz qqq", q.clone());
    let (router_id, lookalike_id) = (router.id, lookalike.id);
    assert!(index.insert(router) && index.insert(lookalike));

    let analysis = crate::memory::lexical::analyze("Which router do I have?");
    let query = Query::hybrid(&q, &analysis, 0.9);
    let candidates = index.candidates(&query, None).unwrap();
    let slot_of = |id: Uuid| (0..index.len()).find(|s| index.entry(*s).unwrap().id == id);
    assert!(candidates.contains(&slot_of(router_id).unwrap()));
    assert!(!candidates.contains(&slot_of(lookalike_id).unwrap()));
    assert!(candidates.len() < 10, "{} candidates", candidates.len());

    let (mine, others) = index.search_split(&query, 5000, "new");
    assert!(mine.is_empty());
    let found = ids(&index, &others);
    assert_eq!(found.first(), Some(&router_id));
    assert!(
        !found.contains(&lookalike_id),
        "scored without a shared term"
    );
    // On vectors alone there are no terms to choose by: every fact is scored.
    let (_, others) = index.search_split(&Query::vector(&q), 5000, "new");
    assert_eq!(others.len(), 3002);
    assert_eq!(ids(&index, &others)[0], lookalike_id);
}

/// However many facts share the question's terms, a recall scores at most
/// [`MAX_CANDIDATES`] of them, those holding its rarest term first.
#[test]
fn candidates_are_bounded_and_the_rarest_term_comes_first() {
    let dim = 8;
    let mut index = Index::new(dim);
    for i in 0..2000 {
        let v = unit(dim, &[(i % dim, 1.0)]);
        assert!(index.insert(fact("old", &format!("widget sample {i}"), v)));
    }
    let rare = fact("old", "widget nighthawk", unit(dim, &[(1, 1.0)]));
    let rare_id = rare.id;
    assert!(index.insert(rare));
    // One of the person's facts in the asking thread is its own: not a candidate.
    assert!(index.insert(fact("mine", "widget here", unit(dim, &[(2, 1.0)]))));

    let analysis = crate::memory::lexical::analyze("widget nighthawk");
    let q = unit(dim, &[(0, 1.0)]);
    let query = Query::hybrid(&q, &analysis, 0.9);
    let candidates = index.candidates(&query, index.thread_numbers.get("mine").copied());
    let candidates = candidates.unwrap();
    assert_eq!(candidates.len(), MAX_CANDIDATES);
    assert_eq!(index.entry(candidates[0]).unwrap().id, rare_id);
    assert!(
        candidates
            .iter()
            .all(|s| index.item(*s).unwrap().thread_id == "old")
    );
    let (mine, others) = index.search_split(&query, 3, "mine");
    assert_eq!(mine.len(), 1);
    assert_eq!(ids(&index, &others)[0], rare_id);
}
