//! [`RedisServer`]: a `redis-server` of the test's own, on a free loopback port, that the test
//! may freeze, kill and restart. Never the shared server.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

/// A `redis-server` process of the test's own. Killed (and its directory deleted) when
/// dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts one that keeps nothing on disk, with `extra` arguments, or says why it cannot
    /// (`redis-server` not on `PATH`) and answers `None`.
    pub async fn start(extra: &[&str]) -> Option<Self> {
        Self::start_with(&["--save", "", "--appendonly", "no"], extra).await
    }

    /// Starts one that keeps what it acknowledged: an append-only file synced on every
    /// write (`appendfsync always`), so a `kill -9` loses nothing it answered.
    pub async fn start_durable() -> Option<Self> {
        Self::start_with(
            &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
            &[],
        )
        .await
    }

    async fn start_with(persistence: &[&str], extra: &[&str]) -> Option<Self> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            eprintln!("skipped: `redis-server` is not on PATH");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("idem-redis-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("a directory for the server");
        let mut server = Self {
            child: None,
            port: crate::free_port(),
            dir,
            extra: persistence
                .iter()
                .chain(extra)
                .map(|arg| (*arg).to_owned())
                .collect(),
        };
        server.restart().await;
        Some(server)
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on its port and directory, and waits until it answers.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--daemonize",
                "no",
                "--dir",
                &self.dir.display().to_string(),
            ])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start redis-server");
        self.child = Some(child);
        let client = redis::Client::open(self.url()).expect("a valid URL");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut connection) = client.get_multiplexed_async_connection().await {
                let pong: redis::RedisResult<String> =
                    redis::cmd("PING").query_async(&mut connection).await;
                if pong.is_ok() {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "redis-server did not come up"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the server (SIGKILL): what a crash or an OOM kill looks like to its clients.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends a signal to the server (`STOP` freezes it, as a stuck host would; `CONT` thaws).
    pub fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("the server is running");
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .expect("cannot run kill");
        assert!(status.success(), "kill -{signal} failed");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A frozen server does not die of SIGKILL until it is thawed.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
