//! A generation of the mock kubelet: its number (every event of it carries
//! the number) and the [`Tasks`] group everything one run (until a restart or
//! shutdown) starts on; ending the generation stops the group.

use crate::core::task::Tasks;

/// One generation of the mock kubelet.
#[derive(Debug, Clone, Default)]
pub struct Generation {
    /// 0 for the first start, then one more per restart.
    pub number: u64,
    /// Every task of the generation; stopped (cancelled and awaited) when it ends.
    pub tasks: Tasks,
}

impl Generation {
    /// Generation `number`, with a new task group.
    pub fn new(number: u64) -> Self {
        Generation { number, tasks: Tasks::new() }
    }
}
