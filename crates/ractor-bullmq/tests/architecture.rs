//! Architecture checks on the crate's own sources (`src/`), so the layering cannot rot silently:
//!
//! - no two top-level modules (`error`, `events`, `worker`, …) depend on each other, directly or
//!   through others: the module graph has no cycle, and the test prints a topological order;
//! - `supervision/` references nothing else of the crate (it could be a crate of its own);
//! - no module uses `runtime/`, the application tree on top of everything.
//!
//! What counts as a dependency of module `a` on module `b`: a path that resolves into `b` from a
//! file of `a` — in `use` items (including multi-line `use crate::{x, y::{z}}` groups and
//! `super::super::…`), in paths in code (`crate::b::f()`, also inside macro calls), and through
//! the crate root's re-exports (`crate::Queue` is a use of `queue`). Doc links (`[x](crate::b::X)`)
//! are counted for the `supervision/` check only: rustdoc links from a lower layer to a higher one
//! ("returned by [`Queue::add`]") explain, they do not couple, but a separable supervision layer
//! cannot link into the rest of the crate at all.
//!
//! The scanner is a small Rust lexer (comments, strings, raw strings, char literals and lifetimes
//! are skipped; doc comments are kept for the doc-link scan) plus a `use`-tree parser; it tracks
//! inline `mod x { … }` blocks so `super` resolves as the compiler does. Its own tests are at the
//! bottom of this file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

#[test]
fn no_two_top_level_modules_depend_on_each_other() {
    let crate_src = CrateSources::read(&src_dir());
    let refs = crate_src.references().unwrap_or_else(|e| panic!("{e}"));
    let graph = ModuleGraph::new(&crate_src.modules, refs.iter().filter(|r| !r.doc));
    match graph.topological_order() {
        Ok(order) => println!(
            "top-level modules, dependencies first: {}",
            order.join(" < ")
        ),
        Err(cycles) => panic!("{}", graph.describe_cycles(&cycles)),
    }
}

#[test]
fn supervision_references_nothing_outside_itself() {
    let crate_src = CrateSources::read(&src_dir());
    let mut offending = String::new();
    for r in crate_src.references().unwrap_or_else(|e| panic!("{e}")) {
        if r.from_module == "supervision" && r.target != Target::Module("supervision".into()) {
            let kind = if r.doc { "doc link" } else { "code" };
            let _ = writeln!(
                offending,
                "  {}:{}: `{}` ({kind}, resolves to {})",
                r.file, r.line, r.path, r.target
            );
        }
    }
    // Nor may it reach the workspace's other crates (a separable layer depends on ractor,
    // tokio and tracing, not on the BullMQ protocol or Redis).
    for file in crate_src
        .files
        .iter()
        .filter(|f| f.top_module() == Some("supervision"))
    {
        for tok in &file.lexed.tokens {
            if let Tok::Ident(name) = &tok.kind {
                if ["bullmq_redis", "bullmq_protocol", "ractor_bullmq"].contains(&name.as_str()) {
                    let _ = writeln!(offending, "  {}:{}: `{name}`", file.display, tok.line);
                }
            }
        }
    }
    assert!(
        offending.is_empty(),
        "supervision/ must use nothing else of the crate, but:\n{offending}"
    );
}

#[test]
fn nothing_depends_on_the_application_tree() {
    // `runtime/` wires every actor into the Runtime's tree; an actor module that reached back
    // into it would make the tree a dependency of its own children.
    let crate_src = CrateSources::read(&src_dir());
    let mut offending = String::new();
    for r in crate_src.references().unwrap_or_else(|e| panic!("{e}")) {
        if !r.doc && r.target == Target::Module("runtime".into()) {
            let _ = writeln!(offending, "  {}:{}: `{}`", r.file, r.line, r.path);
        }
    }
    assert!(
        offending.is_empty(),
        "only lib.rs may use runtime/ (it sits on top of the module graph), but:\n{offending}"
    );
}

// ---------------------------------------------------------------------------------------------
// Sources
// ---------------------------------------------------------------------------------------------

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// One source file: where it sits in the module tree, and its tokens.
struct SourceFile {
    /// Path shown in messages, relative to the crate (`src/events/shared.rs`).
    display: String,
    /// Module path of the file (`["events", "shared"]`; `[]` for `lib.rs`).
    module: Vec<String>,
    lexed: Lexed,
}

impl SourceFile {
    fn new(display: String, module: Vec<String>, text: &str) -> Self {
        Self {
            display,
            module,
            lexed: lex(text),
        }
    }

    fn top_module(&self) -> Option<&str> {
        self.module.first().map(String::as_str)
    }
}

/// The crate: its files, its top-level modules (from `lib.rs`) and the names `lib.rs` re-exports.
struct CrateSources {
    files: Vec<SourceFile>,
    modules: BTreeSet<String>,
    /// Root re-exports: name → the top-level module it comes from (`None`: another crate).
    root_names: BTreeMap<String, Option<String>>,
}

impl CrateSources {
    fn read(src: &Path) -> Self {
        let mut paths = Vec::new();
        collect_rs(src, &mut paths);
        paths.sort();
        let files = paths
            .iter()
            .map(|path| {
                let rel = path.strip_prefix(src).expect("under src/");
                let text = std::fs::read_to_string(path).expect("readable source");
                SourceFile::new(format!("src/{}", rel.display()), module_path(rel), &text)
            })
            .collect();
        Self::from_files(files)
    }

    fn from_files(files: Vec<SourceFile>) -> Self {
        let lib = files
            .iter()
            .find(|f| f.module.is_empty())
            .expect("a crate root (lib.rs)");
        let modules = declared_modules(&lib.lexed.tokens);
        let mut root_names = BTreeMap::new();
        for leaf in use_leaves(&lib.lexed.tokens) {
            let Some(name) = leaf.binding() else { continue };
            // In the crate root, `use error::X` and `use crate::error::X` both name module `error`.
            let first = match leaf.segments.first().map(String::as_str) {
                Some("crate") => leaf.segments.get(1),
                _ => leaf.segments.first(),
            };
            let module = first.filter(|m| modules.contains(*m)).cloned();
            root_names.insert(name, module);
        }
        let sources = Self {
            files,
            modules,
            root_names,
        };
        let found: BTreeSet<String> = sources
            .files
            .iter()
            .filter_map(|f| f.top_module().map(str::to_owned))
            .collect();
        assert_eq!(
            found, sources.modules,
            "the files under src/ and the `mod` items of lib.rs disagree"
        );
        sources
    }

    /// Every reference from a file of one top-level module to a path outside it; or the paths
    /// that resolve to nothing known (so a scanner gap fails the checks instead of hiding an
    /// edge).
    fn references(&self) -> Result<Vec<Reference>, String> {
        let mut out = Vec::new();
        let mut unresolved = String::new();
        for file in self.files.iter().filter(|f| !f.module.is_empty()) {
            let from = file.module[0].clone();
            for found in crate_paths(&file.lexed.tokens) {
                let base: Vec<&str> = file
                    .module
                    .iter()
                    .map(String::as_str)
                    .chain(found.inline_mods.iter().map(String::as_str))
                    .collect();
                let absolute = match resolve(&base, &found.segments) {
                    Ok(Some(absolute)) => absolute,
                    Ok(None) => continue,
                    Err(why) => {
                        let _ = writeln!(
                            unresolved,
                            "  {}:{}: `{}`: {why}",
                            file.display,
                            found.line,
                            found.segments.join("::")
                        );
                        continue;
                    }
                };
                let target = match self.target_of(&absolute) {
                    Some(target) => target,
                    None => {
                        let _ = writeln!(
                            unresolved,
                            "  {}:{}: `{}`: `crate::{}` is neither a module nor a re-export of \
                             lib.rs",
                            file.display,
                            found.line,
                            found.segments.join("::"),
                            absolute[0]
                        );
                        continue;
                    }
                };
                if target == Target::Module(from.clone()) {
                    continue; // inside the module: not a dependency
                }
                out.push(Reference {
                    from_module: from.clone(),
                    target,
                    file: file.display.clone(),
                    line: found.line,
                    path: found.segments.join("::"),
                    doc: found.doc,
                });
            }
        }
        if unresolved.is_empty() {
            Ok(out)
        } else {
            Err(format!(
                "the architecture scanner could not resolve these paths (fix the scanner or the \
                 path):\n{unresolved}"
            ))
        }
    }

    fn target_of(&self, absolute: &[String]) -> Option<Target> {
        let first = absolute.first()?;
        if self.modules.contains(first) {
            return Some(Target::Module(first.clone()));
        }
        match self.root_names.get(first)? {
            Some(module) => Some(Target::Module(module.clone())),
            None => Some(Target::External(first.clone())),
        }
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable src/") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `lib.rs` → `[]`, `x.rs` and `x/mod.rs` → `[x]`, `x/y.rs` → `[x, y]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    match last.as_str() {
        "lib.rs" | "mod.rs" => {}
        other => parts.push(other.trim_end_matches(".rs").to_owned()),
    }
    parts
}

/// `mod x;` items of the crate root (inline `mod x { }` blocks are not top-level files).
fn declared_modules(tokens: &[Token]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for w in tokens.windows(3) {
        if let (Tok::Ident(kw), Tok::Ident(name), Tok::Punct(';')) =
            (&w[0].kind, &w[1].kind, &w[2].kind)
        {
            if kw == "mod" {
                out.insert(name.clone());
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// References and the module graph
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// A top-level module of the crate.
    Module(String),
    /// Another crate, reached through a root re-export (`crate::protocol`).
    External(String),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Module(m) => write!(f, "module `{m}`"),
            Self::External(name) => write!(f, "the re-export `crate::{name}`"),
        }
    }
}

#[derive(Debug, Clone)]
struct Reference {
    from_module: String,
    target: Target,
    file: String,
    line: usize,
    path: String,
    doc: bool,
}

struct ModuleGraph<'a> {
    nodes: Vec<String>,
    /// (from, to) → the references behind the edge, in source order.
    edges: BTreeMap<(String, String), Vec<&'a Reference>>,
}

impl<'a> ModuleGraph<'a> {
    fn new(modules: &BTreeSet<String>, refs: impl Iterator<Item = &'a Reference>) -> Self {
        let mut edges: BTreeMap<(String, String), Vec<&Reference>> = BTreeMap::new();
        for r in refs {
            if let Target::Module(to) = &r.target {
                edges
                    .entry((r.from_module.clone(), to.clone()))
                    .or_default()
                    .push(r);
            }
        }
        Self {
            nodes: modules.iter().cloned().collect(),
            edges,
        }
    }

    fn successors(&self, node: &str) -> Vec<String> {
        self.edges
            .keys()
            .filter(|(from, _)| from == node)
            .map(|(_, to)| to.clone())
            .collect()
    }

    /// Dependencies first; or the strongly connected components with more than one module.
    fn topological_order(&self) -> Result<Vec<String>, Vec<Vec<String>>> {
        let components = self.strongly_connected();
        let cycles: Vec<Vec<String>> = components.iter().filter(|c| c.len() > 1).cloned().collect();
        if !cycles.is_empty() {
            return Err(cycles);
        }
        // Tarjan emits components in reverse topological order of the condensation, i.e. a
        // module after everything it depends on.
        Ok(components.into_iter().flatten().collect())
    }

    /// Tarjan's algorithm.
    fn strongly_connected(&self) -> Vec<Vec<String>> {
        struct Walk<'g, 'a> {
            graph: &'g ModuleGraph<'a>,
            index: BTreeMap<String, usize>,
            low: BTreeMap<String, usize>,
            stack: Vec<String>,
            on_stack: BTreeSet<String>,
            next: usize,
            out: Vec<Vec<String>>,
        }
        impl Walk<'_, '_> {
            fn visit(&mut self, node: &str) {
                self.index.insert(node.to_owned(), self.next);
                self.low.insert(node.to_owned(), self.next);
                self.next += 1;
                self.stack.push(node.to_owned());
                self.on_stack.insert(node.to_owned());
                for succ in self.graph.successors(node) {
                    if !self.index.contains_key(&succ) {
                        self.visit(&succ);
                        let low = self.low[node].min(self.low[&succ]);
                        self.low.insert(node.to_owned(), low);
                    } else if self.on_stack.contains(&succ) {
                        let low = self.low[node].min(self.index[&succ]);
                        self.low.insert(node.to_owned(), low);
                    }
                }
                if self.low[node] == self.index[node] {
                    let mut component = Vec::new();
                    loop {
                        let top = self.stack.pop().expect("node on stack");
                        self.on_stack.remove(&top);
                        let done = top == node;
                        component.push(top);
                        if done {
                            break;
                        }
                    }
                    component.sort();
                    self.out.push(component);
                }
            }
        }
        let mut walk = Walk {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            next: 0,
            out: Vec::new(),
        };
        for node in &self.nodes {
            if !walk.index.contains_key(node) {
                walk.visit(node);
            }
        }
        walk.out
    }

    /// Each cycle's modules and every edge inside it, with the file and line of its imports.
    fn describe_cycles(&self, cycles: &[Vec<String>]) -> String {
        let mut out =
            String::from("top-level modules import each other (directly or through others):\n");
        for cycle in cycles {
            let _ = writeln!(out, "\ncycle among {}:", cycle.join(", "));
            for ((from, to), refs) in &self.edges {
                if !(cycle.contains(from) && cycle.contains(to)) {
                    continue;
                }
                let _ = writeln!(out, "  {from} -> {to}:");
                for r in refs {
                    let _ = writeln!(out, "    {}:{}: `{}`", r.file, r.line, r.path);
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Paths in a token stream
// ---------------------------------------------------------------------------------------------

/// A crate-relative path found in a file (`crate::…`, `super::…`, `self::…`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FoundPath {
    segments: Vec<String>,
    line: usize,
    /// Inline `mod x { … }` blocks around it, outermost first.
    inline_mods: Vec<String>,
    /// Found in a doc comment (a doc link) rather than in code.
    doc: bool,
}

fn is_anchor(s: &str) -> bool {
    matches!(s, "crate" | "super" | "self" | "$crate")
}

/// Absolute path (below the crate root) of `segments` written in module `base`; `None` when the
/// path does not start at `crate`, `super` or `self` (another crate, or a local name).
fn resolve(base: &[&str], segments: &[String]) -> Result<Option<Vec<String>>, String> {
    let Some(first) = segments.first() else {
        return Ok(None);
    };
    if !is_anchor(first) {
        return Ok(None);
    }
    let mut current: Vec<String> = base.iter().map(|s| (*s).to_owned()).collect();
    let mut rest = segments;
    while let Some(seg) = rest.first() {
        match seg.as_str() {
            "crate" | "$crate" => current.clear(),
            "self" => {}
            "super" => {
                if current.pop().is_none() {
                    return Err("`super` goes above the crate root".to_owned());
                }
            }
            _ => break,
        }
        rest = &rest[1..];
    }
    current.extend(rest.iter().cloned());
    if current.is_empty() || current[0] == "*" {
        return Err("names the crate root itself".to_owned());
    }
    Ok(Some(current))
}

/// Every crate-relative path of `tokens`: the leaves of `use` trees, paths in code, doc links.
fn crate_paths(tokens: &[Token]) -> Vec<FoundPath> {
    let mut out = Vec::new();
    // Inline modules: (name, brace depth inside the block).
    let mut mods: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let inline = |mods: &Vec<(String, usize)>| mods.iter().map(|(m, _)| m.clone()).collect();
    while i < tokens.len() {
        match &tokens[i].kind {
            Tok::Open('{') => depth += 1,
            Tok::Close('}') => {
                if mods.last().is_some_and(|(_, d)| *d == depth) {
                    mods.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Open('{'))) = (
                    tokens.get(i + 1).map(|t| &t.kind),
                    tokens.get(i + 2).map(|t| &t.kind),
                ) {
                    depth += 1;
                    mods.push((name.clone(), depth));
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(kw) if kw == "use" && starts_use_tree(tokens.get(i + 1)) => {
                let (leaves, end) = parse_use_item(tokens, i + 1);
                for leaf in leaves {
                    out.push(FoundPath {
                        segments: leaf.segments,
                        line: leaf.line,
                        inline_mods: inline(&mods),
                        doc: false,
                    });
                }
                i = end;
                continue;
            }
            Tok::Ident(first) if is_anchor(first) => {
                let after_sep = i > 0 && tokens[i - 1].kind == Tok::PathSep;
                let in_visibility = i > 0 && tokens[i - 1].kind == Tok::Ident("in".into());
                if !after_sep
                    && !in_visibility
                    && tokens.get(i + 1).map(|t| &t.kind) == Some(&Tok::PathSep)
                {
                    let (segments, end) = parse_path(tokens, i);
                    out.push(FoundPath {
                        segments,
                        line: tokens[i].line,
                        inline_mods: inline(&mods),
                        doc: false,
                    });
                    i = end;
                    continue;
                }
            }
            Tok::Doc(text) => {
                for segments in doc_paths(text) {
                    out.push(FoundPath {
                        segments,
                        line: tokens[i].line,
                        inline_mods: inline(&mods),
                        doc: true,
                    });
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// `use` followed by a path or a group (not `use<'a>` in a precise-capturing bound).
fn starts_use_tree(next: Option<&Token>) -> bool {
    matches!(
        next.map(|t| &t.kind),
        Some(Tok::Ident(_)) | Some(Tok::PathSep) | Some(Tok::Open('{'))
    )
}

/// `ident (:: ident)*` from `start`; returns the segments and the index after them.
fn parse_path(tokens: &[Token], start: usize) -> (Vec<String>, usize) {
    let mut segments = Vec::new();
    let mut i = start;
    while let Some(Tok::Ident(seg)) = tokens.get(i).map(|t| &t.kind) {
        segments.push(seg.clone());
        if tokens.get(i + 1).map(|t| &t.kind) == Some(&Tok::PathSep)
            && matches!(tokens.get(i + 2).map(|t| &t.kind), Some(Tok::Ident(_)))
        {
            i += 2;
        } else {
            i += 1;
            break;
        }
    }
    (segments, i)
}

/// One imported name of a `use` item.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UseLeaf {
    /// Full path, group prefixes included (`crate::a::b::{c}` gives `crate, a, b, c`); a glob
    /// ends in `*`.
    segments: Vec<String>,
    alias: Option<String>,
    line: usize,
}

impl UseLeaf {
    /// The name the item binds (`None` for globs and `as _`).
    fn binding(&self) -> Option<String> {
        let name = self
            .alias
            .clone()
            .or_else(|| self.segments.last().cloned())?;
        (name != "*" && name != "_").then_some(name)
    }
}

/// The leaves of every top-level `use` item of `tokens` (used on `lib.rs`).
fn use_leaves(tokens: &[Token]) -> Vec<UseLeaf> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].kind == Tok::Ident("use".into()) && starts_use_tree(tokens.get(i + 1)) {
            let (leaves, end) = parse_use_item(tokens, i + 1);
            out.extend(leaves);
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Parses the tree of a `use` item starting at `start` up to its `;`.
fn parse_use_item(tokens: &[Token], start: usize) -> (Vec<UseLeaf>, usize) {
    let mut leaves = Vec::new();
    let end = parse_use_tree(tokens, start, &[], &mut leaves);
    // Skip to the end of the item even if the tree was unusual.
    let mut i = end;
    while i < tokens.len() && tokens[i].kind != Tok::Punct(';') {
        i += 1;
    }
    (leaves, i + 1)
}

/// One use tree (`a::b`, `a::{…}`, `a::*`, `a as b`, `{…}`) under `prefix`; returns the index
/// after it.
fn parse_use_tree(
    tokens: &[Token],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<UseLeaf>,
) -> usize {
    let mut path: Vec<String> = prefix.to_vec();
    if tokens.get(i).map(|t| &t.kind) == Some(&Tok::PathSep) {
        i += 1; // `use ::std::…`
    }
    loop {
        let Some(tok) = tokens.get(i) else { return i };
        match &tok.kind {
            Tok::Ident(seg) => {
                path.push(seg.clone());
                let line = tok.line;
                i += 1;
                match tokens.get(i).map(|t| &t.kind) {
                    Some(Tok::PathSep) => {
                        i += 1;
                        continue;
                    }
                    Some(Tok::Ident(kw)) if kw == "as" => {
                        let alias = match tokens.get(i + 1).map(|t| &t.kind) {
                            Some(Tok::Ident(alias)) => Some(alias.clone()),
                            _ => None,
                        };
                        // `self as x` inside a group names the group's prefix.
                        if path.last().is_some_and(|s| s == "self")
                            && path.len() > prefix.len().max(1)
                        {
                            path.pop();
                        }
                        out.push(UseLeaf {
                            segments: path,
                            alias,
                            line,
                        });
                        return i + 2;
                    }
                    _ => {
                        // `a::{self}` names `a` itself.
                        if path.last().is_some_and(|s| s == "self")
                            && path.len() > 1
                            && !prefix.is_empty()
                        {
                            path.pop();
                        }
                        out.push(UseLeaf {
                            segments: path,
                            alias: None,
                            line,
                        });
                        return i;
                    }
                }
            }
            Tok::Punct('*') => {
                path.push("*".to_owned());
                out.push(UseLeaf {
                    segments: path,
                    alias: None,
                    line: tok.line,
                });
                return i + 1;
            }
            Tok::Open('{') => {
                i += 1;
                loop {
                    match tokens.get(i).map(|t| &t.kind) {
                        None => return i,
                        Some(Tok::Close('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        Some(_) => {
                            let next = parse_use_tree(tokens, i, &path, out);
                            if next == i {
                                i += 1; // never loop on an unexpected token
                            } else {
                                i = next;
                            }
                        }
                    }
                }
            }
            _ => return i,
        }
    }
}

/// Paths such as `crate::a::B` or `super::C` in a doc comment (intra-doc link targets).
fn doc_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if is_ident(bytes[i])
            && (i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == b':' || bytes[i - 1] == b'$'))
        {
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            let first = &text[start..i];
            if is_anchor(first) && text[i..].starts_with("::") {
                let mut segments = vec![first.to_owned()];
                while text[i..].starts_with("::") {
                    let seg_start = i + 2;
                    let mut j = seg_start;
                    while j < bytes.len() && is_ident(bytes[j]) {
                        j += 1;
                    }
                    if j == seg_start {
                        break;
                    }
                    segments.push(text[seg_start..j].to_owned());
                    i = j;
                }
                if segments.len() > 1 {
                    out.push(segments);
                }
            }
        } else {
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Open(char),
    Close(char),
    Punct(char),
    /// A literal (string, char, number): its content never names a path.
    Lit,
    /// The text of one doc comment line (`///`, `//!`, or a line of `/** */`).
    Doc(String),
}

#[derive(Debug, Clone)]
struct Token {
    kind: Tok,
    line: usize,
}

struct Lexed {
    tokens: Vec<Token>,
}

fn lex(text: &str) -> Lexed {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let is_ident_start = |c: char| c.is_alphabetic() || c == '_';
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '/' if at(i + 1) == '/' => {
                let start = i;
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                let comment: String = chars[start..i].iter().collect();
                let doc = (comment.starts_with("///") && !comment.starts_with("////"))
                    || comment.starts_with("//!");
                if doc {
                    tokens.push(Token {
                        kind: Tok::Doc(comment[3..].to_owned()),
                        line,
                    });
                }
            }
            '/' if at(i + 1) == '*' => {
                let doc =
                    (at(i + 2) == '*' && at(i + 3) != '*' && at(i + 3) != '/') || at(i + 2) == '!';
                let mut nesting = 0;
                let mut text_line = String::new();
                let mut text_line_no = line;
                loop {
                    if i >= chars.len() {
                        break;
                    }
                    if chars[i] == '/' && at(i + 1) == '*' {
                        nesting += 1;
                        i += 2;
                        continue;
                    }
                    if chars[i] == '*' && at(i + 1) == '/' {
                        nesting -= 1;
                        i += 2;
                        if nesting == 0 {
                            break;
                        }
                        continue;
                    }
                    if chars[i] == '\n' {
                        if doc {
                            tokens.push(Token {
                                kind: Tok::Doc(std::mem::take(&mut text_line)),
                                line: text_line_no,
                            });
                        }
                        line += 1;
                        text_line_no = line;
                    } else {
                        text_line.push(chars[i]);
                    }
                    i += 1;
                }
                if doc && !text_line.is_empty() {
                    tokens.push(Token {
                        kind: Tok::Doc(text_line),
                        line: text_line_no,
                    });
                }
            }
            '"' => {
                i = skip_string(&chars, i + 1, &mut line);
                tokens.push(Token {
                    kind: Tok::Lit,
                    line,
                });
            }
            '\'' => {
                // A char literal ('a', '\n', '\u{1F600}') or a lifetime / label ('a, 'static).
                if at(i + 1) == '\\' {
                    let mut j = i + 2;
                    while j < chars.len() && chars[j] != '\'' {
                        j += 1;
                    }
                    i = j + 1;
                    tokens.push(Token {
                        kind: Tok::Lit,
                        line,
                    });
                } else if at(i + 2) == '\'' {
                    i += 3;
                    tokens.push(Token {
                        kind: Tok::Lit,
                        line,
                    });
                } else {
                    i += 1;
                    while i < chars.len() && is_ident(chars[i]) {
                        i += 1;
                    }
                }
            }
            c if is_ident_start(c) => {
                let start = i;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let prefix = matches!(word.as_str(), "r" | "b" | "br" | "c" | "cr");
                if prefix
                    && (at(i) == '"'
                        || (word != "b"
                            && word != "c"
                            && at(i) == '#'
                            && (at(i + 1) == '"' || at(i + 1) == '#')))
                {
                    if word.contains('r') {
                        i = skip_raw_string(&chars, i, &mut line);
                    } else {
                        i = skip_string(&chars, i + 1, &mut line);
                    }
                    tokens.push(Token {
                        kind: Tok::Lit,
                        line,
                    });
                } else if word == "b" && at(i) == '\'' {
                    let mut j = i + 1;
                    if at(j) == '\\' {
                        j += 1;
                    }
                    j += 1;
                    while j < chars.len() && chars[j] != '\'' {
                        j += 1;
                    }
                    i = j + 1;
                    tokens.push(Token {
                        kind: Tok::Lit,
                        line,
                    });
                } else if word == "r" && at(i) == '#' && is_ident_start(at(i + 1)) {
                    // A raw identifier (`r#type`).
                    let start = i + 1;
                    i += 1;
                    while i < chars.len() && is_ident(chars[i]) {
                        i += 1;
                    }
                    tokens.push(Token {
                        kind: Tok::Ident(chars[start..i].iter().collect()),
                        line,
                    });
                } else {
                    tokens.push(Token {
                        kind: Tok::Ident(word),
                        line,
                    });
                }
            }
            c if c.is_ascii_digit() => {
                while i < chars.len() && (is_ident(chars[i])) {
                    i += 1;
                }
                tokens.push(Token {
                    kind: Tok::Lit,
                    line,
                });
            }
            '$' if is_ident_start(at(i + 1)) => {
                let start = i;
                i += 1;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                tokens.push(Token {
                    kind: Tok::Ident(chars[start..i].iter().collect()),
                    line,
                });
            }
            ':' if at(i + 1) == ':' => {
                tokens.push(Token {
                    kind: Tok::PathSep,
                    line,
                });
                i += 2;
            }
            '{' | '(' | '[' => {
                tokens.push(Token {
                    kind: Tok::Open(c),
                    line,
                });
                i += 1;
            }
            '}' | ')' | ']' => {
                tokens.push(Token {
                    kind: Tok::Close(c),
                    line,
                });
                i += 1;
            }
            other => {
                tokens.push(Token {
                    kind: Tok::Punct(other),
                    line,
                });
                i += 1;
            }
        }
    }
    Lexed { tokens }
}

/// Skips a (byte, C) string body from just after its opening quote; returns the index after the
/// closing quote.
fn skip_string(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                if chars.get(i + 1) == Some(&'\n') {
                    *line += 1;
                }
                i += 2;
            }
            '"' => return i + 1,
            '\n' => {
                *line += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    i
}

/// Skips `#*"…"#*` from the first `#` or `"` after the `r` prefix.
fn skip_raw_string(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        if chars[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    i
}

// ---------------------------------------------------------------------------------------------
// Tests of the scanner itself
// ---------------------------------------------------------------------------------------------

fn sources(files: &[(&str, &str)]) -> CrateSources {
    CrateSources::from_files(
        files
            .iter()
            .map(|(path, text)| {
                SourceFile::new(
                    (*path).to_owned(),
                    module_path(Path::new(path.trim_start_matches("src/"))),
                    text,
                )
            })
            .collect(),
    )
}

fn edges(src: &CrateSources) -> Vec<(String, String, usize, bool)> {
    src.references()
        .expect("resolvable paths")
        .into_iter()
        .map(|r| (r.from_module, r.target.to_string(), r.line, r.doc))
        .collect()
}

const LIB: &str = "mod a;\nmod b;\nmod c;\npub use a::Alpha;\npub use other_crate::Gamma;\n";

#[test]
fn scanner_reads_multi_line_use_groups_and_nested_groups() {
    let src = sources(&[
        ("src/lib.rs", LIB),
        (
            "src/a.rs",
            "use crate::{\n    b::{self, X},\n    c::{d::{Y}},\n};\n",
        ),
        ("src/b.rs", ""),
        ("src/c.rs", ""),
    ]);
    assert_eq!(
        edges(&src),
        vec![
            ("a".into(), "module `b`".into(), 2, false),
            ("a".into(), "module `b`".into(), 2, false),
            ("a".into(), "module `c`".into(), 3, false),
        ]
    );
}

#[test]
fn scanner_resolves_super_super_and_inline_modules() {
    let src = sources(&[
        ("src/lib.rs", LIB),
        ("src/a/mod.rs", "mod inner;\n"),
        (
            "src/a/inner.rs",
            "use super::Local;\nuse super::super::b::X;\nmod tests {\n    use super::*;\n    use super::super::super::c::Z;\n}\nfn f() { super::super::c::g(); }\n",
        ),
        ("src/b.rs", "mod tests {\n    use super::*;\n}\nuse self::x::Y;\n"),
        ("src/c.rs", ""),
    ]);
    assert_eq!(
        edges(&src),
        vec![
            ("a".into(), "module `b`".into(), 2, false),
            ("a".into(), "module `c`".into(), 5, false),
            ("a".into(), "module `c`".into(), 7, false),
        ]
    );
}

#[test]
fn scanner_ignores_strings_comments_and_char_literals() {
    let src = sources(&[
        ("src/lib.rs", LIB),
        (
            "src/a.rs",
            r####"
// use crate::b::X;
/* crate::b::Y /* nested crate::b::Z */ still a comment crate::b::W */
const S: &str = "crate::b::X";
const R: &str = r#"crate::b::" crate::b::X"#;
const Q: char = '"';
fn f<'a>(x: &'a str) -> &'a str { let _ = b'"'; x }
const T: &str = "escaped \" crate::b::X";
"####,
        ),
        ("src/b.rs", ""),
        ("src/c.rs", ""),
    ]);
    assert_eq!(edges(&src), vec![]);
}

#[test]
fn scanner_resolves_root_re_exports_paths_in_code_and_doc_links() {
    let src = sources(&[
        ("src/lib.rs", LIB),
        ("src/a.rs", ""),
        (
            "src/b.rs",
            "//! See [`Alpha`](crate::Alpha).\nfn f() -> crate::Alpha { format!(\"{}\", crate::c::x()); crate::Gamma::new() }\npub(in crate::b) fn g() {}\n",
        ),
        ("src/c.rs", ""),
    ]);
    assert_eq!(
        edges(&src),
        vec![
            ("b".into(), "module `a`".into(), 1, true),
            ("b".into(), "module `a`".into(), 2, false),
            ("b".into(), "module `c`".into(), 2, false),
            ("b".into(), "the re-export `crate::Gamma`".into(), 2, false),
        ]
    );
}

#[test]
fn a_cycle_is_reported_with_its_modules_files_and_lines() {
    let src = sources(&[
        ("src/lib.rs", LIB),
        ("src/a.rs", "use crate::b::X;\n"),
        ("src/b.rs", "\n\nuse crate::{\n    c::Y,\n};\n"),
        ("src/c.rs", "fn f() { crate::a::g() }\n"),
    ]);
    let refs = src.references().expect("resolvable paths");
    let graph = ModuleGraph::new(&src.modules, refs.iter());
    let cycles = graph.topological_order().expect_err("a -> b -> c -> a");
    assert_eq!(
        cycles,
        vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]
    );
    let message = graph.describe_cycles(&cycles);
    for expected in [
        "cycle among a, b, c:",
        "a -> b:\n    src/a.rs:1: `crate::b::X`",
        "b -> c:\n    src/b.rs:4: `crate::c::Y`",
        "c -> a:\n    src/c.rs:1: `crate::a::g`",
    ] {
        assert!(
            message.contains(expected),
            "missing {expected:?} in:\n{message}"
        );
    }
}

#[test]
fn an_acyclic_graph_gives_dependencies_first() {
    let src = sources(&[
        ("src/lib.rs", LIB),
        ("src/a.rs", "use crate::b::X;\n"),
        ("src/b.rs", "use crate::c::Y;\n"),
        ("src/c.rs", ""),
    ]);
    let refs = src.references().expect("resolvable paths");
    let graph = ModuleGraph::new(&src.modules, refs.iter());
    assert_eq!(
        graph.topological_order(),
        Ok(vec!["c".into(), "b".into(), "a".into()])
    );
}

#[test]
fn an_unresolvable_crate_path_fails_loudly() {
    let src = sources(&[
        ("src/lib.rs", LIB),
        ("src/a.rs", "use crate::Missing;\n"),
        ("src/b.rs", ""),
        ("src/c.rs", ""),
    ]);
    let message = src
        .references()
        .expect_err("an unknown root name is refused");
    assert!(
        message.contains("src/a.rs:1: `crate::Missing`"),
        "{message}"
    );
}
