//! The programs the README shows build as pasted. Each is a block of dependency lines and a
//! whole `src/main.rs`, marked in the README by an HTML comment before each block
//! (`<!-- program: server Cargo.toml -->`, `<!-- program: server src/main.rs -->`). The test
//! makes a crate of each pair outside the workspace, as a newcomer's `cargo new` would (its
//! manifest ends with an empty `[dependencies]`, under which the lines are pasted), with the
//! README's `path = "../idem/..."` pointing at this checkout, and builds it: offline, with
//! the workspace's `Cargo.lock`, so it needs no network, and in a target folder of its own
//! under this build's, so it builds the dependencies once per machine and then only what
//! changed. A warning fails the build, as a pasted program should build clean. Cost, measured
//! on the 2-core development machine under other builds: about 80 s for the server and 50 s
//! for the client the first time (their dependencies are built apart from the workspace's,
//! with the features a user's crate gives them), under a second once built, and about 0.7 GB
//! of `target/`.
//!
//! Excerpts are kept the same way: a block after `<!-- excerpt: PATH -->` must be a part of
//! the file PATH, line for line.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use crate::markdown::{Page, pages, repository};

/// The README's programs: the server of *Add idem to a service* and the client alone.
const PROGRAMS: [&str; 2] = ["server", "client"];

/// Where the README says the checkout is, next to the user's crate.
const CHECKOUT: &str = "\"../idem/";

#[test]
fn the_readme_server_builds_as_pasted() {
    build("server");
}

#[test]
fn the_readme_client_builds_as_pasted_without_the_server() {
    let manifest = build("client");
    for server_side in ["idem", "idem-core", "axum"] {
        assert!(
            !manifest.contains(&format!("\n{server_side} ")),
            "the client's dependencies name {server_side}:\n{manifest}"
        );
    }
}

#[test]
fn every_excerpt_is_part_of_its_file() {
    for name in pages() {
        let page = Page::read(&name);
        for path in page.markers("excerpt") {
            let block = page
                .block_after(&format!("<!-- excerpt: {path} -->"))
                .unwrap_or_else(|| panic!("{name}: no code block after the excerpt of {path}"));
            let file = fs::read_to_string(repository().join(&path))
                .unwrap_or_else(|error| panic!("{name}: {path}: {error}"));
            assert!(
                file.contains(&block),
                "{name}: the excerpt of {path} is not in it as written:\n{block}"
            );
        }
    }
}

#[test]
fn the_readme_marks_each_program_once() {
    let readme = Page::read("README.md");
    let mut marked = readme.markers("program");
    marked.sort();
    let mut expected: Vec<String> = PROGRAMS
        .iter()
        .flat_map(|program| {
            [
                format!("{program} Cargo.toml"),
                format!("{program} src/main.rs"),
            ]
        })
        .collect();
    expected.sort();
    assert_eq!(marked, expected);
}

/// Builds the README's program `name`; answers its manifest's dependency block.
fn build(name: &str) -> String {
    let readme = Page::read("README.md");
    let block = |file: &str| {
        readme
            .block_after(&format!("<!-- program: {name} {file} -->"))
            .unwrap_or_else(|| panic!("the README has no {name} {file}"))
    };
    let dependencies = block("Cargo.toml");
    let main = block("src/main.rs");
    assert!(
        !dependencies
            .lines()
            .any(|line| line.trim_start().starts_with('[')),
        "the {name}'s block is lines to paste under the [dependencies] of `cargo new`, without \
         a table header of its own (a second `[dependencies]` is a duplicate key):\n{dependencies}"
    );
    assert!(
        dependencies.contains(CHECKOUT),
        "the {name}'s dependencies are on the checkout at {CHECKOUT}:\n{dependencies}"
    );

    let root = scratch().join(name);
    fs::create_dir_all(root.join("src")).unwrap();
    let checkout = format!("\"{}/", repository().display());
    // What `cargo new` writes, then the README's lines pasted at its end; and, as the user's
    // crate is not a member of the repository's workspace, an empty workspace of its own
    // (before the package, so that the pasted lines stay under `[dependencies]`).
    let manifest = format!(
        "[workspace]\n\n[package]\nname = \"readme-{name}\"\nversion = \"0.1.0\"\n\
         edition = \"2024\"\n\n[dependencies]\n{}",
        dependencies.replace(CHECKOUT, &checkout)
    );
    write_if_changed(&root.join("Cargo.toml"), &manifest);
    write_if_changed(&root.join("src/main.rs"), &main);
    fs::copy(repository().join("Cargo.lock"), root.join("Cargo.lock")).unwrap();

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args([
            "build",
            "--offline",
            "--message-format",
            "short",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", scratch().join("target"))
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the README's {name} does not build as pasted:\n{stderr}"
    );
    let warnings: Vec<_> = stderr
        .lines()
        .filter(|line| line.contains("warning"))
        .collect();
    assert!(
        warnings.is_empty(),
        "the README's {name} builds with warnings:\n{stderr}"
    );
    dependencies
}

/// The folder of the programs' crates and their build: next to this test's binary.
fn scratch() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    profile.join("readme-programs")
}

/// Writes `text` unless the file holds it already, so that cargo sees an unchanged file as
/// unchanged and does not rebuild it.
fn write_if_changed(path: &Path, text: &str) {
    if fs::read_to_string(path).ok().as_deref() != Some(text) {
        fs::write(path, text).unwrap();
    }
}
