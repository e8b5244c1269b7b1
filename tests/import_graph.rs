//! No two files of `src/` import each other (issue #17): a loop between two files means neither
//! can be read, tested or moved without the other. An import is any path into the crate that a
//! file names (`use crate::…`, `super::…`, `self::…`, in a `use` or inline); a module naming
//! its own submodules is not one (that is how a module declares and re-exports its parts).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The module path of a file under `src/` (`backend/gpu/mod.rs` → `backend::gpu`).
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The text of `source` without comments, so that doc links are not imports.
fn code_of(source: &str) -> String {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a `use` tree names, braces expanded: `a::{b, c::{d}}` → `a::b`, `a::c::d`.
fn expand_use_tree(tree: &str) -> Vec<String> {
    // Without its renames (`x as y`, keeping what follows y) and whitespace.
    let mut tokens = tree.split_whitespace();
    let mut bare = String::new();
    while let Some(token) = tokens.next() {
        if token == "as" {
            let alias = tokens.next().unwrap_or("");
            bare.push_str(alias.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_'));
        } else {
            bare.push_str(token);
        }
    }
    let tree = bare;
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let (prefix, rest) = (&tree[..open], &tree[open + 1..tree.len() - 1]);
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&rest[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&rest[start..]);
    items
        .into_iter()
        .filter(|item| !item.is_empty())
        .flat_map(|item| expand_use_tree(&format!("{prefix}{item}")))
        .collect()
}

/// The crate paths a file names, each as its segments relative to the crate root.
fn paths_named(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut named = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(end) = rest.find(';') {
            named.extend(expand_use_tree(&rest[..end]));
        }
    }
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            let before = at.checked_sub(1).map(|i| bytes[i] as char);
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '$') {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |n| at + n);
            named.push(code[at..end].to_string());
        }
    }
    named
        .iter()
        .filter_map(|path| {
            let mut segments = path.split("::").filter(|s| !s.is_empty());
            let mut resolved: Vec<String> = match segments.next()? {
                "crate" => Vec::new(),
                "self" | "super" => module.to_vec(),
                _ => return None,
            };
            if path.starts_with("super") {
                resolved.pop();
            }
            for segment in segments {
                match segment {
                    "super" => {
                        resolved.pop();
                    }
                    "self" | "*" => {}
                    name => resolved.push(name.to_string()),
                }
            }
            Some(resolved)
        })
        .collect()
}

/// The pairs of files that import each other, given each file's path under `src/` and text.
fn two_cycles(files: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let by_module: BTreeMap<Vec<String>, &String> =
        files.keys().map(|file| (module_of(file), file)).collect();
    let mut edges = BTreeSet::new();
    for (file, source) in files {
        let module = module_of(file);
        for path in paths_named(&module, &code_of(source)) {
            // The longest prefix of the path that is a file's module is the file it imports.
            let target = (0..=path.len())
                .rev()
                .find_map(|n| by_module.get(&path[..n]));
            if let Some(&target) = target {
                if target != file && !module_of(target).starts_with(&module) {
                    edges.insert((file.clone(), target.clone()));
                }
            }
        }
    }
    edges
        .iter()
        .filter(|(a, b)| a < b && edges.contains(&(b.clone(), a.clone())))
        .cloned()
        .collect()
}

fn read_tree(dir: &Path, root: &Path, files: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            read_tree(&path, root, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.strip_prefix(root).expect("under src/");
            let name = name.to_string_lossy().replace('\\', "/");
            files.insert(name, std::fs::read_to_string(&path).expect("a source file"));
        }
    }
}

#[test]
fn no_two_files_of_src_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    read_tree(&root, &root, &mut files);
    assert!(files.len() > 50, "read {} files of {root:?}", files.len());
    let loops = two_cycles(&files);
    assert!(loops.is_empty(), "files importing each other: {loops:?}");
}

/// The loops issue #17 found, planted in a small tree: each must be caught, and a module
/// naming its own submodule must not count.
#[test]
fn planted_loops_are_found() {
    let tree = |files: &[(&str, &str)]| -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(name, text)| (name.to_string(), text.to_string()))
            .collect()
    };
    let planted = tree(&[
        ("lib.rs", "pub mod gguf;\npub mod backend;"),
        ("gguf/mod.rs", "mod error;\nmod format;\npub use error::E;"),
        ("gguf/error.rs", "fn f() { super::format::VERSIONS; }"),
        ("gguf/format.rs", "use super::{error::E, other};"),
        ("backend/mod.rs", "pub mod gpu;\npub use self::gpu::Wgpu;"),
        (
            "backend/gpu/mod.rs",
            "use crate::backend::{Backend, gpu::X};",
        ),
        (
            "backend/gpu/recorder.rs",
            "use crate::backend::gpu::profiler::Profiler;",
        ),
        (
            "backend/gpu/profiler.rs",
            "use super::recorder::{self as r, Recorder};",
        ),
    ]);
    assert_eq!(
        two_cycles(&planted),
        vec![
            (
                "backend/gpu/profiler.rs".to_string(),
                "backend/gpu/recorder.rs".to_string()
            ),
            ("gguf/error.rs".to_string(), "gguf/format.rs".to_string()),
        ]
    );
    let comment_only = tree(&[
        ("a.rs", "/// Written by [`super::b::B`].\nuse crate::b::B;"),
        ("b.rs", "// crate::a::A would loop\npub struct B;"),
    ]);
    assert!(two_cycles(&comment_only).is_empty());
}
