//! Allocate, GetPreferredAllocation and PreStartContainer (ALLOC-001..005,
//! PREF-001..003, PRE-001): called directly on the plugin with the healthy
//! devices of the kubelet's first snapshot.

use super::*;

/// ALLOC-001.
pub(crate) async fn alloc_each(s: &mut Basic<'_>) -> Outcome {
    let healthy = need!(s.healthy().await);
    if healthy.is_empty() {
        return Outcome::skip("no healthy devices");
    }
    let n = healthy.len().min(64);
    for id in healthy.iter().take(n) {
        match need!(s.allocate(vec![vec![id.clone()]]).await) {
            Ok(r) => {
                let answers = crate::protocol::deviceplugin::allocate(1, &r);
                if let Some(v) =
                    answers.into_iter().find(|v| v.rule == &crate::protocol::deviceplugin::ALLOCATE_ANSWERS)
                {
                    return Outcome::fail(format!("Allocate([{id}])"), v.to_string(), v.rule.fix);
                }
            }
            Err(e) => {
                return Outcome::fail(
                    format!("Allocate([{id}])"),
                    e.to_string(),
                    "allocate every device you advertise as Healthy",
                )
            }
        }
    }
    Outcome::pass(format!("{n} device(s)"))
}

/// ALLOC-002.
pub(crate) async fn alloc_multi(s: &mut Basic<'_>) -> Outcome {
    let healthy = need!(s.healthy().await);
    if healthy.len() < 2 {
        return Outcome::skip("fewer than 2 healthy devices");
    }
    let req = vec![vec![healthy[0].clone()], vec![healthy[1].clone()]];
    match need!(s.allocate(req).await) {
        Ok(r) if r.container_responses.len() == 2 => Outcome::pass(""),
        Ok(r) => Outcome::fail(
            format!("Allocate([{}], [{}])", healthy[0], healthy[1]),
            format!("{} container responses for 2 containers", r.container_responses.len()),
            "answer one ContainerAllocateResponse per ContainerAllocateRequest, in order",
        ),
        Err(e) => {
            Outcome::fail("Allocate (2 containers)", e.to_string(), "accept several container requests in one call")
        }
    }
}

/// ALLOC-003.
pub(crate) async fn alloc_not_empty(s: &mut Basic<'_>) -> Outcome {
    let healthy = need!(s.healthy().await);
    let Some(id) = healthy.first().cloned() else { return Outcome::skip("no healthy devices") };
    match need!(s.allocate(vec![vec![id.clone()]]).await) {
        Ok(r) => {
            // The rulebook's Allocate rules: no answer fails the pod; an empty one is a WARN.
            use crate::protocol::deviceplugin::{allocate, ALLOCATE_ANSWERS, ALLOCATE_NOT_EMPTY};
            let v: Vec<_> = allocate(1, &r)
                .into_iter()
                .filter(|x| x.rule == &ALLOCATE_ANSWERS || x.rule == &ALLOCATE_NOT_EMPTY)
                .collect();
            let fix = v.first().map_or("", |x| x.rule.fix);
            checks::judged(&format!("Allocate([{id}])"), &v, fix)
        }
        Err(e) => {
            Outcome::fail(format!("Allocate([{id}])"), e.to_string(), "allocate every device you advertise as Healthy")
        }
    }
}

/// ALLOC-004.
pub(crate) async fn alloc_unknown(s: &mut Basic<'_>) -> Outcome {
    match need!(s.allocate(vec![vec![UNKNOWN_ID.to_string()]]).await) {
        Err(e) => Outcome::pass(e.to_string()),
        Ok(_) => Outcome::fail(
            format!("Allocate([{UNKNOWN_ID}])"),
            "success for a device the plugin never advertised",
            "return an error (InvalidArgument) for unknown device IDs",
        ),
    }
}

/// ALLOC-005.
pub(crate) async fn alloc_concurrent(s: &mut Basic<'_>) -> Outcome {
    let healthy = need!(s.healthy().await);
    if healthy.is_empty() {
        return Outcome::skip("no healthy devices");
    }
    let c = need!(s.client().await);
    let timeout = s.o.timeout;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..8 {
        let id = healthy[i % healthy.len()].clone();
        let mut c = c.clone();
        set.spawn(async move {
            let req = AllocateRequest {
                container_requests: vec![ContainerAllocateRequest { devices_ids: vec![id.clone()] }],
            };
            match tokio::time::timeout(timeout, c.allocate(req)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(st)) => Err(format!("{id}: {}", evidence::status_text(st.code(), st.message()))),
                Err(_) => Err(format!("{id}: no answer within {timeout:?}")),
            }
        });
    }
    let mut errors = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(Err(e)) = r {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Outcome::pass("8 parallel calls")
    } else {
        Outcome::fail(
            "8 parallel Allocate calls",
            errors.join("; "),
            "serve Allocate concurrently; do not hold a lock across a call",
        )
    }
}

/// PREF-001: every size answered with exactly that many distinct IDs.
pub(crate) async fn pref_size(s: &mut Basic<'_>) -> Outcome {
    preferred(s, checks::offer_request, |p| p.size, "return exactly allocation_size distinct IDs").await
}

/// PREF-002: only available devices.
pub(crate) async fn pref_available(s: &mut Basic<'_>) -> Outcome {
    preferred(s, checks::offer_request, |p| p.available, "choose only from available_deviceIDs").await
}

/// PREF-003: the must-include devices kept.
pub(crate) async fn pref_must_include(s: &mut Basic<'_>) -> Outcome {
    preferred(s, checks::must_include_request, |p| p.must_include, "always include must_include_deviceIDs").await
}

/// GetPreferredAllocation for every size, asked as `request` builds it
/// (available, must-include) and judged by the problem `pick` selects.
async fn preferred(
    s: &mut Basic<'_>,
    request: fn(&[String], usize) -> checks::PreferredRequest,
    pick: fn(checks::PreferredProblems) -> Option<String>,
    fix: &str,
) -> Outcome {
    let opts = need!(s.options().await);
    if !opts.get_preferred_allocation_available {
        return Outcome::skip("GetPreferredAllocation is not advertised");
    }
    let healthy = need!(s.healthy().await);
    if healthy.is_empty() {
        return Outcome::skip("no healthy devices");
    }
    let mut c = need!(s.client().await);
    let healthy: Vec<String> = healthy.into_iter().take(64).collect();
    let n = healthy.len();
    for size in 1..=n {
        let (available, must) = request(&healthy, size);
        let req = PreferredAllocationRequest {
            container_requests: vec![ContainerPreferredAllocationRequest {
                available_device_i_ds: available.clone(),
                must_include_device_i_ds: must.clone(),
                allocation_size: size as i32,
            }],
        };
        let call = format!(
            "GetPreferredAllocation(size {size}, available {}, mustInclude {must:?})",
            evidence::list(&available, 8)
        );
        let answer = match tokio::time::timeout(s.o.timeout, c.get_preferred_allocation(req)).await {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(st)) => {
                return Outcome::fail(
                    call,
                    evidence::status_text(st.code(), st.message()),
                    "answer every size from 1 to all devices (an error fails pod admission)",
                )
            }
            Err(_) => return Outcome::fail(call, "timed out", "answer GetPreferredAllocation promptly"),
        };
        let Some(first) = answer.container_responses.first() else {
            return Outcome::fail(
                call,
                "no container responses",
                "answer one ContainerPreferredAllocationResponse per container",
            );
        };
        let p = checks::preferred_problems(&available, &must, size, &first.device_i_ds);
        if let Some(problem) = pick(p) {
            return Outcome::fail(call, problem, fix);
        }
    }
    Outcome::pass(format!("sizes 1..={n}"))
}

/// PRE-001.
pub(crate) async fn pre_start(s: &mut Basic<'_>) -> Outcome {
    let opts = need!(s.options().await);
    if !opts.pre_start_required {
        return Outcome::skip("PreStartContainer is not required by the plugin");
    }
    let healthy = need!(s.healthy().await);
    let Some(id) = healthy.first().cloned() else { return Outcome::skip("no healthy devices") };
    if let Err(e) = need!(s.allocate(vec![vec![id.clone()]]).await) {
        return Outcome::fail(format!("Allocate([{id}])"), e.to_string(), "allocate every healthy device");
    }
    let mut c = need!(s.client().await);
    let req = PreStartContainerRequest { devices_ids: vec![id.clone()] };
    let start = Instant::now();
    match tokio::time::timeout(Duration::from_secs(30), c.pre_start_container(req)).await {
        Ok(Ok(_)) => Outcome::pass(format!("after {}", ms(start.elapsed()))),
        Ok(Err(st)) if evidence::is_connection_lost(st.message()) => Outcome::fail(
            format!("PreStartContainer([{id}])"),
            evidence::status_text(st.code(), st.message()),
            "succeed for devices you allocated (an error fails the container start)",
        ),
        Ok(Err(st)) => {
            let text = crate::protocol::go_status(st.code(), st.message());
            let v = crate::protocol::deviceplugin::pre_start(Some(&text), start.elapsed());
            let answer = v.map(|v| v.to_string()).unwrap_or(text);
            Outcome::fail(
                format!("PreStartContainer([{id}])"),
                answer,
                "succeed for devices you allocated (an error fails the container start)",
            )
        }
        Err(_) => Outcome::fail(
            format!("PreStartContainer([{id}])"),
            "no answer within the kubelet's 30s",
            "answer PreStartContainer within 30s",
        ),
    }
}
