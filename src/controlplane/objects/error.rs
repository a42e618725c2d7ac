//! Why a manifest is not an object dpctl reads: a field error (the field's
//! path, what kind of problem, the detail, as apimachinery's `field.Error`
//! holds them) or a problem with the object as a whole. The texts are one
//! line each, the path first.

use super::quantity::QuantityError;

/// What is wrong with one field.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// Missing or empty: `PATH is required`.
    Required,
    /// Present, of another JSON type: `PATH has the wrong type`.
    WrongType,
    /// Of another JSON type than the typed object's field (`crate::api::k8s`),
    /// in serde's words: `PATH: invalid type: map, expected a sequence`.
    Type(String),
    /// A rule the value breaks, worded after `must`: `PATH must be a list`.
    Must(&'static str),
    /// A value outside its enumeration: `PATH "x" is not A or B`.
    NotSupported {
        /// The value given.
        value: String,
        /// The values allowed, as a phrase (`NoSchedule, NoExecute or None`).
        allowed: &'static str,
    },
    /// A value given twice (`field.Duplicate`).
    Duplicate(String),
    /// A list longer than allowed (`field.TooMany`): its length and the limit.
    TooMany(usize, usize),
    /// A quantity that does not parse.
    Quantity(QuantityError),
    /// A time that is not RFC 3339.
    Time(crate::core::time::TimeError),
    /// A UID that could not be the API server's.
    Uid(crate::core::validate::UidError),
    /// A CEL expression kube-apiserver refuses.
    Cel(crate::controlplane::cel::Refused),
    /// Anything else, the detail after the path: `PATH: detail`.
    Invalid(String),
}

/// One field's error: where, and what is wrong there.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field's path (`spec.devices[0].capacity[mem].value`).
    pub path: String,
    /// The problem.
    pub problem: Problem,
}

impl FieldError {
    /// The error `problem` at `path`.
    pub fn new(path: impl Into<String>, problem: Problem) -> Self {
        FieldError { path: path.into(), problem }
    }

    /// `PATH is required`.
    pub fn required(path: impl Into<String>) -> Self {
        FieldError::new(path, Problem::Required)
    }

    /// `PATH: detail`.
    pub fn invalid(path: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError::new(path, Problem::Invalid(detail.into()))
    }

    /// `PATH must RULE`.
    pub fn must(path: impl Into<String>, rule: &'static str) -> Self {
        FieldError::new(path, Problem::Must(rule))
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = &self.path;
        match &self.problem {
            Problem::Required => write!(f, "{at} is required"),
            Problem::WrongType => write!(f, "{at} has the wrong type"),
            Problem::Type(detail) => write!(f, "{at}: {detail}"),
            Problem::Must(rule) => write!(f, "{at} must {rule}"),
            Problem::NotSupported { value, allowed } => write!(f, "{at} {value:?} is not {allowed}"),
            Problem::Duplicate(v) => write!(f, "{at}: Duplicate value: {v:?}"),
            Problem::TooMany(n, max) => write!(f, "{at}: Too many: {n}: must have at most {max} items"),
            Problem::Quantity(e) => write!(f, "{at}: {e}"),
            Problem::Time(e) => write!(f, "{at}: {e}"),
            Problem::Uid(e) => write!(f, "{at}: {e}"),
            Problem::Cel(e) => write!(f, "{at}: {e}"),
            Problem::Invalid(detail) => write!(f, "{at}: {detail}"),
        }
    }
}

impl std::error::Error for FieldError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            Problem::Quantity(e) => Some(e),
            Problem::Time(e) => Some(e),
            Problem::Uid(e) => Some(e),
            Problem::Cel(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a manifest is not one of the objects dpctl reads.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectError {
    /// Its kind is none of [`super::KINDS`].
    NotDra,
    /// It has no `metadata`.
    NoMetadata,
    /// It has no `spec` (a DeviceTaintRule, a ResourceSlice).
    NoSpec,
    /// One of its fields.
    Field(FieldError),
    /// A field of a CustomResourceDefinition.
    Crd(FieldError),
}

impl std::fmt::Display for ObjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectError::NotDra => f.write_str("not a DRA object"),
            ObjectError::NoMetadata => f.write_str("no metadata"),
            ObjectError::NoSpec => f.write_str("no spec"),
            ObjectError::Field(e) => e.fmt(f),
            ObjectError::Crd(e) => write!(f, "CustomResourceDefinition: {e}"),
        }
    }
}

impl std::error::Error for ObjectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ObjectError::Field(e) | ObjectError::Crd(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FieldError> for ObjectError {
    fn from(e: FieldError) -> Self {
        ObjectError::Field(e)
    }
}
