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
    /// A configuration file, the first argument when there is one (a sentinel's).
    config: Option<PathBuf>,
    /// What it keeps on disk, as arguments.
    persistence: Vec<String>,
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

    /// Starts a Redis Sentinel that watches `primary` under the name `name`, with a quorum of
    /// one: it alone decides that the primary is down (after `down_after`) and promotes its
    /// replica.
    pub async fn start_sentinel(
        primary: &RedisServer,
        name: &str,
        down_after: Duration,
    ) -> Option<Self> {
        let mut sentinel = Self::unstarted(&[], &[])?;
        let config = sentinel.dir.join("sentinel.conf");
        let monitor = format!(
            "sentinel monitor {name} 127.0.0.1 {port} 1\n\
             sentinel down-after-milliseconds {name} {down_after}\n\
             sentinel failover-timeout {name} 2000\n",
            port = primary.port(),
            down_after = down_after.as_millis(),
        );
        std::fs::write(&config, monitor).expect("the sentinel's configuration is written");
        sentinel.config = Some(config);
        sentinel.extra = vec!["--sentinel".to_owned()];
        sentinel.restart().await;
        Some(sentinel)
    }

    /// Starts one with an append-only file that it syncs once a second (`appendfsync
    /// everysec`, Redis's default when the file is on): a `kill -9` may lose the last second
    /// of what it acknowledged, unless a write waited for the sync (`WAITAOF`).
    pub async fn start_with_aof_every_second() -> Option<Self> {
        Self::start_with(
            &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
            ],
            &[],
        )
        .await
    }

    /// Starts a replica of `primary` that keeps nothing on disk, and waits until it is in
    /// sync.
    pub async fn start_replica_of(primary: &RedisServer) -> Option<Self> {
        let port = primary.port().to_string();
        let args = [
            "--repl-diskless-sync-delay",
            "0",
            "--replicaof",
            "127.0.0.1",
            &port,
        ];
        let replica = Self::start(&args).await?;
        replica.wait_in_sync(primary).await;
        Some(replica)
    }

    /// Waits until this replica of `primary` is in sync: its link is up, and it acknowledges
    /// the primary's writes (see [`acknowledged`]). After a sync a primary streams nothing to
    /// a replica until the replica's first acknowledgement, up to a second later, and `WAIT`
    /// does not count it before then.
    pub async fn wait_in_sync(&self, primary: &RedisServer) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let ours = replication(self).await;
            if ours.contains("master_link_status:up")
                && acknowledged(&primary.url(), "probe", 1).await
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the replica did not sync: {ours}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn start_with(persistence: &[&str], extra: &[&str]) -> Option<Self> {
        let mut server = Self::unstarted(persistence, extra)?;
        server.restart().await;
        Some(server)
    }

    /// A server on a free port and a directory of its own, not started yet; `None` when
    /// `redis-server` is not on `PATH`.
    fn unstarted(persistence: &[&str], extra: &[&str]) -> Option<Self> {
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
        Some(Self {
            child: None,
            port: crate::free_port(),
            dir,
            config: None,
            persistence: owned(persistence),
            extra: owned(extra),
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it runs (it was not killed, or was started again).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts it again with `extra` in place of the extra arguments it was started with (a
    /// killed primary coming back as a replica of the promoted one, say).
    pub async fn restart_with(&mut self, extra: &[&str]) {
        self.extra = owned(extra);
        self.restart().await;
    }

    /// What the server has logged so far, across its restarts (empty before it logs).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on its port and directory, and waits until it answers.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let child = Command::new("redis-server")
            .args(&self.config)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--daemonize",
                "no",
                "--dir",
                &self.dir.display().to_string(),
                "--logfile",
                &self.log_path().display().to_string(),
            ])
            .args(&self.persistence)
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

/// Whether `replicas` replicas of the primary at `url` acknowledge a write to `key` within a
/// tenth of a second (`SET`, then `WAIT` on the same connection): what a durable store needs
/// of them, asked directly.
pub async fn acknowledged(url: &str, key: &str, replicas: usize) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let Ok(mut connection) = client.get_multiplexed_async_connection().await else {
        return false;
    };
    let acknowledged: redis::RedisResult<(String, usize)> = redis::pipe()
        .cmd("SET")
        .arg(key)
        .arg(1)
        .arg("PX")
        .arg(1000)
        .cmd("WAIT")
        .arg(replicas)
        .arg(100)
        .query_async(&mut connection)
        .await;
    acknowledged.is_ok_and(|(_, count)| count >= replicas)
}

/// `INFO replication` of `server`.
async fn replication(server: &RedisServer) -> String {
    let mut connection = redis::Client::open(server.url())
        .expect("a valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("the server answers");
    redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut connection)
        .await
        .expect("the server answers")
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
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
