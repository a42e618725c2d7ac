//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource`):
//! `80Gi`, `1.5`, `500m`, `1e3`. Held exactly as nano-units in an `i128`
//! (values finer than 1n round up, as apimachinery's do), with the text as
//! written kept for output.

use std::cmp::Ordering;

/// A parsed quantity.
#[derive(Debug, Clone)]
pub struct Quantity {
    nanos: i128,
    text: String,
}

const NANO: i128 = 1_000_000_000;

/// A text that is not a Kubernetes quantity (or is out of range): the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError(pub String);

impl std::fmt::Display for QuantityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "quantity {:?} is not a Kubernetes quantity (e.g. 80Gi, 500m, 1.5, 1e3)", self.0)
    }
}

impl std::error::Error for QuantityError {}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;

    /// Parse `s` in apimachinery's quantity syntax.
    fn from_str(s: &str) -> Result<Quantity, QuantityError> {
        Quantity::read(s)
    }
}

impl Quantity {
    /// Parse `s` in apimachinery's quantity syntax.
    pub fn read(s: &str) -> Result<Quantity, QuantityError> {
        let bad = || QuantityError(s.to_string());
        let t = s.trim();
        if t.is_empty() || t.len() > 64 {
            return Err(bad());
        }
        let (neg, body) = match t.as_bytes()[0] {
            b'-' => (true, &t[1..]),
            b'+' => (false, &t[1..]),
            _ => (false, t),
        };
        let num_end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
        let (num, suffix) = body.split_at(num_end);
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return Err(bad());
        }
        let (pow2, mut exp10): (u32, i32) = match suffix {
            "" => (0, 0),
            "Ki" => (10, 0),
            "Mi" => (20, 0),
            "Gi" => (30, 0),
            "Ti" => (40, 0),
            "Pi" => (50, 0),
            "Ei" => (60, 0),
            "n" => (0, -9),
            "u" => (0, -6),
            "m" => (0, -3),
            "k" => (0, 3),
            "M" => (0, 6),
            "G" => (0, 9),
            "T" => (0, 12),
            "P" => (0, 15),
            "E" => (0, 18),
            e if e.starts_with(['e', 'E']) => (0, e[1..].parse::<i32>().map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        if !(-40..=40).contains(&exp10) {
            return Err(bad());
        }
        let digits = format!("{int}{frac}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 30 {
            return Err(bad());
        }
        let mant: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| bad())? };
        exp10 -= frac.len() as i32;
        // value = mant * 2^pow2 * 10^exp10; nanos = value * 10^9, rounded up.
        let mut v = mant.checked_mul(1i128 << pow2).ok_or_else(bad)?;
        let e = exp10 + 9;
        if e >= 0 {
            v = v.checked_mul(10i128.checked_pow(e as u32).ok_or_else(bad)?).ok_or_else(bad)?;
        } else {
            let d = 10i128.checked_pow((-e) as u32).unwrap_or(i128::MAX);
            v = v / d + i128::from(v % d != 0);
        }
        if v > i128::from(i64::MAX) * NANO {
            return Err(bad());
        }
        Ok(Quantity { nanos: if neg { -v } else { v }, text: t.to_string() })
    }

    /// From nano-units (text in canonical form).
    pub fn from_nanos(nanos: i128) -> Quantity {
        Quantity { nanos, text: canonical(nanos) }
    }

    /// From nano-units, written as apimachinery writes a computed
    /// quantity of `self`'s format (the first operand's, as `Add` and
    /// `NewDecimalQuantity` keep it): a BinarySI one (written with `Ki`..`Ei`)
    /// with the largest binary suffix that leaves a whole number, unless it is
    /// under 1024 in size or not whole (then DecimalSI, as
    /// `CanonicalizeBytes` does); a DecimalSI one with a suffix of 10³ˣ.
    pub fn computed_like(&self, nanos: i128) -> Quantity {
        let binary = self.text.ends_with('i');
        let n = nanos.unsigned_abs();
        if binary && n % (NANO as u128) == 0 && n / (NANO as u128) >= 1024 {
            let sign = if nanos < 0 { "-" } else { "" };
            let whole = n / NANO as u128;
            for (shift, suf) in [(60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")] {
                if whole % (1u128 << shift) == 0 {
                    return Quantity { nanos, text: format!("{sign}{}{suf}", whole >> shift) };
                }
            }
            return Quantity { nanos, text: format!("{sign}{whole}") };
        }
        Quantity { nanos, text: decimal(nanos) }
    }

    /// The value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The text as written (or canonical for computed values).
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// The shortest exact text for `nanos`: a binary suffix when the value is a
/// whole number of KiB.., else a decimal one.
fn canonical(nanos: i128) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n == 0 {
        return "0".into();
    }
    if n % 1_000_000_000 == 0 {
        let whole = n / 1_000_000_000;
        for (shift, suf) in [(60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")] {
            if whole % (1u128 << shift) == 0 {
                return format!("{sign}{}{suf}", whole >> shift);
            }
        }
    }
    decimal(nanos)
}

/// DecimalSI's text for `nanos`: the largest suffix of 10³ˣ that leaves a whole number.
fn decimal(nanos: i128) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n == 0 {
        return "0".into();
    }
    for (p, suf) in [(27u32, "E"), (24, "P"), (21, "T"), (18, "G"), (15, "M"), (12, "k"), (9, ""), (6, "m"), (3, "u")] {
        let d = 10u128.pow(p);
        if n % d == 0 {
            return format!("{sign}{}{suf}", n / d);
        }
    }
    format!("{sign}{n}n")
}

impl PartialEq for Quantity {
    fn eq(&self, o: &Self) -> bool {
        self.nanos == o.nanos
    }
}
impl Eq for Quantity {}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Quantity {
    fn cmp(&self, o: &Self) -> Ordering {
        self.nanos.cmp(&o.nanos)
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_in_apimachinery_syntax_and_compare_by_value() {
        let q = |s: &str| Quantity::read(s).unwrap();
        assert_eq!(q("80Gi").nanos(), 80 * (1i128 << 30) * NANO);
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert_eq!(q("1.5"), q("1500m"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("1E-3"), q("1m"));
        assert_eq!(q("0.1n").nanos(), 1, "finer than 1n rounds up");
        assert!(q("40Gi") < q("43G") && q("40Gi") > q("42G"));
        assert!(q("-1") < q("0"));
        for bad in ["", "Gi", "1.2.3", "1Xi", "1 Gi", "abc", "1e99"] {
            assert!(Quantity::read(bad).unwrap_err().to_string().contains("not a Kubernetes quantity"), "{bad}");
        }
        assert_eq!(Quantity::from_nanos(q("40Gi").nanos() * 2).text(), "80Gi");
        assert_eq!(Quantity::from_nanos(q("1500m").nanos()).text(), "1500m");
        assert_eq!(Quantity::from_nanos(q("3k").nanos()).text(), "3k");
        // Computed in the first operand's format (KEP-5517's sums and products).
        let like = |f: &str, v: &str| q(f).computed_like(q(v).nanos()).text().to_string();
        assert_eq!(like("3Gi", "6Gi"), "6Gi");
        assert_eq!(like("512Mi", "1536Mi"), "1536Mi");
        assert_eq!(like("1Ki", "2000"), "2000", "binary, not a whole Ki");
        assert_eq!(like("1Gi", "1000"), "1k", "binary under 1024 is written DecimalSI");
        assert_eq!(like("2", "4"), "4");
        assert_eq!(like("2", "2048"), "2048", "decimal stays decimal");
        assert_eq!(like("500m", "1500m"), "1500m");
    }
}
