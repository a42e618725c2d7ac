//! Consumable capacity (KEP-5075) and shared counters (KEP-4815), as
//! amounts: what one allocation consumes of a device's capacities under
//! their request policies (consumable_capacity.go calculateConsumedQuantity,
//! violatesPolicy), and the sums that must stay within a capacity or a
//! counter.

use super::Candidate;
use crate::controlplane::objects::quantity::Quantity;
use crate::controlplane::objects::Capacity;
use std::collections::BTreeMap;

/// What one request consumes of `cap` when it asks for `requested`: no
/// amount takes the policy's default, or all of it without a policy; an
/// amount is rounded up to the valid range's step or the next valid value.
pub fn consumed_of(requested: Option<&Quantity>, cap: &Capacity) -> Result<Quantity, String> {
    let Some(q) = requested else {
        return Ok(cap.policy.as_ref().and_then(|p| p.default.clone()).unwrap_or_else(|| cap.value.clone()));
    };
    let Some(p) = &cap.policy else { return Ok(q.clone()) };
    if let Some(min) = &p.min {
        let mut v = if q < min { min.clone() } else { q.clone() };
        if let Some(step) = p.step.as_ref().filter(|s| s.nanos() > 0) {
            let over = v.nanos() - min.nanos();
            let steps = over / step.nanos() + i128::from(over % step.nanos() != 0);
            if steps * step.nanos() != over {
                v = Quantity::from_nanos(min.nanos() + steps * step.nanos());
            }
        }
        if let Some(max) = p.max.as_ref().filter(|m| v > **m) {
            return Err(format!("{q} rounds up to {v}, above the validRange max {max}"));
        }
        return Ok(v);
    }
    if !p.valid_values.is_empty() {
        return p
            .valid_values
            .iter()
            .find(|v| *v >= q)
            .cloned()
            .ok_or_else(|| format!("{q} is above every validValue"));
    }
    Ok(q.clone())
}

/// The fully qualified name a capacity request names on `c`, if `c` has it.
fn resolve<'a>(c: &'a Candidate, name: &str) -> Option<&'a String> {
    let full = if name.contains('/') { name.to_string() } else { format!("{}/{name}", c.driver) };
    c.capacity.get_key_value(&full).map(|(k, _)| k)
}

/// What allocating `c` for a request with capacity `requests` consumes of
/// each of its capacities, or why it cannot (a capacity it lacks, a policy
/// the amount breaks, more than the device has).
pub fn consumed(c: &Candidate, requests: &BTreeMap<String, Quantity>) -> Result<BTreeMap<String, Quantity>, String> {
    let mut named = BTreeMap::new();
    for (name, q) in requests {
        let full = resolve(c, name).ok_or_else(|| format!("has no capacity {name:?}"))?;
        named.insert(full.clone(), q);
    }
    let mut out = BTreeMap::new();
    for (name, cap) in &c.capacity {
        let q = consumed_of(named.get(name).copied(), cap).map_err(|e| format!("capacity {name}: {e}"))?;
        if q > cap.value {
            return Err(format!("capacity {name}: {q} is more than the device's {}", cap.value));
        }
        out.insert(name.clone(), q);
    }
    Ok(out)
}

/// The capacity name as the status writes it: without the driver's own
/// domain, as slices usually publish it (the slice's spelling is not kept;
/// upstream writes the name as the slice spelled it).
pub fn status_name(c: &Candidate, full: &str) -> String {
    full.strip_prefix(&format!("{}/", c.driver)).unwrap_or(full).to_string()
}
