//! The code in the guides and recipes works as a reader copies it.
//!
//! `src/lib.rs` compiles (and, where Redis is enough, runs) every Rust block as a doctest;
//! this file checks what a doctest cannot: that each page lists, in a `toml` block, every
//! crate its Rust blocks name (with the features they need), that no block hides lines
//! (`# ` lines are invisible on GitHub) or is left uncompiled (`ignore`), and that the Node
//! snippet of getting-started runs when saved as the file it names.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

/// The pages whose code a reader copies.
fn pages() -> Vec<PathBuf> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut pages = vec![
        docs.join("scaling.md"),
        docs.join("supervision.md"),
        docs.join("telemetry.md"),
    ];
    for dir in ["guides", "recipes"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(docs.join(dir))
            .expect("docs dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        found.sort();
        pages.extend(found);
    }
    pages
}

/// The fenced blocks of `markdown`: (info string, body).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in markdown.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) => current = Some((info.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => out.extend(current.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// Library names of every package in the workspace's lock file (`-` as `_`): the crates a
/// block could name.
fn known_crates() -> BTreeSet<String> {
    let lock = include_str!("../../Cargo.lock");
    lock.lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .map(|n| n.replace('-', "_"))
        .filter(|n| !["std", "core", "alloc"].contains(&n.as_str()))
        .collect()
}

/// The crates `code` names as the first segment of a path (`serde::Deserialize`,
/// `#[tokio::main]`, `use ractor::Actor`).
fn crates_named(code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let bytes = code.as_bytes();
    let mut named = BTreeSet::new();
    let mut i = 0;
    while let Some(at) = code[i..].find("::") {
        let end = i + at;
        let start = code[..end]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |p| p + 1);
        let word = &code[start..end];
        let preceded_by_path = start >= 2 && &bytes[start - 2..start] == b"::";
        let preceded_by_dot = start >= 1 && bytes[start - 1] == b'.';
        if !word.is_empty() && !preceded_by_path && !preceded_by_dot && known.contains(word) {
            named.insert(word.to_owned());
        }
        i = end + 2;
    }
    named
}

/// Dependencies listed in the page's `toml` blocks: crate name (`-` as `_`) → its line.
fn listed(blocks: &[(String, String)]) -> BTreeMap<String, String> {
    let mut deps = BTreeMap::new();
    for (_, body) in blocks.iter().filter(|(info, _)| info == "toml") {
        for line in body.lines() {
            let Some((name, _)) = line.split_once('=') else {
                continue;
            };
            let name = name.trim();
            if !name.is_empty() && !name.starts_with('#') && !name.starts_with('[') {
                deps.insert(name.replace('-', "_"), line.to_owned());
            }
        }
    }
    deps
}

/// This crate's dependencies (`-` as `_`): what the doctests of `docs/` compile against.
fn doctest_dependencies() -> BTreeSet<String> {
    let manifest = include_str!("../Cargo.toml");
    manifest
        .lines()
        .filter_map(|l| l.split_once(['=', '.']).map(|(name, _)| name.trim()))
        .filter(|n| !n.is_empty() && !n.starts_with(['#', '[']))
        .map(|n| n.replace('-', "_"))
        .collect()
}

#[test]
fn every_rust_block_lists_its_dependencies_and_hides_nothing() {
    let known = known_crates();
    let compiled_with = doctest_dependencies();
    let mut problems = BTreeSet::new();
    for page in pages() {
        let name = page
            .file_name()
            .expect("file")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&page).expect("page");
        let blocks = blocks(&text);
        let deps = listed(&blocks);
        for krate in deps.keys() {
            if !compiled_with.contains(krate) {
                problems.insert(format!(
                    "{name}: lists `{krate}`, which integration-tests/Cargo.toml lacks, so the doctests \
                     do not compile against it"
                ));
            }
        }
        for (info, body) in blocks.iter().filter(|(info, _)| info.starts_with("rust")) {
            if info.split(',').any(|a| a == "ignore") {
                problems.insert(format!(
                    "{name}: a block is `ignore`, so nothing compiles it"
                ));
            }
            for line in body.lines() {
                if line == "#" || line.trim_start().starts_with("# ") {
                    problems.insert(format!("{name}: hidden line `{line}`"));
                }
            }
            for krate in crates_named(body, &known) {
                if !deps.contains_key(&krate) {
                    problems.insert(format!("{name}: uses `{krate}` but does not list it"));
                }
            }
            let feature = |krate: &str, needs: &[&str]| {
                let line = deps.get(krate).map_or("", String::as_str);
                needs.iter().all(|f| line.contains(&format!("\"{f}\"")))
                    || line.contains("\"full\"")
            };
            if body.contains("tokio::main") && !feature("tokio", &["macros", "rt-multi-thread"]) {
                problems.insert(format!(
                    "{name}: `#[tokio::main]` needs tokio's `macros` and `rt-multi-thread`"
                ));
            }
            if body.contains("tokio::test") && !feature("tokio", &["macros", "rt"]) {
                problems.insert(format!("{name}: `#[tokio::test]` needs tokio's `macros`"));
            }
            let derives_serde = body.lines().any(|l| {
                l.contains("derive(") && (l.contains("Deserialize") || l.contains("Serialize"))
            });
            if derives_serde && !feature("serde", &["derive"]) {
                problems.insert(format!(
                    "{name}: deriving serde traits needs serde's `derive` feature"
                ));
            }
            if body.contains("ractor_bullmq::testing") && !feature("ractor_bullmq", &["test-util"])
            {
                problems.insert(format!(
                    "{name}: `ractor_bullmq::testing` needs the `test-util` feature"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}",
        Vec::from_iter(problems).join("\n")
    );
}

/// The first `js` block of getting-started, saved as the file its first line names
/// (`// inspect.js …`), runs against a job added from Rust and prints it.
#[tokio::test]
async fn the_getting_started_node_snippet_runs_as_saved() -> Result<()> {
    if !common::node_available() {
        return Ok(());
    }
    if common::redis_url().trim_end_matches('/') != "redis://127.0.0.1:6379" {
        eprintln!("!!! SKIPPING: the snippet connects to 127.0.0.1:6379, REDIS_URL is elsewhere");
        return Ok(());
    }
    let guide = include_str!("../../docs/guides/getting-started.md");
    let (_, script) = blocks(guide)
        .into_iter()
        .find(|(info, _)| info == "js")
        .context("no js block")?;
    let file = script
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("// "))
        .and_then(|l| l.split_whitespace().next())
        .context("the first line names the file")?
        .trim_end_matches(':')
        .to_owned();
    assert!(file.ends_with(".js"), "{file}");

    let queue_name = common::unique_queue("docs-node-snippet");
    let queue = common::open_queue(&queue_name).await?;
    let job = queue
        .add("welcome", json!({ "to": "ada@example.com" }))
        .attempts(3)
        .await?;

    let dir = std::env::temp_dir().join(&queue_name);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(&file), &script)?;
    let output = tokio::process::Command::new("node")
        .arg(&file)
        .arg(&queue_name)
        .arg(job.id())
        .current_dir(&dir)
        // As if `npm install bullmq@6.7.0` had run in that directory.
        .env("NODE_PATH", common::node_dir().join("node_modules"))
        .kill_on_drop(true)
        .output()
        .await?;
    std::fs::remove_dir_all(&dir)?;
    common::cleanup(&queue_name).await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "node {file} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("welcome "), "{stdout}");
    assert!(stdout.contains(r#"{"to":"ada@example.com"}"#), "{stdout}");
    assert!(stdout.contains(r#""attempts":3"#), "{stdout}");
    assert!(stdout.trim_end().ends_with("waiting"), "{stdout}");
    Ok(())
}
