//! Following one endpoint: its ListAndWatch stream, message by message,
//! into the manager, until the stream ends.

use super::Manager;
use crate::client::conn::{PluginConn, Update};
use prost::Message;
use std::sync::Arc;

impl Manager {
    /// Follow endpoint `id`'s ListAndWatch until it ends.
    pub(super) async fn follow(self: Arc<Self>, resource: String, id: u64, conn: PluginConn) {
        let mut stream = match conn.list_and_watch().await {
            Ok(s) => s,
            Err(e) => return self.stream_ended(&resource, id, &e.to_string()),
        };
        loop {
            match stream.next().await {
                Ok(Update::Snapshot(r)) => {
                    let bytes = r.encoded_len();
                    self.snapshot(&resource, id, r.devices, bytes);
                }
                Ok(Update::Closed) => {
                    return self.stream_ended(&resource, id, "the plugin closed the ListAndWatch stream")
                }
                Err(e) => return self.stream_ended(&resource, id, &e.to_string()),
            }
        }
    }
}
