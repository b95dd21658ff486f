//! The D-Bus wire format: values, signatures and marshalling (the D-Bus
//! specification, "Message Protocol"). Only what talking to systemd needs: every basic
//! type but unix fds, arrays, structs, dict entries and variants; both byte orders when
//! reading, little-endian when writing.

use std::fmt;

/// A D-Bus value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `y`
    Byte(u8),
    /// `b`
    Bool(bool),
    /// `n`
    I16(i16),
    /// `q`
    U16(u16),
    /// `i`
    I32(i32),
    /// `u`
    U32(u32),
    /// `x`
    I64(i64),
    /// `t`
    U64(u64),
    /// `d`
    Double(f64),
    /// `s`
    Str(String),
    /// `o`
    Path(String),
    /// `g`
    Sig(String),
    /// `a…`: the element signature (needed for empty arrays) and the items.
    Array(String, Vec<Value>),
    /// `(…)`
    Struct(Vec<Value>),
    /// `v`
    Variant(Box<Value>),
    /// `{kv}` (only inside an array)
    Dict(Box<Value>, Box<Value>),
}

impl Value {
    /// A string.
    pub fn str(s: impl Into<String>) -> Self {
        Value::Str(s.into())
    }
    /// An array of strings (`as`).
    pub fn strs<S: AsRef<str>>(v: &[S]) -> Self {
        Value::Array("s".into(), v.iter().map(|s| Value::Str(s.as_ref().to_string())).collect())
    }
    /// An array of u32 (`au`).
    pub fn u32s(v: &[u32]) -> Self {
        Value::Array("u".into(), v.iter().map(|&x| Value::U32(x)).collect())
    }
    /// Its signature.
    pub fn signature(&self) -> String {
        match self {
            Value::Byte(_) => "y".into(),
            Value::Bool(_) => "b".into(),
            Value::I16(_) => "n".into(),
            Value::U16(_) => "q".into(),
            Value::I32(_) => "i".into(),
            Value::U32(_) => "u".into(),
            Value::I64(_) => "x".into(),
            Value::U64(_) => "t".into(),
            Value::Double(_) => "d".into(),
            Value::Str(_) => "s".into(),
            Value::Path(_) => "o".into(),
            Value::Sig(_) => "g".into(),
            Value::Array(e, _) => format!("a{e}"),
            Value::Struct(v) => format!("({})", v.iter().map(Value::signature).collect::<String>()),
            Value::Variant(_) => "v".into(),
            Value::Dict(k, v) => format!("{{{}{}}}", k.signature(), v.signature()),
        }
    }
    /// The string inside a `s`, `o` or `g` (through variants).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) | Value::Path(s) | Value::Sig(s) => Some(s),
            Value::Variant(v) => v.as_str(),
            _ => None,
        }
    }
    /// The number inside an unsigned or non-negative integer (through variants).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Byte(x) => Some(*x as u64),
            Value::U16(x) => Some(*x as u64),
            Value::U32(x) => Some(*x as u64),
            Value::U64(x) => Some(*x),
            Value::I16(x) => u64::try_from(*x).ok(),
            Value::I32(x) => u64::try_from(*x).ok(),
            Value::I64(x) => u64::try_from(*x).ok(),
            Value::Variant(v) => v.as_u64(),
            _ => None,
        }
    }
    /// The items of an array, or the fields of a struct (through variants).
    pub fn items(&self) -> Option<&[Value]> {
        match self {
            Value::Array(_, v) | Value::Struct(v) => Some(v),
            Value::Variant(v) => v.items(),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) | Value::Path(s) | Value::Sig(s) => write!(f, "{s:?}"),
            Value::Array(_, v) | Value::Struct(v) => {
                let (o, c) = if matches!(self, Value::Array(..)) { ('[', ']') } else { ('(', ')') };
                write!(f, "{o}")?;
                for (i, x) in v.iter().enumerate() {
                    write!(f, "{}{x}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, "{c}")
            }
            Value::Variant(v) => write!(f, "{v}"),
            Value::Dict(k, v) => write!(f, "{k}: {v}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Double(d) => write!(f, "{d}"),
            other => write!(f, "{}", other.as_u64().map_or_else(|| format!("{other:?}"), |n| n.to_string())),
        }
    }
}

/// A parsed single complete type.
#[derive(Debug, Clone, PartialEq)]
enum Type {
    Basic(u8),
    Array(Box<Type>),
    Struct(Vec<Type>),
    Dict(Box<Type>, Box<Type>),
    Variant,
}

impl Type {
    fn align(&self) -> usize {
        match self {
            Type::Basic(c) => align_of(*c),
            Type::Array(_) => 4,
            Type::Struct(_) | Type::Dict(..) => 8,
            Type::Variant => 1,
        }
    }
    fn text(&self) -> String {
        match self {
            Type::Basic(c) => (*c as char).to_string(),
            Type::Array(e) => format!("a{}", e.text()),
            Type::Struct(v) => format!("({})", v.iter().map(Type::text).collect::<String>()),
            Type::Dict(k, v) => format!("{{{}{}}}", k.text(), v.text()),
            Type::Variant => "v".into(),
        }
    }
}

fn align_of(c: u8) -> usize {
    match c {
        b'y' | b'g' | b'v' => 1,
        b'n' | b'q' => 2,
        b'x' | b't' | b'd' | b'(' | b'{' => 8,
        _ => 4,
    }
}

/// Parses a signature into its complete types.
fn parse_signature(sig: &str) -> Result<Vec<Type>, String> {
    fn one(s: &[u8], i: &mut usize, depth: usize) -> Result<Type, String> {
        if depth > 32 {
            return Err("signature nests deeper than 32".into());
        }
        let c = *s.get(*i).ok_or("signature ends early")?;
        *i += 1;
        Ok(match c {
            b'y' | b'b' | b'n' | b'q' | b'i' | b'u' | b'x' | b't' | b'd' | b's' | b'o' | b'g' | b'h' => Type::Basic(c),
            b'v' => Type::Variant,
            b'a' => {
                if s.get(*i) == Some(&b'{') {
                    *i += 1;
                    let k = one(s, i, depth + 1)?;
                    let v = one(s, i, depth + 1)?;
                    if s.get(*i) != Some(&b'}') {
                        return Err("dict entry without '}'".into());
                    }
                    *i += 1;
                    Type::Array(Box::new(Type::Dict(Box::new(k), Box::new(v))))
                } else {
                    Type::Array(Box::new(one(s, i, depth + 1)?))
                }
            }
            b'(' => {
                let mut v = vec![];
                while s.get(*i) != Some(&b')') {
                    v.push(one(s, i, depth + 1)?);
                }
                *i += 1;
                if v.is_empty() {
                    return Err("empty struct".into());
                }
                Type::Struct(v)
            }
            other => return Err(format!("unknown type code {:?}", other as char)),
        })
    }
    let s = sig.as_bytes();
    let mut i = 0;
    let mut out = vec![];
    while i < s.len() {
        out.push(one(s, &mut i, 0)?);
    }
    Ok(out)
}

/// Marshals values, little-endian, aligned from the start of the buffer (a message body
/// starts 8-aligned, so that is the alignment the specification asks for).
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes so far.
    pub buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn pad(&mut self, a: usize) {
        while self.buf.len() % a != 0 {
            self.buf.push(0);
        }
    }
    fn u32(&mut self, x: u32) {
        self.pad(4);
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    fn string(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }
    /// Appends one value.
    pub fn put(&mut self, v: &Value) {
        match v {
            Value::Byte(x) => self.buf.push(*x),
            Value::Bool(b) => self.u32(*b as u32),
            Value::I16(x) => {
                self.pad(2);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::U16(x) => {
                self.pad(2);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::I32(x) => self.u32(*x as u32),
            Value::U32(x) => self.u32(*x),
            Value::I64(x) => {
                self.pad(8);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::U64(x) => {
                self.pad(8);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::Double(x) => {
                self.pad(8);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::Str(s) | Value::Path(s) => self.string(s),
            Value::Sig(s) => {
                self.buf.push(s.len() as u8);
                self.buf.extend_from_slice(s.as_bytes());
                self.buf.push(0);
            }
            Value::Array(elem, items) => {
                self.pad(4);
                let at = self.buf.len();
                self.buf.extend_from_slice(&[0; 4]);
                self.pad(elem.as_bytes().first().map_or(1, |&c| align_of(c)));
                let start = self.buf.len();
                for x in items {
                    self.put(x);
                }
                let n = (self.buf.len() - start) as u32;
                self.buf[at..at + 4].copy_from_slice(&n.to_le_bytes());
            }
            Value::Struct(v) => {
                self.pad(8);
                for x in v {
                    self.put(x);
                }
            }
            Value::Dict(k, x) => {
                self.pad(8);
                self.put(k);
                self.put(x);
            }
            Value::Variant(x) => {
                self.put(&Value::Sig(x.signature()));
                self.put(x);
            }
        }
    }
}

/// Unmarshals values; positions are counted from the start of `buf`.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    /// Where the next value starts.
    pub pos: usize,
    big: bool,
}

impl<'a> Reader<'a> {
    /// A reader over `buf` (`big`: big-endian).
    pub fn new(buf: &'a [u8], big: bool) -> Self {
        Self { buf, pos: 0, big }
    }
    pub(crate) fn pad(&mut self, a: usize) -> Result<(), String> {
        let to = self.pos.div_ceil(a) * a;
        if to > self.buf.len() {
            return Err("message ends inside padding".into());
        }
        self.pos = to;
        Ok(())
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or("message ends early")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        self.pad(N)?;
        let mut b: [u8; N] = self.take(N)?.try_into().expect("N bytes");
        if self.big {
            b.reverse();
        }
        Ok(b)
    }
    /// Reads a u32.
    pub fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.fixed::<4>()?))
    }
    fn text(&mut self, n: usize) -> Result<String, String> {
        let b = self.take(n + 1)?;
        if b[n] != 0 {
            return Err("string without its terminating NUL".into());
        }
        String::from_utf8(b[..n].to_vec()).map_err(|_| "string is not UTF-8".to_string())
    }
    /// Reads the values of a signature.
    pub fn values(&mut self, sig: &str) -> Result<Vec<Value>, String> {
        parse_signature(sig)?.iter().map(|t| self.one(t, 0)).collect()
    }
    fn one(&mut self, t: &Type, depth: usize) -> Result<Value, String> {
        if depth > 64 {
            return Err("value nests deeper than 64".into());
        }
        Ok(match t {
            Type::Basic(c) => match c {
                b'y' => Value::Byte(self.take(1)?[0]),
                b'b' => match self.u32()? {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    x => return Err(format!("boolean {x}")),
                },
                b'n' => Value::I16(i16::from_le_bytes(self.fixed::<2>()?)),
                b'q' => Value::U16(u16::from_le_bytes(self.fixed::<2>()?)),
                b'i' => Value::I32(i32::from_le_bytes(self.fixed::<4>()?)),
                b'u' | b'h' => Value::U32(self.u32()?),
                b'x' => Value::I64(i64::from_le_bytes(self.fixed::<8>()?)),
                b't' => Value::U64(u64::from_le_bytes(self.fixed::<8>()?)),
                b'd' => Value::Double(f64::from_le_bytes(self.fixed::<8>()?)),
                b's' | b'o' => {
                    let n = self.u32()? as usize;
                    let s = self.text(n)?;
                    if *c == b's' {
                        Value::Str(s)
                    } else {
                        Value::Path(s)
                    }
                }
                b'g' => {
                    let n = self.take(1)?[0] as usize;
                    Value::Sig(self.text(n)?)
                }
                other => return Err(format!("unknown type code {:?}", *other as char)),
            },
            Type::Array(e) => {
                let n = self.u32()? as usize;
                self.pad(e.align())?;
                let end = self.pos.checked_add(n).filter(|&x| x <= self.buf.len()).ok_or("array longer than the message")?;
                let mut v = vec![];
                while self.pos < end {
                    v.push(self.one(e, depth + 1)?);
                }
                if self.pos != end {
                    return Err("array items overrun its length".into());
                }
                Value::Array(e.text(), v)
            }
            Type::Struct(fields) => {
                self.pad(8)?;
                Value::Struct(fields.iter().map(|f| self.one(f, depth + 1)).collect::<Result<_, _>>()?)
            }
            Type::Dict(k, v) => {
                self.pad(8)?;
                Value::Dict(Box::new(self.one(k, depth + 1)?), Box::new(self.one(v, depth + 1)?))
            }
            Type::Variant => {
                let n = self.take(1)?[0] as usize;
                let sig = self.text(n)?;
                let ts = parse_signature(&sig)?;
                if ts.len() != 1 {
                    return Err(format!("variant signature {sig:?} is not one complete type"));
                }
                Value::Variant(Box::new(self.one(&ts[0], depth + 1)?))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(v: Value) {
        let mut w = Writer::default();
        w.put(&v);
        let got = Reader::new(&w.buf, false).values(&v.signature()).unwrap();
        assert_eq!(got, vec![v]);
    }

    #[test]
    fn values_round_trip() {
        round(Value::U64(u64::MAX));
        round(Value::strs(&["a", "bc"]));
        round(Value::Array("(sv)".into(), vec![]));
        round(Value::Struct(vec![Value::Byte(7), Value::U64(3), Value::str("x"), Value::Bool(true)]));
        round(Value::Array(
            "(sv)".into(),
            vec![
                Value::Struct(vec![Value::str("PIDs"), Value::Variant(Box::new(Value::u32s(&[1, 2])))]),
                Value::Struct(vec![Value::str("CPUWeight"), Value::Variant(Box::new(Value::U64(0)))]),
            ],
        ));
        round(Value::Array("{sv}".into(), vec![Value::Dict(Box::new(Value::str("k")), Box::new(Value::Variant(Box::new(Value::I32(-1)))))]));
    }

    #[test]
    fn layout_follows_the_specification() {
        // A byte, then a u64 aligned to 8, then a string: "y t s".
        let mut w = Writer::default();
        for v in [Value::Byte(1), Value::U64(2), Value::str("ab")] {
            w.put(&v);
        }
        assert_eq!(w.buf, [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, b'a', b'b', 0]);
        // An empty array of structs: length 0, then padding to 8 for the element.
        let mut w = Writer::default();
        w.put(&Value::Array("(sv)".into(), vec![]));
        assert_eq!(w.buf, [0, 0, 0, 0, 0, 0, 0, 0]);
        // An array of u64: the length does not count the padding before the first item.
        let mut w = Writer::default();
        w.put(&Value::Array("t".into(), vec![Value::U64(5)]));
        assert_eq!(&w.buf[..8], &[8, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn bad_input_is_refused_not_panicked_on() {
        for sig in ["a", "(", "()", "a{s", "z"] {
            assert!(parse_signature(sig).is_err(), "{sig}");
        }
        assert!(Reader::new(&[5, 0, 0, 0, b'a'], false).values("s").is_err());
        assert!(Reader::new(&[255, 255, 255, 0], false).values("as").is_err());
    }
}
