//! Label and field selectors as kube-apiserver reads them from a list or
//! watch (`labelSelector`, `fieldSelector`): label selectors in
//! apimachinery's grammar (`k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`,
//! `k notin (a,b)`, joined by commas); field selectors of `=`, `==` and
//! `!=` terms over the fields a resource supports, any other field being
//! `400 BadRequest` in kube-apiserver's words.

use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Label {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector (every requirement must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Vec<Label>);

/// Split at commas outside parentheses.
fn terms(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().map(str::trim).filter(|t| !t.is_empty()).collect()
}

/// Why a selector is refused (400 BadRequest), in kube-apiserver's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorError {
    /// An operator (this character) where a label value belongs.
    Operator(char),
    /// An `in`/`notin` term (this one) without its `(…)` set.
    Set(String),
    /// A label term (this one) with no operator it knows.
    Requirement(String),
    /// A field selector (the whole, and the term) with no `=`, `==` or `!=`.
    FieldTerm(String, String),
    /// A field a ResourceSlice cannot be selected by.
    SliceField(String),
    /// A field a Pod cannot be selected by.
    PodField(String),
    /// A field other than metadata.name and metadata.namespace.
    MetaField(String),
}

impl std::fmt::Display for SelectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectorError::Operator(c) => write!(f, "unable to parse requirement: found '{c}', expected: identifier"),
            SelectorError::Set(t) => write!(f, "unable to parse requirement: {t}"),
            SelectorError::Requirement(t) => {
                write!(f, "unable to parse requirement: found '{t}', expected: in, notin, =, ==, !=, gt, lt")
            }
            SelectorError::FieldTerm(s, t) => write!(f, "invalid selector: '{s}'; can't understand '{t}'"),
            SelectorError::SliceField(field) => {
                write!(f, "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {field}")
            }
            SelectorError::PodField(field) => write!(f, "field label not supported: {field}"),
            SelectorError::MetaField(field) => {
                write!(f, "{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"")
            }
        }
    }
}

impl std::error::Error for SelectorError {}

impl Labels {
    /// Parse `labelSelector`; `Err` is the BadRequest message.
    pub fn parse(s: &str) -> Result<Labels, SelectorError> {
        let mut out = Vec::new();
        for t in terms(s) {
            let set = |rest: &str| -> Option<Vec<String>> {
                let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
                Some(inner.split(',').map(|v| v.trim().to_string()).collect())
            };
            // labels/selector.go: after `=`, `==` or `!=` comes an identifier, not another operator.
            let op_value = t.split_once("!=").or_else(|| t.split_once("==")).or_else(|| t.split_once('='));
            if let Some(c) = op_value.and_then(|(_, v)| v.trim().chars().next()).filter(|c| "=!".contains(*c)) {
                return Err(SelectorError::Operator(c));
            }
            let req = if let Some(k) = t.strip_prefix('!') {
                Label::Absent(k.trim().to_string())
            } else if let Some((k, v)) = t.split_once("!=") {
                Label::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                Label::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = t.split_once(" notin ") {
                Label::NotIn(k.trim().into(), set(rest).ok_or_else(|| SelectorError::Set(t.to_string()))?)
            } else if let Some((k, rest)) = t.split_once(" in ") {
                Label::In(k.trim().into(), set(rest).ok_or_else(|| SelectorError::Set(t.to_string()))?)
            } else if t.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
                Label::Exists(t.to_string())
            } else {
                return Err(SelectorError::Requirement(t.to_string()));
            };
            out.push(req);
        }
        Ok(Labels(out))
    }

    /// Whether `obj`'s labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Label::Eq(k, v) => get(k) == Some(v.as_str()),
            Label::Ne(k, v) => get(k) != Some(v.as_str()),
            Label::Exists(k) => get(k).is_some(),
            Label::Absent(k) => get(k).is_none(),
            Label::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Label::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
        })
    }
}

/// A parsed field selector: (field, value, equal?) terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields(Vec<(String, String, bool)>);

/// The fields a kind can be selected by, and its word for any other
/// (`Err`: kube-apiserver's BadRequest message).
fn known(kind: &str, field: &str) -> Result<(), SelectorError> {
    match kind {
        // pkg/apis/resource/v1/conversion.go
        "ResourceSlice" => match field {
            "metadata.name" | "spec.nodeName" | "spec.driver" | "spec.pool.name" => Ok(()),
            _ => Err(SelectorError::SliceField(field.to_string())),
        },
        // pkg/apis/core/v1/conversion.go (AddFieldLabelConversionFuncForPod)
        "Pod" => match field {
            "metadata.name"
            | "metadata.namespace"
            | "spec.nodeName"
            | "spec.restartPolicy"
            | "spec.schedulerName"
            | "spec.serviceAccountName"
            | "spec.hostNetwork"
            | "status.phase"
            | "status.podIP"
            | "status.podIPs"
            | "status.nominatedNodeName" => Ok(()),
            _ => Err(SelectorError::PodField(field.to_string())),
        },
        // runtime.DefaultMetaV1FieldSelectorConversion
        _ => match field {
            "metadata.name" | "metadata.namespace" => Ok(()),
            _ => Err(SelectorError::MetaField(field.to_string())),
        },
    }
}

impl Fields {
    /// Parse `fieldSelector` for objects of `kind`; `Err` is the BadRequest message.
    pub fn parse(kind: &str, s: &str) -> Result<Fields, SelectorError> {
        let mut out = Vec::new();
        for t in terms(s) {
            let (k, v, eq) = if let Some((k, v)) = t.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                (k, v, true)
            } else {
                return Err(SelectorError::FieldTerm(s.to_string(), t.to_string()));
            };
            known(kind, k.trim())?;
            out.push((k.trim().to_string(), v.trim().to_string(), eq));
        }
        Ok(Fields(out))
    }

    /// Whether `obj` satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, v, eq)| {
            let at = k.split('.').fold(obj, |o, p| &o[p]);
            let have = match at {
                // spec.hostNetwork: a bool, selected as its text ("false" when unset).
                Value::Bool(b) => b.to_string(),
                Value::Null if k == "spec.hostNetwork" => "false".to_string(),
                // status.podIPs: the first address.
                Value::Array(a) => {
                    a.first().map(|x| x["ip"].as_str().unwrap_or_default().to_string()).unwrap_or_default()
                }
                other => other.as_str().unwrap_or_default().to_string(),
            };
            (have == *v) == *eq
        })
    }
}

/// Both selectors of a query, for objects of `kind`; `Err` is a 400 answer.
pub fn of_query(kind: &str, pairs: &[(String, String)]) -> Result<(Labels, Fields), (u16, Value)> {
    let mut labels = Labels::default();
    let mut fields = Fields::default();
    for (k, v) in pairs {
        let r = match k.as_str() {
            "labelSelector" => Labels::parse(v).map(|l| labels.0.extend(l.0)),
            "fieldSelector" => Fields::parse(kind, v).map(|f| fields.0.extend(f.0)),
            _ => Ok(()),
        };
        r.map_err(|e| super::status(400, "BadRequest", e.to_string()))?;
    }
    Ok((labels, fields))
}

/// Selectors of both kinds.
pub type Selection = (Labels, Fields);

/// Whether `obj` is selected.
pub fn selected(sel: &Selection, obj: &Value) -> bool {
    sel.0.matches(obj) && sel.1.matches(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_in_apimachinery_grammar() {
        let o = json!({"metadata": {"labels": {"app": "gpu", "tier": "a"}}});
        for (s, want) in [
            ("app=gpu", true),
            ("app==gpu,tier", true),
            ("app!=gpu", false),
            ("!missing", true),
            ("tier in (a, b)", true),
            ("tier notin (a)", false),
            ("missing", false),
            ("app=gpu,tier in (b,c)", false),
        ] {
            assert_eq!(Labels::parse(s).unwrap().matches(&o), want, "{s}");
        }
        assert!(Labels::parse("a b c").is_err());
        // The corpus's "slice list by a bad label selector": kube-apiserver's 400 words.
        assert_eq!(
            Labels::parse("a===b").unwrap_err().to_string(),
            "unable to parse requirement: found '=', expected: identifier"
        );
        assert_eq!(
            Labels::parse("a!==b").unwrap_err().to_string(),
            "unable to parse requirement: found '=', expected: identifier"
        );
    }

    #[test]
    fn field_selectors_refuse_unknown_fields_in_kube_apiserver_words() {
        let s = json!({"metadata": {"name": "x"}, "spec": {"driver": "d", "nodeName": "n"}});
        assert!(Fields::parse("ResourceSlice", "spec.driver=d,spec.nodeName!=m").unwrap().matches(&s));
        let pooled = json!({"spec": {"pool": {"name": "p"}}});
        assert!(Fields::parse("ResourceSlice", "spec.pool.name=p").unwrap().matches(&pooled));
        assert_eq!(
            Fields::parse("ResourceSlice", "spec.allNodes=true").unwrap_err().to_string(),
            "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.allNodes"
        );
        assert_eq!(
            Fields::parse("ResourceClaim", "spec.x=1").unwrap_err().to_string(),
            "\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let pod = json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}});
        assert!(Fields::parse("Pod", "spec.nodeName=n1,status.phase=Pending,spec.hostNetwork=false")
            .unwrap()
            .matches(&pod));
        assert!(!Fields::parse("Pod", "spec.nodeName=n2").unwrap().matches(&pod));
        assert_eq!(
            Fields::parse("Pod", "spec.bogus=x").unwrap_err().to_string(),
            "field label not supported: spec.bogus"
        );
        let (c, e) = of_query("ResourceSlice", &[("fieldSelector".into(), "status.x=1".into())]).unwrap_err();
        assert_eq!((c, e["reason"].as_str()), (400, Some("BadRequest")));
    }
}
