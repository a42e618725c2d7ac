//! The DRA plugin registry (the kubelet's DRAPluginManager), without I/O:
//! each driver's registered instances, which one calls go to (the newest),
//! what a registration replaces and a deregistration removes, a duplicate
//! endpoint, and what a change in connected instances means for the
//! driver's slices (the pending wipes). Each instance carries a handle of
//! the shell's (`H`: its connection and its tasks' stop token); the
//! registry hands back the handles it lets go, the shell stops them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One registered instance of a driver.
#[derive(Debug)]
pub struct Instance<H> {
    /// The registration socket the plugin watcher found.
    pub socket: PathBuf,
    /// Where the engine dials it.
    pub endpoint: PathBuf,
    /// The gRPC service it is called through.
    pub service: &'static str,
    /// Its order of registration: calls go to the newest.
    pub seq: u64,
    /// Whether its endpoint accepts connections (gRPC's connection state, probed).
    pub connected: bool,
    /// The shell's: its connection and the stop token of its tasks.
    pub handle: H,
}

/// Registered drivers and their instances, by driver name.
#[derive(Debug)]
pub struct Registry<H> {
    plugins: BTreeMap<String, Vec<Instance<H>>>,
    /// Numbers instances and wipe tickets.
    seq: u64,
    /// Before 1.33: registration sockets whose instance a later registration
    /// replaced → the driver (their deregistration removes the driver).
    replaced: BTreeMap<PathBuf, String>,
    /// Driver → the ticket of its pending slice wipe.
    pending_wipes: BTreeMap<String, u64>,
}

impl<H> Default for Registry<H> {
    fn default() -> Self {
        Registry { plugins: BTreeMap::new(), seq: 0, replaced: BTreeMap::new(), pending_wipes: BTreeMap::new() }
    }
}

/// An instance a deregistration removed.
#[derive(Debug, PartialEq, Eq)]
pub struct Gone {
    /// Its driver.
    pub driver: String,
    /// Its endpoint, as shown.
    pub endpoint: String,
    /// The driver's instances left (0: the driver is gone).
    pub instances: usize,
}

/// What a change in a driver's instances means for its slices (the kubelet's
/// DRAPluginManager.sync): wipe them later when no instance is connected and
/// no wipe is pending; cancel a pending wipe when one is.
#[derive(Debug, PartialEq, Eq)]
enum WipeDecision {
    Schedule,
    Cancel,
    Nothing,
}

/// dra_plugin_manager.go add(): an endpoint an instance of the driver
/// registered already (through another registration socket: the same socket
/// again replaces its instance) is refused with the kubelet's text.
fn duplicate_endpoint<'a>(
    mut known: impl Iterator<Item = (&'a Path, &'a Path)>,
    socket: &Path,
    endpoint: &Path,
    driver: &str,
) -> Option<String> {
    known
        .any(|(s, e)| s != socket && e == endpoint)
        .then(|| format!("endpoint {} already registered for DRA driver plugin {driver}", endpoint.display()))
}

fn wipe_decision(usable: bool, pending: bool) -> WipeDecision {
    match (usable, pending) {
        (true, true) => WipeDecision::Cancel,
        (false, false) => WipeDecision::Schedule,
        _ => WipeDecision::Nothing,
    }
}

impl<H> Registry<H> {
    /// The instance calls to `driver` go to: the newest.
    pub fn newest(&self, driver: &str) -> Option<&Instance<H>> {
        self.plugins.get(driver).and_then(|l| l.iter().max_by_key(|i| i.seq))
    }

    /// The driver's instances, in no particular order.
    pub fn instances(&self, driver: &str) -> &[Instance<H>] {
        self.plugins.get(driver).map(Vec::as_slice).unwrap_or_default()
    }

    /// Registered drivers with their instances.
    pub fn drivers(&self) -> impl Iterator<Item = (&String, &Vec<Instance<H>>)> {
        self.plugins.iter()
    }

    /// Whether `driver` has a registered instance.
    pub fn has(&self, driver: &str) -> bool {
        self.plugins.contains_key(driver)
    }

    /// The refusal of a registration of `driver` through `socket` at an
    /// endpoint another of its instances has ([`duplicate_endpoint`]).
    pub fn duplicate(&self, driver: &str, socket: &Path, endpoint: &Path) -> Option<String> {
        let known = self.plugins.get(driver).map(|l| l.iter().map(|i| (i.socket.as_path(), i.endpoint.as_path())));
        duplicate_endpoint(known.into_iter().flatten(), socket, endpoint, driver)
    }

    /// RegisterPlugin: an instance of `driver` through `socket`. The same
    /// registration socket again replaces its instance; unless instances
    /// `coexist` (1.33+, one plugin per driver name before) any registration
    /// replaces the earlier ones, whose socket's deregistration then removes
    /// the driver. Returns the handles of the replaced instances (for the
    /// shell to stop) and the driver's instances now.
    pub fn register(
        &mut self,
        driver: &str,
        socket: &Path,
        endpoint: &Path,
        service: &'static str,
        coexist: bool,
        handle: H,
    ) -> (Vec<H>, usize) {
        self.seq += 1;
        let seq = self.seq;
        self.replaced.remove(socket);
        let list = self.plugins.entry(driver.to_string()).or_default();
        let mut stopped = Vec::new();
        let mut replaced = Vec::new();
        for old in std::mem::take(list) {
            if coexist && old.socket != socket {
                list.push(old);
            } else {
                if old.socket != socket {
                    replaced.push(old.socket);
                }
                stopped.push(old.handle);
            }
        }
        list.push(Instance {
            socket: socket.to_path_buf(),
            endpoint: endpoint.to_path_buf(),
            service,
            seq,
            connected: true,
            handle,
        });
        let instances = list.len();
        self.replaced.extend(replaced.into_iter().map(|s| (s, driver.to_string())));
        (stopped, instances)
    }

    /// DeRegisterPlugin: the instance registered through `socket` went away.
    /// Returns what went, and the handles of the instances removed (for the
    /// shell to stop).
    pub fn deregister(&mut self, socket: &Path) -> (Option<Gone>, Vec<H>) {
        let mut gone = None;
        let mut stopped = Vec::new();
        if let Some(driver) = self.replaced.remove(socket) {
            // kubelet ≤ 1.32: DeRegisterPlugin(name) deletes the driver's one plugin.
            if let Some(list) = self.plugins.get_mut(&driver) {
                let endpoint = list.last().map(|i| i.endpoint.display().to_string()).unwrap_or_default();
                stopped.extend(list.drain(..).map(|i| i.handle));
                gone = Some(Gone { driver, endpoint, instances: 0 });
            }
        }
        for (driver, list) in self.plugins.iter_mut().filter(|_| gone.is_none()) {
            if let Some(i) = list.iter().position(|i| i.socket == socket) {
                let inst = list.remove(i);
                stopped.push(inst.handle);
                gone = Some(Gone {
                    driver: driver.clone(),
                    endpoint: inst.endpoint.display().to_string(),
                    instances: list.len(),
                });
                break;
            }
        }
        if let Some(Gone { driver, instances: 0, .. }) = &gone {
            self.plugins.remove(driver);
        }
        (gone, stopped)
    }

    /// Record whether `driver`'s instance of `socket` accepts connections;
    /// whether that changed.
    pub fn set_connected(&mut self, driver: &str, socket: &Path, up: bool) -> bool {
        let inst = self.plugins.get_mut(driver).and_then(|l| l.iter_mut().find(|i| i.socket == socket));
        match inst {
            Some(i) if i.connected != up => {
                i.connected = up;
                true
            }
            _ => false,
        }
    }

    /// The kubelet's sync for `driver`: a driver with no usable instance
    /// (connected, or registered at all when connections are not
    /// `monitored`, before 1.34) gets a wipe scheduled — its ticket is
    /// returned; one that is usable again cancels a pending wipe.
    pub fn sync_wipe(&mut self, driver: &str, monitored: bool) -> Option<u64> {
        let usable = self.plugins.get(driver).is_some_and(|l| l.iter().any(|i| i.connected || !monitored));
        match wipe_decision(usable, self.pending_wipes.contains_key(driver)) {
            WipeDecision::Cancel => {
                self.pending_wipes.remove(driver);
                None
            }
            WipeDecision::Nothing => None,
            WipeDecision::Schedule => {
                self.seq += 1;
                let t = self.seq;
                self.pending_wipes.insert(driver.to_string(), t);
                Some(t)
            }
        }
    }

    /// Whether the wipe of `ticket` is still `driver`'s pending one: if so it
    /// is taken (the shell wipes now), else it was cancelled or replaced.
    pub fn take_wipe(&mut self, driver: &str, ticket: u64) -> bool {
        if self.pending_wipes.get(driver) != Some(&ticket) {
            return false;
        }
        self.pending_wipes.remove(driver);
        true
    }

    /// Whether a wipe of `driver`'s slices is pending.
    pub fn wipe_pending(&self, driver: &str) -> bool {
        self.pending_wipes.contains_key(driver)
    }

    /// Whether no wipe is pending.
    pub fn no_wipe_pending(&self) -> bool {
        self.pending_wipes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_wiped_only_when_no_instance_is_connected() {
        assert_eq!(wipe_decision(false, false), WipeDecision::Schedule);
        assert_eq!(wipe_decision(false, true), WipeDecision::Nothing, "the first deadline stands");
        assert_eq!(wipe_decision(true, true), WipeDecision::Cancel);
        assert_eq!(wipe_decision(true, false), WipeDecision::Nothing);
    }

    /// TestAddSameName, "Same name, same endpoint -> error" (dra_plugin_manager.go add()).
    #[test]
    fn the_same_endpoint_registered_again_through_another_socket_is_refused() {
        let (s1, s2, e1, e2) =
            (Path::new("/r/a.sock"), Path::new("/r/b.sock"), Path::new("/p/dra.sock"), Path::new("/p/dra2.sock"));
        let known = [(s1, e1)];
        assert_eq!(
            duplicate_endpoint(known.iter().copied(), s2, e1, "gpu.x").as_deref(),
            Some("endpoint /p/dra.sock already registered for DRA driver plugin gpu.x")
        );
        assert_eq!(
            duplicate_endpoint(known.iter().copied(), s2, e2, "gpu.x"),
            None,
            "another endpoint: a second instance"
        );
        assert_eq!(
            duplicate_endpoint(known.iter().copied(), s1, e1, "gpu.x"),
            None,
            "the same socket replaces its instance"
        );
        assert_eq!(duplicate_endpoint(std::iter::empty(), s2, e1, "gpu.x"), None);
    }
}
