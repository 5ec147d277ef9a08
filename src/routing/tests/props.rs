//! Property tests: no panic on any input, any length is decided, and short plain questions
//! are never taken for Open WebUI tasks.

use proptest::prelude::*;

use super::*;
use crate::routing::internal::{TurnKind, detect};

fn decide_blocking(
    turn: &Turn,
) -> Result<crate::routing::RouteDecision, crate::routing::RouteError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(decider().decide(turn, &two_models()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_prompt_is_decided(prompt in "\\PC{1,400}", stream in any::<bool>(), max in proptest::option::of(0u32..2000)) {
        prop_assume!(!prompt.trim().is_empty());
        let turn = request(vec![ChatMessage::user(prompt)], stream, None, max, "auto");
        let d = decide_blocking(&turn).unwrap();
        prop_assert!(!d.reasons.is_empty());
    }

    #[test]
    fn huge_non_ascii_prompts_are_decided(unit in "[あ-んア-ン漢字a-z ?\\n`]{1,8}", reps in 1usize..40_000) {
        let prompt = format!("x{}", unit.repeat(reps));
        let d = decide_blocking(&user_turn(&prompt)).unwrap();
        prop_assert!(d.domain.as_str() == "code" || d.domain.as_str() == "general");
    }

    #[test]
    fn short_plain_questions_are_never_internal_tasks(
        q in "[a-zA-Z0-9あ-んア-ン一-龯 、。,.!?？]{1,120}",
        stream in any::<bool>(),
        max in proptest::option::of(prop_oneof![Just(4u32), Just(1000u32), 1u32..4096]),
    ) {
        prop_assume!(!q.trim().is_empty());
        let turn = request(vec![ChatMessage::user(q)], stream, None, max, "auto");
        let is_user = matches!(detect(&turn), TurnKind::User { .. });
        prop_assert!(is_user);
    }
}
