//! The binary's configuration: the command line, then the environment, then the defaults.
//!
//! | setting | flag | variable | default |
//! | --- | --- | --- | --- |
//! | listen address | `--addr` | `SHOP_ADDR` | `127.0.0.1:3000` |
//! | idempotency store | | `IDEM_STORE` | `memory` |
//! | replicas a Redis claim waits for | | `SHOP_REDIS_WAIT_REPLICAS` | unset: none (asynchronous) |
//! | how long it waits for them | | `SHOP_REDIS_WAIT_TIMEOUT_MS` | `100` |
//! | with Redis, where payments, refunds and transfers live | | `SHOP_DATABASE_URL` | unset: this process's memory |
//! | transfer delay (at the bank) | | `SHOP_TRANSFER_DELAY_MS` | `10000` |
//! | payment delay (the card network) | | `SHOP_PAYMENT_DELAY_MS` | `0` |
//! | a transfer's pause between the bank's answer and its ledger row | | `SHOP_LEDGER_DELAY_MS` | `0` |
//! | the bank's URL | | `SHOP_BANK_URL` | a bank the shop starts on a loopback port |
//! | how long one call to the bank is retried | | `SHOP_BANK_DEADLINE_MS` | `60000` |
//! | refund delay | | `SHOP_REFUND_DELAY_MS` | `1000` |
//! | webhook secret | | `SHOP_WEBHOOK_SECRET` | `whsec_demo` |
//! | bank down (refunds fail) | | `SHOP_BANK_DOWN` | `0` |
//! | idle timeout | | `SHOP_IDLE_TIMEOUT_MS` | `20000` |
//! | header-read timeout | | `SHOP_HEADER_READ_TIMEOUT_MS` | `10000` |
//! | connection bound | | `SHOP_MAX_CONNECTIONS` | `512` |
//! | the longest records are kept | | `SHOP_MAX_TTL_MS` | unset: each route's TTL (24 h for payments) |
//! | how long an abandoned transfer waits for its client | | `SHOP_RESUME_AFTER_MS` | `5000` (the route's own) |
//! | NATS with JetStream (payment events, receipts) | | `SHOP_NATS_URL` | none: no broker |
//! | the admin API's token | | `SHOP_ADMIN_TOKEN` | unset: no admin API |
//! | the memory store's bound on records | | `SHOP_MEMORY_MAX_ENTRIES` | `100000` |
//! | the gRPC API's address | | `SHOP_GRPC_ADDR` | none: no gRPC API |

use std::{fmt, net::SocketAddr, time::Duration};

use idem::redis::Durability;

use crate::{ConnectionLimits, Settings, admin::AdminToken, backend::StoreChoice};

/// The default listen address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:3000";

/// The usage text of `--help`.
pub const USAGE: &str = "\
usage: shop [--addr HOST:PORT]
       shop bank [--addr HOST:PORT]   the shop's bank, as a process of its own (bank --help)

A small shop service that shows idempotency keys at work.

options:
  --addr HOST:PORT   where to listen (also SHOP_ADDR; default 127.0.0.1:3000)
  -h, --help         this text

environment:
  IDEM_STORE              memory (default), redis://host:6379,
                          redis+cluster://host:port[,host:port...] (seed nodes),
                          redis+sentinel://host:port[,host:port...]/name,
                          postgres://user@host/db, mysql://user@host/db
                          (MySQL or MariaDB), or sqlite:///path/to/shop.db
                          (the file created when missing)
  SHOP_REDIS_WAIT_REPLICAS
                          with Redis: claims wait (WAIT) for this many replicas
                          before the handler runs; a claim that does not get there
                          is answered 503 (default: unset, asynchronous)
  SHOP_REDIS_WAIT_TIMEOUT_MS
                          how long a claim waits for them (default 100)
  SHOP_DATABASE_URL       with Redis: the PostgreSQL database (postgres://user@host/db)
                          that keeps the payments, refunds and transfers, shared by
                          every shop (default: unset, this process's memory)
  SHOP_TRANSFER_DELAY_MS  how long the bank takes per transfer (default 10000)
  SHOP_PAYMENT_DELAY_MS   how long the card network takes per payment (default 0)
  SHOP_LEDGER_DELAY_MS    how long a transfer waits between the bank's answer and its
                          ledger row, for fault tests (default 0)
  SHOP_BANK_URL           the bank's service, as http://127.0.0.1:4000 (default: the shop
                          starts one in its own process, on a loopback port)
  SHOP_BANK_DEADLINE_MS   how long the shop retries one call to the bank before the
                          transfer stops, to be resumed (default 60000)
  SHOP_REFUND_DELAY_MS    how long the bank takes per refund (default 1000)
  SHOP_WEBHOOK_SECRET     the key of the bank's webhook signatures (default whsec_demo)
  SHOP_BANK_DOWN          1: the bank fails every refund (default 0)
  SHOP_IDLE_TIMEOUT_MS    close a connection that sends nothing for this long,
                          new or between requests (default 20000)
  SHOP_HEADER_READ_TIMEOUT_MS
                          close a connection whose request head takes longer
                          than this to arrive (default 10000)
  SHOP_MAX_CONNECTIONS    connections served at once; more wait up to 1 s for a
                          slot, or get 503 (default 512)
  SHOP_MAX_TTL_MS         the longest idempotency records are kept, whatever a route's
                          TTL says, never less than its lease (default: each route's own)
  SHOP_RESUME_AFTER_MS    how long a transfer that stopped part-way (the shop died, the
                          bank did not confirm) waits for its user's retry before the
                          shop finishes it itself (default 5000)
  SHOP_ADMIN_TOKEN        turns the admin API on (GET and DELETE /admin/idempotency-keys,
                          with Authorization: Bearer <token>); at least 16 characters
                          (default: unset, no admin API)
  SHOP_MEMORY_MAX_ENTRIES with the memory store: the most completed records it keeps; past
                          it, the oldest are forgotten before their TTL, and the log and
                          GET /metrics say so (default 100000)
  SHOP_NATS_URL           NATS with JetStream, as nats://127.0.0.1:4222: each payment is
                          published on shop.payments.created (stream SHOP, created when
                          missing) and a receipts consumer writes one receipt per payment
                          (default: no broker, no receipts)
  SHOP_GRPC_ADDR          where the gRPC API (shop.v1.Payments, with server
                          reflection) listens, as 127.0.0.1:50051 (default: no gRPC API)
  RUST_LOG                log filter (default info,sqlx::postgres::notice=warn,
                          async_nats=warn; RUST_LOG=info shows PostgreSQL's notices and
                          the NATS client's connection events too)
";

/// Everything the binary needs to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Which store keeps the idempotency records.
    pub store: StoreChoice,
    /// How the shop behaves.
    pub settings: Settings,
    /// Whether the bank starts down.
    pub bank_down: bool,
    /// The timeouts and the bound of client connections.
    pub connections: ConnectionLimits,
    /// The longest idempotency records are kept, whatever a route's TTL says.
    pub max_ttl: Option<Duration>,
    /// How long an operation that stopped part-way waits for its client before the shop
    /// resumes it, if not the route's own delay.
    pub resume_after: Option<Duration>,
    /// NATS with JetStream, for the payment events and the receipts consumer.
    pub nats_url: Option<String>,
    /// The most completed records a memory store keeps, if not its default.
    pub memory_max_entries: Option<u64>,
    /// Where the gRPC API listens, if anywhere.
    pub grpc_addr: Option<SocketAddr>,
}

/// What the command line asked for.
#[derive(Debug)]
pub enum Command {
    /// Run the shop.
    Run(Box<Config>),
    /// Print the usage text.
    Help,
}

/// A setting that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads the command line `args` (without the program name) and the environment as
    /// `var` answers it.
    pub fn parse(
        args: impl IntoIterator<Item = String>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Command, ConfigError> {
        let mut addr = None;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "-h" | "--help" => return Ok(Command::Help),
                "--addr" => {
                    let value = args.next().ok_or_else(|| {
                        ConfigError("--addr needs a value, as in --addr 127.0.0.1:3001".into())
                    })?;
                    addr = Some(("--addr", value));
                }
                other => match other.strip_prefix("--addr=") {
                    Some(value) => addr = Some(("--addr", value.to_owned())),
                    None => {
                        return Err(ConfigError(format!(
                            "unknown argument {other:?}; see --help"
                        )));
                    }
                },
            }
        }
        let (source, addr) = addr
            .or_else(|| var("SHOP_ADDR").map(|value| ("SHOP_ADDR", value)))
            .unwrap_or(("the default", DEFAULT_ADDR.to_owned()));
        let addr = addr.parse().map_err(|_| {
            ConfigError(format!(
                "{source}: {addr:?} is not an address; use HOST:PORT, as in 127.0.0.1:3000"
            ))
        })?;
        let mut store = var("IDEM_STORE")
            .unwrap_or_default()
            .parse()
            .map_err(|error: crate::backend::BackendError| ConfigError(error.to_string()))?;
        redis_books(&var, &mut store)?;
        if let Some(durability) = redis_durability(&var)? {
            match &mut store {
                StoreChoice::Redis(redis) => redis.durability = durability,
                other => {
                    return Err(ConfigError(format!(
                        "SHOP_REDIS_WAIT_REPLICAS is set but IDEM_STORE={other} is not Redis; \
                         unset it, or use a redis:// store"
                    )));
                }
            }
        }
        let millis = |name: &str, default: Duration| -> Result<Duration, ConfigError> {
            match var(name) {
                None => Ok(default),
                Some(value) => value
                    .trim()
                    .parse()
                    .map(Duration::from_millis)
                    .map_err(|_| {
                        ConfigError(format!("{name}={value:?} is not a number of milliseconds"))
                    }),
            }
        };
        let positive_millis = |name: &str, default: Duration| -> Result<Duration, ConfigError> {
            let value = millis(name, default)?;
            if value.is_zero() {
                return Err(ConfigError(format!(
                    "{name}=0 would close every connection at once; use 1 or more milliseconds"
                )));
            }
            Ok(value)
        };
        let connections = ConnectionLimits {
            idle_timeout: positive_millis(
                "SHOP_IDLE_TIMEOUT_MS",
                ConnectionLimits::DEFAULT_IDLE_TIMEOUT,
            )?,
            header_read_timeout: positive_millis(
                "SHOP_HEADER_READ_TIMEOUT_MS",
                ConnectionLimits::DEFAULT_HEADER_READ_TIMEOUT,
            )?,
            max_connections: match var("SHOP_MAX_CONNECTIONS") {
                None => ConnectionLimits::DEFAULT_MAX_CONNECTIONS,
                Some(value) => value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|&bound: &usize| bound > 0)
                    .ok_or_else(|| {
                        ConfigError(format!(
                            "SHOP_MAX_CONNECTIONS={value:?} is not a number of connections (1 or more)"
                        ))
                    })?,
            },
            queue_timeout: ConnectionLimits::DEFAULT_QUEUE_TIMEOUT,
        };
        let settings = Settings {
            transfer_delay: millis("SHOP_TRANSFER_DELAY_MS", Settings::DEFAULT_TRANSFER_DELAY)?,
            payment_delay: millis("SHOP_PAYMENT_DELAY_MS", Settings::DEFAULT_PAYMENT_DELAY)?,
            ledger_delay: millis("SHOP_LEDGER_DELAY_MS", Duration::ZERO)?,
            bank_url: match var("SHOP_BANK_URL").map(|url| url.trim().to_owned()) {
                None => None,
                Some(url) if url.is_empty() => None,
                Some(url) if url.starts_with("http://") || url.starts_with("https://") => Some(url),
                Some(url) => {
                    return Err(ConfigError(format!(
                        "SHOP_BANK_URL={url:?} is not an http:// URL, as in http://127.0.0.1:4000"
                    )));
                }
            },
            bank_deadline: millis(
                "SHOP_BANK_DEADLINE_MS",
                idem_client::RetryPolicy::DEFAULT_DEADLINE,
            )?,
            refund_delay: millis("SHOP_REFUND_DELAY_MS", Settings::DEFAULT_REFUND_DELAY)?,
            webhook_secret: var("SHOP_WEBHOOK_SECRET")
                .unwrap_or_else(|| Settings::DEFAULT_WEBHOOK_SECRET.to_owned()),
            admin_token: match var("SHOP_ADMIN_TOKEN") {
                None => None,
                Some(token) if token.trim().is_empty() => None,
                Some(token) => Some(AdminToken::new(&token).ok_or_else(|| {
                    ConfigError(
                        "SHOP_ADMIN_TOKEN must be at least 16 visible characters (no spaces), \
                         as from `openssl rand -hex 16`"
                            .into(),
                    )
                })?),
            },
            ..Settings::default()
        };
        let memory_max_entries = match var("SHOP_MEMORY_MAX_ENTRIES") {
            None => None,
            Some(value) => {
                let bound = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|&bound: &u64| bound > 0)
                    .ok_or_else(|| {
                        ConfigError(format!(
                            "SHOP_MEMORY_MAX_ENTRIES={value:?} is not a number of records (1 or more)"
                        ))
                    })?;
                if store != StoreChoice::Memory {
                    return Err(ConfigError(format!(
                        "SHOP_MEMORY_MAX_ENTRIES is set but IDEM_STORE={store} is not the memory \
                         store; unset it"
                    )));
                }
                Some(bound)
            }
        };
        let bank_down = match var("SHOP_BANK_DOWN").as_deref().map(str::trim) {
            None | Some("" | "0" | "false") => false,
            Some("1" | "true") => true,
            Some(other) => {
                return Err(ConfigError(format!("SHOP_BANK_DOWN={other:?}: use 1 or 0")));
            }
        };
        let max_ttl = match millis("SHOP_MAX_TTL_MS", Duration::MAX)? {
            Duration::MAX => None,
            ttl if ttl.is_zero() => {
                return Err(ConfigError(
                    "SHOP_MAX_TTL_MS=0 would keep no record; use 1 or more milliseconds".into(),
                ));
            }
            ttl => Some(ttl),
        };
        let resume_after = match millis("SHOP_RESUME_AFTER_MS", Duration::MAX)? {
            Duration::MAX => None,
            after if after.is_zero() => {
                return Err(ConfigError(
                    "SHOP_RESUME_AFTER_MS=0: use 1 or more milliseconds".into(),
                ));
            }
            after => Some(after),
        };
        let nats_url = match var("SHOP_NATS_URL").map(|url| url.trim().to_owned()) {
            None => None,
            Some(url) if url.is_empty() => None,
            Some(url) if url.starts_with("nats://") || url.starts_with("tls://") => Some(url),
            Some(url) => {
                return Err(ConfigError(format!(
                    "SHOP_NATS_URL={url:?} is not a nats:// URL, as in nats://127.0.0.1:4222"
                )));
            }
        };
        let grpc_addr = match var("SHOP_GRPC_ADDR").map(|addr| addr.trim().to_owned()) {
            None => None,
            Some(addr) if addr.is_empty() => None,
            Some(addr) => Some(addr.parse().map_err(|_| {
                ConfigError(format!(
                    "SHOP_GRPC_ADDR={addr:?} is not an address, as in 127.0.0.1:50051"
                ))
            })?),
        };
        Ok(Command::Run(Box::new(Self {
            grpc_addr,
            addr,
            store,
            settings,
            bank_down,
            connections,
            max_ttl,
            resume_after,
            nats_url,
            memory_max_entries,
        })))
    }
}

/// The durability `SHOP_REDIS_WAIT_REPLICAS` and `SHOP_REDIS_WAIT_TIMEOUT_MS` ask for:
/// `None` when the first is unset (or `0`), and then the second may not be set either.
/// `SHOP_DATABASE_URL`: with a Redis store, the PostgreSQL database of the shop's books.
fn redis_books(
    var: &impl Fn(&str) -> Option<String>,
    store: &mut StoreChoice,
) -> Result<(), ConfigError> {
    let Some(url) = var("SHOP_DATABASE_URL")
        .map(|url| url.trim().to_owned())
        .filter(|url| !url.is_empty())
    else {
        return Ok(());
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(ConfigError(format!(
            "SHOP_DATABASE_URL={:?} is not a postgres:// URL, as in postgres://user@host/db",
            crate::backend::redact(&url)
        )));
    }
    match store {
        StoreChoice::Redis(redis) => {
            redis.books = Some(url);
            Ok(())
        }
        other => Err(ConfigError(format!(
            "SHOP_DATABASE_URL is set but IDEM_STORE={other} is not Redis (with postgres:// the \
             shop's books are in the store's own database); unset it, or use a redis:// store"
        ))),
    }
}

fn redis_durability(
    var: &impl Fn(&str) -> Option<String>,
) -> Result<Option<Durability>, ConfigError> {
    const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);
    let replicas = match var("SHOP_REDIS_WAIT_REPLICAS").as_deref().map(str::trim) {
        None | Some("" | "0") => None,
        Some(value) => Some(value.parse::<u32>().map_err(|_| {
            ConfigError(format!(
                "SHOP_REDIS_WAIT_REPLICAS={value:?} is not a number of replicas (0 or more)"
            ))
        })?),
    };
    let timeout = match var("SHOP_REDIS_WAIT_TIMEOUT_MS").as_deref().map(str::trim) {
        None | Some("") => None,
        Some(value) => match value.parse::<u64>() {
            Ok(0) | Err(_) => {
                return Err(ConfigError(format!(
                    "SHOP_REDIS_WAIT_TIMEOUT_MS={value:?} is not a number of milliseconds \
                     (1 or more)"
                )));
            }
            Ok(millis) => Some(Duration::from_millis(millis)),
        },
    };
    match (replicas, timeout) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(ConfigError(
            "SHOP_REDIS_WAIT_TIMEOUT_MS is set without SHOP_REDIS_WAIT_REPLICAS; set both, \
             or neither for asynchronous claims"
                .into(),
        )),
        (Some(replicas), timeout) => Ok(Some(Durability::replicas(
            replicas,
            timeout.unwrap_or(DEFAULT_TIMEOUT),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn parse(args: &[&str], vars: &[(&str, &str)]) -> Result<Command, ConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        Config::parse(args.iter().map(|arg| arg.to_string()), |name| {
            vars.get(name).cloned()
        })
    }

    fn config(args: &[&str], vars: &[(&str, &str)]) -> Config {
        match parse(args, vars).unwrap() {
            Command::Run(config) => *config,
            Command::Help => panic!("help"),
        }
    }

    #[test]
    fn defaults_need_nothing() {
        let config = config(&[], &[]);
        assert_eq!(config.addr, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(config.store, StoreChoice::Memory);
        assert_eq!(config.settings, Settings::default());
        assert_eq!(config.settings.transfer_delay, Duration::from_secs(10));
        assert!(!config.bank_down);
        assert_eq!(config.connections, ConnectionLimits::default());
        assert_eq!(config.nats_url, None);
        assert_eq!(config.grpc_addr, None, "no gRPC API by default");
    }

    #[test]
    fn the_grpc_api_listens_where_shop_grpc_addr_says() {
        let config = config(&[], &[("SHOP_GRPC_ADDR", " 127.0.0.1:50051 ")]);
        assert_eq!(config.grpc_addr, Some("127.0.0.1:50051".parse().unwrap()));
        let error = parse(&[], &[("SHOP_GRPC_ADDR", "localhost")]).unwrap_err();
        assert!(error.to_string().contains("SHOP_GRPC_ADDR"), "{error}");
    }

    #[test]
    fn the_broker_is_a_nats_url() {
        let vars = [("SHOP_NATS_URL", " nats://127.0.0.1:4222 ")];
        assert_eq!(
            config(&[], &vars).nats_url.as_deref(),
            Some("nats://127.0.0.1:4222")
        );
        let error = parse(&[], &[("SHOP_NATS_URL", "127.0.0.1:4222")]).unwrap_err();
        assert!(error.to_string().contains("not a nats:// URL"), "{error}");
    }

    #[test]
    fn the_flag_wins_over_the_variable() {
        let vars = [("SHOP_ADDR", "127.0.0.1:4000")];
        assert_eq!(config(&[], &vars).addr.port(), 4000);
        assert_eq!(
            config(&["--addr", "127.0.0.1:3001"], &vars).addr.port(),
            3001
        );
        assert_eq!(config(&["--addr=0.0.0.0:3002"], &vars).addr.port(), 3002);
    }

    #[test]
    fn variables_set_the_store_and_the_bank() {
        let config = config(
            &[],
            &[
                ("IDEM_STORE", "postgres://postgres@127.0.0.1/test"),
                ("SHOP_TRANSFER_DELAY_MS", "1500"),
                ("SHOP_PAYMENT_DELAY_MS", "250"),
                ("SHOP_BANK_URL", "http://127.0.0.1:4000"),
                ("SHOP_REFUND_DELAY_MS", "0"),
                ("SHOP_WEBHOOK_SECRET", "whsec_x"),
                ("SHOP_BANK_DOWN", "1"),
            ],
        );
        assert!(matches!(config.store, StoreChoice::Postgres(_)));
        assert_eq!(config.settings.transfer_delay, Duration::from_millis(1500));
        assert_eq!(config.settings.payment_delay, Duration::from_millis(250));
        assert_eq!(
            config.settings.bank_url.as_deref(),
            Some("http://127.0.0.1:4000")
        );
        assert_eq!(config.settings.refund_delay, Duration::ZERO);
        assert_eq!(config.settings.webhook_secret, "whsec_x");
        assert!(config.bank_down);
    }

    #[test]
    fn variables_set_the_durability_of_redis_claims() {
        let durability = |vars: &[(&str, &str)]| match config(&[], vars).store {
            StoreChoice::Redis(redis) => redis.durability,
            other => panic!("{other:?}"),
        };
        let cluster = (
            "IDEM_STORE",
            "redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
        );
        assert_eq!(durability(&[cluster]), Durability::Async);
        assert_eq!(
            durability(&[cluster, ("SHOP_REDIS_WAIT_REPLICAS", "0")]),
            Durability::Async
        );
        assert_eq!(
            durability(&[cluster, ("SHOP_REDIS_WAIT_REPLICAS", "1")]),
            Durability::replicas(1, Duration::from_millis(100))
        );
        assert_eq!(
            durability(&[
                ("IDEM_STORE", "redis://127.0.0.1:6379"),
                ("SHOP_REDIS_WAIT_REPLICAS", " 2 "),
                ("SHOP_REDIS_WAIT_TIMEOUT_MS", "250"),
            ]),
            Durability::replicas(2, Duration::from_millis(250))
        );
    }

    #[test]
    fn a_variable_puts_the_books_of_a_shop_on_redis_in_postgresql() {
        let books = |vars: &[(&str, &str)]| match config(&[], vars).store {
            StoreChoice::Redis(redis) => redis.books,
            other => panic!("{other:?}"),
        };
        let redis = ("IDEM_STORE", "redis://127.0.0.1:6379");
        assert_eq!(books(&[redis]), None);
        assert_eq!(books(&[redis, ("SHOP_DATABASE_URL", " ")]), None);
        assert_eq!(
            books(&[redis, ("SHOP_DATABASE_URL", "postgres://shop@db/books")]).as_deref(),
            Some("postgres://shop@db/books")
        );
        for (vars, says) in [
            (
                &[redis, ("SHOP_DATABASE_URL", "mysql://root:pw@db/x")][..],
                "not a postgres:// URL",
            ),
            (
                &[("SHOP_DATABASE_URL", "postgres://db/x")][..],
                "IDEM_STORE=memory is not Redis",
            ),
        ] {
            let error = parse(&[], vars).unwrap_err();
            assert!(error.to_string().contains(says), "{vars:?}: {error}");
            assert!(!error.to_string().contains("pw@"), "{error}");
        }
    }

    #[test]
    fn variables_set_the_connection_limits() {
        let config = config(
            &[],
            &[
                ("SHOP_IDLE_TIMEOUT_MS", "1500"),
                ("SHOP_HEADER_READ_TIMEOUT_MS", " 250 "),
                ("SHOP_MAX_CONNECTIONS", "64"),
            ],
        );
        assert_eq!(
            config.connections,
            ConnectionLimits {
                idle_timeout: Duration::from_millis(1500),
                header_read_timeout: Duration::from_millis(250),
                max_connections: 64,
                ..ConnectionLimits::default()
            }
        );
    }

    #[test]
    fn variables_turn_the_admin_api_on_and_bound_the_memory_store() {
        let defaults = config(&[], &[]);
        assert_eq!(defaults.settings.admin_token, None);
        assert_eq!(defaults.memory_max_entries, None);
        let config = config(
            &[],
            &[
                ("SHOP_ADMIN_TOKEN", "adm_0123456789abcdef"),
                ("SHOP_MEMORY_MAX_ENTRIES", "50"),
            ],
        );
        assert_eq!(
            config.settings.admin_token,
            AdminToken::new("adm_0123456789abcdef")
        );
        assert_eq!(config.memory_max_entries, Some(50));
    }

    #[test]
    fn a_variable_caps_the_records_ttl() {
        assert_eq!(config(&[], &[]).max_ttl, None);
        let config = config(&[], &[("SHOP_MAX_TTL_MS", "2000")]);
        assert_eq!(config.max_ttl, Some(Duration::from_secs(2)));
    }

    #[test]
    fn mistakes_are_explained() {
        for (args, vars, says) in [
            (&["--addr"][..], &[][..], "needs a value"),
            (&[], &[("SHOP_MAX_TTL_MS", "0")], "would keep no record"),
            (&[], &[("SHOP_MAX_TTL_MS", "1d")], "milliseconds"),
            (&["--port", "1"], &[], "unknown argument"),
            (&["--addr", "localhost"], &[], "not an address"),
            (&[], &[("SHOP_TRANSFER_DELAY_MS", "10s")], "milliseconds"),
            (&[], &[("IDEM_STORE", "cassandra://x")], "names no store"),
            (&[], &[("SHOP_BANK_DOWN", "yes")], "use 1 or 0"),
            (
                &[],
                &[("SHOP_IDLE_TIMEOUT_MS", "0")],
                "1 or more milliseconds",
            ),
            (
                &[],
                &[("SHOP_HEADER_READ_TIMEOUT_MS", "1s")],
                "milliseconds",
            ),
            (&[], &[("SHOP_MAX_CONNECTIONS", "0")], "1 or more"),
            (
                &[],
                &[("SHOP_MAX_CONNECTIONS", "many")],
                "number of connections",
            ),
            (&[], &[("SHOP_PAYMENT_DELAY_MS", "1s")], "milliseconds"),
            (
                &[],
                &[("SHOP_REDIS_WAIT_REPLICAS", "1")],
                "IDEM_STORE=memory is not Redis",
            ),
            (
                &[],
                &[
                    ("IDEM_STORE", "redis://127.0.0.1:6379"),
                    ("SHOP_REDIS_WAIT_REPLICAS", "one"),
                ],
                "number of replicas",
            ),
            (
                &[],
                &[
                    ("IDEM_STORE", "redis://127.0.0.1:6379"),
                    ("SHOP_REDIS_WAIT_TIMEOUT_MS", "100"),
                ],
                "without SHOP_REDIS_WAIT_REPLICAS",
            ),
            (
                &[],
                &[
                    ("IDEM_STORE", "redis://127.0.0.1:6379"),
                    ("SHOP_REDIS_WAIT_REPLICAS", "1"),
                    ("SHOP_REDIS_WAIT_TIMEOUT_MS", "0"),
                ],
                "1 or more",
            ),
            (
                &[],
                &[("SHOP_BANK_URL", "127.0.0.1:4000")],
                "not an http:// URL",
            ),
            (&[], &[("SHOP_ADMIN_TOKEN", "secret")], "at least 16"),
            (&[], &[("SHOP_MEMORY_MAX_ENTRIES", "0")], "1 or more"),
            (
                &[],
                &[
                    ("IDEM_STORE", "redis://127.0.0.1:6379"),
                    ("SHOP_MEMORY_MAX_ENTRIES", "50"),
                ],
                "not the memory store",
            ),
        ] {
            let error = parse(args, vars).unwrap_err();
            assert!(
                error.to_string().contains(says),
                "{args:?} {vars:?}: {error}"
            );
        }
        assert!(matches!(parse(&["--help"], &[]), Ok(Command::Help)));
    }
}
