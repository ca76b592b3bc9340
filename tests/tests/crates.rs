//! The crate family keeps its shape: each store crate is written on `idem-core`'s public store
//! API (what a stranger's store gets) and depends on nothing of the front door, and every
//! library crate that goes to crates.io has a README of its own whose links resolve there.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// The stores of the family, each a crate of its own.
const STORE_CRATES: [&str; 4] = ["idem-redis", "idem-postgres", "idem-mysql", "idem-sqlite"];

/// The crates a user gets from crates.io.
const LIBRARY_CRATES: [&str; 11] = [
    "idem",
    "idem-core",
    "idem-macros",
    "idem-protocol",
    "idem-client",
    "idem-redis",
    "idem-postgres",
    "idem-mysql",
    "idem-sqlite",
    "idem-conformance",
    "idem-check",
];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is inside the repository")
        .to_owned()
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            let text = fs::read_to_string(&path).unwrap();
            found.push((path, text));
        }
    }
    found
}

/// The `[dependencies]` table of a manifest, as its lines.
fn dependencies(manifest: &str) -> Vec<&str> {
    manifest
        .lines()
        .skip_while(|line| *line != "[dependencies]")
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .collect()
}

#[test]
fn a_store_crate_uses_only_the_public_store_api() {
    for store in STORE_CRATES {
        for (path, text) in sources(&repository().join(store).join("src")) {
            assert!(
                !text.contains("__private"),
                "{} names idem-core's `__private`, which is not public API",
                path.display()
            );
        }
        let manifest = fs::read_to_string(repository().join(store).join("Cargo.toml")).unwrap();
        let front_door = dependencies(&manifest)
            .into_iter()
            .filter(|line| line.starts_with("idem ") || line.starts_with("idem="))
            .collect::<Vec<_>>();
        assert!(
            front_door.is_empty(),
            "{store} depends on the front door `idem`; a store depends on idem-core: {front_door:?}"
        );
    }
}

#[test]
fn every_library_crate_has_a_readme_whose_links_resolve_on_crates_io() {
    for name in LIBRARY_CRATES {
        let folder = repository().join(name);
        let manifest = fs::read_to_string(folder.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("\nreadme = \"README.md\"\n"),
            "{name}'s manifest does not name its own README.md"
        );
        let readme = fs::read_to_string(folder.join("README.md"))
            .unwrap_or_else(|error| panic!("{name}/README.md: {error}"));
        // On crates.io a relative link resolves against nothing: every link is absolute.
        for (at, _) in readme.match_indices("](") {
            let target = &readme[at + 2..];
            assert!(
                target.starts_with("https://") || target.starts_with('#'),
                "{name}/README.md links to a relative path, which breaks on crates.io: {}",
                target.lines().next().unwrap_or_default()
            );
        }
    }
}
