//! [`RedisCluster`]: a six-node Redis Cluster of the test's own (three primaries, three
//! replicas), made with `redis-cli --cluster create` on free loopback ports, which a test may
//! fail over, reshard, freeze and kill. Never the shared server.
//!
//! Every change of the cluster waits for its effect by polling the nodes' own state
//! ([`wait_until_settled`](RedisCluster::wait_until_settled)), never a guessed time.

use std::{
    collections::BTreeMap,
    process::{Command, Stdio},
    time::Duration,
};

use redis::Value;

use crate::redis_server::{RedisServer, acknowledged};

/// How long a node may take to notice a failure (`cluster-node-timeout`): short, so that a
/// replica takes over a killed primary within a few seconds.
const NODE_TIMEOUT: Duration = Duration::from_millis(1000);
/// How long the cluster may take to settle after a change, on a slow machine.
const SETTLE: Duration = Duration::from_secs(60);

/// Six `redis-server` processes in one cluster. Killed, with their directories, on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// A node's view of which primary serves which slots: the first slot of each range, its last,
/// and the primary's port.
type SlotMap = BTreeMap<u16, (u16, u16)>;

impl RedisCluster {
    /// Starts six nodes, makes them a cluster of three primaries with a replica each, and
    /// waits until every node reports `cluster_state:ok` and every replica is in sync. `None`
    /// (saying why) without `redis-server` and `redis-cli`.
    pub async fn start() -> Option<Self> {
        if !tool_found("redis-cli") {
            eprintln!("skipped: `redis-cli` is not on PATH");
            return None;
        }
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let bus = crate::free_port().to_string();
            let timeout = NODE_TIMEOUT.as_millis().to_string();
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-port",
                &bus,
                "--cluster-node-timeout",
                &timeout,
                // A replica syncs at once, not after the default 5 s of diskless delay.
                "--repl-diskless-sync-delay",
                "0",
            ];
            nodes.push(RedisServer::start(&args).await?);
        }
        let cluster = Self { nodes };
        let mut create = vec!["--cluster".to_owned(), "create".to_owned()];
        create.extend(cluster.nodes.iter().map(|node| address(node.port())));
        create.extend(["--cluster-replicas", "1", "--cluster-yes"].map(str::to_owned));
        redis_cli(create).await;
        cluster.wait_until_settled().await;
        Some(cluster)
    }

    /// The seed nodes' URLs, as a service is configured with them.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The node listening on `port`.
    pub fn node(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|node| node.port() == port)
            .expect("a node of this cluster")
    }

    /// Sends `command` to the node on `port`, on a connection of its own.
    pub async fn ask(&self, port: u16, command: &redis::Cmd) -> redis::RedisResult<Value> {
        let client = redis::Client::open(address_url(port))?;
        let mut connection = client.get_multiplexed_async_connection().await?;
        command.query_async(&mut connection).await
    }

    /// The slot of a Redis key (`CLUSTER KEYSLOT`).
    pub async fn slot_of(&self, key: &str) -> u16 {
        let slot = self
            .ask(
                self.running()[0],
                redis::cmd("CLUSTER").arg("KEYSLOT").arg(key),
            )
            .await
            .expect("a running node answers");
        match slot {
            Value::Int(slot) => slot as u16,
            other => panic!("CLUSTER KEYSLOT answered {other:?}"),
        }
    }

    /// The port of the primary that serves `slot`, as the running nodes agree.
    pub async fn primary_of(&self, slot: u16) -> u16 {
        let map = self
            .slot_map(self.running()[0])
            .await
            .expect("a running node answers");
        map.range(..=slot)
            .next_back()
            .filter(|(_, (last, _))| slot <= *last)
            .map(|(_, (_, primary))| *primary)
            .expect("every slot is served")
    }

    /// The port of `primary`'s replica.
    pub async fn replica_of(&self, primary: u16) -> u16 {
        let role = self
            .ask(primary, &redis::cmd("ROLE"))
            .await
            .expect("the primary answers");
        let replicas = match role {
            Value::Array(fields) => fields.into_iter().nth(2),
            _ => None,
        };
        let Some(Value::Array(replicas)) = replicas else {
            panic!("{primary} is not a primary");
        };
        let [Value::Array(first), ..] = replicas.as_slice() else {
            panic!("{primary} has no replica");
        };
        match first.get(1) {
            Some(Value::BulkString(port)) => String::from_utf8_lossy(port).parse().unwrap(),
            other => panic!("ROLE lists a replica without a port: {other:?}"),
        }
    }

    /// `kill -SIGNAL` on the node on `port` (`STOP` freezes it, `CONT` thaws it).
    pub fn signal(&mut self, port: u16, signal: &str) {
        self.node(port).signal(signal);
    }

    /// Kills the node on `port` (`kill -9`).
    pub fn kill(&mut self, port: u16) {
        self.node(port).kill();
    }

    /// Starts the node on `port` again, on its directory: it keeps its cluster configuration
    /// (not its data), and rejoins as a replica of whoever took its slots over.
    pub async fn restart(&mut self, port: u16) {
        self.node(port).restart().await;
    }

    /// Makes the replica on `port` take its primary's slots over at once, without the
    /// primary's consent or an election (`CLUSTER FAILOVER TAKEOVER`), and waits until the
    /// cluster agrees.
    pub async fn take_over(&self, port: u16) {
        self.ask(port, redis::cmd("CLUSTER").arg("FAILOVER").arg("TAKEOVER"))
            .await
            .expect("the replica accepts the takeover");
        self.wait_for_primary(port).await;
    }

    /// A manual failover of the replica on `port` (`CLUSTER FAILOVER`): its primary stops
    /// writes until the replica has caught up, then the replica is promoted. Waits until the
    /// cluster agrees.
    ///
    /// Redis gives a manual failover 5 s: the replica must reach exactly the replication
    /// offset its primary announced when it paused, and win an election, in that time, or the
    /// failover is abandoned (the replica logs "Manual failover timed out." and stays a
    /// replica). Under load on a busy machine that happens now and then; an operator then asks
    /// again, and so does this, each time the replica's log says it gave up.
    pub async fn fail_over(&self, port: u16) {
        let deadline = tokio::time::Instant::now() + SETTLE;
        let mut abandoned = self.abandoned_failovers(port);
        self.ask(port, redis::cmd("CLUSTER").arg("FAILOVER"))
            .await
            .expect("the replica accepts the failover");
        loop {
            if self.is_primary(port).await && self.settled().await.is_ok() {
                return;
            }
            let now_abandoned = self.abandoned_failovers(port);
            if now_abandoned > abandoned {
                abandoned = now_abandoned;
                eprintln!("{port}: the manual failover timed out; asking again");
                // Refused only if the replica became a primary since it was asked: the loop
                // sees that next.
                let _ = self.ask(port, redis::cmd("CLUSTER").arg("FAILOVER")).await;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{port} did not become a primary after {abandoned} abandoned manual failovers"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// How many manual failovers the node on `port` has abandoned, as its log says.
    fn abandoned_failovers(&self, port: u16) -> usize {
        let node = self
            .nodes
            .iter()
            .find(|node| node.port() == port)
            .expect("a node of this cluster");
        node.log().matches("Manual failover timed out").count()
    }

    async fn is_primary(&self, port: u16) -> bool {
        let role = self.ask(port, &redis::cmd("ROLE")).await;
        matches!(&role, Ok(Value::Array(fields))
            if matches!(fields.first(), Some(Value::BulkString(role)) if role == b"master"))
    }

    /// Waits until the node on `port` is a primary and the cluster has settled around it.
    pub async fn wait_for_primary(&self, port: u16) {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            if self.is_primary(port).await && self.settled().await.is_ok() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{port} did not become a primary: {:?}",
                self.ask(port, &redis::cmd("ROLE")).await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Moves `slots` slots, with their keys, from the primary on `from` to the primary on
    /// `to` (`redis-cli --cluster reshard`), and waits until the cluster agrees.
    pub async fn reshard(&self, from: u16, to: u16, slots: u16) {
        let (from_id, to_id) = (self.id(from).await, self.id(to).await);
        redis_cli(vec![
            "--cluster".into(),
            "reshard".into(),
            address(from),
            "--cluster-from".into(),
            from_id,
            "--cluster-to".into(),
            to_id,
            "--cluster-slots".into(),
            slots.to_string(),
            "--cluster-yes".into(),
        ])
        .await;
        self.wait_until_settled().await;
    }

    /// Waits until every running node reports `cluster_state:ok`, all of them map every slot
    /// to the same running primary, and every running replica's link to its primary is up.
    pub async fn wait_until_settled(&self) {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            let Err(why) = self.settled().await else {
                return;
            };
            assert!(
                tokio::time::Instant::now() < deadline,
                "the cluster did not settle: {why}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn settled(&self) -> Result<(), String> {
        let running = self.running();
        let mut maps = Vec::new();
        for &port in &running {
            let info = self
                .ask(port, redis::cmd("CLUSTER").arg("INFO"))
                .await
                .map_err(|error| format!("{port}: {error}"))?;
            let info: String = redis::from_redis_value(info).map_err(|e| e.to_string())?;
            if !info.contains("cluster_state:ok") {
                return Err(format!("{port} is not ok"));
            }
            maps.push(self.slot_map(port).await.map_err(|e| e.to_string())?);
            let replication = self
                .ask(port, redis::cmd("INFO").arg("replication"))
                .await
                .map_err(|error| format!("{port}: {error}"))?;
            let replication: String =
                redis::from_redis_value(replication).map_err(|e| e.to_string())?;
            if replication.contains("role:slave") && !replication.contains("master_link_status:up")
            {
                return Err(format!("{port} is a replica out of sync"));
            }
        }
        let first = maps.first().ok_or("no node runs")?;
        if maps.iter().any(|map| map != first) {
            return Err("the nodes disagree on who serves which slots".into());
        }
        if let Some((_, (_, primary))) = first.iter().find(|(_, (_, p))| !running.contains(p)) {
            return Err(format!("slots are mapped to {primary}, which is down"));
        }
        self.replicas_acknowledge(first).await
    }

    /// Whether the replica of every primary that has one acknowledges its writes. After a
    /// sync a primary streams nothing to a replica until the replica's first acknowledgement,
    /// up to a second later, and `WAIT` does not count it before then.
    async fn replicas_acknowledge(&self, map: &SlotMap) -> Result<(), String> {
        let primaries: std::collections::BTreeSet<u16> =
            map.values().map(|(_, primary)| *primary).collect();
        for primary in primaries {
            let replication = self
                .ask(primary, redis::cmd("INFO").arg("replication"))
                .await
                .map_err(|error| format!("{primary}: {error}"))?;
            let replication: String =
                redis::from_redis_value(replication).map_err(|e| e.to_string())?;
            if !replication.contains("slave0:") {
                continue;
            }
            let probe = self.key_served_by(primary, map).await;
            if !acknowledged(&address_url(primary), &probe, 1).await {
                return Err(format!("the replica of {primary} does not acknowledge yet"));
            }
        }
        Ok(())
    }

    /// A key that `primary` serves in `map`: `probe-N` for the first `N` that hashes to one of
    /// its slots (a primary serves a third of them, so a few tries).
    async fn key_served_by(&self, primary: u16, map: &SlotMap) -> String {
        for n in 0.. {
            let key = format!("probe-{n}");
            let slot = self.slot_of(&key).await;
            let served_by = map
                .range(..=slot)
                .next_back()
                .filter(|(_, (last, _))| slot <= *last)
                .map(|(_, (_, primary))| *primary);
            if served_by == Some(primary) {
                return key;
            }
        }
        unreachable!("some probe hashes to every primary's slots")
    }

    /// The node's view of the slots (`CLUSTER SLOTS`).
    async fn slot_map(&self, port: u16) -> redis::RedisResult<SlotMap> {
        let slots = self.ask(port, redis::cmd("CLUSTER").arg("SLOTS")).await?;
        let Value::Array(ranges) = slots else {
            return Ok(SlotMap::new());
        };
        let mut map = SlotMap::new();
        for range in ranges {
            let Value::Array(fields) = range else {
                continue;
            };
            if let [
                Value::Int(first),
                Value::Int(last),
                Value::Array(primary),
                ..,
            ] = fields.as_slice()
                && let Some(Value::Int(primary_port)) = primary.get(1)
            {
                map.insert(*first as u16, (*last as u16, *primary_port as u16));
            }
        }
        Ok(map)
    }

    async fn id(&self, port: u16) -> String {
        let id = self
            .ask(port, redis::cmd("CLUSTER").arg("MYID"))
            .await
            .expect("the node answers");
        redis::from_redis_value(id).expect("an id")
    }

    fn running(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|node| node.is_running())
            .map(RedisServer::port)
            .collect()
    }
}

fn address(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

fn address_url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

fn tool_found(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Runs `redis-cli args` to its end, off the runtime's threads, and fails the test if it
/// fails.
async fn redis_cli(args: Vec<String>) {
    let output = tokio::task::spawn_blocking(move || {
        Command::new("redis-cli")
            .args(&args)
            .output()
            .expect("redis-cli runs")
    })
    .await
    .expect("redis-cli's thread ends");
    assert!(
        output.status.success(),
        "redis-cli failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
