//! [`PostgresServer`]: a PostgreSQL server of the test's own, on a free loopback port, that the
//! test may crash and restart. Never the shared server: a fault test that stopped that one
//! would break every other test running beside it.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// A PostgreSQL cluster in a directory of its own, started with `pg_ctl` on a free port.
/// Stopped (immediately) and deleted when dropped.
#[derive(Debug)]
pub struct PostgresServer {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    running: bool,
}

impl PostgresServer {
    /// Creates and starts one, or says why it cannot (`pg_config` not on `PATH`) and
    /// answers `None`.
    pub fn start() -> Option<Self> {
        let Some(bin) = bindir() else {
            eprintln!("skipped: `pg_config` is not on PATH, so no PostgreSQL of the test's own");
            return None;
        };
        let port = crate::free_port();
        let dir = std::env::temp_dir().join(format!("idem-pg-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("a directory for the cluster");
        let mut server = Self {
            bin,
            dir,
            port,
            running: false,
        };
        server.give_to_postgres_user();
        let data = server.data();
        server.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-instructions",
            ],
        );
        server.restart();
        Some(server)
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts the server (again) on its port and directory, and waits until it accepts
    /// connections.
    pub fn restart(&mut self) {
        assert!(!self.running, "the server is running");
        let (data, log) = (self.data(), self.dir.join("log").display().to_string());
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D", &data, "-o", &options, "-l", &log, "-w", "-t", "60", "start",
            ],
        );
        self.running = true;
    }

    /// Stops the server at once, without a checkpoint (`pg_ctl stop -m immediate`): to its
    /// clients, what a crash looks like. What it acknowledged is on disk.
    pub fn crash(&mut self) {
        if self.running {
            let data = self.data();
            self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
            self.running = false;
        }
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// Runs one of PostgreSQL's programs as the `postgres` OS user when this process is
    /// root (PostgreSQL refuses to run as root), and asserts that it succeeded.
    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let status = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&program)
                .args(args)
                .stdout(Stdio::null())
                .status()
        } else {
            Command::new(&program)
                .args(args)
                .stdout(Stdio::null())
                .status()
        }
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
        assert!(status.success(), "{} {args:?} failed", program.display());
    }

    /// As root, gives the cluster's directory to the `postgres` OS user.
    fn give_to_postgres_user(&self) {
        if is_root() {
            let status = Command::new("chown")
                .args(["postgres:", &self.dir.display().to_string()])
                .status()
                .expect("cannot run chown");
            assert!(status.success(), "chown of the cluster's directory failed");
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.crash();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn bindir() -> Option<PathBuf> {
    let output = Command::new("pg_config").arg("--bindir").output().ok()?;
    output.status.success().then(|| {
        let text = String::from_utf8_lossy(&output.stdout);
        Path::new(text.trim()).to_path_buf()
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0")
}
