//! Consumable capacity (KEP-5075) and shared counters (KEP-4815), as
//! amounts: what one allocation consumes of a device's capacities under
//! their request policies (consumable_capacity.go calculateConsumedQuantity,
//! violatesPolicy), and the sums that must stay within a capacity or a
//! counter.

use super::Candidate;
use crate::controlplane::objects::quantity::Quantity;
use crate::controlplane::objects::Capacity;
use std::collections::BTreeMap;

/// Why a device's capacity cannot be consumed as a request asks.
#[derive(Debug, Clone, PartialEq)]
pub enum CapacityError {
    /// The device has no capacity of this name.
    NoCapacity(String),
    /// An amount whose rounding goes above the valid range's max: what was
    /// asked, what it rounds up to, the max.
    AboveMax(Box<(Quantity, Quantity, Quantity)>),
    /// An amount above every valid value.
    AboveValues(Quantity),
    /// More than the device has.
    MoreThanDevice {
        /// What would be consumed.
        consumed: Quantity,
        /// What the device has.
        has: Quantity,
    },
    /// One capacity's (this name's) problem.
    Capacity(String, Box<CapacityError>),
}

impl std::fmt::Display for CapacityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CapacityError::NoCapacity(name) => write!(f, "has no capacity {name:?}"),
            CapacityError::AboveMax(b) => {
                let (asked, rounded, max) = &**b;
                write!(f, "{asked} rounds up to {rounded}, above the validRange max {max}")
            }
            CapacityError::AboveValues(q) => write!(f, "{q} is above every validValue"),
            CapacityError::MoreThanDevice { consumed, has } => write!(f, "{consumed} is more than the device's {has}"),
            CapacityError::Capacity(name, e) => write!(f, "capacity {name}: {e}"),
        }
    }
}

impl std::error::Error for CapacityError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CapacityError::Capacity(_, e) => Some(&**e),
            _ => None,
        }
    }
}

/// What one request consumes of `cap` when it asks for `requested`: no
/// amount takes the policy's default, or all of it without a policy; an
/// amount is rounded up to the valid range's step or the next valid value.
pub fn consumed_of(requested: Option<&Quantity>, cap: &Capacity) -> Result<Quantity, CapacityError> {
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
            return Err(CapacityError::AboveMax(Box::new((q.clone(), v, max.clone()))));
        }
        return Ok(v);
    }
    if !p.valid_values.is_empty() {
        return p.valid_values.iter().find(|v| *v >= q).cloned().ok_or_else(|| CapacityError::AboveValues(q.clone()));
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
pub fn consumed(
    c: &Candidate,
    requests: &BTreeMap<String, Quantity>,
) -> Result<BTreeMap<String, Quantity>, CapacityError> {
    let mut named = BTreeMap::new();
    for (name, q) in requests {
        let full = resolve(c, name).ok_or_else(|| CapacityError::NoCapacity(name.clone()))?;
        named.insert(full.clone(), q);
    }
    let mut out = BTreeMap::new();
    for (name, cap) in &c.capacity {
        let q = consumed_of(named.get(name).copied(), cap)
            .map_err(|e| CapacityError::Capacity(name.clone(), Box::new(e)))?;
        if q > cap.value {
            let more = CapacityError::MoreThanDevice { consumed: q, has: cap.value.clone() };
            return Err(CapacityError::Capacity(name.clone(), Box::new(more)));
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
