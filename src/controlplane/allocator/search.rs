//! The backtracking search (allocator.go allocateOne/allocateDevice): each
//! request in turn, each sub-request of a firstAvailable request in order,
//! each device that fits in slice order; a device is checked against what
//! other claims hold and what this claim picked so far (in use, shared
//! counters, consumable capacity, taints, constraints.matchAttribute), and a
//! dead end undoes the last pick and tries the next device.

use super::cel::{self, Compiled};
use super::{capacity, taints, Allocated, Candidate, Catalog, Key, TooFew, Unallocatable};
use crate::controlplane::objects::quantity::Quantity;
use crate::controlplane::objects::{Attribute, ClaimSpec, Request, Selector};
use crate::core::fasthash::FastSet;
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::rc::Rc;

/// Steps after which the search gives up (upstream is bounded by the
/// scheduler's timeout instead).
const MAX_STEPS: u64 = 200_000;

#[cfg(test)]
thread_local! {
    /// Tests: scan every candidate (no [`Search::scan`]), to compare.
    pub(super) static PLAIN_SCAN: Cell<bool> = const { Cell::new(false) };
    /// Tests: the steps the last search on this thread took.
    pub(super) static STEPS: Cell<u64> = const { Cell::new(0) };
}

/// resourceapi.AllocationResultsMaxSize: devices one claim's allocation may list.
const MAX_RESULTS: usize = 32;

/// Why a device cannot be picked now.
enum Reject {
    /// A constraint (matchAttribute, distinctAttribute) would break: for a
    /// device an All request must have, upstream stops the claim
    /// (allocateDevice with must: "cannot add device … because a claim
    /// constraint would not be satisfied").
    Constraint(String),
    /// Anything else (in use, counters, capacity, taints, compatibility groups).
    Other(String),
    /// What stops the claim (a derived attribute that does not evaluate:
    /// allocator_experimental.go lookupAttribute's error ends Allocate).
    Fatal(Unallocatable),
}

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reject::Constraint(s) | Reject::Other(s) => f.write_str(s),
            Reject::Fatal(e) => write!(f, "{e}"),
        }
    }
}

/// One pick of this claim: the result and what it consumes.
struct Pick {
    result: Allocated,
    index: usize,
    capacity: BTreeMap<String, Quantity>,
    /// Per constraint of the claim: the attribute it compared for this
    /// device (static or derived), None when the constraint does not cover
    /// the pick's request.
    values: Vec<Option<Attribute>>,
    /// Whether its compatibility groups joined the counter sets' running
    /// intersections (checkAndConsumeCompatibilityGroups ran for it).
    grouped: bool,
}

/// The compatibility-group state of one counter set (KEP-5963,
/// compatibility_groups.go compatibilityGroupIntersection): no member yet
/// admits anything; while every member declared no groups, only a device
/// without groups; else a device whose groups meet the running intersection.
#[derive(Debug, Clone, Default)]
struct Groups {
    members: bool,
    all_empty: bool,
    groups: BTreeSet<String>,
}

impl Groups {
    fn admits(&self, g: &BTreeSet<String>) -> bool {
        if !self.members {
            return true;
        }
        if g.is_empty() {
            return self.all_empty;
        }
        !self.all_empty && self.groups.intersection(g).next().is_some()
    }

    fn add(&self, g: &BTreeSet<String>) -> Groups {
        if !self.members {
            return Groups { members: true, all_empty: g.is_empty(), groups: g.clone() };
        }
        if self.all_empty || g.is_empty() {
            return self.clone();
        }
        Groups { groups: self.groups.intersection(g).cloned().collect(), ..self.clone() }
    }
}

/// Run `f` (a search) on [`cel::with_stack`]'s thread; in tests, with
/// this thread's [`PLAIN_SCAN`] and back with the search's [`STEPS`].
pub(super) fn on_stack<T: Send>(f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    #[cfg(test)]
    {
        let plain = PLAIN_SCAN.with(Cell::get);
        let (out, steps) = cel::with_stack(move || {
            PLAIN_SCAN.with(|p| p.set(plain));
            let out = f();
            (out, STEPS.with(Cell::get))
        })?;
        STEPS.with(|s| s.set(steps));
        Ok(out)
    }
    #[cfg(not(test))]
    cel::with_stack(f)
}

pub(super) struct Search<'a> {
    claim: &'a str,
    spec: &'a ClaimSpec,
    catalog: &'a Catalog,
    cands: &'a [Candidate],
    drivers: &'a BTreeSet<String>,
    /// Devices other claims hold exclusively (looked up for each candidate
    /// tried: a fast hash, not SipHash of three strings).
    used: FastSet<(&'a str, &'a str, &'a str)>,
    /// Capacity other claims consume of shareable devices, in nano-units.
    shared: BTreeMap<Key, BTreeMap<String, i128>>,
    /// Share IDs other claims hold, per device.
    shares: BTreeMap<Key, BTreeSet<String>>,
    /// Counters other claims' devices consume: (driver, pool, set, counter) → nano-units.
    counted: BTreeMap<(String, String, String, String), i128>,
    /// Made when a selector needs CEL run (not for `device.driver == X`).
    ctx: OnceCell<::cel::Context<'static>>,
    programs: RefCell<HashMap<String, Program>>,
    /// Per (sub-)request label: its selectors, compiled, in the order they
    /// run (made once, not for every candidate tried).
    sets: RefCell<HashMap<String, Rc<SelectorSet>>>,
    /// Per (sub-)request label, per candidate: not yet known, no, yes.
    fits: RefCell<HashMap<String, Vec<Option<bool>>>>,
    /// Per driver, its candidates' indices in order: what a request whose
    /// first selector is `device.driver == "X"` can match ([`Search::scan`]).
    by_driver: RefCell<HashMap<String, Rc<Vec<usize>>>>,
    /// Derived attributes evaluated, per (candidate, expression)
    /// (allocator_experimental.go derivedAttributesCache).
    derived: RefCell<HashMap<(usize, String), Attribute>>,
    /// The compatibility groups of the devices other claims hold, per
    /// (driver, pool, counter set) (compatibilityGroupsBaselineForPool).
    baseline: OnceCell<HashMap<(String, String, String), Groups>>,
    steps: Cell<u64>,
}

/// A selector compiled (or why not), shared by every label that uses it.
type Program = Rc<Result<Compiled, cel::Refused>>;

/// A request's selectors as they run on a candidate: its class's (named
/// in errors as `whose`), then its own, each with its index.
struct SelectorSet {
    whose: Option<String>,
    groups: [Vec<(usize, Program)>; 2],
}

impl<'a> Search<'a> {
    pub(super) fn new(
        claim: &'a str,
        spec: &'a ClaimSpec,
        catalog: &'a Catalog,
        cands: &'a [Candidate],
        taken: &'a [&'a Allocated],
        drivers: &'a BTreeSet<String>,
    ) -> Search<'a> {
        // Only devices that are shareable or consume counters need looking
        // up (usually none: no map of every candidate for every claim).
        let special: HashMap<(&str, &str, &str), &Candidate> = cands
            .iter()
            .filter(|c| c.multi || !c.consumes.is_empty())
            .map(|c| ((c.driver.as_str(), c.pool.as_str(), c.device.as_str()), c))
            .collect();
        let mut s = Search {
            claim,
            spec,
            catalog,
            cands,
            drivers,
            used: FastSet::default(),
            shared: BTreeMap::new(),
            shares: BTreeMap::new(),
            counted: BTreeMap::new(),
            ctx: OnceCell::new(),
            programs: RefCell::new(HashMap::new()),
            sets: RefCell::new(HashMap::new()),
            fits: RefCell::new(HashMap::new()),
            by_driver: RefCell::new(HashMap::new()),
            derived: RefCell::new(HashMap::new()),
            baseline: OnceCell::new(),
            steps: Cell::new(0),
        };
        let mut counted_devices = HashSet::new();
        s.used.reserve(taken.len());
        for a in taken.iter().filter(|a| !a.admin) {
            let c = if special.is_empty() {
                None
            } else {
                special.get(&(a.driver.as_str(), a.pool.as_str(), a.device.as_str()))
            };
            // Without DRAConsumableCapacity a share counts as the whole
            // device (dynamicresources GatherAllocatedState, foreachAllocatedDevice).
            let shares = catalog.features.consumable_capacity;
            if shares && (a.share_id.is_some() || c.is_some_and(|c| c.multi)) {
                let key = a.key();
                let m = s.shared.entry(key.clone()).or_default();
                for (name, q) in &a.consumed_capacity {
                    let full = if name.contains('/') { name.clone() } else { format!("{}/{name}", a.driver) };
                    *m.entry(full).or_default() += Quantity::read(q).map_or(0, |q| q.nanos());
                }
                s.shares.entry(key).or_default().extend(a.share_id.clone());
            } else {
                s.used.insert((a.driver.as_str(), a.pool.as_str(), a.device.as_str()));
            }
            // A device consumes its counters once, however many shares it
            // has (allocator_incubating.go checkAvailableCounters counts
            // each allocated device once). Only a device that consumes
            // counters is noted (the others have none to count).
            let consumes = c.map(|c| c.consumes.as_slice()).unwrap_or(&[]);
            if consumes.is_empty() || !counted_devices.insert((a.driver.as_str(), a.pool.as_str(), a.device.as_str())) {
                continue;
            }
            for set in consumes {
                for (counter, q) in &set.counters {
                    let k = (a.driver.clone(), a.pool.clone(), set.name.clone(), counter.clone());
                    *s.counted.entry(k).or_default() += q.nanos();
                }
            }
        }
        s
    }

    pub(super) fn run(&self) -> Result<Vec<Allocated>, Unallocatable> {
        // Every All (sub-)request's devices are counted, each selector run
        // on each device, before the search (validateDeviceRequest): a
        // runtime error there stops the claim even in a sub-request the
        // search would not reach.
        for r in &self.spec.requests {
            if r.first_available.is_empty() {
                if r.all {
                    self.fitting(r, &r.name)?;
                }
            } else {
                for s in r.first_available.iter().filter(|s| s.all) {
                    self.fitting(s, &format!("{}/{}", r.name, s.name))?;
                }
            }
        }
        let mut mine = Vec::new();
        let r = self.request(0, &mut mine);
        #[cfg(test)]
        STEPS.with(|s| s.set(self.steps.get()));
        r?;
        Ok(mine.into_iter().map(|p| p.result).collect())
    }

    /// The candidates the search tries for the ExactCount request `r`, in
    /// order, when not all can match: one whose first selector to run (its
    /// class's first, else its own) is `device.driver == "X"` matches
    /// X's devices only, and on any other device that selector answers
    /// false before another runs, so none of them can match or fail. None:
    /// every candidate (also when the selectors cannot be made: the
    /// search then reports that as it reaches a candidate).
    fn scan(&self, r: &Request, label: &str) -> Option<Rc<Vec<usize>>> {
        #[cfg(test)]
        if PLAIN_SCAN.with(Cell::get) {
            return None;
        }
        let set = self.selector_set(r, label).ok()?;
        let (_, first) = set.groups.iter().flatten().next()?;
        let driver = cel::driver_of(first.as_ref().as_ref().ok()?)?;
        let mut index = self.by_driver.borrow_mut();
        let list = index.entry(driver.to_string()).or_insert_with(|| {
            Rc::new(self.cands.iter().enumerate().filter(|(_, c)| c.driver == driver).map(|(i, _)| i).collect())
        });
        Some(list.clone())
    }

    /// The class selectors of `r`, or why there are none.
    fn class<'r>(&self, r: &'r Request, label: &str) -> Result<(Vec<Selector>, Option<&'r str>), Unallocatable> {
        match self.catalog.classes.get(&r.class) {
            Some(s) => Ok((s.clone(), Some(r.class.as_str()))),
            None if self.drivers.contains(&r.class) || self.cands.iter().any(|c| c.driver == r.class) => {
                Ok((vec![Selector::driver(&r.class)], None))
            }
            None => Err(Unallocatable::NoClass {
                claim: self.claim.to_string(),
                request: label.to_string(),
                class: r.class.clone(),
            }),
        }
    }

    /// Compile each of `selectors` not compiled yet (once per search).
    fn compile<'s>(&self, selectors: impl Iterator<Item = &'s Selector>) {
        let mut programs = self.programs.borrow_mut();
        for s in selectors {
            if !programs.contains_key(&s.expression) {
                programs.insert(s.expression.clone(), Rc::new(cel::compile(&s.expression)));
            }
        }
    }

    /// The candidates that match every selector of `r` (class first, as
    /// upstream), in order; remembered per label across backtracking. Each
    /// selector is compiled once, not looked up per candidate.
    fn fitting(&self, r: &Request, label: &str) -> Result<Vec<usize>, Unallocatable> {
        let set = self.selector_set(r, label)?;
        let known = self.fits.borrow_mut().remove(label);
        let mut fits = known.unwrap_or_else(|| vec![None; self.cands.len()]);
        let mut out = Vec::new();
        let mut result = Ok(());
        for (i, fit) in fits.iter_mut().enumerate() {
            let hit = match *fit {
                Some(hit) => hit,
                None => match self.selected(&set, i) {
                    Ok(hit) => {
                        *fit = Some(hit);
                        hit
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                },
            };
            // All counts only devices whose capacity can take the request
            // at all (validateDeviceRequest's static CmpRequestOverCapacity).
            if hit && (!r.all || capacity::consumed(&self.cands[i], &r.capacity).is_ok()) {
                out.push(i);
            }
        }
        self.fits.borrow_mut().insert(label.to_string(), fits);
        result.map(|()| out)
    }

    /// Whether candidate `i` matches every selector of `r`, run now if
    /// not known yet (remembered per label).
    fn fits(&self, r: &Request, label: &str, i: usize) -> Result<bool, Unallocatable> {
        if let Some(Some(hit)) = self.fits.borrow().get(label).and_then(|v| v.get(i).copied()) {
            return Ok(hit);
        }
        let set = self.selector_set(r, label)?;
        let hit = self.selected(&set, i)?;
        let mut fits = self.fits.borrow_mut();
        if !fits.contains_key(label) {
            fits.insert(label.to_string(), vec![None; self.cands.len()]);
        }
        if let Some(k) = fits.get_mut(label).and_then(|known| known.get_mut(i)) {
            *k = Some(hit);
        }
        Ok(hit)
    }

    /// The selectors of `r` (its class's first, as upstream), compiled;
    /// made once per label.
    fn selector_set(&self, r: &Request, label: &str) -> Result<Rc<SelectorSet>, Unallocatable> {
        if let Some(set) = self.sets.borrow().get(label) {
            return Ok(set.clone());
        }
        let (class_sel, class) = self.class(r, label)?;
        self.compile(class_sel.iter().chain(&r.selectors));
        let programs = self.programs.borrow();
        let mut groups: [Vec<(usize, Program)>; 2] = Default::default();
        for (g, sels) in [class_sel.as_slice(), r.selectors.as_slice()].into_iter().enumerate() {
            for (n, s) in sels.iter().enumerate() {
                match programs.get(&s.expression) {
                    Some(p) => groups[g].push((n, p.clone())),
                    None => return Err(self.selector_error(None, n, "CEL program not compiled")),
                }
            }
        }
        let set = Rc::new(SelectorSet { whose: class.map(|n| format!("class {n}: ")), groups });
        self.sets.borrow_mut().insert(label.to_string(), set.clone());
        Ok(set)
    }

    /// The candidates that fit `r`, a selector error counting as not (for
    /// explaining a failure only); of `scan`'s only when given (the others
    /// cannot fit).
    fn lenient(&self, r: &Request, label: &str, scan: Option<&Vec<usize>>) -> Vec<usize> {
        match scan {
            Some(list) => list.iter().copied().filter(|&i| self.fits(r, label, i).unwrap_or(false)).collect(),
            None => (0..self.cands.len()).filter(|&i| self.fits(r, label, i).unwrap_or(false)).collect(),
        }
    }

    /// Whether candidate `i` is in use for a request with `admin`
    /// (allocateOne's first, cheap check: before any selector runs).
    fn in_use(&self, admin: bool, i: usize, mine: &[Pick]) -> bool {
        let c = &self.cands[i];
        let mine_has = mine.iter().any(|p| p.index == i);
        if admin {
            mine_has && !c.multi
        } else {
            (mine_has && !c.multi) || self.used.contains(&(c.driver.as_str(), c.pool.as_str(), c.device.as_str()))
        }
    }

    fn selector_error(&self, whose: Option<&str>, n: usize, e: &str) -> Unallocatable {
        Unallocatable::Selector {
            claim: self.claim.to_string(),
            error: format!("{}selector #{n}: {e}", whose.unwrap_or_default()),
        }
    }

    /// Whether candidate `i` matches every selector: `groups` are the
    /// class's (named by `whose`), then the request's, compiled.
    fn selected(&self, set: &SelectorSet, i: usize) -> Result<bool, Unallocatable> {
        let c = &self.cands[i];
        // A device with binding conditions is not selectable while the
        // feature is off, before any selector runs (isSelectable).
        if !self.catalog.features.binding_conditions && !c.binding_conditions.is_empty() {
            return Ok(false);
        }
        for (g, sels) in set.groups.iter().enumerate() {
            let whose = if g == 0 { set.whose.as_deref() } else { None };
            for (n, compiled) in sels {
                let compiled =
                    compiled.as_ref().as_ref().map_err(|e| self.selector_error(whose, *n, &format!("CEL {e}")))?;
                let ctx = self.ctx.get_or_init(cel::context);
                let hit = cel::matches(ctx, compiled, c).map_err(|e| {
                    let e = format!("on device {}/{}/{}: CEL runtime error: {e}", c.driver, c.pool, c.device);
                    self.selector_error(whose, *n, &e)
                })?;
                if !hit {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Whether candidate `i` can be picked for `r` now, as the pick, or why not.
    fn check(&self, r: &Request, label: &str, admin: bool, i: usize, mine: &[Pick]) -> Result<Pick, Reject> {
        let c = &self.cands[i];
        let features = &self.catalog.features;
        let name = format!("device {}", c.device);
        let mine_has = mine.iter().any(|p| p.index == i);
        if admin {
            if mine_has && !c.multi {
                return Err(Reject::Other(format!("{name}: already in this claim")));
            }
        } else if (mine_has && !c.multi) || self.used.contains(&(c.driver.as_str(), c.pool.as_str(), c.device.as_str()))
        {
            return Err(Reject::Other(format!("{name}: in use")));
        }
        let early = if r.all { None } else { Some(self.capacity_for(r, i, mine)?) };
        // Shared counters (KEP-4815); a shareable device already shared
        // (by another claim or this one) has its counters counted
        // (allocateDevice's skipCounterCheck).
        let shared_already =
            c.multi && (self.shares.contains_key(&c.key()) || self.shared.contains_key(&c.key()) || mine_has);
        let consumes = if shared_already { &[][..] } else { c.consumes.as_slice() };
        // Compatibility groups (KEP-5963), before the counters, as
        // allocateDevice checks them: on each counter set the device draws
        // from, its groups must meet those of every device already on it.
        let grouped = features.compatibility_groups && !consumes.is_empty();
        if grouped {
            for set in consumes {
                let state = self.groups_on(c, &set.name, mine);
                let g: BTreeSet<String> = set.groups.iter().cloned().collect();
                if !state.admits(&g) {
                    return Err(Reject::Other(format!(
                        "{name}: compatibility groups {:?} on counter set {} do not meet {:?} of the devices drawing from it",
                        set.groups, set.name, state.groups
                    )));
                }
            }
        }
        for set in consumes {
            let Some(total) = c.counters.iter().find(|s| s.name == set.name) else { continue };
            for (counter, q) in &set.counters {
                let Some(limit) = total.counters.get(counter) else { continue };
                let k = (c.driver.clone(), c.pool.clone(), set.name.clone(), counter.clone());
                let others = self.counted.get(&k).copied().unwrap_or(0);
                let mut seen = HashSet::new();
                let ours: i128 = mine
                    .iter()
                    .filter(|p| seen.insert(p.index))
                    .map(|p| &self.cands[p.index])
                    .filter(|o| {
                        !(o.multi && (self.shares.contains_key(&o.key()) || self.shared.contains_key(&o.key())))
                    })
                    .filter(|o| o.driver == c.driver && o.pool == c.pool)
                    .flat_map(|o| o.consumes.iter().filter(|s| s.name == set.name))
                    .filter_map(|s| s.counters.get(counter).map(Quantity::nanos))
                    .sum();
                if others + ours + q.nanos() > limit.nanos() {
                    return Err(Reject::Other(format!(
                        "{name}: shared counter {}/{counter} would exceed {limit} ({} in use)",
                        set.name,
                        Quantity::from_nanos(others + ours)
                    )));
                }
            }
        }
        // Taints (KEP-5055).
        if let Some(t) = taints::blocking(c, &self.catalog.rules, &r.tolerations) {
            return Err(Reject::Other(format!("{name}: tainted {}: {t} (not tolerated)", t.effect)));
        }
        // constraints.matchAttribute and distinctAttribute, with list-typed
        // attributes (KEP-5491) and derived attributes (KEP-6080).
        let base = label.split('/').next().unwrap_or(label);
        let mut values = Vec::with_capacity(self.spec.constraints.len());
        for (n, con) in self.spec.constraints.iter().enumerate() {
            let covers = |l: &str| {
                con.requests.is_empty() || con.requests.iter().any(|q| q == l || q == l.split('/').next().unwrap_or(l))
            };
            if !covers(label) && !covers(base) {
                values.push(None);
                continue;
            }
            let attr = &con.match_attribute;
            let kind = if con.distinct { "distinctAttribute" } else { "matchAttribute" };
            let Some(v) = self.attribute(r, label, i, attr).map_err(Reject::Fatal)? else {
                return Err(Reject::Constraint(format!(
                    "{name}: constraints.{kind} {attr}: the device has no such attribute"
                )));
            };
            let others: Vec<(&Attribute, &str)> = mine
                .iter()
                .filter_map(|p| p.values.get(n).and_then(Option::as_ref).map(|a| (a, p.result.device.as_str())))
                .collect();
            let why = if con.distinct {
                distinct_violation(&v, &others, features.list_type_attributes)
            } else {
                match_violation(&v, &others, features.list_type_attributes)
            };
            if let Some(why) = why {
                return Err(Reject::Constraint(format!("{name}: constraints.{kind} {attr}: {why}")));
            }
            values.push(Some(v));
        }
        // Consumable capacity (KEP-5075): for an ExactCount request checked
        // before anything else (allocateOne's CmpRequestOverCapacity comes
        // before allocateDevice: no derived attribute is evaluated for a
        // device without room); for a device an All request must have,
        // after taints and constraints as in allocateDevice (a constraint
        // it breaks stops the claim even when its capacity would not do
        // either).
        let consumed = match early {
            Some(consumed) => consumed,
            None => self.capacity_for(r, i, mine)?,
        };
        // A shareable device gets a share (ID and consumed capacity) for
        // an adminAccess request too (allocator_incubating.go allocateDevice).
        let multi = c.multi;
        let share_id = multi.then(|| self.share_id(c, label, mine));
        // Binding conditions are copied while the feature is on (with it
        // off, a device that has them is never picked).
        let binding = features.binding_conditions;
        Ok(Pick {
            result: Allocated {
                request: label.to_string(),
                driver: c.driver.clone(),
                pool: c.pool.clone(),
                device: c.device.clone(),
                admin,
                skip_node_operations: c.skip.clone(),
                tolerations: r.tolerations.clone(),
                consumed_capacity: if multi {
                    consumed.iter().map(|(k, q)| (capacity::status_name(c, k), q.text().to_string())).collect()
                } else {
                    BTreeMap::new()
                },
                share_id,
                binding_conditions: if binding { c.binding_conditions.clone() } else { Vec::new() },
                binding_failure_conditions: if binding { c.binding_failure_conditions.clone() } else { Vec::new() },
            },
            index: i,
            capacity: if multi { consumed } else { BTreeMap::new() },
            values,
            grouped,
        })
    }

    /// What picking candidate `i` for `r` consumes of its capacities, or
    /// why it cannot: the amounts under the request policies, within what
    /// other claims and this one's picks left of a shareable device.
    fn capacity_for(&self, r: &Request, i: usize, mine: &[Pick]) -> Result<BTreeMap<String, Quantity>, Reject> {
        let c = &self.cands[i];
        let name = format!("device {}", c.device);
        let mut consumed = BTreeMap::new();
        if c.multi || !r.capacity.is_empty() {
            consumed = capacity::consumed(c, &r.capacity).map_err(|e| Reject::Other(format!("{name}: {e}")))?;
        }
        if c.multi {
            for (cap, q) in &consumed {
                let value = &c.capacity[cap].value;
                let others = self.shared.get(&c.key()).and_then(|m| m.get(cap)).copied().unwrap_or(0);
                let ours: i128 =
                    mine.iter().filter(|p| p.index == i).filter_map(|p| p.capacity.get(cap)).map(Quantity::nanos).sum();
                if others + ours + q.nanos() > value.nanos() {
                    return Err(Reject::Other(format!(
                        "{name}: capacity {cap}: {q} more would exceed {value} ({} allocated)",
                        Quantity::from_nanos(others + ours)
                    )));
                }
            }
        }
        Ok(consumed)
    }

    /// The attribute `name` of candidate `i` as a constraint of request
    /// `r` sees it (allocator_experimental.go lookupAttribute): the
    /// request's derived attribute of that name, evaluated (once per
    /// device and expression), else the device's own. An expression that
    /// does not compile or evaluate stops the claim.
    fn attribute(&self, r: &Request, label: &str, i: usize, name: &str) -> Result<Option<Attribute>, Unallocatable> {
        let c = &self.cands[i];
        let Some((_, expr)) = r.derived.iter().find(|(n, _)| n == name) else {
            return Ok(c.attributes.get(name).cloned());
        };
        if let Some(a) = self.derived.borrow().get(&(i, expr.clone())) {
            return Ok(Some(a.clone()));
        }
        self.compile(std::iter::once(&Selector { expression: expr.clone() }));
        let programs = self.programs.borrow();
        let stop = |e: String| Unallocatable::Selector {
            claim: self.claim.to_string(),
            error: format!("request {label}: {e}"),
        };
        let compiled = match programs.get(expr).map(|p| p.as_ref()) {
            Some(Ok(p)) => p,
            Some(Err(e)) => return Err(stop(format!("compile derived attribute {name} failed: {e}"))),
            None => return Err(stop(format!("compile derived attribute {name} failed: not compiled"))),
        };
        let ctx = self.ctx.get_or_init(cel::context);
        let a = cel::derive(ctx, compiled, c).map_err(|e| {
            stop(format!(
                "evaluate derived attribute {name} on device {}/{}/{} failed: {e}",
                c.driver, c.pool, c.device
            ))
        })?;
        self.derived.borrow_mut().insert((i, expr.clone()), a.clone());
        Ok(Some(a))
    }

    /// The compatibility-group state of counter set `set` of `c`'s pool:
    /// the devices other claims hold that draw from it (in pool order),
    /// then this claim's picks that joined it.
    fn groups_on(&self, c: &Candidate, set: &str, mine: &[Pick]) -> Groups {
        let baseline = self.baseline.get_or_init(|| {
            let mut out: HashMap<(String, String, String), Groups> = HashMap::new();
            for o in self.cands {
                let k = o.key();
                let held = self.used.contains(&(o.driver.as_str(), o.pool.as_str(), o.device.as_str()))
                    || self.shares.contains_key(&k)
                    || self.shared.contains_key(&k);
                if !held {
                    continue;
                }
                for s in &o.consumes {
                    let g: BTreeSet<String> = s.groups.iter().cloned().collect();
                    let e = out.entry((o.driver.clone(), o.pool.clone(), s.name.clone())).or_default();
                    *e = e.add(&g);
                }
            }
            out
        });
        let mut state = baseline.get(&(c.driver.clone(), c.pool.clone(), set.to_string())).cloned().unwrap_or_default();
        for p in mine.iter().filter(|p| p.grouped) {
            let o = &self.cands[p.index];
            if o.driver != c.driver || o.pool != c.pool {
                continue;
            }
            for s in o.consumes.iter().filter(|s| s.name == set) {
                state = state.add(&s.groups.iter().cloned().collect());
            }
        }
        state
    }

    /// A share ID no other share of the device has: a UUID, as upstream's
    /// (allocatedstate.go GenerateShareID: uuid.NewUUID), derived rather
    /// than random.
    fn share_id(&self, c: &Candidate, label: &str, mine: &[Pick]) -> String {
        let used = self.shares.get(&c.key());
        for salt in 0u32.. {
            let seed = format!("{}\0{label}\0{}/{}/{}\0{salt}", self.claim, c.driver, c.pool, c.device);
            let id = crate::controlplane::objects::derived_uid(&seed);
            let clash = used.is_some_and(|u| u.contains(&id))
                || mine.iter().any(|p| p.result.share_id.as_deref() == Some(id.as_str()));
            if !clash {
                return id;
            }
        }
        unreachable!("u32 salts cannot all clash")
    }

    /// `n` steps at once: the candidates a [`Search::scan`] leaves out,
    /// each of which the full scan would have stepped over (in use, or not
    /// matching), so the search gives up exactly where the full scan would.
    fn skip_steps(&self, n: usize) -> Result<(), Unallocatable> {
        let total = self.steps.get().saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
        if total > MAX_STEPS {
            self.steps.set(MAX_STEPS + 1);
            return Err(Unallocatable::GaveUp { claim: self.claim.to_string(), steps: MAX_STEPS });
        }
        self.steps.set(total);
        Ok(())
    }

    fn step(&self) -> Result<(), Unallocatable> {
        let n = self.steps.get() + 1;
        self.steps.set(n);
        if n > MAX_STEPS {
            return Err(Unallocatable::GaveUp { claim: self.claim.to_string(), steps: MAX_STEPS });
        }
        Ok(())
    }

    /// Requests `i..`, trying each sub-request of a firstAvailable request in order.
    fn request(&self, i: usize, mine: &mut Vec<Pick>) -> Result<(), Unallocatable> {
        let Some(r) = self.spec.requests.get(i) else { return Ok(()) };
        let options: Vec<(&Request, String)> = if r.first_available.is_empty() {
            vec![(r, r.name.clone())]
        } else {
            r.first_available.iter().map(|s| (s, format!("{}/{}", r.name, s.name))).collect()
        };
        let mut errors = Vec::new();
        for (opt, label) in &options {
            match self.option(i, opt, label, r.admin, mine) {
                Ok(()) => return Ok(()),
                Err(e) if e.fatal() => return Err(e),
                Err(e) => errors.push(e),
            }
        }
        match errors.pop() {
            Some(e) if options.len() == 1 => Err(e),
            last => {
                errors.extend(last);
                Err(Unallocatable::NoSubRequest {
                    claim: self.claim.to_string(),
                    request: r.name.clone(),
                    reasons: errors,
                })
            }
        }
    }

    /// One (sub-)request: its devices, then the requests after it.
    fn option(
        &self,
        i: usize,
        r: &Request,
        label: &str,
        admin: bool,
        mine: &mut Vec<Pick>,
    ) -> Result<(), Unallocatable> {
        // All: every fitting device, each selector run on every device
        // first (validateDeviceRequest, where a runtime error stops the
        // claim). ExactCount: selectors run device by device as the search
        // reaches a device not in use (allocateOne), so an error on a
        // device the search never needs does not count.
        // ExactCount tries only the candidates that can match when the
        // first selector names the driver ([`Search::scan`]).
        let scan = if r.all { None } else { self.scan(r, label) };
        let fitting: Vec<usize> = match &scan {
            _ if r.all => self.fitting(r, label)?,
            Some(list) => list.to_vec(),
            None => (0..self.cands.len()).collect(),
        };
        let tried = if r.all { fitting.len() } else { self.cands.len() };
        let want = if r.all { fitting.len() } else { usize::try_from(r.count).unwrap_or(usize::MAX) };
        if mine.len().saturating_add(want) > MAX_RESULTS {
            return Err(Unallocatable::TooFew(Box::new(TooFew {
                claim: self.claim.to_string(),
                request: label.to_string(),
                want: (!r.all).then_some(want as u64),
                class: r.class.clone(),
                fitting: tried,
                free: tried,
                why: vec![format!(
                    "the claim would hold {} devices, more than the {MAX_RESULTS} an allocation result may list",
                    mine.len().saturating_add(want)
                )],
            })));
        }
        let mut deeper = None;
        let gaps = scan.is_some();
        if want > 0 && self.devices(i, r, label, admin, &fitting, gaps, 0, want, mine, &mut deeper)? {
            return Ok(());
        }
        if let Some(e) = deeper {
            return Err(e);
        }
        let fitting = if r.all { fitting } else { self.lenient(r, label, scan.as_deref()) };
        Err(self.diagnose(r, label, admin, &fitting, want, mine))
    }

    /// Picks `left` more devices for `r` from `fitting[start..]`; true when
    /// this and every later request were satisfied. The first failure of a
    /// later request (or of an All request's device) is kept in `deeper`,
    /// reported rather than a diagnosis of this request. With `gaps`,
    /// `fitting` is a [`Search::scan`]: the candidates it leaves out count
    /// the steps the full scan would have taken over them.
    #[allow(clippy::too_many_arguments)]
    fn devices(
        &self,
        i: usize,
        r: &Request,
        label: &str,
        admin: bool,
        fitting: &[usize],
        gaps: bool,
        start: usize,
        left: usize,
        mine: &mut Vec<Pick>,
        deeper: &mut Option<Unallocatable>,
    ) -> Result<bool, Unallocatable> {
        if left == 0 {
            return match self.request(i + 1, mine) {
                Ok(()) => Ok(true),
                Err(e) if e.fatal() => Err(e),
                Err(e) => {
                    // The first dead end (of the preferred picks) explains best.
                    deeper.get_or_insert(e);
                    Ok(false)
                }
            };
        }
        // The first candidate the full scan would try from here.
        let mut next = match start.checked_sub(1).and_then(|p| fitting.get(p)) {
            Some(&before) if gaps => before + 1,
            _ => 0,
        };
        for (pos, &c) in fitting.iter().enumerate().skip(start) {
            // All: every fitting device, so only the next one in order.
            if r.all && pos != start {
                break;
            }
            // Too few left: stop (ExactCount goes on, as upstream's search
            // does, so that a selector's runtime error on the way counts).
            if r.all && fitting.len() - pos < left {
                break;
            }
            if gaps {
                self.skip_steps(c.saturating_sub(next))?;
                next = c + 1;
            }
            self.step()?;
            if !r.all && (self.in_use(admin, c, mine) || !self.fits(r, label, c)?) {
                continue;
            }
            let pick = match self.check(r, label, admin, c, mine) {
                Ok(p) => p,
                Err(Reject::Fatal(e)) => return Err(e),
                Err(Reject::Constraint(why)) if r.all => {
                    return Err(Unallocatable::Constraint {
                        claim: self.claim.to_string(),
                        request: label.to_string(),
                        device: format!("{}/{}/{}", self.cands[c].driver, self.cands[c].pool, self.cands[c].device),
                        why,
                    });
                }
                Err(Reject::Other(why)) if r.all => {
                    deeper.get_or_insert(Unallocatable::TooFew(Box::new(TooFew {
                        claim: self.claim.to_string(),
                        request: label.to_string(),
                        want: None,
                        class: r.class.clone(),
                        fitting: fitting.len(),
                        free: pos,
                        why: vec![why],
                    })));
                    return Ok(false);
                }
                Err(_) => continue,
            };
            mine.push(pick);
            if self.devices(i, r, label, admin, fitting, gaps, pos + 1, left - 1, mine, deeper)? {
                return Ok(true);
            }
            mine.pop();
        }
        if gaps {
            self.skip_steps(self.cands.len().saturating_sub(next))?;
        }
        Ok(false)
    }

    /// Why `r` cannot get `want` of `fitting` given this claim's picks `mine`.
    fn diagnose(
        &self,
        r: &Request,
        label: &str,
        admin: bool,
        fitting: &[usize],
        want: usize,
        mine: &[Pick],
    ) -> Unallocatable {
        let mut why = Vec::new();
        let mut free = 0;
        for &c in fitting {
            match self.check(r, label, admin, c, mine) {
                Ok(_) => free += 1,
                Err(e) => why.push(e.to_string()),
            }
        }
        if free >= want && want > 0 {
            why.push(format!(
                "{free} free devices fit one by one but no {want} of them together (shared counters, capacity or constraints.matchAttribute)"
            ));
        }
        why.truncate(8);
        Unallocatable::TooFew(Box::new(TooFew {
            claim: self.claim.to_string(),
            request: label.to_string(),
            want: (!r.all).then_some(want as u64),
            class: r.class.clone(),
            fitting: fitting.len(),
            free,
            why,
        }))
    }
}

/// Why `v` breaks a matchAttribute constraint with the values `others` of
/// the devices it covers so far, if it does (allocator_experimental.go
/// matchAttributeConstraint.add): with list-typed attributes, the values
/// (a scalar a set of one) must all intersect; without, the first device
/// may have any value, every later one a scalar equal to the first's.
fn match_violation(v: &Attribute, others: &[(&Attribute, &str)], lists: bool) -> Option<String> {
    if lists {
        let Some(mut set) = v.as_set() else { return Some("an empty list matches nothing".into()) };
        for (o, device) in others {
            match o.as_set().and_then(|s| s.intersection(&set)) {
                Some(i) => set = i,
                None => {
                    return Some(format!(
                        "{v:?} has no value in common with the devices before ({o:?} of device {device})"
                    ))
                }
            }
        }
        return None;
    }
    let (first, device) = others.first()?;
    if v.is_list() {
        return Some(format!("{v:?} is a list (DRAListTypeAttributes is off)"));
    }
    (*first != v).then(|| format!("{v:?} differs from {first:?} of device {device}"))
}

/// Why `v` breaks a distinctAttribute constraint, if it does
/// (constraint.go distinctAttributeConstraint.matchesAttribute): with
/// list-typed attributes, its values must be disjoint from each other
/// device's; without, a scalar must differ from each (a list is refused
/// beside any other device).
fn distinct_violation(v: &Attribute, others: &[(&Attribute, &str)], lists: bool) -> Option<String> {
    if lists {
        let Some(set) = v.as_set() else { return Some("an empty list cannot be compared".into()) };
        for (o, device) in others {
            if o.as_set().and_then(|s| s.intersection(&set)).is_some() {
                return Some(format!("{v:?} shares a value with {o:?} of device {device}"));
            }
        }
        return None;
    }
    if v.is_list() && !others.is_empty() {
        return Some(format!("{v:?} is a list (DRAListTypeAttributes is off)"));
    }
    others.iter().find(|(o, _)| *o == v).map(|(o, device)| format!("{o:?} is also device {device}'s"))
}
