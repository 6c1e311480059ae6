//! Label and field selectors, parsed from the `labelSelector` / `fieldSelector` query strings as
//! apimachinery's `labels.Parse` and `fields.ParseSelector` do, and matched against objects.
//! Errors are the real server's 400 `BadRequest` (the parse error as the message) and, for a field
//! the type does not index, `field label not supported: <field>`.

use serde_json::{Map, Value};

use crate::resource::ResourceType;
use crate::status::ApiError;

/// A label requirement's operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `k=v`, `k==v`.
    Eq,
    /// `k!=v` (also matches objects without the label).
    NotEq,
    /// `k in (a,b)`.
    In,
    /// `k notin (a,b)` (also matches objects without the label).
    NotIn,
    /// `k`.
    Exists,
    /// `!k`.
    DoesNotExist,
    /// `k>n` (integer comparison).
    Gt,
    /// `k<n`.
    Lt,
}

/// One requirement: a key, an operator, its values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub op: Op,
    /// The values (empty for `Exists`/`DoesNotExist`).
    pub values: Vec<String>,
}

/// A parsed label selector: all requirements must hold (empty = everything).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The requirements, in the order given.
    pub requirements: Vec<Requirement>,
}

fn parse_err(msg: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {msg}"))
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, ApiError> {
    let (mut depth, mut start, mut parts) = (0i32, 0usize, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(ApiError::bad_request("found ')', expected: ',' or 'end of string'"));
        }
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn valid_key(key: &str) -> Result<(), ApiError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c))
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(parse_err(format!(
            "key: Invalid value: {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )))
    }
}

fn valid_value(v: &str) -> Result<(), ApiError> {
    let ok = v.is_empty()
        || (v.len() <= 63
            && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err(parse_err(format!(
            "values[0][key]: Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )))
    }
}

fn set_values(rest: &str) -> Result<Vec<String>, ApiError> {
    let inner =
        rest.trim().strip_prefix('(').and_then(|r| r.strip_suffix(')')).ok_or_else(|| {
            parse_err(format!("found '{}' expected: '('", rest.split_whitespace().next().unwrap_or("")))
        })?;
    if inner.trim().is_empty() {
        return Err(parse_err("for 'in', 'notin' operators, values set can't be empty"));
    }
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    for v in &values {
        valid_value(v)?;
    }
    Ok(values)
}

/// Where the real lexer's identifier starting at `s` ends (whitespace or an operator character).
fn word_end(s: &str) -> usize {
    s.find(|c: char| c.is_whitespace() || "=!(),<>".contains(c)).unwrap_or(s.len())
}

/// One requirement, read as the real parser reads it: a key, then an operator (`in`/`notin`, a
/// symbol) or nothing; another identifier after the key is the error naming it.
fn requirement(part: &str) -> Result<Requirement, ApiError> {
    let s = part.trim();
    if s.is_empty() {
        return Err(parse_err("found '', expected: !, identifier, or 'end of string'"));
    }
    let req = |key: &str, op, values| -> Result<Requirement, ApiError> {
        let key = key.trim();
        valid_key(key)?;
        Ok(Requirement { key: key.to_string(), op, values })
    };
    if let Some(k) = s.strip_prefix('!') {
        return req(k, Op::DoesNotExist, Vec::new());
    }
    let (key, after) = s.split_at(word_end(s));
    let after = after.trim_start();
    if after.is_empty() {
        return req(key, Op::Exists, Vec::new());
    }
    if !after.starts_with(|c: char| "=!(),<>".contains(c)) {
        let (word, rest) = after.split_at(word_end(after));
        return match word {
            "in" => req(key, Op::In, set_values(rest)?),
            "notin" => req(key, Op::NotIn, set_values(rest)?),
            _ => Err(parse_err(format!("found '{word}', expected: in, notin, =, ==, !=, gt, lt"))),
        };
    }
    for (sym, op) in [("!=", Op::NotEq), ("==", Op::Eq), ("=", Op::Eq), (">", Op::Gt), ("<", Op::Lt)] {
        if let Some(v) = after.strip_prefix(sym) {
            let v = v.trim();
            if matches!(op, Op::Gt | Op::Lt) && v.parse::<i64>().is_err() {
                return Err(parse_err(format!("for 'Gt', 'Lt' operators, the value must be an integer, got {v:?}")));
            }
            valid_value(v)?;
            return req(key, op, vec![v.to_string()]);
        }
    }
    let found: String = after.chars().take(1).collect();
    Err(parse_err(format!("found '{found}', expected: in, notin, =, ==, !=, gt, lt")))
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        let value = labels.get(&self.key).and_then(Value::as_str);
        let int = |s: &str| s.parse::<i64>().ok();
        match self.op {
            Op::Eq | Op::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Op::NotEq | Op::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::Gt => value.and_then(int).zip(int(&self.values[0])).is_some_and(|(a, b)| a > b),
            Op::Lt => value.and_then(int).zip(int(&self.values[0])).is_some_and(|(a, b)| a < b),
        }
    }
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h` (empty or blank = everything). Errors: 400
    /// `BadRequest` with the parse error.
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        if s.trim().is_empty() {
            return Ok(LabelSelector::default());
        }
        let requirements = split_top(s)?.into_iter().map(requirement).collect::<Result<_, _>>()?;
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` (an object's `metadata.labels`) satisfy every requirement.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether an object's labels satisfy the selector.
    pub fn matches_object(&self, obj: &Value) -> bool {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let labels = obj["metadata"]["labels"].as_object().unwrap_or_else(|| EMPTY.get_or_init(Map::new));
        self.matches(labels)
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// One field term: `field=value` or `field!=value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldTerm {
    /// The field label (`metadata.name`, `spec.nodeName`).
    pub field: String,
    /// `=`/`==` (false) or `!=` (true).
    pub negated: bool,
    /// The value (unescaped).
    pub value: String,
}

/// A parsed field selector: all terms must hold (empty = everything).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// The terms, in the order given.
    pub terms: Vec<FieldTerm>,
}

/// Splits on unescaped `sep`, keeping escapes.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let (mut parts, mut cur, mut escaped) = (Vec::new(), String::new(), false);
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    parts.push(cur);
    parts
}

fn unescape(s: &str) -> Result<String, ApiError> {
    let (mut out, mut chars) = (String::new(), s.chars());
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(e @ ('\\' | ',' | '=' | '!')) => out.push(e),
            Some(e) => {
                return Err(ApiError::bad_request(format!("invalid field selector: invalid escape sequence: \\{e}")));
            }
            None => return Err(ApiError::bad_request("invalid field selector: unterminated escape sequence")),
        }
    }
    Ok(out)
}

fn field_term(part: &str) -> Result<FieldTerm, ApiError> {
    for (sym, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((f, v)) = part.split_once(sym) {
            return Ok(FieldTerm { field: f.trim().to_string(), negated, value: unescape(v)? });
        }
    }
    Err(not_understood(part))
}

/// The real parser's error for a term without an operator (`whole` is patched in by the caller).
fn not_understood(part: &str) -> ApiError {
    ApiError::bad_request(format!("invalid selector: '\u{0}'; can't understand '{part}'"))
}

/// The value of a field label on an object of type `ty`, as the real server's field-label
/// conversion and `GetAttrs` produce it (missing strings are `""`, booleans `"true"`/`"false"`).
pub fn field_value(obj: &Value, ty: &ResourceType, field: &str) -> String {
    let path: &str = match (ty.group.as_str(), ty.plural.as_str(), field) {
        ("events.k8s.io", "events", f) if f.starts_with("involvedObject.") => {
            return text(&obj["regarding"], &f["involvedObject.".len()..]);
        }
        ("events.k8s.io", "events", "reportingComponent") => "reportingController",
        ("events.k8s.io", "events", "source") => "deprecatedSource.component",
        ("", "pods", "spec.hostNetwork") => {
            return obj["spec"]["hostNetwork"].as_bool().unwrap_or(false).to_string();
        }
        (_, _, f) => f,
    };
    text(obj, path)
}

fn text(obj: &Value, path: &str) -> String {
    let v = path.split('.').fold(obj, |v, k| &v[k]);
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    /// Parses `metadata.name=x,spec.nodeName!=y` (empty = everything) and checks each field is one
    /// the type `ty` supports (`metadata.name`, `metadata.namespace`, and
    /// [`ResourceType::field_selectors`]). Errors: 400 `BadRequest`, `field label not supported:
    /// <field>` for other fields.
    pub fn parse(s: &str, ty: &ResourceType) -> Result<FieldSelector, ApiError> {
        if s.trim().is_empty() {
            return Ok(FieldSelector::default());
        }
        // The real parser reads the terms in sorted order: the first of those without an
        // operator is the one its error names.
        let mut parts = split_unescaped(s, ',');
        parts.sort();
        let mut terms = Vec::new();
        for part in parts.iter().filter(|p| !p.is_empty()) {
            let term = field_term(part).map_err(|mut e| {
                e.message = e.message.replace('\u{0}', s);
                e
            })?;
            terms.push(term);
        }
        for term in &terms {
            let known = term.field == "metadata.name"
                || term.field == "metadata.namespace"
                || ty.field_selectors.contains(&term.field);
            // Types with their own field labels convert them with a function that refuses the
            // others; the rest get the generic conversion's message.
            if !known && ty.field_selectors.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "\"{}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                    term.field
                )));
            }
            if !known {
                return Err(ApiError::bad_request(format!("field label not supported: {}", term.field)));
            }
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the object satisfies every term.
    pub fn matches(&self, obj: &Value, ty: &ResourceType) -> bool {
        self.terms.iter().all(|t| (field_value(obj, ty, &t.field) == t.value) != t.negated)
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value a `metadata.name=` term requires, if any (lets a list look up one key).
    pub fn required_name(&self) -> Option<&str> {
        self.terms.iter().find(|t| t.field == "metadata.name" && !t.negated).map(|t| t.value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn label_operators_match_as_kubernetes() {
        let l = labels(json!({"app": "web", "tier": "front", "n": "5"}));
        let yes = [
            "app=web",
            "app==web",
            "app!=db",
            "missing!=x",
            "tier in (front, back)",
            "tier notin (back)",
            "missing notin (x)",
            "app",
            "!missing",
            "app=web,tier=front",
            "n>3",
            "n<7",
            "",
            "app in(web)",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        let no = [
            "app=db",
            "app!=web",
            "tier in (back)",
            "tier notin (front)",
            "missing",
            "!app",
            "app=web,tier=back",
            "missing in (x)",
            "n>5",
            "n<5",
            "app>1",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
    }

    #[test]
    fn bad_label_selectors_are_400() {
        for s in ["app in front", "a b", "x=a b", "=x", "app,", "app)", "n>x", "-bad=x", "app in ()", "app in (a"] {
            let e = LabelSelector::parse(s).unwrap_err();
            assert_eq!((e.code, e.reason), (400, "BadRequest"), "{s}");
        }
        let sel = LabelSelector::parse("example.com/role in (a,b),!gone").unwrap();
        assert_eq!(sel.requirements[0].key, "example.com/role");
        assert_eq!(sel.requirements[0].values, ["a", "b"]);
        assert_eq!(sel.requirements[1].op, Op::DoesNotExist);
    }

    #[test]
    fn field_selectors_use_the_types_labels() {
        let r = Registry::builtin();
        let pods = r.find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"},
            "status": {"phase": "Running"}});
        let sel = FieldSelector::parse("spec.nodeName=n1,status.phase!=Pending,metadata.namespace==ns", pods).unwrap();
        assert!(sel.matches(&pod, pods));
        assert!(FieldSelector::parse("spec.hostNetwork=false", pods).unwrap().matches(&pod, pods));
        assert!(!FieldSelector::parse("metadata.name=q", pods).unwrap().matches(&pod, pods));
        assert_eq!(FieldSelector::parse("metadata.name=q", pods).unwrap().required_name(), Some("q"));
        let cms = r.find("", "v1", "configmaps").unwrap();
        let e = FieldSelector::parse("spec.nodeName=n1", cms).unwrap_err();
        // Measured on kube-apiserver v1.37: types without field labels of their own get the
        // generic conversion's message, the others their conversion function's.
        let generic = "\"spec.nodeName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"";
        assert_eq!((e.code, e.message.as_str()), (400, generic));
        let e = FieldSelector::parse("data.x=1", pods).unwrap_err();
        assert_eq!(e.message, "field label not supported: data.x");
        let e = FieldSelector::parse("metadata.name in (a,b)", cms).unwrap_err();
        assert_eq!(e.message, "invalid selector: 'metadata.name in (a,b)'; can't understand 'b)'");
        assert_eq!(FieldSelector::parse("nonsense", cms).unwrap_err().code, 400);
        let esc = FieldSelector::parse(r"metadata.name=a\,b", cms).unwrap();
        assert_eq!(esc.terms[0].value, "a,b");
    }

    #[test]
    fn event_fields_read_the_events_api_shape() {
        let r = Registry::builtin();
        let ev = r.find("events.k8s.io", "v1", "events").unwrap();
        let obj = json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"},
            "reportingController": "kubelet", "reason": "Started", "type": "Normal"});
        let sel = FieldSelector::parse(
            "involvedObject.kind=Pod,involvedObject.name=p,reportingComponent=kubelet,type=Normal",
            ev,
        )
        .unwrap();
        assert!(sel.matches(&obj, ev));
        let secrets = r.find("", "v1", "secrets").unwrap();
        assert!(FieldSelector::parse("type=Opaque", secrets).unwrap().matches(&json!({"type": "Opaque"}), secrets));
    }
}
