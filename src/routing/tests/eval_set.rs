//! The shipped eval (`eval/routing.jsonl`) and its thresholds.

use std::path::Path;

use crate::config::InternalTasksConfig;
use crate::routing::eval::{parse_cases, run_file};
use crate::routing::{Decider, RoutingConfig};

#[tokio::test]
async fn shipped_eval_meets_its_targets() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/routing.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(parse_cases(&text).unwrap().len() >= 150);
    let decider = Decider::new(RoutingConfig::default(), InternalTasksConfig::default());
    let report = run_file(&path, &decider).await.unwrap();
    println!("{report}");
    assert!(report.web.accuracy() >= 0.97, "{report}");
    assert!(report.domain.accuracy() >= 0.95, "{report}");
    assert_eq!(report.internal.correct, report.internal.total, "{report}");
    assert_eq!(report.internal_false_positives, 0, "{report}");
}

#[tokio::test]
async fn the_report_names_each_miss_with_its_reasons() {
    let text = r#"{"id":"wrong","prompt":"今日の柏市の天気は？","web":false,"domain":"code"}"#;
    let cases = parse_cases(text).unwrap();
    let decider = Decider::new(RoutingConfig::default(), InternalTasksConfig::default());
    let cat = crate::routing::eval::eval_catalog(&decider);
    let report = crate::routing::eval::run_cases(&decider, &cat, &cases)
        .await
        .unwrap();
    assert_eq!(report.web.correct, 0);
    assert_eq!(report.misses.len(), 2);
    let shown = report.to_string();
    assert!(
        shown.contains("line 1 [wrong] web: expected false, got true"),
        "{shown}"
    );
    assert!(
        shown.contains(r#"web_search: pos="天気" -> web"#),
        "{shown}"
    );
    assert!(parse_cases("{not json").is_err());
}
