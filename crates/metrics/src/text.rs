//! The Prometheus text exposition format, version 0.0.4.
//!
//! Every family is written as `# HELP`, `# TYPE`, then its samples, contiguously and in
//! the order they were added; families with no samples are left out. Label values are
//! escaped (`\\`, `\"`, `\n`), HELP text too (`\\`, `\n`).

use std::fmt::Write as _;

/// The content type of the format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metric type named on the `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// A sample value: integers are printed exactly, floats in Rust's shortest round-trip
/// decimal form (never an exponent), non-finite ones as `NaN`, `+Inf`, `-Inf`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(u128),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(u128::from(v))
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Int(v as u128)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl Value {
    /// The value as Prometheus reads it (a float64).
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
        }
    }

    fn write(self, out: &mut String) {
        match self {
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(f) if f.is_nan() => out.push_str("NaN"),
            Value::Float(f) if f.is_infinite() => {
                out.push_str(if f > 0.0 { "+Inf" } else { "-Inf" })
            }
            Value::Float(f) => {
                let _ = write!(out, "{f}");
            }
        }
    }
}

/// One sample: label pairs in the order given, and the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

/// One metric family.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    pub fn new(name: impl Into<String>, kind: Kind, help: impl Into<String>) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind,
            samples: Vec::new(),
        }
    }

    /// Adds a sample.
    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: impl Into<Value>) {
        self.samples.push(Sample {
            labels,
            value: value.into(),
        });
    }
}

/// `\` → `\\`, `"` → `\"`, newline → `\n` (the label value escapes of the format).
pub fn escape_label_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// `\` → `\\`, newline → `\n` (the HELP escapes of the format).
pub fn escape_help(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Whether `name` is a valid metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
pub fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Writes every family with samples.
pub fn encode(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        debug_assert!(valid_metric_name(&f.name), "{}", f.name);
        let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.as_str());
        for s in &f.samples {
            out.push_str(&f.name);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape_label_value(v));
                }
                out.push('}');
            }
            out.push(' ');
            s.value.write(&mut out);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escape_help("x\\y\nz \"q\""), "x\\\\y\\nz \"q\"");
    }

    #[test]
    fn encodes_families_in_order_and_skips_empty() {
        let mut a = Family::new("b_total", Kind::Counter, "B.\nline");
        a.push(vec![("device", "d\"1".into()), ("port", "1".into())], 7u64);
        let empty = Family::new("empty", Kind::Gauge, "nothing");
        let mut c = Family::new("a", Kind::Gauge, "A");
        c.push(vec![], 0.25);
        c.push(vec![], f64::INFINITY);
        c.push(vec![], f64::NAN);
        let s = encode(&[a, empty, c]);
        assert_eq!(
            s,
            "# HELP b_total B.\\nline\n# TYPE b_total counter\n\
             b_total{device=\"d\\\"1\",port=\"1\"} 7\n\
             # HELP a A\n# TYPE a gauge\na 0.25\na +Inf\na NaN\n"
        );
    }

    #[test]
    fn big_integers_are_exact() {
        let mut f = Family::new("x_total", Kind::Counter, "x");
        f.push(vec![], Value::Int(u128::from(u64::MAX) * 4));
        assert!(encode(&[f]).ends_with("x_total 73786976294838206460\n"));
    }

    #[test]
    fn metric_names() {
        assert!(valid_metric_name("node_infiniband_info"));
        assert!(!valid_metric_name("1abc"));
        assert!(!valid_metric_name("a-b"));
        assert!(!valid_metric_name(""));
    }
}
