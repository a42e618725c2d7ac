//! Resources the kubelet has with nothing to allocate, and why: its plugin
//! reports nothing, died (`plugin-died`), or never came back
//! (`not-re-registered`); stale sockets no dead plugin claimed; the plugin's
//! healthy devices against the kubelet's allocatable ones.

use super::*;

/// Resources the kubelet knows (registered in the checkpoint or allocatable).
fn known_resources<'a>(v: &View<'a>) -> BTreeSet<&'a String> {
    let mut resources: BTreeSet<&String> = registered(v.f).map(|r| r.keys().collect()).unwrap_or_default();
    if let Some(a) = v.f.allocatable.ok() {
        resources.extend(a.keys());
    }
    resources
}

/// The healthy device IDs of the plugin serving `r`, when its devices were read.
fn plugin_healthy(v: &View, r: &str) -> Option<BTreeSet<String>> {
    let p = v.m.served.get(r).map(|(i, _)| &v.f.plugins[*i])?;
    p.devices.as_ref().map(|d| d.iter().filter(|x| x.health == HEALTHY).map(|x| x.id.clone()).collect())
}

/// The plugin's healthy devices differ from the kubelet's allocatable ones.
pub(super) fn plugin_kubelet_mismatch(v: &View) -> Vec<Finding> {
    let Some(alloc) = v.f.allocatable.ok().filter(|_| v.kubelet == Kubelet::Up) else { return Vec::new() };
    let mut out = Vec::new();
    for r in known_resources(v) {
        let a = alloc.get(r).cloned().unwrap_or_default();
        let (Some((i, _)), Some(h)) = (v.m.served.get(r), plugin_healthy(v, r)) else { continue };
        if h == a {
            continue;
        }
        let only_p: Vec<&String> = h.difference(&a).collect();
        let only_k: Vec<&String> = a.difference(&h).collect();
        out.push(finding(
            Severity::Warning,
            "plugin-kubelet-mismatch",
            r.clone(),
            format!("the plugin reports {} healthy device(s) but the kubelet has {} allocatable", h.len(), a.len()),
            format!(
                "plugin {}: healthy {}; kubelet allocatable: {}; only in the plugin: {}; only in the kubelet: {}",
                show(&v.f.plugins[*i].socket),
                ids(&h),
                ids(&a),
                ids(only_p),
                ids(only_k)
            ),
            "some plugins (generic-device-plugin, NVIDIA's) tell only one ListAndWatch stream about a change, so an extra client (dpctl probe or watch, doctor itself) can swallow an update the kubelet never gets; restart the plugin to resync the kubelet, and use `doctor --no-streams` on such nodes",
        ));
    }
    out
}

/// Resources registered with the kubelet with nothing to allocate, and why
/// (its plugin reports nothing, died, or never came back); then the stale
/// sockets no dead plugin claimed.
pub(super) fn resources_unavailable(v: &View) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut stale_left: Vec<&Path> = v.stale.clone();
    if v.kubelet == Kubelet::Up {
        let reg = registered(v.f);
        for r in known_resources(v) {
            let Some(g) = reg.and_then(|x| x.get(r)) else { continue };
            if let Some(x) = unavailable(v, r, g, &mut stale_left) {
                out.push(x);
            }
        }
    }
    if v.kubelet != Kubelet::Down {
        out.extend(stale_left.into_iter().map(stale_socket));
    }
    out
}

fn stale_socket(s: &Path) -> Finding {
    finding(
        Severity::Warning,
        "stale-socket",
        show(s),
        "a stale socket: nothing listens on it (its plugin exited without removing it)",
        "connect: connection refused",
        "restart the plugin that owned it; since nothing listens (connect was refused) removing it is safe, and the kubelet removes it at its next start",
    )
}

/// Why registered resource `r` (devices `g` in the checkpoint) has nothing to allocate, if it has not.
fn unavailable<'a>(v: &View<'a>, r: &String, g: &[String], stale_left: &mut Vec<&'a Path>) -> Option<Finding> {
    let f = v.f;
    let a = f.allocatable.ok().map(|a| a.get(r).cloned().unwrap_or_default());
    let served = v.m.served.get(r).map(|(i, _)| &f.plugins[*i]);
    let unread_unmapped = f
        .plugins
        .iter()
        .enumerate()
        .filter(|(i, p)| p.devices.is_none() && !v.m.served.values().any(|(j, _)| j == i))
        .count();
    let nothing = match &a {
        Some(a) => a.is_empty(),
        // Without PodResources only the sockets tell; a live plugin whose
        // devices were not read (--no-streams, errors) may be this one.
        None => served.is_none() && !v.m.ambiguous.contains_key(r) && unread_unmapped == 0,
    };
    if !nothing {
        return None;
    }
    let alloc_ev = if a.is_some() { "; allocatable: 0" } else { "" };
    let base = format!("{} device(s) registered in the checkpoint: {}{alloc_ev}", g.len(), ids(g));
    let pods = v.holders_text(r);
    if let Some(p) = served {
        let why = match plugin_healthy(v, r) {
            None => format!("its plugin {} answers (its devices were not read: --no-streams)", show(&p.socket)),
            Some(h) if h.is_empty() => format!("its plugin {} reports no Healthy device", show(&p.socket)),
            Some(h) => format!(
                "the kubelet has none of the {} device(s) its plugin {} reports Healthy (see plugin-kubelet-mismatch)",
                h.len(),
                show(&p.socket)
            ),
        };
        return Some(finding(
            Severity::Error,
            "resource-unavailable",
            r.clone(),
            format!("nothing of this resource can be allocated: {why}"),
            format!("{base}{pods}"),
            "check the plugin's logs and devices; restart the plugin so it sends the kubelet a fresh device list",
        ));
    }
    if let Some(c) = v.m.ambiguous.get(r) {
        let socks: Vec<String> = c.iter().map(|i| show(&f.plugins[*i].socket)).collect();
        let stale: Vec<String> = v.stale.iter().map(|s| show(s)).collect();
        return Some(finding(
            Severity::Error,
            "resource-unavailable",
            r.clone(),
            "nothing of this resource can be allocated, and it cannot be told which live socket (if any) is its plugin",
            format!(
                "{base}; candidates reporting the same IDs: {}; stale sockets: {}{pods}",
                socks.join(", "),
                stale.join(", ")
            ),
            "check each plugin with `dpctl probe`; restart the plugin of this resource",
        ));
    }
    if !stale_left.is_empty() {
        return Some(plugin_died(r, &base, &pods, stale_left));
    }
    let empty_unmapped: Vec<String> = f
        .plugins
        .iter()
        .enumerate()
        .filter(|(i, p)| p.devices.as_ref().is_some_and(Vec::is_empty) && !v.m.served.values().any(|(j, _)| j == i))
        .map(|(_, p)| show(&p.socket))
        .collect();
    if !empty_unmapped.is_empty() {
        return Some(finding(
            Severity::Warning,
            "resource-unavailable",
            r.clone(),
            "nothing of this resource can be allocated; live plugins that report no devices at all may include its plugin (then it found no hardware)",
            format!("{base}; plugins with no devices: {}{pods}", empty_unmapped.join(", ")),
            "check the plugin's logs for why it finds no devices (drivers, device files, its config)",
        ));
    }
    if f.entries.iter().any(|e| e.connect.as_ref().is_some_and(Connect::untested)) {
        return Some(finding(
            Severity::Error,
            "resource-unavailable",
            r.clone(),
            "nothing of this resource can be allocated; its plugin may be behind one of the sockets that could not be tested",
            format!("{base}{pods}"),
            "run doctor as root to tell whether its plugin is alive",
        ));
    }
    let started = f
        .kubelet_started
        .map(|t| format!("; kubelet.sock created {}", crate::core::time::rfc3339(t)))
        .unwrap_or_default();
    Some(finding(
        Severity::Error,
        "not-re-registered",
        r.clone(),
        "no socket in the device-plugin directory serves this resource: the kubelet removes every plugin socket when it starts, and this resource's plugin did not register again after the kubelet restarted (capacity stays 0 until it does)",
        format!("{base}{started}{pods}"),
        "restart the plugin (delete its DaemonSet pod); a plugin must watch for kubelet.sock being re-created and register again",
    ))
}

/// A socket left behind with nothing listening: the plugin of `r` died (it claims that socket).
fn plugin_died(r: &str, base: &str, pods: &str, stale_left: &mut Vec<&Path>) -> Finding {
    let pick =
        stale_left.iter().position(|s| name_matches(s, r)).or(if stale_left.len() == 1 { Some(0) } else { None });
    let (what, ev) = match pick {
        Some(k) => {
            let s = stale_left.remove(k);
            (format!("its socket {} is left with nothing listening", show(s)), String::new())
        }
        None => (
            "one of the sockets left with nothing listening was probably its plugin's".to_string(),
            format!("; stale sockets: {}", stale_left.iter().map(|s| show(s)).collect::<Vec<_>>().join(", ")),
        ),
    };
    finding(
        Severity::Error,
        "plugin-died",
        r,
        format!("the plugin serving this resource died: {what}. The kubelet keeps the resource's capacity for a grace period (5 minutes) with every device unhealthy, so nothing can be allocated, then drops it"),
        format!("{base}; connect: connection refused{ev}{pods}"),
        "restart the plugin (delete its DaemonSet pod) and read why it died (kubectl logs --previous); its new instance replaces the stale socket",
    )
}
