//! `max_allowed_packet`: the largest response the server accepts in one statement.
//!
//! A completion sends the whole encoded response as one parameter. The server refuses a
//! statement longer than its `max_allowed_packet` (16 MiB by default on MariaDB, 64 MiB on
//! MySQL 8) and closes the connection, so the completion could never be written: the record
//! would stay in flight, and once its lease lapsed a retry would run the operation again. A
//! response that does not fit is therefore completed without its body, as the runtime
//! completes a body over its own cap (`Policy::max_stored_body`): the operation is recorded
//! as done, with its status, and retries get the documented answer for a response that cannot
//! be replayed. A warning names the setting to raise.

use std::borrow::Cow;

use sqlx::{MySqlExecutor, MySqlPool};
use tokio::sync::OnceCell;

use super::errors::store_error;
use idem_core::{replay::StoredResponse, store::StoreError};

/// What a completion's statement needs besides the response: the other parameters, the
/// statement id and the packet's header, with room to spare.
const OVERHEAD: usize = 1024;

/// The server's `max_allowed_packet`, read once, when a completion first needs it.
#[derive(Debug, Default)]
pub(crate) struct Packet {
    max: OnceCell<i64>,
}

impl Packet {
    /// `response` if its bytes fit in one statement, or its record without the body. The
    /// limit is asked on `executor` the first time: a transaction's own connection, so that a
    /// completion never waits for a second connection while it holds one.
    pub(crate) async fn fit<'a, 'e>(
        &self,
        executor: impl MySqlExecutor<'e>,
        pool: &MySqlPool,
        response: &'a StoredResponse,
    ) -> Result<Cow<'a, StoredResponse>, StoreError> {
        let max = self
            .max
            .get_or_try_init(|| async {
                sqlx::query_scalar::<_, i64>("SELECT CAST(@@max_allowed_packet AS SIGNED)")
                    .fetch_one(executor)
                    .await
            })
            .await
            .map_err(|e| store_error(pool, e))?;
        let needed = response.as_bytes().len().saturating_add(OVERHEAD);
        if i64::try_from(needed).unwrap_or(i64::MAX) <= *max {
            return Ok(Cow::Borrowed(response));
        }
        tracing::warn!(
            bytes = response.as_bytes().len(),
            max_allowed_packet = *max,
            "a response is larger than the server's max_allowed_packet allows: its record is \
             stored without the body, and its retries cannot be replayed; raise \
             max_allowed_packet, or lower the route's max_stored_body"
        );
        Ok(Cow::Owned(StoredResponse::omitted(response.status())))
    }
}
