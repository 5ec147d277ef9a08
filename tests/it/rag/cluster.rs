//! The RAG lane in cluster mode, against real PostgreSQL and Redis: `coordinator docs
//! ingest` (a process of its own) and `POST /docs` (on `serve`) write into PostgreSQL, and
//! a `coordinator worker` process answers a `rag:<collection>` chat from there with its
//! citation; a document changed through `serve` is what the worker cites next. Runs when
//! `DATABASE_URL` and `REDIS_URL` are set.

use std::time::Duration;

use serde_json::{Value, json};

use super::BACKUP;
use crate::cluster::{
    cleanup, cluster_config, command, env, eventually, get_json, pg, serve_in_process,
    spawn_worker, worker_names,
};
use crate::helpers::{MODEL, spawn_fake, task_id};

/// Asks `model` through `serve`; the answer's text and the task id.
async fn ask(http: &reqwest::Client, base: &str, model: &str, question: &str) -> (String, String) {
    let res = http
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": model, "messages": [{"role": "user", "content": question}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-coordinator-queue"], "tasks:rag");
    let task_id = task_id(&res);
    let body: Value = res.json().await.unwrap();
    let text = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    (text, task_id)
}

#[tokio::test]
async fn a_worker_process_answers_from_documents_in_postgres() {
    let Some(env) = env() else { return };
    let fake = spawn_fake().await;
    let (base, stop, serve) = serve_in_process(cluster_config(&env, &env.redis)).await;
    let _worker = spawn_worker(&env, "nas-box", &fake);
    let http = reqwest::Client::new();
    eventually(
        Duration::from_secs(20),
        "the worker process shows up in /workers",
        || async {
            worker_names(&http, &base)
                .await
                .contains(&"nas-box".to_owned())
        },
    )
    .await;

    // The command line writes into PostgreSQL from a process of its own.
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("backup.md"), BACKUP).unwrap();
    let status = command(
        &env,
        &[
            "docs",
            "ingest",
            notes.to_str().unwrap(),
            "--collection",
            "notes",
        ],
    )
    .status()
    .await
    .unwrap();
    assert!(status.success());
    // And so does serve, for an upload.
    let res = http
        .post(format!("{base}/docs"))
        .json(&json!({"collection": "pets", "path": "cat.md", "content": "# Cat\n\n## Vet\n\nThe cat's vaccination appointment is booked every April.\n"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let listing = get_json(&http, &format!("{base}/docs")).await;
    let names: Vec<&str> = listing["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes", "pets"], "{listing}");

    let (text, task_id) = ask(&http, &base, "rag:notes", "When does the NAS backup run?").await;
    assert!(
        text.contains("Sources:\n- [1] notes/backup.md › Backup › NAS › Schedule"),
        "{text}"
    );
    let backend = fake.requests_to("/api/chat").pop().unwrap().body.unwrap();
    assert_eq!(backend["model"], MODEL);
    let user = backend["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        user.contains("The NAS backup runs every night at 02:00"),
        "{user}"
    );
    let pool = pg(&env).await;
    let (status, queue, worker): (String, String, Option<String>) = sqlx::query_as(&format!(
        "SELECT status, queue, worker_id FROM {}.tasks WHERE task_id = $1::uuid",
        env.schema
    ))
    .bind(&task_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (status.as_str(), queue.as_str(), worker.as_deref()),
        ("done", "tasks:rag", Some("nas-box"))
    );

    // A document changed through serve is what the worker process reads next.
    let res = http
        .post(format!("{base}/docs"))
        .json(&json!({"collection": "notes", "path": "backup.md", "content": BACKUP.replace("02:00", "04:15")}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        201,
        "an upload is its own document, next to the ingested file"
    );
    let res = http
        .delete(format!(
            "{base}/docs/notes?path={}",
            notes.join("backup.md").canonicalize().unwrap().display()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{:?}", res.text().await);
    let (text, _) = ask(&http, &base, "rag:notes", "When does the NAS backup run?").await;
    assert!(
        text.contains("Sources:\n- [1] backup.md › Backup › NAS › Schedule"),
        "{text}"
    );
    let backend = fake.requests_to("/api/chat").pop().unwrap().body.unwrap();
    let user = backend.to_string();
    assert!(user.contains("04:15") && !user.contains("02:00"), "{user}");

    stop.send(()).unwrap();
    serve.await.unwrap().unwrap();
    cleanup(&env).await;
}
