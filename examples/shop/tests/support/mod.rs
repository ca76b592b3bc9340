//! What the tests of abandoned transfers share: the `shop` and `bank` binaries as processes,
//! the transfers their clients give up on, the bank's statement and the shop's books, and the
//! two scenarios each durable store runs (the shop killed with SIGKILL while clients give up;
//! two shops resuming the same operations). Each test file uses part of it.
#![allow(dead_code)]

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    process::Stdio,
    time::Duration,
};

use axum::http::Method;
use idem::{IdempotencyKey, Principal, Scope, StoreKey, steps::step_key};
use idem_tests::{free_port, key};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    time::Instant,
};

/// Where a test reads what the shop wrote in its database: its ledger rows, and how many
/// operations are still in flight.
pub(crate) trait Books {
    /// Every transfer row of the shop's ledger.
    async fn rows(&self) -> Vec<Row>;
    /// The records still in flight.
    async fn in_flight(&self) -> i64;
}

/// The shop's ledger rows in PostgreSQL (its `shop_transfers` table).
pub(crate) async fn postgres_rows(pool: &sqlx::PgPool) -> Vec<Row> {
    let rows: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT id, bank_transfer FROM shop_transfers")
            .fetch_all(pool)
            .await
            .unwrap();
    rows.into_iter()
        .map(|(id, bank_transfer)| Row {
            id,
            bank_transfer: bank_transfer.unwrap_or_default(),
        })
        .collect()
}

/// The shop's books and records both in PostgreSQL.
pub(crate) struct PostgresBooks(pub(crate) sqlx::PgPool);

impl Books for PostgresBooks {
    async fn rows(&self) -> Vec<Row> {
        postgres_rows(&self.0).await
    }

    async fn in_flight(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM idempotency_records WHERE state = 'in_flight'")
            .fetch_one(&self.0)
            .await
            .unwrap()
    }
}

/// How long the shop has, after its last restart, to finish every abandoned transfer.
pub(crate) const SETTLE: Duration = Duration::from_secs(60);

/// A binary of the shop package as a process, its stderr in a log file; killed when dropped.
pub(crate) struct Process {
    child: Child,
    exe: &'static str,
    args: Vec<String>,
    vars: Vec<(&'static str, String)>,
    log: PathBuf,
    pub(crate) url: String,
}

impl Process {
    /// Starts `exe` with `args` and `vars`, and waits until it says where it listens.
    pub(crate) async fn start(
        exe: &'static str,
        args: Vec<String>,
        vars: Vec<(&'static str, String)>,
        log: PathBuf,
    ) -> Self {
        let mut process = Self {
            child: spawn(exe, &args, &vars, &log),
            exe,
            args,
            vars,
            log,
            url: String::new(),
        };
        process.url = process.listening().await;
        process
    }

    /// The URL its first line of stdout names: `<name>: listening on <url>`.
    pub(crate) async fn listening(&mut self) -> String {
        let stdout = self.child.stdout.take().expect("stdout is piped");
        let (mut stdout, mut line) = (BufReader::new(stdout), String::new());
        let read = stdout.read_line(&mut line);
        if tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .is_err()
        {
            panic!("{} did not start; its log: {}", self.exe, self.log_text());
        }
        // The rest of stdout is read to its end: a process whose stdout is closed fails at its
        // next line.
        tokio::spawn(async move {
            let mut rest = String::new();
            while stdout.read_line(&mut rest).await.is_ok_and(|read| read > 0) {
                rest.clear();
            }
        });
        line.trim()
            .split_once(": listening on ")
            .map(|(_, url)| url.to_owned())
            .unwrap_or_else(|| panic!("{}: {line:?}; its log: {}", self.exe, self.log_text()))
    }

    /// `kill -9`, and waits until it is gone.
    pub(crate) async fn kill(&mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }

    /// Starts it again, on the same address and with the same settings.
    pub(crate) async fn restart(&mut self) {
        self.child = spawn(self.exe, &self.args, &self.vars, &self.log);
        self.url = self.listening().await;
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

pub(crate) fn spawn(
    exe: &str,
    args: &[String],
    vars: &[(&'static str, String)],
    log: &PathBuf,
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("a log file");
    let mut command = Command::new(exe);
    command
        .args(args)
        .env_remove("IDEM_STORE")
        .env_remove("SHOP_NATS_URL")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true);
    for (name, value) in vars {
        command.env(name, value);
    }
    command.spawn().expect("the binary starts")
}

pub(crate) fn log_path(test: &str, what: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "idem-{test}-{what}-{:08x}.log",
        rand::random::<u32>()
    ))
}

/// The bank, on `port`, taking `delay_ms` per transfer.
pub(crate) async fn bank(port: u16, delay_ms: u64, log: PathBuf) -> Process {
    Process::start(
        env!("CARGO_BIN_EXE_bank"),
        vec!["--addr".to_owned(), format!("127.0.0.1:{port}")],
        vec![("SHOP_TRANSFER_DELAY_MS", delay_ms.to_string())],
        log,
    )
    .await
}

/// A shop on `port`, its records in `store`, its bank at `bank_url`, resuming an abandoned
/// transfer 300 ms after nobody holds it.
pub(crate) async fn shop(
    port: u16,
    store: &str,
    bank_url: &str,
    extra: &[(&'static str, &str)],
    log: PathBuf,
) -> Process {
    let mut vars = vec![
        ("IDEM_STORE", store.to_owned()),
        ("SHOP_ADDR", format!("127.0.0.1:{port}")),
        ("SHOP_BANK_URL", bank_url.to_owned()),
        ("SHOP_RESUME_AFTER_MS", "300".to_owned()),
    ];
    vars.extend(
        extra
            .iter()
            .map(|(name, value)| (*name, (*value).to_owned())),
    );
    Process::start(env!("CARGO_BIN_EXE_shop"), Vec::new(), vars, log).await
}

/// One transfer a client asked for.
#[derive(Clone, Debug)]
pub(crate) struct Operation {
    user: String,
    key: String,
    amount: i64,
}

impl Operation {
    pub(crate) fn new(index: usize) -> Self {
        Self {
            user: format!("user{}", index % 7),
            key: key(),
            amount: 1000 + i64::try_from(index).unwrap(),
        }
    }

    pub(crate) fn body(&self) -> Value {
        json!({ "amount": self.amount, "currency": "JPY", "toAccount": "0000000" })
    }

    /// The key the operation's bank step sends the bank.
    pub(crate) fn bank_key(&self) -> String {
        let operation = StoreKey::new(
            &Scope::User,
            Some(&Principal::new(self.user.as_str())),
            &Method::POST,
            "/transfers",
            &IdempotencyKey::new(self.key.as_str()).unwrap(),
        );
        step_key(&operation, "bank-order").as_str().to_owned()
    }

    /// Sends the transfer once, giving up after a second, as an impatient client would.
    pub(crate) async fn send_and_give_up(&self, shop_url: &str) {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let _ = client
            .post(format!("{shop_url}/transfers"))
            .bearer_auth(&self.user)
            .header("idempotency-key", &self.key)
            .json(&self.body())
            .send()
            .await;
    }

    /// Retries the transfer as a patient client does (through 409), and answers the 201's body.
    pub(crate) async fn retry(&self, shop_url: &str) -> Value {
        let client = reqwest::Client::new();
        for _ in 0..600 {
            let answer = client
                .post(format!("{shop_url}/transfers"))
                .bearer_auth(&self.user)
                .header("idempotency-key", &self.key)
                .json(&self.body())
                .send()
                .await
                .unwrap();
            let status = answer.status();
            let body: Value = answer.json().await.unwrap();
            match status.as_u16() {
                201 => return body,
                409 => tokio::time::sleep(Duration::from_millis(100)).await,
                other => panic!("a retry of {self:?} got {other}: {body}"),
            }
        }
        panic!("a retry of {self:?} stayed in flight for a minute");
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BankTransfer {
    /// The bank's id of the transfer.
    pub(crate) id: String,
    /// The key it was ordered under.
    pub(crate) key: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Statement {
    items: Vec<BankTransfer>,
}

/// What the bank moved for the shop.
pub(crate) async fn bank_statement(bank_url: &str) -> Vec<BankTransfer> {
    let statement: Statement = reqwest::Client::new()
        .get(format!("{bank_url}/transfers"))
        .bearer_auth("shop")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    statement.items
}

/// A ledger row: its transfer id and the bank transfer it records.
#[derive(Debug)]
pub(crate) struct Row {
    /// The transfer's id.
    pub(crate) id: String,
    /// The bank transfer it records.
    pub(crate) bank_transfer: String,
}

/// Whether the books agree: every bank transfer has exactly one ledger row, every row its
/// bank transfer, and no operation moved money twice. `Err` says what does not hold.
pub(crate) fn books_agree(
    bank: &[BankTransfer],
    rows: &[Row],
    operations: &[Operation],
) -> Result<(), String> {
    let mut rows_per_transfer: HashMap<&str, usize> = HashMap::new();
    for row in rows {
        *rows_per_transfer
            .entry(row.bank_transfer.as_str())
            .or_default() += 1;
    }
    let moved: HashSet<&str> = bank.iter().map(|transfer| transfer.id.as_str()).collect();
    for transfer in bank {
        match rows_per_transfer.get(transfer.id.as_str()) {
            Some(1) => {}
            count => {
                return Err(format!(
                    "the bank transfer {} has {count:?} ledger rows",
                    transfer.id
                ));
            }
        }
    }
    if let Some(row) = rows
        .iter()
        .find(|row| !moved.contains(row.bank_transfer.as_str()))
    {
        return Err(format!("the ledger row {} has no bank transfer", row.id));
    }
    let mut per_key: HashMap<&str, usize> = HashMap::new();
    for transfer in bank {
        *per_key.entry(transfer.key.as_str()).or_default() += 1;
    }
    if let Some((key, count)) = per_key.iter().find(|(_, count)| **count > 1) {
        return Err(format!("the bank moved money {count} times under {key}"));
    }
    let ours: HashSet<String> = operations.iter().map(Operation::bank_key).collect();
    if let Some(stranger) = bank.iter().find(|transfer| !ours.contains(&transfer.key)) {
        return Err(format!(
            "a bank transfer under a key of no operation: {stranger:?}"
        ));
    }
    Ok(())
}

/// Polls until `check` answers `Ok`, for at most [`SETTLE`]; panics with its last answer.
pub(crate) async fn settles<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + SETTLE;
    loop {
        let verdict = check().await;
        match verdict {
            Ok(()) => return,
            Err(why) if Instant::now() >= deadline => {
                panic!("{what}: not settled within {SETTLE:?}: {why}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// The shop's own ledger, through its API: each user's transfers.
pub(crate) async fn api_rows(shop_url: &str, operations: &[Operation]) -> Vec<Row> {
    let users: HashSet<&str> = operations.iter().map(|op| op.user.as_str()).collect();
    let mut rows = Vec::new();
    for user in users {
        let list: Value = reqwest::Client::new()
            .get(format!("{shop_url}/transfers"))
            .bearer_auth(user)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for item in list["items"].as_array().unwrap() {
            rows.push(Row {
                id: item["id"].as_str().unwrap().to_owned(),
                bank_transfer: item["bankTransfer"].as_str().unwrap().to_owned(),
            });
        }
    }
    rows
}

/// Sends every operation once, each client giving up after a second.
pub(crate) async fn abandon_all(operations: &[Operation], shop_urls: &[&str]) {
    let sent: Vec<_> = operations
        .iter()
        .enumerate()
        .map(|(index, operation)| {
            let (operation, url) = (
                operation.clone(),
                shop_urls[index % shop_urls.len()].to_owned(),
            );
            tokio::spawn(async move { operation.send_and_give_up(&url).await })
        })
        .collect();
    for sending in sent {
        sending.await.unwrap();
    }
}

/// 100 transfers from clients that give up after a second, the shop killed with SIGKILL at
/// five random moments and restarted, and nobody retrying: the shop, its records at
/// `store`, finishes every transfer the bank made, once, as `books` shows.
pub(crate) async fn abandoned_across_crashes(test: &str, store: &str, books: impl Books) {
    let bank = bank(free_port(), 300, log_path(test, "bank")).await;
    let port = free_port();
    let mut shop = shop(port, store, &bank.url, &[], log_path(test, "shop")).await;
    let operations: Vec<Operation> = (0..100).map(Operation::new).collect();
    send_through_crashes(&operations, &mut shop, 5).await;
    settle_then_retry(&shop, &bank, &operations, &books).await;
}

/// Sends `operations` to the shop at `url` one after another, 40 to 120 ms apart, each client
/// giving up after a second, while the shop is killed with SIGKILL at `kills` random moments
/// and restarted; answers once every client has given up.
pub(crate) async fn send_through_crashes(
    operations: &[Operation],
    shop: &mut Process,
    kills: usize,
) {
    let url = shop.url.clone();
    let sent: Vec<Operation> = operations.to_vec();
    let sender = tokio::spawn(async move {
        let mut sending = Vec::new();
        for operation in sent {
            let url = url.clone();
            sending.push(tokio::spawn(async move {
                operation.send_and_give_up(&url).await
            }));
            tokio::time::sleep(Duration::from_millis(rand::random_range(40..120))).await;
        }
        for sent in sending {
            sent.await.unwrap();
        }
    });
    for _ in 0..kills {
        tokio::time::sleep(Duration::from_millis(rand::random_range(600..2400))).await;
        shop.kill().await;
        shop.restart().await;
    }
    sender.await.unwrap();
}

/// After [`send_through_crashes`]: the books settle within [`SETTLE`] with no operation left
/// in flight, then every client's retry gets 201 with the transfer the bank made for it, and
/// the bank made each transfer once.
pub(crate) async fn settle_then_retry(
    shop: &Process,
    bank: &Process,
    operations: &[Operation],
    books: &impl Books,
) {
    settles("the books after the crashes", || async {
        let statement = bank_statement(&bank.url).await;
        books_agree(&statement, &books.rows().await, operations)?;
        match books.in_flight().await {
            0 => Ok(()),
            open => Err(format!("{open} operations are still in flight")),
        }
    })
    .await;
    let made = bank_statement(&bank.url).await;
    eprintln!(
        "the bank made {} of {} transfers before any retry; the shop resumed {} operations",
        made.len(),
        operations.len(),
        resumptions(&shop.log_text()).values().sum::<usize>()
    );
    assert!(
        !made.is_empty(),
        "some transfers reached the bank: the test exercised something; shop log: {}",
        shop.log_text()
    );
    // A client that retries now gets the transfer the shop finished, whatever happened.
    let moved: HashMap<String, String> = made
        .iter()
        .map(|transfer| (transfer.key.clone(), transfer.id.clone()))
        .collect();
    for operation in operations {
        let transfer = operation.retry(&shop.url).await;
        if let Some(bank_transfer) = moved.get(&operation.bank_key()) {
            assert_eq!(
                transfer["bankTransfer"],
                bank_transfer.as_str(),
                "{operation:?}: the retry's transfer is the one the bank made"
            );
        }
    }
    let statement = bank_statement(&bank.url).await;
    books_agree(&statement, &books.rows().await, operations).unwrap();
    assert_eq!(
        statement.len(),
        operations.len(),
        "after the retries, every transfer was made once"
    );
}

/// Two shops on one database (`store`), and transfers stopped while the bank was away: each
/// is resumed by one shop at a time, never by both at once (the bank never saw two runs of
/// one operation together), and finished once, as `books` shows.
pub(crate) async fn two_shops_resume_each_operation_once(
    test: &str,
    store: &str,
    books: impl Books,
) {
    let bank_port = free_port();
    let bank_url = format!("http://127.0.0.1:{bank_port}");
    let extra = [("SHOP_BANK_DEADLINE_MS", "1500")];
    let first = shop(
        free_port(),
        store,
        &bank_url,
        &extra,
        log_path(test, "shop-1"),
    )
    .await;
    let second = shop(
        free_port(),
        store,
        &bank_url,
        &extra,
        log_path(test, "shop-2"),
    )
    .await;
    let operations: Vec<Operation> = (0..20).map(Operation::new).collect();
    abandon_all(&operations, &[&first.url, &second.url]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bank = bank(bank_port, 50, log_path(test, "bank")).await;
    settles("the books of two shops", || async {
        let statement = bank_statement(&bank.url).await;
        books_agree(&statement, &books.rows().await, &operations)?;
        match (statement.len(), books.in_flight().await) {
            (20, 0) => Ok(()),
            (made, open) => Err(format!("{made} of 20 made, {open} in flight")),
        }
    })
    .await;
    let bank_log = bank.log_text();
    assert!(
        !bank_log.contains("outcome=\"conflict\""),
        "the bank saw one operation's order twice at once: {bank_log}"
    );
    let resumed = |shop: &Process| shop.log_text().matches("outcome=\"resumed\"").count();
    assert!(
        resumed(&first) + resumed(&second) >= 20,
        "every operation was resumed by a shop"
    );
}

/// How many times the resumer of the shop whose log is `log` ran each operation, by the
/// prefix of its store key the log names.
pub(crate) fn resumptions(log: &str) -> HashMap<String, usize> {
    let mut runs = HashMap::new();
    for key in keys_of(log, "resumed an operation its client abandoned") {
        *runs.entry(key).or_default() += 1;
    }
    runs
}

/// The operations the shop whose log is `log` suspended (a step failed and may pass later),
/// by the prefix of their store keys.
pub(crate) fn suspended(log: &str) -> HashSet<String> {
    keys_of(log, "outcome=\"suspended\"").collect()
}

/// The key (the prefix of a store key) each line of `log` that contains `what` names last.
fn keys_of<'a>(log: &'a str, what: &'a str) -> impl Iterator<Item = String> + 'a {
    log.lines()
        .filter(move |line| line.contains(what))
        .filter_map(|line| line.rsplit_once("key="))
        .map(|(_, rest)| {
            let key = rest.trim_start_matches('"');
            key.split(['"', ' ']).next().unwrap_or_default().to_owned()
        })
}

/// Waits (within [`SETTLE`]) until `shops` have suspended `count` operations between them:
/// each has met the bank away, and none can finish before the resumer takes it up.
pub(crate) async fn until_suspended(shops: &[Process], count: usize) {
    settles("every operation stopped while the bank is away", || async {
        let stopped: HashSet<String> = shops
            .iter()
            .flat_map(|shop| suspended(&shop.log_text()))
            .collect();
        match stopped.len() {
            n if n >= count => Ok(()),
            n => Err(format!("{n} of {count} operations stopped")),
        }
    })
    .await;
}
