//! Property tests of the wire format. With a small seeded generator: every value and
//! message encoded is decoded back to itself, and bytes cut short or mutated are refused
//! with an error, never a panic (a failure prints its seed and case). With proptest, at
//! the end: any bytes at all, framed or not, under any signature, are decoded or refused,
//! and what is decoded is bounded by the bytes that carried it.

use super::message::{Message, ERROR, METHOD_CALL, METHOD_RETURN, SIGNAL};
use super::wire::{Reader, Value, Writer};

/// xorshift64*: deterministic, so a failing case is reproduced from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// A type to generate values of (dict keys are basic, as the specification requires).
#[derive(Debug, Clone)]
enum T {
    Basic(u8),
    Array(Box<T>),
    Struct(Vec<T>),
    Dict(u8, Box<T>),
    Variant,
}

impl T {
    fn sig(&self) -> String {
        match self {
            T::Basic(c) => (*c as char).to_string(),
            T::Array(e) => format!("a{}", e.sig()),
            T::Struct(v) => format!("({})", v.iter().map(T::sig).collect::<String>()),
            T::Dict(k, v) => format!("{{{}{}}}", *k as char, v.sig()),
            T::Variant => "v".into(),
        }
    }
}

const BASIC: &[u8] = b"ybnqiuxtdsog";

fn gen_type(r: &mut Rng, depth: u32) -> T {
    let pick = if depth >= 4 { 0 } else { r.below(6) };
    match pick {
        0 | 1 => T::Basic(BASIC[r.below(BASIC.len() as u64) as usize]),
        2 => T::Array(Box::new(gen_type(r, depth + 1))),
        3 => T::Struct((0..1 + r.below(4)).map(|_| gen_type(r, depth + 1)).collect()),
        4 => T::Array(Box::new(T::Dict(BASIC[r.below(BASIC.len() as u64) as usize], Box::new(gen_type(r, depth + 1))))),
        _ => T::Variant,
    }
}

fn gen_text(r: &mut Rng) -> String {
    const CHARS: &[char] = &['a', 'Z', '0', '/', '.', '_', ' ', '\'', 'é', 'ß', '€', '😀', '\u{7f}'];
    (0..r.below(12)).map(|_| CHARS[r.below(CHARS.len() as u64) as usize]).collect()
}

fn gen_value(r: &mut Rng, t: &T, depth: u32) -> Value {
    match t {
        T::Basic(c) => match c {
            b'y' => Value::Byte(r.next() as u8),
            b'b' => Value::Bool(r.chance(2)),
            b'n' => Value::I16(r.next() as i16),
            b'q' => Value::U16(r.next() as u16),
            b'i' => Value::I32(r.next() as i32),
            b'u' => Value::U32(r.next() as u32),
            b'x' => Value::I64(r.next() as i64),
            b't' => Value::U64(r.next()),
            // Any double but NaN (which is not equal to itself).
            b'd' => Value::Double(Some(f64::from_bits(r.next())).filter(|d| !d.is_nan()).unwrap_or(-0.5)),
            b's' => Value::Str(gen_text(r)),
            b'o' => Value::Path(format!("/{}", gen_text(r))),
            _ => Value::Sig(gen_type(r, 2).sig()),
        },
        T::Array(e) => Value::Array(e.sig(), (0..r.below(4)).map(|_| gen_value(r, e, depth + 1)).collect()),
        T::Struct(v) => Value::Struct(v.iter().map(|f| gen_value(r, f, depth + 1)).collect()),
        T::Dict(k, v) => Value::Dict(Box::new(gen_value(r, &T::Basic(*k), depth + 1)), Box::new(gen_value(r, v, depth + 1))),
        T::Variant => {
            let inner = gen_type(r, depth.max(2) + 1);
            Value::Variant(Box::new(gen_value(r, &inner, depth + 1)))
        }
    }
}

fn gen_values(r: &mut Rng) -> Vec<Value> {
    (0..r.below(5))
        .map(|_| {
            let t = gen_type(r, 0);
            gen_value(r, &t, 0)
        })
        .collect()
}

fn gen_message(r: &mut Rng) -> Message {
    let kind = [METHOD_CALL, METHOD_RETURN, ERROR, SIGNAL][r.below(4) as usize];
    let opt = |r: &mut Rng, s: String| if r.chance(3) { None } else { Some(s) };
    let (path, member) = (format!("/org/{}", gen_text(r)), gen_text(r));
    Message {
        kind,
        flags: r.below(4) as u8,
        serial: 0,
        reply_serial: if r.chance(2) { Some(r.next() as u32) } else { None },
        path: opt(r, path),
        interface: opt(r, "org.example.I".into()),
        member: opt(r, member),
        error_name: opt(r, "org.example.Error".into()),
        destination: opt(r, ":1.7".into()),
        sender: opt(r, "org.freedesktop.DBus".into()),
        body: gen_values(r),
    }
}

#[test]
fn values_round_trip_alone_and_in_sequence() {
    for seed in 1..=3000u64 {
        let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let values = gen_values(&mut r);
        // Written one after another: each value's alignment depends on what came before.
        let mut w = Writer::default();
        for v in &values {
            w.put(v);
        }
        let sig: String = values.iter().map(Value::signature).collect();
        let mut rd = Reader::new(&w.buf, false);
        let back = rd.values(&sig).unwrap_or_else(|e| panic!("seed {seed}: {sig:?} does not decode: {e}\n{values:?}"));
        assert_eq!(back, values, "seed {seed}: {sig:?}");
        assert_eq!(rd.pos, w.buf.len(), "seed {seed}: {sig:?} left bytes unread");
    }
}

#[test]
fn messages_round_trip() {
    for seed in 1..=2000u64 {
        let mut r = Rng(seed.wrapping_mul(0xd1b5_4a32_d192_ed03));
        let mut m = gen_message(&mut r);
        m.serial = 1 + r.below(1 << 31) as u32;
        let bytes = m.encode(m.serial);
        let head: [u8; 16] = bytes[..16].try_into().unwrap();
        assert_eq!(Message::length(&head), Ok(bytes.len()), "seed {seed}");
        assert_eq!(Message::decode(&bytes).as_ref(), Ok(&m), "seed {seed}");
        // The header alone, then the body, as the client reads them.
        let f = Message::fixed(&head).unwrap();
        let (mut h, sig) = Message::decode_header(&bytes[..f.header_len()]).unwrap();
        h.decode_body(&sig, &bytes[f.header_len()..], f.big).unwrap();
        assert_eq!(h, m, "seed {seed}");
    }
}

/// Decodes `b` every way the client does; must return, never panic.
fn decode_all_ways(b: &[u8], sig: &str) -> bool {
    let whole = Message::decode(b).is_ok();
    if let Some(head) = b.get(..16).and_then(|h| <[u8; 16]>::try_from(h).ok()) {
        if let Ok(f) = Message::fixed(&head) {
            let _ = Message::decode_header(&b[..f.header_len().min(b.len())]);
        }
    }
    let _ = Reader::new(b, false).values(sig);
    let _ = Reader::new(b, true).values(sig);
    whole
}

#[test]
fn cut_or_mutated_bytes_are_refused_without_panic() {
    let mut accepted_mutants = 0;
    for seed in 1..=600u64 {
        let mut r = Rng(seed.wrapping_mul(0xa076_1d64_78bd_642f));
        let mut m = gen_message(&mut r);
        m.serial = 1;
        let bytes = m.encode(1);
        let sig: String = m.body.iter().map(Value::signature).collect();
        // Every strict prefix is an error: a message is exactly as long as it says.
        for n in 0..bytes.len() {
            let cut = &bytes[..n];
            let ok = std::panic::catch_unwind(|| decode_all_ways(cut, &sig));
            assert_eq!(ok.ok(), Some(false), "seed {seed}: a prefix of {n} of {} bytes decoded or panicked", bytes.len());
        }
        // Mutants: bytes changed, lengths stretched, bytes dropped or added.
        for _ in 0..60 {
            let mut b = bytes.clone();
            for _ in 0..1 + r.below(4) {
                let i = r.below(b.len() as u64) as usize;
                match r.below(5) {
                    0 => b[i] = r.next() as u8,
                    1 => b[i] ^= 1 << r.below(8),
                    2 => b[i] = [0, 0xff, 0x80, 0x7f][r.below(4) as usize],
                    3 => {
                        b.remove(i);
                    }
                    _ => b.insert(i, r.next() as u8),
                }
            }
            let copy = b.clone();
            let ok = std::panic::catch_unwind(|| decode_all_ways(&copy, &sig));
            let Ok(accepted) = ok else { panic!("seed {seed}: decoding panicked on {b:02x?}") };
            accepted_mutants += accepted as usize;
        }
        // Random signatures over the message's bytes.
        for _ in 0..10 {
            let t = gen_type(&mut r, 0).sig();
            let b = bytes.clone();
            assert!(std::panic::catch_unwind(|| decode_all_ways(&b, &t)).is_ok(), "seed {seed}: {t:?} panicked");
        }
    }
    // Some mutants are still valid messages (a changed string byte); most are not.
    assert!(accepted_mutants < 600 * 60, "every mutant decoded: the mutations do nothing");
}

// Any bytes, not only near-valid ones (proptest; in place of a fuzz target, see
// docs/layout.md). What is decoded is never more than the bytes that carried it: at most
// one basic value or empty array per byte, at most as many bytes of text as were read,
// nesting at most 64 deep; so the memory a message costs is bounded by its length, and
// that by the limits of the `dbus` module (MAX_HEADER, MAX_REPLY, MAX_SIGNAL).

use proptest::prelude::*;

/// Basic values and empty arrays (leaves), bytes of text, and the deepest nesting.
#[derive(Debug, Default)]
struct Size {
    leaves: usize,
    text: usize,
    depth: usize,
}

fn size(values: &[Value]) -> Size {
    fn walk(v: &Value, depth: usize, s: &mut Size) {
        s.depth = s.depth.max(depth);
        match v {
            Value::Str(t) | Value::Path(t) | Value::Sig(t) => {
                s.leaves += 1;
                s.text += t.len();
            }
            Value::Array(_, items) | Value::Struct(items) if !items.is_empty() => items.iter().for_each(|x| walk(x, depth + 1, s)),
            Value::Variant(x) => walk(x, depth + 1, s),
            Value::Dict(k, x) => {
                walk(k, depth + 1, s);
                walk(x, depth + 1, s);
            }
            _ => s.leaves += 1,
        }
    }
    let mut s = Size::default();
    values.iter().for_each(|v| walk(v, 1, &mut s));
    s
}

fn bounded_by(values: &[Value], header_text: usize, bytes: usize) -> Result<(), TestCaseError> {
    let s = size(values);
    prop_assert!(s.leaves <= bytes, "{} values from {} bytes", s.leaves, bytes);
    prop_assert!(s.text + header_text <= bytes, "{} bytes of text from {} bytes", s.text + header_text, bytes);
    prop_assert!(s.depth <= 65, "nested {} deep", s.depth);
    Ok(())
}

fn header_text(m: &Message) -> usize {
    [&m.path, &m.interface, &m.member, &m.error_name, &m.destination, &m.sender].iter().map(|s| s.as_ref().map_or(0, |s| s.len())).sum()
}

/// Signatures: well-formed ones of every type the reader knows (unix fds included), and
/// any string of signature characters.
fn arb_sig() -> impl Strategy<Value = String> {
    let basic = prop::sample::select(b"ybnqiuxtdsogh".to_vec());
    let leaf = basic.clone().prop_map(|c| (c as char).to_string());
    let valid = leaf.prop_recursive(5, 24, 4, move |inner| {
        prop_oneof![
            inner.clone().prop_map(|s| format!("a{s}")),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|v| format!("({})", v.concat())),
            (basic.clone(), inner).prop_map(|(k, v)| format!("a{{{}{v}}}", k as char)),
            Just("v".to_string()),
        ]
    });
    prop_oneof![4 => prop::collection::vec(valid, 1..4).prop_map(|v| v.concat()), 1 => "[ybnqiuxtdsoghav(){}z]{0,12}"]
}

proptest! {
    // 256 cases each (proptest's default); the four run in well under a second.
    /// Any bytes, and any bytes behind a fixed header that frames them exactly.
    #[test]
    fn any_bytes_decode_or_are_refused(mut b in prop::collection::vec(any::<u8>(), 0..512), framed in any::<bool>(), fields in any::<prop::sample::Index>()) {
        if framed && b.len() >= 16 {
            let big = b[0] % 2 == 1;
            b[0] = if big { b'B' } else { b'l' };
            b[3] = 1;
            let fields_len = fields.index(b.len() - 15);
            let body_len = b.len().saturating_sub((16 + fields_len).div_ceil(8) * 8);
            let put = |x: usize| if big { (x as u32).to_be_bytes() } else { (x as u32).to_le_bytes() };
            b[4..8].copy_from_slice(&put(body_len));
            b[12..16].copy_from_slice(&put(fields_len));
        }
        if let Ok(m) = Message::decode(&b) {
            bounded_by(&m.body, header_text(&m), b.len())?;
        }
    }

    /// A fixed header is taken exactly when its byte order, version and length are allowed.
    #[test]
    fn any_fixed_header_frames_within_the_specification(
        mark in prop::sample::select(vec![b'l', b'B', b'b', 0]),
        version in prop::sample::select(vec![1u8, 0, 2]),
        lengths in prop::array::uniform2(prop_oneof![0u32..1 << 20, (1u32 << 26)..(1 << 28), any::<u32>()]),
        rest in any::<[u8; 6]>(),
    ) {
        let big = mark == b'B';
        let put = |x: u32| if big { x.to_be_bytes() } else { x.to_le_bytes() };
        let mut head = [0u8; 16];
        head[0] = mark;
        head[1..3].copy_from_slice(&rest[..2]);
        head[3] = version;
        head[4..8].copy_from_slice(&put(lengths[0]));
        head[8..12].copy_from_slice(&rest[2..]);
        head[12..16].copy_from_slice(&put(lengths[1]));
        let total = (16 + lengths[1] as usize).div_ceil(8) * 8 + lengths[0] as usize;
        let allowed = matches!(mark, b'l' | b'B') && version == 1 && total <= super::message::MAX_MESSAGE;
        match Message::fixed(&head) {
            Ok(f) => {
                prop_assert!(allowed, "{:?} taken", head);
                prop_assert_eq!((f.big, f.body_len, f.fields_len), (big, lengths[0] as usize, lengths[1] as usize));
                prop_assert_eq!(f.header_len() % 8, 0);
                prop_assert_eq!(f.total(), total);
                prop_assert_eq!(Message::length(&head), Ok(total));
            }
            Err(e) => prop_assert!(!allowed, "{:?} refused: {}", head, e),
        }
    }

    /// Whatever a signature reads from any bytes (either byte order) is written back to
    /// as many bytes, and those read back to the same values: decoding has one answer.
    #[test]
    fn any_bytes_under_any_signature_read_to_what_writes_back(
        sig in arb_sig(),
        b in prop::collection::vec(any::<u8>(), 0..256),
        big in any::<bool>(),
    ) {
        let mut r = Reader::new(&b, big);
        if let Ok(values) = r.values(&sig) {
            bounded_by(&values, 0, b.len())?;
            let mut w = Writer::default();
            values.iter().for_each(|v| w.put(v));
            prop_assert_eq!(w.buf.len(), r.pos, "{:?} read {} bytes, wrote {}", sig, r.pos, w.buf.len());
            let again = Reader::new(&w.buf, false).values(&sig);
            // Debug compares NaN equal to itself.
            prop_assert_eq!(format!("{again:?}"), format!("{:?}", Ok::<_, String>(values)));
        }
    }

    /// A real header over a body of any bytes: the body is decoded by the header's
    /// signature, or refused.
    #[test]
    fn any_body_under_a_real_header_decodes_or_is_refused(seed in any::<u64>(), body in prop::collection::vec(any::<u8>(), 0..256)) {
        let m = gen_message(&mut Rng(seed | 1));
        let mut b = m.encode(1);
        let head: [u8; 16] = b[..16].try_into().unwrap();
        let header_len = Message::fixed(&head).unwrap().header_len();
        b.truncate(header_len);
        b[4..8].copy_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(&body);
        if let Ok(back) = Message::decode(&b) {
            bounded_by(&back.body, header_text(&back), b.len())?;
        }
    }
}
