use super::budget::{Trim, prompt_room, trim};
use super::*;
use crate::chat::{ChatMessage, Role};

#[test]
fn japanese_counts_a_token_per_character_and_english_four_characters() {
    assert_eq!(estimate_text_tokens(""), 0);
    assert_eq!(estimate_text_tokens("abcd"), 1);
    assert_eq!(estimate_text_tokens("abcde"), 2);
    assert_eq!(estimate_text_tokens("会議のメモ"), 5);
    assert_eq!(estimate_text_tokens("会議 memo"), 2 + 2);
    // The fake machine counts the same way, plus four tokens around each message.
    let m = ChatMessage::new(Role::User, "会議のメモ");
    assert_eq!(message_tokens(&m), 5 + 4);
    assert_eq!(request_tokens(&[m.clone(), m]), 18);
}

/// The character-by-character count, as the estimate was first written (the byte count
/// must agree with it on every text).
fn counted_per_character(text: &str) -> u32 {
    let (wide, narrow) = text
        .chars()
        .fold((0u32, 0u32), |(w, n), c| match is_wide(c) {
            true => (w + 1, n),
            false => (w, n + 1),
        });
    wide + narrow.div_ceil(4)
}

proptest::proptest! {
    #[test]
    fn counting_ascii_runs_counts_as_decoding_characters(text in "([ -~]{0,19}[あ-ん→…é])*[ -~]{0,30}|[ -~\\n\\t]{0,300}|\\PC{0,120}|[a-z\u{3000}-\u{3040}\u{9ff0}-\u{ac10}\u{d7a0}-\u{d7ff}\u{f8f0}-\u{fb10}\u{fef0}-\u{fff0}\u{10000}-\u{10010}]{0,60}") {
        proptest::prop_assert_eq!(estimate_text_tokens(&text), counted_per_character(&text));
    }
}

#[test]
fn num_ctx_is_rounded_capped_and_at_least_ollamas_default() {
    assert_eq!(choose_num_ctx(100, None, None, 32_768, false), 4096);
    assert_eq!(choose_num_ctx(2048, None, None, 32_768, false), 4096);
    // Past the default, the whole window at once: a growing chat reloads once.
    assert_eq!(choose_num_ctx(5000, None, None, 32_768, false), 32_768);
    // Past half of it at the first load too: such a chat outgrows the default within a
    // turn or two, and would be loaded and reloaded.
    assert_eq!(choose_num_ctx(2049, None, None, 32_768, false), 32_768);
    // Capped by the window, even below the default.
    assert_eq!(choose_num_ctx(20_000, None, None, 16_384, false), 16_384);
    assert_eq!(choose_num_ctx(100, None, None, 2048, false), 2048);
}

#[test]
fn a_resident_window_that_holds_the_request_is_kept() {
    // Loaded at 12288: a small request keeps it (no reload).
    assert_eq!(
        choose_num_ctx(3000, None, Some(12_288), 16_384, false),
        12_288
    );
    // Resident with the default, which holds a request of more than half of it: kept.
    assert_eq!(choose_num_ctx(3000, None, Some(4096), 16_384, false), 4096);
    // Too small for this one: it grows to the whole window.
    assert_eq!(
        choose_num_ctx(9000, None, Some(8192), 16_384, false),
        16_384
    );
    assert_eq!(
        choose_num_ctx(5000, None, Some(4096), 16_384, false),
        16_384
    );
    // Loaded above what is allowed now (config changed): not reused.
    assert_eq!(
        choose_num_ctx(2000, None, Some(32_768), 16_384, false),
        4096
    );
    assert_eq!(
        choose_num_ctx(3000, None, Some(32_768), 16_384, false),
        16_384
    );
}

#[test]
fn a_model_loaded_wide_before_is_loaded_with_the_whole_window_at_once() {
    // A short prompt first: the whole window, not the default it would outgrow.
    assert_eq!(choose_num_ctx(100, None, None, 16_384, true), 16_384);
    // Resident already with a window that holds the request: kept.
    assert_eq!(choose_num_ctx(100, None, Some(4096), 16_384, true), 4096);
    // The client's own window still wins.
    assert_eq!(choose_num_ctx(100, Some(2048), None, 16_384, true), 2048);
}

#[test]
fn the_clients_own_num_ctx_wins_within_the_window() {
    assert_eq!(
        choose_num_ctx(9000, Some(2048), Some(8192), 16_384, false),
        2048
    );
    assert_eq!(
        choose_num_ctx(100, Some(65_536), None, 16_384, false),
        16_384
    );
}

#[test]
fn a_window_is_the_smaller_of_the_models_and_the_cap() {
    let w = |context_length, max_num_ctx| Window {
        context_length,
        max_num_ctx,
    };
    assert_eq!(w(Some(32_768), Some(16_384)).limit(), Some(16_384));
    assert_eq!(w(Some(8192), Some(16_384)).limit(), Some(8192));
    assert_eq!(w(None, Some(16_384)).limit(), Some(16_384));
    assert_eq!(w(Some(8192), None).limit(), Some(8192));
    assert_eq!(w(None, None).limit(), None);
}

#[test]
fn the_answer_keeps_its_room_but_never_more_than_half() {
    assert_eq!(answer_reserve(None), 1024);
    assert_eq!(answer_reserve(Some(200)), 200);
    assert_eq!(prompt_room(4096, 1024), 3072);
    assert_eq!(prompt_room(4096, 100_000), 2048);
}

/// A cost of `base` plus each kept turn's and item's tokens.
fn cost<'a>(base: u32, turns: &'a [u32], items: &'a [u32]) -> impl Fn(usize, &[usize]) -> u32 + 'a {
    move |first, kept| {
        base + turns[first..].iter().sum::<u32>() + kept.iter().map(|i| items[*i]).sum::<u32>()
    }
}

#[test]
fn what_fits_is_not_trimmed() {
    let got = trim(2, &[0.9, 0.5], 100, cost(10, &[20, 20], &[10, 10])).unwrap();
    assert_eq!(
        got,
        Trim {
            turns_dropped: 0,
            memory_kept: vec![0, 1],
            tokens: 70
        }
    );
}

#[test]
fn history_goes_oldest_first_before_any_memory() {
    let got = trim(3, &[0.9, 0.5], 45, cost(10, &[30, 20, 10], &[5, 5])).unwrap();
    assert_eq!(got.turns_dropped, 2);
    assert_eq!(got.memory_kept, vec![0, 1]);
    assert_eq!(got.tokens, 30);
}

#[test]
fn then_memory_goes_lowest_score_first() {
    let got = trim(1, &[0.5, 0.9, 0.2], 30, cost(10, &[40], &[10, 10, 10])).unwrap();
    assert_eq!(got.turns_dropped, 1);
    assert_eq!(got.memory_kept, vec![0, 1]);
    assert_eq!(got.tokens, 30);
    let got = trim(1, &[0.5, 0.9, 0.2], 20, cost(10, &[40], &[10, 10, 10])).unwrap();
    assert_eq!(got.memory_kept, vec![1]);
}

#[test]
fn a_prompt_that_cannot_fit_alone_is_an_error_with_its_size() {
    assert_eq!(trim(2, &[0.5], 50, cost(80, &[10, 10], &[10])), Err(80));
}
