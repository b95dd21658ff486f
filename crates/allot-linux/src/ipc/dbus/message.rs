//! D-Bus messages: the header (byte order, type, flags, serial, header fields) and a
//! body marshalled by its signature (D-Bus specification, "Message Format").

use super::wire::{Reader, Value, Writer};

/// Message types.
pub const METHOD_CALL: u8 = 1;
/// A method's reply.
pub const METHOD_RETURN: u8 = 2;
/// An error reply.
pub const ERROR: u8 = 3;
/// A signal.
pub const SIGNAL: u8 = 4;

/// One message, header fields decoded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    /// METHOD_CALL, METHOD_RETURN, ERROR or SIGNAL.
    pub kind: u8,
    /// Header flags.
    pub flags: u8,
    /// Its serial.
    pub serial: u32,
    /// The serial of the call it answers.
    pub reply_serial: Option<u32>,
    /// Object path.
    pub path: Option<String>,
    /// Interface.
    pub interface: Option<String>,
    /// Method or signal name.
    pub member: Option<String>,
    /// Error name (ERROR only).
    pub error_name: Option<String>,
    /// Destination bus name.
    pub destination: Option<String>,
    /// Sender bus name.
    pub sender: Option<String>,
    /// The body.
    pub body: Vec<Value>,
}

/// The specification's largest message (2^27 bytes). The client reads bodies it does not
/// want in bounded chunks without keeping them (see the `dbus` module), so this only
/// frames the stream; what is decoded has much smaller limits.
pub const MAX_MESSAGE: usize = 128 << 20;

/// The fixed first 16 bytes of a message, and the lengths that frame the rest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fixed {
    /// Big-endian.
    pub big: bool,
    /// METHOD_CALL, METHOD_RETURN, ERROR or SIGNAL.
    pub kind: u8,
    /// Length of the header fields array (not counting the padding after it).
    pub fields_len: usize,
    /// Length of the body.
    pub body_len: usize,
}

impl Fixed {
    /// Where the body starts: the header fields, padded to 8.
    pub fn header_len(&self) -> usize {
        (16 + self.fields_len).div_ceil(8) * 8
    }
    /// The whole message's length.
    pub fn total(&self) -> usize {
        self.header_len() + self.body_len
    }
}

impl Message {
    /// A method call.
    pub fn call(dest: &str, path: &str, iface: &str, member: &str, body: Vec<Value>) -> Self {
        Self {
            kind: METHOD_CALL,
            path: Some(path.into()),
            interface: Some(iface.into()),
            member: Some(member.into()),
            destination: Some(dest.into()),
            body,
            ..Default::default()
        }
    }

    /// The wire bytes, with this serial.
    pub fn encode(&self, serial: u32) -> Vec<u8> {
        let mut body = Writer::default();
        for v in &self.body {
            body.put(v);
        }
        let sig: String = self.body.iter().map(Value::signature).collect();
        let mut fields = vec![];
        let mut field = |code: u8, v: Value| fields.push(Value::Struct(vec![Value::Byte(code), Value::Variant(Box::new(v))]));
        if let Some(p) = &self.path {
            field(1, Value::Path(p.clone()));
        }
        if let Some(s) = &self.interface {
            field(2, Value::str(s));
        }
        if let Some(s) = &self.member {
            field(3, Value::str(s));
        }
        if let Some(s) = &self.error_name {
            field(4, Value::str(s));
        }
        if let Some(s) = self.reply_serial {
            field(5, Value::U32(s));
        }
        if let Some(s) = &self.destination {
            field(6, Value::str(s));
        }
        if let Some(s) = &self.sender {
            field(7, Value::str(s));
        }
        if !sig.is_empty() {
            field(8, Value::Sig(sig));
        }
        let mut w = Writer::default();
        for v in [Value::Byte(b'l'), Value::Byte(self.kind), Value::Byte(self.flags), Value::Byte(1)] {
            w.put(&v);
        }
        w.put(&Value::U32(body.buf.len() as u32));
        w.put(&Value::U32(serial));
        w.put(&Value::Array("(yv)".into(), fields));
        w.pad(8);
        w.buf.extend_from_slice(&body.buf);
        w.buf
    }

    /// Reads the fixed header: byte order, type, version and the two lengths.
    pub fn fixed(head: &[u8; 16]) -> Result<Fixed, String> {
        let big = match head[0] {
            b'l' => false,
            b'B' => true,
            x => return Err(format!("unknown byte order mark {x:#x} (allowed: 'l' or 'B')")),
        };
        if head[3] != 1 {
            return Err(format!("protocol version {} (only 1 is known)", head[3]));
        }
        let mut r = Reader::new(head, big);
        r.pos = 4;
        let body_len = r.u32()? as usize;
        r.pos = 12;
        let fields_len = r.u32()? as usize;
        let f = Fixed { big, kind: head[1], fields_len, body_len };
        if f.total() > MAX_MESSAGE {
            return Err(format!("message of {} bytes is larger than the {MAX_MESSAGE} the specification allows", f.total()));
        }
        Ok(f)
    }

    /// The total length of a message from its first 16 bytes.
    pub fn length(head: &[u8; 16]) -> Result<usize, String> {
        Self::fixed(head).map(|f| f.total())
    }

    /// Decodes the header alone (the fixed part, the fields and the padding after them:
    /// exactly [`Fixed::header_len`] bytes). Returns the message with an empty body and
    /// the body's signature, so that whether the body is wanted can be decided before a
    /// byte of it is read.
    pub fn decode_header(buf: &[u8]) -> Result<(Self, String), String> {
        let head: &[u8; 16] = buf.get(..16).and_then(|h| h.try_into().ok()).ok_or("message shorter than its fixed header")?;
        let fixed = Self::fixed(head)?;
        if buf.len() != fixed.header_len() {
            return Err(format!("header is {} bytes, its fields say {}", buf.len(), fixed.header_len()));
        }
        let mut r = Reader::new(buf, fixed.big);
        let h = r.values("yyyyuua(yv)")?;
        let byte = |i: usize| if let Value::Byte(b) = h[i] { b } else { 0 };
        let mut m = Message { kind: byte(1), flags: byte(2), serial: h[5].as_u64().unwrap_or(0) as u32, ..Default::default() };
        let mut sig = String::new();
        for f in h[6].items().unwrap_or(&[]) {
            let Some([Value::Byte(code), v]) = f.items().map(|x| [x[0].clone(), x[1].clone()]) else { continue };
            let s = v.as_str().map(String::from);
            match code {
                1 => m.path = s,
                2 => m.interface = s,
                3 => m.member = s,
                4 => m.error_name = s,
                5 => m.reply_serial = v.as_u64().map(|x| x as u32),
                6 => m.destination = s,
                7 => m.sender = s,
                8 => sig = s.unwrap_or_default(),
                _ => {}
            }
        }
        r.pad(8)?;
        if r.pos != buf.len() {
            return Err(format!("header fields end at {}, the header says {}", r.pos, buf.len()));
        }
        Ok((m, sig))
    }

    /// Decodes a body of signature `sig` into `self.body`; every byte must be covered.
    pub fn decode_body(&mut self, sig: &str, body: &[u8], big: bool) -> Result<(), String> {
        let mut b = Reader::new(body, big);
        self.body = b.values(sig)?;
        if b.pos != body.len() {
            return Err(format!("body signature {sig:?} covers {} of its {} bytes", b.pos, body.len()));
        }
        Ok(())
    }

    /// Decodes one whole message.
    pub fn decode(buf: &[u8]) -> Result<Self, String> {
        let head: &[u8; 16] = buf.get(..16).and_then(|h| h.try_into().ok()).ok_or("message shorter than its fixed header")?;
        let fixed = Self::fixed(head)?;
        if buf.len() != fixed.total() {
            return Err(format!("message is {} bytes, its header says {}", buf.len(), fixed.total()));
        }
        let (mut m, sig) = Self::decode_header(&buf[..fixed.header_len()])?;
        m.decode_body(&sig, &buf[fixed.header_len()..], fixed.big)?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_headers_are_refused_not_panicked_on() {
        assert!(Message::decode(&[b'l', 2, 0, 1, 0, 0, 0, 0]).is_err());
        let mut h = [0u8; 16];
        h[0] = b'l';
        h[3] = 1;
        h[4..8].copy_from_slice(&(100u32 << 20).to_le_bytes());
        assert_eq!(Message::length(&h), Ok(16 + (100 << 20)));
        h[4..8].copy_from_slice(&(200u32 << 20).to_le_bytes());
        assert!(Message::length(&h).is_err(), "larger than the specification allows");
    }

    #[test]
    fn hello_is_encoded_as_dbus_daemon_expects() {
        // The bytes of `Hello()` with serial 1 (as libdbus and sd-bus send it).
        let m = Message::call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello", vec![]);
        let b = m.encode(1);
        assert_eq!(&b[..12], &[b'l', 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(b.len() % 8, 0);
        let head: [u8; 16] = b[..16].try_into().unwrap();
        assert_eq!(Message::length(&head).unwrap(), b.len());
        let back = Message::decode(&b).unwrap();
        assert_eq!(back.member.as_deref(), Some("Hello"));
        assert_eq!(back.destination.as_deref(), Some("org.freedesktop.DBus"));
        assert_eq!(back.serial, 1);
    }

    #[test]
    fn messages_round_trip_with_bodies() {
        let props = Value::Array("(sv)".into(), vec![Value::Struct(vec![Value::str("Delegate"), Value::Variant(Box::new(Value::Bool(true)))])]);
        let aux = Value::Array("(sa(sv))".into(), vec![]);
        let mut m = Message::call(
            "org.freedesktop.systemd1",
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "StartTransientUnit",
            vec![Value::str("a.scope"), Value::str("fail"), props, aux],
        );
        let b = m.encode(9);
        m.serial = 9;
        assert_eq!(Message::decode(&b).unwrap(), m);
    }

    #[test]
    fn big_endian_messages_are_read() {
        // An error reply from a big-endian peer: serial 2, reply to 5, error name, body "s".
        let mut b: Vec<u8> = vec![b'B', ERROR, 0, 1];
        let body: Vec<u8> = [&4u32.to_be_bytes()[..], b"nope\0"].concat();
        b.extend_from_slice(&(body.len() as u32).to_be_bytes());
        b.extend_from_slice(&2u32.to_be_bytes());
        // Fields: (4, v "s" "x.Err"), (5, v "u" 5), (8, v "g" "s").
        let mut f: Vec<u8> = vec![];
        f.extend_from_slice(&[4, 1, b's', 0]);
        f.extend_from_slice(&5u32.to_be_bytes());
        f.extend_from_slice(b"x.Err\0");
        while f.len() % 8 != 0 {
            f.push(0);
        }
        f.extend_from_slice(&[5, 1, b'u', 0]);
        f.extend_from_slice(&5u32.to_be_bytes());
        f.extend_from_slice(&[8, 1, b'g', 0, 1, b's', 0]);
        b.extend_from_slice(&(f.len() as u32).to_be_bytes());
        b.extend_from_slice(&f);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        b.extend_from_slice(&body);
        let m = Message::decode(&b).unwrap();
        assert_eq!((m.kind, m.serial, m.reply_serial), (ERROR, 2, Some(5)));
        assert_eq!(m.error_name.as_deref(), Some("x.Err"));
        assert_eq!(m.body, vec![Value::str("nope")]);
    }

    /// The fuzz target's seeds (fuzz/seeds/dbus_message) are whole messages this decoder
    /// takes, so the fuzzer starts from inside the format, not from noise.
    #[test]
    fn the_fuzz_seeds_are_messages() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/dbus_message");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = Message::decode(&std::fs::read(&p).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(!m.body.is_empty(), "{}", p.display());
            n += 1;
        }
        assert!(n >= 3, "{n} seeds in {}", dir.display());
    }
}
