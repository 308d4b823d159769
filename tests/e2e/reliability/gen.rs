//! The seeded generator behind the reliability suites: one `fastrand`
//! generator per suite, seeded from `TANDEM_FUZZ_SEED` or the clock, and
//! the inputs it makes — JSON values of every type and size, odd ids,
//! 10,000-deep nesting, mutated params, and broken LSP frames and ACP lines.
//!
//! Every suite prints its seed to stderr first, and every failure message
//! carries it, so `TANDEM_FUZZ_SEED=<seed>` replays the same inputs.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

/// Nesting depth of the "10,000-deep" params and bodies.
pub const DEEP: usize = 10_000;

/// Stands for a 10,000-deep array inside a generated value; replaced by
/// the raw nesting when the value is written out (serde_json cannot hold
/// it: its parser stops at depth 128, which is what the daemon must do too).
const DEEP_MARKER: &str = "\u{1}deep\u{1}";

/// A suite's source of randomness.
pub struct Gen {
    pub seed: u64,
    rng: fastrand::Rng,
}

impl Gen {
    /// The generator of `suite`: seeded with `TANDEM_FUZZ_SEED` when set,
    /// else from the clock; prints the seed either way.
    pub fn for_suite(suite: &str) -> Gen {
        let seed = std::env::var("TANDEM_FUZZ_SEED")
            .ok()
            .map(|s| {
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("TANDEM_FUZZ_SEED must be a u64, not {s:?}"))
            })
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        eprintln!("{suite}: seed {seed} (TANDEM_FUZZ_SEED={seed} replays it)");
        Gen {
            seed,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// `[0, n)`.
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.usize(..n.max(1))
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.rng.u32(..100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.rng.u8(..)).collect()
    }

    /// A string: usually short and mixed (ASCII, escapes, non-BMP), now
    /// and then empty, rarely (1 in 400) 64 KiB to 1 MiB long. Never contains `:`, so it
    /// cannot spell a `Content-Length:` header inside a body.
    pub fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a", "Z", "0", " ", "\n", "\t", "\"", "\\", "/", "é", "日本", "🦀", "\u{0}", "\u{7f}",
            "\u{2028}", "\u{feff}", "{", "]", "..", "%", "$",
        ];
        match self.below(400) {
            0..=19 => String::new(),
            20 => {
                let len = self.below(1 << 20) + (64 << 10);
                "x".repeat(len)
            }
            _ => {
                let n = self.below(24);
                (0..n).map(|_| *self.pick(PIECES)).collect()
            }
        }
    }

    /// Any JSON value, nested at most `depth` more levels; one nested
    /// value in 40 is 10,000 deep.
    pub fn value(&mut self, depth: u32) -> Value {
        let roll = self.below(40);
        if depth == 0 {
            return self.scalar(roll);
        }
        match roll {
            0..=9 => {
                let n = self.below(5);
                Value::Array((0..n).map(|_| self.value(depth - 1)).collect())
            }
            10..=19 => {
                let n = self.below(5);
                let mut map = Map::new();
                for _ in 0..n {
                    map.insert(self.string(), self.value(depth - 1));
                }
                Value::Object(map)
            }
            39 => Value::String(DEEP_MARKER.to_string()),
            _ => self.scalar(roll),
        }
    }

    fn scalar(&mut self, roll: usize) -> Value {
        match roll % 5 {
            0 => Value::Null,
            1 => Value::Bool(self.chance(50)),
            2 => self.number(),
            _ => Value::String(self.string()),
        }
    }

    pub fn number(&mut self) -> Value {
        match self.below(8) {
            0 => json!(0),
            1 => json!(-1),
            2 => json!(i64::MAX),
            3 => json!(u64::MAX),
            4 => json!(i64::MIN),
            5 => json!(1.5e308),
            6 => json!(-0.25),
            _ => json!(self.rng.i32(..)),
        }
    }

    /// A request id as raw JSON text: mostly a plain integer, else
    /// something odd (null, float, past u64, nested, string, bool).
    pub fn odd_id(&mut self, plain: i64) -> String {
        match self.below(14) {
            0 => "null".into(),
            1 => "1.5".into(),
            2 => "123456789012345678901234567890".into(),
            3 => "-1".into(),
            4 => "{\"a\":[1]}".into(),
            5 => "[1,2]".into(),
            6 => "true".into(),
            7 => "\"\"".into(),
            8 => format!("\"tandem-{plain}\""),
            9 => "1e3".into(),
            10 => i64::MAX.to_string(),
            _ => plain.to_string(),
        }
    }

    /// `template` changed in one random way: a field dropped, a field's
    /// value replaced by one of another type (or a huge string, or 10,000
    /// deep), an unknown field added, or the whole params replaced.
    pub fn mutate(&mut self, template: &Value) -> Value {
        let mut params = template.clone();
        match self.below(8) {
            0 => {}
            1 => {
                if let Some(slot) = self.random_slot(&mut params) {
                    *slot = Value::Null;
                    drop_nulls(&mut params);
                }
            }
            2 | 3 => {
                let replacement = self.value(2);
                if let Some(slot) = self.random_slot(&mut params) {
                    *slot = replacement;
                }
            }
            4 => {
                let replacement = if self.chance(20) {
                    Value::String("y".repeat(self.below(256 << 10) + 1))
                } else {
                    Value::String(DEEP_MARKER.to_string())
                };
                if let Some(slot) = self.random_slot(&mut params) {
                    *slot = replacement;
                }
            }
            5 => {
                let key = self.string();
                let value = self.value(1);
                if let Value::Object(map) = &mut params {
                    map.insert(key, value);
                }
            }
            6 => params = self.value(2),
            _ => {
                // Two changes at once.
                let once = self.mutate(template);
                params = self.mutate(&once);
            }
        }
        params
    }

    /// A mutable reference to a random value inside `value` (any depth),
    /// or `None` for a scalar at the top.
    fn random_slot<'a>(&mut self, value: &'a mut Value) -> Option<&'a mut Value> {
        let len = match value {
            Value::Object(map) => map.len(),
            Value::Array(items) => items.len(),
            _ => return None,
        };
        if len == 0 {
            return None;
        }
        let at = self.below(len);
        let descend = self.chance(40);
        let child = match value {
            Value::Object(map) => map.values_mut().nth(at)?,
            Value::Array(items) => items.get_mut(at)?,
            _ => return None,
        };
        if descend && (child.is_object() || child.is_array()) {
            // Re-borrow through a raw check: descend only when the child
            // has something inside.
            let has_inside = match &*child {
                Value::Object(m) => !m.is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => false,
            };
            if has_inside {
                return self.random_slot(child);
            }
        }
        Some(child)
    }
}

fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// `value` as JSON text, with every deep marker replaced by a 10,000-deep
/// array.
pub fn to_text(value: &Value) -> String {
    let text = value.to_string();
    let marker = serde_json::to_string(DEEP_MARKER).expect("marker");
    if text.contains(&marker) {
        text.replace(&marker, &deep_array())
    } else {
        text
    }
}

/// `[[[…1…]]]`, [`DEEP`] levels.
pub fn deep_array() -> String {
    format!("{}1{}", "[".repeat(DEEP), "]".repeat(DEEP))
}

/// `{"a":{"a":…}}`, [`DEEP`] levels.
pub fn deep_object() -> String {
    format!("{}1{}", "{\"a\":".repeat(DEEP), "}".repeat(DEEP))
}

/// A JSON-RPC message as text: a request when `id` is given, else a
/// notification; `params` already JSON text (or absent).
pub fn message(id: Option<&str>, method: &str, params: Option<&str>) -> String {
    let method = serde_json::to_string(method).expect("method");
    let mut text = String::from("{\"jsonrpc\":\"2.0\"");
    if let Some(id) = id {
        text.push_str(&format!(",\"id\":{id}"));
    }
    text.push_str(&format!(",\"method\":{method}"));
    if let Some(params) = params {
        text.push_str(&format!(",\"params\":{params}"));
    }
    text.push('}');
    text
}

/// A body that is not one JSON-RPC message: not JSON, not UTF-8, a batch,
/// a scalar, a message with a bad envelope, or cut short.
pub fn bad_body(gen: &mut Gen, valid: &str) -> Vec<u8> {
    match gen.below(18) {
        0 => Vec::new(),
        1 => b"this is not json".to_vec(),
        2 => {
            let n = gen.below(64) + 1;
            gen.bytes(n)
        }
        3 => vec![0xff, 0xfe, b'{', 0x80, b'}'],
        4 => format!("[{valid},{valid}]").into_bytes(),
        5 => b"[]".to_vec(),
        6 => gen
            .pick(&["1", "\"s\"", "null", "true", "{}"])
            .as_bytes()
            .to_vec(),
        7 => b"{\"id\":1,\"method\":\"tandem/listSessions\"}".to_vec(),
        8 => b"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"tandem/listSessions\"}".to_vec(),
        9 => b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}".to_vec(),
        10 => b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tandem/listSessions\",\"params\":\"x\"}"
            .to_vec(),
        11 => b"{\"jsonrpc\":\"2.0\",\"id\":\"tandem-1\",\"result\":1,\"error\":{}}".to_vec(),
        12 => b"{\"jsonrpc\":\"2.0\",\"id\":\"tandem-999\",\"result\":{}}".to_vec(),
        13 => deep_object().into_bytes(),
        14 => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{}}}",
            deep_array()
        )
        .into_bytes(),
        15 => repeated_key(gen, valid),
        16 => gen.pick(TYPE_INVALID).as_bytes().to_vec(),
        _ => {
            let cut = gen.below(valid.len().max(1));
            valid.as_bytes()[..cut].to_vec()
        }
    }
}

/// Structurally valid JSON that no JSON-RPC decoder takes: members of the
/// wrong type, or of the right type in the wrong combination.
const TYPE_INVALID: &[&str] = &[
    r#"{"jsonrpc":2.0,"id":1,"method":"tandem/listSessions"}"#,
    r#"{"jsonrpc":"2.0","id":true,"method":"tandem/listSessions"}"#,
    r#"{"jsonrpc":"2.0","id":{"n":1},"method":"tandem/listSessions"}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":null}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":["tandem/listSessions"]}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"tandem/listSessions","params":7}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"tandem/listSessions","result":{}}"#,
    r#"{"jsonrpc":"2.0","id":"tandem-1","error":"no"}"#,
    r#"{"jsonrpc":"2.0","id":"tandem-1","error":{"code":"1","message":"no"}}"#,
    r#"{"jsonrpc":"2.0","id":"tandem-1","error":{"code":1}}"#,
    r#"{"jsonrpc":"2.0","result":{}}"#,
    r#"{"jsonrpc":"2.0","id":1}"#,
];

/// `valid` (a JSON object) with one of its top-level members, or a
/// chosen one, given a second time: serde_json's `Value` keeps the last
/// silently, a typed decoder refuses it.
fn repeated_key(gen: &mut Gen, valid: &str) -> Vec<u8> {
    let Some(inner) = valid.trim().strip_suffix('}') else {
        return br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tandem/listSessions"}"#.to_vec();
    };
    let extra = match gen.below(6) {
        0 => r#""method":"tandem/listSessions""#.to_string(),
        1 => format!(r#""id":{}"#, gen.below(1000)),
        2 => r#""jsonrpc":"2.0""#.to_string(),
        3 => r#""params":{}"#.to_string(),
        4 => r#""id":null"#.to_string(),
        _ => r#""result":null"#.to_string(),
    };
    // Before or after the first occurrence.
    if gen.chance(50) {
        let rest = inner.trim_start().strip_prefix('{').unwrap_or(inner);
        format!("{{{extra},{rest}}}").into_bytes()
    } else {
        format!("{inner},{extra}}}").into_bytes()
    }
}

/// How an LSP frame's header block is written.
pub fn lsp_header(gen: &mut Gen, body_len: usize) -> Vec<u8> {
    let (line_end, name) = match gen.below(6) {
        0 => ("\n", "content-length"),
        1 => ("\r\n", "CONTENT-LENGTH"),
        _ => ("\r\n", "Content-Length"),
    };
    let mut header = String::new();
    if gen.chance(15) {
        header.push_str(&format!(
            "Content-Type: application/vscode-jsonrpc; charset=utf-8{line_end}"
        ));
    }
    header.push_str(&format!("{name}: {body_len}{line_end}"));
    if gen.chance(5) {
        header.push_str(&format!("{name}: {body_len}{line_end}"));
    }
    header.push_str(line_end);
    header.into_bytes()
}

/// A header block that is wrong: the reader answers `-32700` and
/// resynchronizes at the next `Content-Length:`. `body` follows it.
pub fn bad_header(gen: &mut Gen, body: &[u8]) -> Vec<u8> {
    let len = body.len();
    let header = match gen.below(10) {
        0 => "Content-Length: twelve\r\n\r\n".to_string(),
        1 => "Content-Length: -5\r\n\r\n".to_string(),
        2 => "Content-Length: 0x10\r\n\r\n".to_string(),
        3 => "Content-Length: 999999999999999999999999\r\n\r\n".to_string(),
        4 => format!("Content-Length: {}\r\n\r\n", 300usize << 20),
        5 => format!(
            "Content-Length: {len}\r\nContent-Length: {}\r\n\r\n",
            len + 1
        ),
        6 => "Content-Type: application/json\r\n\r\n".to_string(),
        7 => format!("Content-Length {len}\r\n\r\n"),
        8 => format!("X-Junk: {}\r\n\r\n", "j".repeat(9 * 1024)),
        _ => format!("Content-Length: {len}\r\nno colon here\r\n\r\n"),
    };
    let mut bytes = header.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}
