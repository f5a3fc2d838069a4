//! One printed object: the human line (`rdma`'s words) and the JSON object (`rdma -j`'s
//! keys, in its order), built together so the two never drift apart.

use serde_json::Value;

/// One field of a row: its JSON key and value, and how the human line shows it
/// (`None`: JSON only).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub key: String,
    pub json: Value,
    pub human: Option<String>,
}

/// One object: the human line's leading words and the fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub prefix: String,
    pub fields: Vec<Field>,
    /// A line of text output only, printed indented under the row (not in
    /// the JSON, which stays `rdma -j`'s): e.g. a port's congestion
    /// counters grouped.
    pub note: Option<String>,
}

impl Row {
    pub fn new(prefix: String) -> Row {
        Row {
            prefix,
            fields: Vec::new(),
            note: None,
        }
    }

    /// A field shown the same way in both outputs.
    pub fn num(&mut self, key: &str, v: impl Into<u64>) {
        let v = v.into();
        self.push(key, Value::from(v), Some(v.to_string()));
    }

    pub fn opt(&mut self, key: &str, v: Option<impl Into<u64>>) {
        if let Some(v) = v {
            self.num(key, v);
        }
    }

    pub fn text(&mut self, key: &str, v: &str) {
        self.push(key, Value::from(v), Some(v.to_string()));
    }

    /// A key: hex without 0x in JSON, with 0x in the human line.
    pub fn key(&mut self, key: &str, v: Option<impl Into<u64>>) {
        if let Some(v) = v {
            let v = v.into();
            self.push(key, Value::from(format!("{v:x}")), Some(format!("{v:#x}")));
        }
    }

    pub fn json_only(&mut self, key: &str, v: Value) {
        self.push(key, v, None);
    }

    pub fn push(&mut self, key: &str, json: Value, human: Option<String>) {
        self.fields.push(Field {
            key: key.to_string(),
            json,
            human,
        });
    }

    /// The value of a field, if the row has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|f| f.key == key).map(|f| &f.json)
    }

    /// [`Row::human`] and, under it, the note when there is one (no
    /// trailing newline).
    pub fn human_lines(&self) -> String {
        match &self.note {
            Some(n) => format!("{}\n    {n}", self.human()),
            None => self.human(),
        }
    }

    /// The line `rdma` would print.
    pub fn human(&self) -> String {
        let mut s = self.prefix.clone();
        for f in &self.fields {
            if let Some(h) = &f.human {
                if !s.is_empty() {
                    s.push(' ');
                }
                s.push_str(&f.key);
                s.push(' ');
                s.push_str(h);
            }
        }
        s
    }
}

/// The rows as a JSON array of objects, keys in `rdma -j` order.
pub fn json(rows: &[Row]) -> String {
    if rows.is_empty() {
        return "[]\n".into();
    }
    let mut s = String::from("[");
    for (i, r) in rows.iter().enumerate() {
        s.push_str(if i == 0 { " {\n" } else { ",{\n" });
        for (j, f) in r.fields.iter().enumerate() {
            // Values are numbers, strings, bools and arrays of those: serializing
            // them cannot fail; "null" keeps the document valid if it ever did.
            let v = serde_json::to_string(&f.json).unwrap_or_else(|_| "null".into());
            let k = serde_json::to_string(&f.key).unwrap_or_else(|_| "\"?\"".into());
            s.push_str(&format!("    {k}: {v}"));
            s.push_str(if j + 1 < r.fields.len() { ",\n" } else { "\n" });
        }
        s.push_str("  }");
    }
    s.push_str(" ]\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_and_json_from_one_row() {
        let mut r = Row::new("link rxe0/1".into());
        r.json_only("ifname", Value::from("rxe0"));
        r.num("lqpn", 17u32);
        r.key("lkey", Some(0x1234u32));
        r.text("owner-state", "dead");
        assert_eq!(
            r.human(),
            "link rxe0/1 lqpn 17 lkey 0x1234 owner-state dead"
        );
        let v: Value = serde_json::from_str(&json(&[r])).unwrap();
        assert_eq!(v[0]["ifname"], "rxe0");
        assert_eq!(v[0]["lkey"], "1234");
        assert_eq!(v[0]["owner-state"], "dead");
        assert_eq!(json(&[]), "[]\n");
    }
}
