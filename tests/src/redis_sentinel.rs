//! [`SentinelGroup`]: a primary, two replicas and a Redis Sentinel that watches them, each a
//! `redis-server` of the test's own on a free port, which a test may fail over, freeze and
//! kill. Never the shared server.
//!
//! The sentinel alone decides (a quorum of one) and declares a primary down after
//! [`DOWN_AFTER`]. Every change waits for its effect by polling the servers' and the
//! sentinel's own state, never a guessed time.

use std::time::Duration;

use redis::Value;

use crate::redis_server::RedisServer;

/// The name the sentinel knows the primary by.
pub const NAME: &str = "idem";
/// How long the primary may be silent before the sentinel declares it down.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// How long a change may take to settle on a slow machine. A primary demoted while it ran
/// is reconfigured by the sentinel at its next look at it, up to ten seconds later.
const SETTLE: Duration = Duration::from_secs(60);

/// A primary with two replicas, and a sentinel. Killed, with their directories, on drop.
#[derive(Debug)]
pub struct SentinelGroup {
    servers: Vec<RedisServer>,
    sentinel: RedisServer,
}

/// What the replicas and the primary need besides their role: a replica syncs at once, not
/// after the default 5 s of diskless delay.
const SYNC_AT_ONCE: [&str; 2] = ["--repl-diskless-sync-delay", "0"];

impl SentinelGroup {
    /// Starts the primary, its two replicas and the sentinel, and waits until the replicas
    /// are in sync and the sentinel sees all three. `None` (saying why) without
    /// `redis-server`.
    pub async fn start() -> Option<Self> {
        let primary = RedisServer::start(&SYNC_AT_ONCE).await?;
        let port = primary.port().to_string();
        let replica = [
            SYNC_AT_ONCE[0],
            SYNC_AT_ONCE[1],
            "--replicaof",
            "127.0.0.1",
            &port,
        ];
        let mut servers = vec![];
        for _ in 0..2 {
            servers.push(RedisServer::start(&replica).await?);
        }
        servers.insert(0, primary);
        let sentinel = RedisServer::start_sentinel(&servers[0], NAME, DOWN_AFTER).await?;
        let group = Self { servers, sentinel };
        group.wait_until_settled().await;
        Some(group)
    }

    /// The sentinel's URL, as a service is configured with it.
    pub fn sentinel_url(&self) -> String {
        self.sentinel.url()
    }

    /// The server on `port`.
    pub fn server(&mut self, port: u16) -> &mut RedisServer {
        self.servers
            .iter_mut()
            .find(|server| server.port() == port)
            .expect("a server of this group")
    }

    /// Sends `command` to the server (or the sentinel) on `port`, on a connection of its own.
    pub async fn ask(&self, port: u16, command: &redis::Cmd) -> redis::RedisResult<Value> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
        let mut connection = client.get_multiplexed_async_connection().await?;
        command.query_async(&mut connection).await
    }

    /// The primary the sentinel names.
    pub async fn primary(&self) -> u16 {
        let address = self
            .ask(
                self.sentinel.port(),
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(NAME),
            )
            .await
            .expect("the sentinel answers");
        let address: Vec<String> = redis::from_redis_value(address).expect("host and port");
        address[1].parse().expect("a port")
    }

    /// The running servers other than the primary the sentinel names.
    pub async fn replicas(&self) -> Vec<u16> {
        let primary = self.primary().await;
        self.running()
            .into_iter()
            .filter(|port| *port != primary)
            .collect()
    }

    /// Asks the sentinel to fail over now (`SENTINEL FAILOVER`), without the primary's
    /// agreement, and waits until it names another primary that reports itself one, with a
    /// replica in sync. Answers the new primary.
    pub async fn fail_over(&self) -> u16 {
        let old = self.primary().await;
        self.ask(
            self.sentinel.port(),
            redis::cmd("SENTINEL").arg("FAILOVER").arg(NAME),
        )
        .await
        .expect("the sentinel starts a failover");
        self.wait_for_new_primary(old).await
    }

    /// Waits until the sentinel names a primary other than `old` that reports itself one,
    /// with a replica in sync, and answers it.
    pub async fn wait_for_new_primary(&self, old: u16) -> u16 {
        self.wait_for("a new primary", async || {
            let primary = self.primary().await;
            if primary == old {
                return Err(format!("the sentinel still names {old}"));
            }
            self.serves(primary).await?;
            Ok(primary)
        })
        .await
    }

    /// Waits until the sentinel names a running primary that reports itself one, every other
    /// running server is its replica in sync, and the sentinel sees each of them as a healthy
    /// replica.
    pub async fn wait_until_settled(&self) {
        self.wait_for("the group to settle", async || {
            let primary = self.primary().await;
            self.serves(primary).await?;
            for replica in self.replicas().await {
                self.replicates(replica, primary).await?;
            }
            self.sentinel_sees_replicas(self.replicas().await.len())
                .await
        })
        .await;
    }

    /// Freezes (`STOP`) or thaws (`CONT`) the server on `port`.
    pub fn signal(&mut self, port: u16, signal: &str) {
        self.server(port).signal(signal);
    }

    /// Kills (`kill -9`) the server on `port`.
    pub fn kill(&mut self, port: u16) {
        self.server(port).kill();
    }

    /// Starts the killed server on `port` again, as a replica of the primary the sentinel
    /// names now (as an operator brings a failed primary back), and waits until the group has
    /// settled around it.
    pub async fn restart_as_replica(&mut self, port: u16) {
        let primary = self.primary().await.to_string();
        let args = [
            SYNC_AT_ONCE[0],
            SYNC_AT_ONCE[1],
            "--replicaof",
            "127.0.0.1",
            &primary,
        ];
        self.server(port).restart_with(&args).await;
        self.wait_until_settled().await;
    }

    /// Whether `primary` is running, reports itself a primary, and has a replica in sync.
    async fn serves(&self, primary: u16) -> Result<(), String> {
        let info = self.replication(primary).await?;
        if !info.contains("role:master") {
            return Err(format!("{primary} is not a primary yet"));
        }
        let replicas: Vec<&str> = info
            .lines()
            .filter(|line| line.starts_with("slave") && line.contains("state="))
            .collect();
        // A primary counts a replica for `WAIT` only once it is online (after a sync, once the
        // replica has acknowledged, up to a second later).
        if replicas.is_empty() || replicas.iter().any(|line| !line.contains("state=online")) {
            return Err(format!(
                "{primary} has a replica that is not online: {replicas:?}"
            ));
        }
        Ok(())
    }

    /// Whether `replica` replicates `primary` over a link that is up.
    async fn replicates(&self, replica: u16, primary: u16) -> Result<(), String> {
        let info = self.replication(replica).await?;
        let following = info.contains("role:slave")
            && info.contains(&format!("master_port:{primary}"))
            && info.contains("master_link_status:up");
        if following {
            Ok(())
        } else {
            Err(format!("{replica} does not replicate {primary} yet"))
        }
    }

    /// Whether the sentinel lists `count` replicas of the primary, none of them down.
    async fn sentinel_sees_replicas(&self, count: usize) -> Result<(), String> {
        let replicas = self
            .ask(
                self.sentinel.port(),
                redis::cmd("SENTINEL").arg("REPLICAS").arg(NAME),
            )
            .await
            .map_err(|error| error.to_string())?;
        let replicas: Vec<Vec<String>> =
            redis::from_redis_value(replicas).map_err(|error| error.to_string())?;
        // Each replica is a flat list of names and values; a healthy one's flags are `slave`
        // alone (no `s_down`, no `disconnected`).
        let healthy = replicas
            .iter()
            .filter(|fields| {
                fields
                    .chunks(2)
                    .any(|pair| pair[0] == "flags" && pair.get(1).is_some_and(|f| f == "slave"))
            })
            .count();
        if healthy >= count {
            Ok(())
        } else {
            Err(format!(
                "the sentinel sees {healthy} healthy replicas of {count}"
            ))
        }
    }

    async fn replication(&self, port: u16) -> Result<String, String> {
        let info = self
            .ask(port, redis::cmd("INFO").arg("replication"))
            .await
            .map_err(|error| format!("{port}: {error}"))?;
        redis::from_redis_value(info).map_err(|error| error.to_string())
    }

    async fn wait_for<T>(
        &self,
        what: &str,
        mut check: impl AsyncFnMut() -> Result<T, String>,
    ) -> T {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            match check().await {
                Ok(value) => return value,
                Err(why) => assert!(
                    tokio::time::Instant::now() < deadline,
                    "waited {SETTLE:?} for {what}: {why}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn running(&self) -> Vec<u16> {
        self.servers
            .iter()
            .filter(|server| server.is_running())
            .map(RedisServer::port)
            .collect()
    }
}
