//! Names the commit a build comes from, as `COORDINATOR_COMMIT` (for example `e74ee95`, or
//! `e74ee95+dirty` when the sources differ from it; `unknown` outside a git checkout):
//! `coordinator --version`, the start-up log line and the benchmarks' reports print it, so
//! a report names the binary it measured, not whatever the checkout holds by then.

use std::process::Command;

fn git(args: &[&str]) -> Option<std::process::Output> {
    Command::new("git").args(args).output().ok()
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"])
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    let name = match commit {
        Some(commit) => {
            let clean = git(&[
                "diff",
                "--quiet",
                "HEAD",
                "--",
                "src",
                "Cargo.toml",
                "Cargo.lock",
            ])
            .is_some_and(|o| o.status.success());
            if clean {
                commit
            } else {
                format!("{commit}+dirty")
            }
        }
        None => "unknown".to_owned(),
    };
    println!("cargo:rustc-env=COORDINATOR_COMMIT={name}");
    // Again when a commit is made or the sources change.
    for path in [
        ".git/HEAD",
        ".git/refs/heads",
        ".git/packed-refs",
        "src",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
}
