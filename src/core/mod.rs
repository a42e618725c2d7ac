//! The protocol core every subcommand shares: transport (dial, safe listen,
//! serve), the HTTP/2 `:authority` shim, validation, paths, errors and time.
pub mod authority;
pub mod error;
pub mod paths;
pub mod time;
pub mod transport;
pub mod validate;

pub use error::{Error, Result};
