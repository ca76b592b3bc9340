//! [`MySqlServer`]: a MariaDB server of the test's own, on a free loopback port, that the test
//! may kill and restart. Never the shared server: a fault test that stopped that one would
//! break every other test running beside it.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A MariaDB server with a data directory of its own, started with `mariadbd`. Killed and its
/// directory deleted when dropped.
#[derive(Debug)]
pub struct MySqlServer {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl MySqlServer {
    /// Creates a data directory (`mariadb-install-db`) and starts a server on it, or says why
    /// it cannot (the programs are not installed) and answers `None`.
    pub fn start() -> Option<Self> {
        // `mariadb-install-db --help` exits 1: ask `command -v`, as a shell would.
        let installed = Command::new("sh")
            .args(["-c", "command -v mariadb-install-db"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !installed || !std::path::Path::new(MARIADBD).exists() {
            eprintln!("skipped: MariaDB (mariadb-install-db, {MARIADBD}) is not installed");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("idem-mysql-{:016x}", rand::random::<u64>()));
        // A temporary directory of its own: servers that share one (the default, /tmp) can
        // collide on their temporary tables while `mariadb-install-db` bootstraps them.
        std::fs::create_dir_all(dir.join("tmp")).expect("a directory for the server");
        // mariadbd runs as the `mysql` OS user when started as root: the directory is its.
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "mysql:", &dir.display().to_string()])
                .status()
                .expect("cannot run chown");
            assert!(status.success(), "chown of the server's directory failed");
        }
        let mut server = Self {
            dir,
            port: crate::free_port(),
            child: None,
        };
        let installed = Command::new("mariadb-install-db")
            .args(["--no-defaults", "--user=mysql", "--skip-test-db"])
            .arg("--auth-root-authentication-method=normal")
            .arg(format!("--datadir={}", server.data()))
            .arg(format!("--tmpdir={}", server.dir.join("tmp").display()))
            .output()
            .expect("cannot run mariadb-install-db");
        assert!(
            installed.status.success(),
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&installed.stdout),
            String::from_utf8_lossy(&installed.stderr)
        );
        server.restart();
        Some(server)
    }

    /// The URL of its database `test` (created at the first start).
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }

    /// Starts the server (again) on its port and directory, and waits until it answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let child = Command::new(MARIADBD)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .arg(format!("--pid-file={}", self.dir.join("pid").display()))
            .arg(format!("--log-error={}", self.dir.join("log").display()))
            .arg(format!("--tmpdir={}", self.dir.join("tmp").display()))
            .args([
                "--user=mysql",
                "--bind-address=127.0.0.1",
                "--innodb-buffer-pool-size=32M",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start mariadbd");
        self.child = Some(child);
        self.wait_until_it_answers();
    }

    /// `kill -9`: to its clients, what a crash looks like. What it committed is on disk
    /// (InnoDB's redo log, flushed at each commit by default).
    pub fn crash(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn wait_until_it_answers(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let address = format!("127.0.0.1:{}", self.port);
        while std::net::TcpStream::connect(&address).is_err() {
            assert!(
                Instant::now() < deadline,
                "MariaDB did not start; its log: {}",
                std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let created = Command::new("mysql")
            .args(["-uroot", "-h127.0.0.1", &format!("-P{}", self.port)])
            .args(["-e", "CREATE DATABASE IF NOT EXISTS test"])
            .status()
            .expect("cannot run mysql");
        assert!(created.success(), "the database `test` could not be made");
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }
}

/// Where Debian's package puts the server.
const MARIADBD: &str = "/usr/sbin/mariadbd";

impl Drop for MySqlServer {
    fn drop(&mut self) {
        self.crash();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0")
}
