//! `docs/compatibility.md`, section "Node methods → Rust items", cannot fall behind the oracle
//! (issue 22 §2): the public methods and accessors of Node 6.7.0's classes are read from their
//! `.d.ts` files (`node/node_modules/bullmq/dist/esm/classes/`), and every one must have exactly
//! one row in its class's table, every row must name a method of that class, and every status
//! must be one of the four the section defines. The Rust items a row names (`Type::method`)
//! must exist in the crates' sources, and the tests a
//! row names (`file.rs::test`) must exist. No Redis needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each table of the section and the `.d.ts` files (and class names) whose methods it lists.
const TABLES: [(&str, &[(&str, &str)]); 7] = [
    (
        "Queue (with `QueueGetters` and `QueueBase`)",
        &[
            ("queue-base", "QueueBase"),
            ("queue-getters", "QueueGetters"),
            ("queue", "Queue"),
        ],
    ),
    ("Job", &[("job", "Job")]),
    ("Worker", &[("worker", "Worker")]),
    ("FlowProducer", &[("flow-producer", "FlowProducer")]),
    ("QueueEvents", &[("queue-events", "QueueEvents")]),
    (
        "QueueEventsProducer",
        &[("queue-events-producer", "QueueEventsProducer")],
    ),
    ("JobScheduler", &[("job-scheduler", "JobScheduler")]),
];

const STATUSES: [&str; 4] = ["same", "differs", "not supported", "missing"];

const SECTION: &str = "## Node methods → Rust items";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

fn classes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("node/node_modules/bullmq/dist/esm/classes")
}

/// The public methods and accessors declared in the body of `export declare class {class}`
/// (constructors, `private` and `protected` members and properties left out), each once.
fn public_methods(dts: &str, class: &str) -> BTreeSet<String> {
    let start = format!("export declare class {class}");
    let mut lines = dts.lines().skip_while(|line| {
        !(line.starts_with(&start) && line[start.len()..].starts_with(['<', ' ']))
    });
    assert!(lines.next().is_some(), "no class {class} in its .d.ts");
    let mut names = BTreeSet::new();
    for line in lines.take_while(|line| *line != "}") {
        // Members sit at four spaces; deeper lines continue a signature or a doc comment.
        let Some(member) = line.strip_prefix("    ") else {
            continue;
        };
        if !member.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            continue;
        }
        let mut rest = member;
        for modifier in ["static ", "readonly ", "async "] {
            rest = rest.strip_prefix(modifier).unwrap_or(rest);
        }
        if rest.starts_with("private ") || rest.starts_with("protected ") {
            continue;
        }
        for accessor in ["get ", "set "] {
            rest = rest.strip_prefix(accessor).unwrap_or(rest);
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(end);
        if name.is_empty() || name == "constructor" {
            continue;
        }
        if after.starts_with('(') || after.starts_with('<') {
            names.insert(name.to_string());
        }
    }
    names
}

/// One row of a table: the Node method (first backticked word of the first cell), the Rust
/// item cell and the status cell.
#[derive(Debug)]
struct Row {
    method: String,
    rust: String,
    status: String,
    proof: String,
}

/// The tables of the section, by their `###` title.
fn tables(doc: &str) -> BTreeMap<String, Vec<Row>> {
    let section = doc
        .split_once(SECTION)
        .unwrap_or_else(|| panic!("docs/compatibility.md has no section {SECTION:?}"))
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut out: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in section.lines() {
        if let Some(title) = line.strip_prefix("### ") {
            current = Some(title.trim().to_string());
            out.entry(title.trim().to_string()).or_default();
            continue;
        }
        let (Some(title), true) = (&current, line.starts_with("| `")) else {
            continue;
        };
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        assert_eq!(cells.len(), 4, "{title}: a row needs 4 cells: {line}");
        let method = cells[0]
            .split('`')
            .nth(1)
            .unwrap_or_else(|| panic!("{title}: no method in {line}"))
            .to_string();
        out.get_mut(title).expect("a table").push(Row {
            method,
            rust: cells[1].to_string(),
            status: cells[2].to_string(),
            proof: cells[3].to_string(),
        });
    }
    out
}

/// Every `Type::method` named in backticks in `cell` (module paths and variants left out).
fn rust_items(cell: &str) -> Vec<(String, String)> {
    let mut items = Vec::new();
    for code in cell.split('`').skip(1).step_by(2) {
        let mut rest = code;
        while let Some(at) = rest.find("::") {
            let before = &rest[..at];
            let ty_start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let ty = &before[ty_start..];
            let after = &rest[at + 2..];
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let method = &after[..end];
            if ty.starts_with(|c: char| c.is_ascii_uppercase())
                && method.starts_with(|c: char| c.is_ascii_lowercase())
            {
                items.push((ty.to_string(), method.to_string()));
            }
            rest = after;
        }
    }
    items
}

/// Every `file.rs::test` named in backticks in `cell`, as (path from the repository root, test):
/// a bare file is in `integration-tests/tests/`, `crate/tests/file.rs` in `crates/`.
fn tests_named(cell: &str) -> Vec<(PathBuf, String)> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|code| code.split_once(".rs::"))
        .map(|(file, test)| {
            let path = if file.contains('/') {
                repo().join("crates").join(format!("{file}.rs"))
            } else {
                repo()
                    .join("integration-tests/tests")
                    .join(format!("{file}.rs"))
            };
            (path, test.to_string())
        })
        .collect()
}

/// The text of every `.rs` file under the crates' `src/` directories.
fn crate_sources() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).expect("a source file"));
                out.push('\n');
            }
        }
    }
    let mut out = String::new();
    for krate in std::fs::read_dir(repo().join("crates")).expect("crates/") {
        let src = krate.expect("a crate").path().join("src");
        if src.is_dir() {
            walk(&src, &mut out);
        }
    }
    out
}

#[test]
fn every_public_node_method_has_one_row_naming_existing_rust_items() {
    let dir = classes_dir();
    assert!(
        dir.join("queue.d.ts").exists(),
        "the Node oracle is not installed: run `npm ci` in integration-tests/node"
    );
    let doc = std::fs::read_to_string(repo().join("docs/compatibility.md")).expect("the doc");
    let tables = tables(&doc);
    let sources = crate_sources();
    let mut problems = Vec::new();
    for (title, files) in TABLES {
        let mut node = BTreeSet::new();
        for (file, class) in files {
            let dts = std::fs::read_to_string(dir.join(format!("{file}.d.ts"))).expect("a .d.ts");
            node.extend(public_methods(&dts, class));
        }
        let Some(rows) = tables.get(title) else {
            problems.push(format!("no table `### {title}`"));
            continue;
        };
        let mut seen = BTreeSet::new();
        for row in rows {
            if !seen.insert(row.method.clone()) {
                problems.push(format!("{title}: two rows for `{}`", row.method));
            }
            if !node.contains(&row.method) {
                problems.push(format!(
                    "{title}: `{}` is not a public Node method",
                    row.method
                ));
            }
            if !STATUSES.iter().any(|s| row.status.starts_with(s)) {
                problems.push(format!(
                    "{title}: `{}` has status {:?}, not one of {STATUSES:?}",
                    row.method, row.status
                ));
            }
            for (path, test) in tests_named(&row.proof) {
                let found = std::fs::read_to_string(&path)
                    .is_ok_and(|text| text.contains(&format!("fn {test}(")));
                if !found {
                    problems.push(format!(
                        "{title}: `{}` is proved by `{test}`, which is not in {}",
                        row.method,
                        path.display()
                    ));
                }
            }
            for (ty, method) in rust_items(&row.rust) {
                let has_type = ["struct", "enum", "trait", "type"]
                    .iter()
                    .any(|kind| sources.contains(&format!("{kind} {ty}")));
                let has_fn = sources.contains(&format!("fn {method}"));
                if !has_type || !has_fn {
                    problems.push(format!(
                        "{title}: `{}` names `{ty}::{method}`, which is not in crates/*/src",
                        row.method
                    ));
                }
            }
        }
        for missing in node.difference(&seen) {
            problems.push(format!("{title}: no row for Node's `{missing}`"));
        }
        let unsupported = rows
            .iter()
            .filter(|r| r.status.starts_with("not supported"))
            .count();
        let missing = rows
            .iter()
            .filter(|r| r.status.starts_with("missing"))
            .count();
        eprintln!(
            "{title}: {} Node methods, {} with a Rust counterpart, {unsupported} not supported, \
             {missing} missing",
            node.len(),
            rows.len() - unsupported - missing
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_dts_reader_finds_methods_and_accessors_but_not_private_members() {
    let dts = "\
export declare class Demo<T = any> extends Base {
    readonly opts: Options;
    private secret;
    constructor(name: string);
    static create<T>(name: string): Demo<T>;
    get concurrency(): number;
    set concurrency(n: number);
    protected helper(): void;
    private hidden(): void;
    publishEvent<T extends {
        eventName: string;
    }>(args: T): Promise<void>;
    /**
     * run(): not a member
     */
    run(): Promise<void>;
}
export declare class Other {
    notDemo(): void;
}
";
    let names: Vec<String> = public_methods(dts, "Demo").into_iter().collect();
    assert_eq!(names, ["concurrency", "create", "publishEvent", "run"]);
    assert_eq!(
        rust_items("`Queue::get_jobs(&[JobState::Waiting], start)`, `tokio::time::sleep`"),
        [("Queue".to_string(), "get_jobs".to_string())]
    );
    let named = tests_named("`queue_admin.rs::counts`, `ractor-bullmq/tests/x.rs::y` (note)");
    assert_eq!(
        named[0].0,
        repo().join("integration-tests/tests/queue_admin.rs")
    );
    assert_eq!(
        named[1],
        (
            repo().join("crates/ractor-bullmq/tests/x.rs"),
            "y".to_string()
        )
    );
}
