//! Findings are plain data: what is wrong, where, the evidence read, and what to do.

use serde::Serialize;

use crate::codes::{Code, Layer, Severity};
use rdmakit_host::model::Attr;

/// One file (or probe) and the value it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub path: String,
    pub value: String,
}

impl Evidence {
    pub fn new(path: impl Into<String>, value: impl Into<String>) -> Evidence {
        Evidence {
            path: path.into(),
            value: value.into(),
        }
    }

    /// The evidence an attribute gives: its path and raw value (or read error).
    pub fn of<T>(a: &Attr<T>) -> Evidence {
        Evidence::new(a.path.clone(), a.shown())
    }
}

/// One problem (or, at info severity, one fact worth acting on).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub code: Code,
    pub severity: Severity,
    #[serde(serialize_with = "crate::codes::layer_serde::one")]
    pub layer: Layer,
    /// What the finding is about: "host", "rxe0", "mlx5_0 port 1", "IRQ 45".
    pub subject: String,
    /// One sentence: what is wrong, with the values that matter.
    pub message: String,
    pub evidence: Vec<Evidence>,
    /// The check commonly left out that this finding catches, as a hint, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omission: Option<&'static str>,
    /// What to do about it.
    pub remedy: String,
    /// Commands to run next, most useful first.
    pub next: Vec<String>,
    /// The message's few words that matter most, for one-line forms (the NPD
    /// line, a Slurm drain reason; [`crate::oneline`]) when the message itself is
    /// long; `None`: the message is shortened. Not part of the JSON.
    #[serde(skip)]
    pub brief: Option<String>,
}

impl Finding {
    /// A finding with the code's default severity, layer and omission.
    pub fn new(code: Code, subject: impl Into<String>, message: impl Into<String>) -> Finding {
        let info = code.info();
        Finding {
            code,
            severity: info.severity,
            layer: info.layer,
            subject: subject.into(),
            message: message.into(),
            evidence: Vec::new(),
            omission: info.omission,
            remedy: String::new(),
            next: Vec::new(),
            brief: None,
        }
    }

    pub fn severity(mut self, s: Severity) -> Finding {
        self.severity = s;
        self
    }

    pub fn evidence(mut self, e: Evidence) -> Finding {
        self.evidence.push(e);
        self
    }

    pub fn attr<T>(mut self, a: &Attr<T>) -> Finding {
        self.evidence.push(Evidence::of(a));
        self
    }

    pub fn remedy(mut self, r: impl Into<String>) -> Finding {
        self.remedy = r.into();
        self
    }

    pub fn next(mut self, cmd: impl Into<String>) -> Finding {
        self.next.push(cmd.into());
        self
    }

    /// Sets [`Finding::brief`].
    pub fn brief(mut self, b: impl Into<String>) -> Finding {
        self.brief = Some(b.into());
        self
    }
}
